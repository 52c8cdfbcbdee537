import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot } from '../../src/core/model.js';
import type { Resources } from '../../src/core/resources.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { PriceBook } from '../../src/scheduler/reservation-price.js';
import { table3Catalog } from '../helpers/catalogs.js';

const book = new PriceBook(loadCatalogFile());

describe('packed reservation prices (beyond Eva §4.2)', () => {
  it('price a task at its dominant share of the cheapest family it can run on', () => {
    // [1 GPU, 12 vCPU, 48 GiB]: vCPUs bind on P3 (8 per GPU); 12/64 of a $24.48/h p3.16xlarge.
    expect(book.dominantSharePrice({ any: [1, 12, 48] })).toBeCloseTo((12 / 64) * 24.48, 12);
    // Alone it needs a p3.8xlarge: the standalone price overstates it 2.7×.
    expect(book.reservationPrice({ any: [1, 12, 48] })).toBe(12.24);
    // A CPU task: memory binds on C7i (2 GiB/vCPU), vCPUs on R7i (8 GiB/vCPU), and R7i is cheaper for it.
    expect(book.dominantSharePrice({ any: [0, 13, 56] })).toBeCloseTo((13 / 192) * 12.7008, 12);
    // Per-family demands: only the families the task names count.
    expect(book.dominantSharePrice({ c7i: [0, 4, 4] })).toBeCloseTo((4 / 192) * 8.568, 12);
  });

  it('gross the share up by the packing efficiency, never above the standalone price', () => {
    expect(book.packedReservationPrice({ any: [1, 12, 48] }, 0.8)).toBeCloseTo(((12 / 64) * 24.48) / 0.8, 12);
    // A task that fills its cheapest type (p3.2xlarge) keeps that type's price.
    expect(book.packedReservationPrice({ any: [1, 8, 30] }, 0.8)).toBe(3.06);
    expect(book.packedReservationPrice({ any: [1, 12, 48] }, 1e-6)).toBe(12.24);
    expect(() => book.dominantSharePrice({ any: [9, 1, 1] })).toThrow(/no instance type can host/);
  });

  it('Eva rejects a packing efficiency outside (0, 1]', () => {
    const catalog = loadCatalogFile();
    expect(() => new EvaScheduler(catalog, { packingEfficiency: 0 })).toThrow(/packing efficiency/);
    expect(() => new EvaScheduler(catalog, { packingEfficiency: 1.2 })).toThrow(/packing efficiency/);
  });

  it('make a move cost the job its packed price per second out of service; multi-task jobs keep Eva’s price', () => {
    // One job alone on an a.x ($12/h): Partial Reconfiguration moves it to a new d.x. The move costs the d.x's
    // 160 s boot at $0.40/h, plus the job's price for its 60 s migration delay and that boot (helpers/catalogs.ts).
    const moveCost = (demand: Resources, replicas: number, prices: 'packed' | 'standalone') => {
      const ids = Array.from({ length: replicas }, (_, i) => `t${i}`);
      const snapshot: ClusterSnapshot = {
        nowSeconds: 100_000,
        jobs: [{ id: 'j', taskIds: ids, reconfigurable: true, arrivalSeconds: 0, migrationDelaySeconds: 60 }],
        tasks: ids.map((id) => ({
          id,
          jobId: 'j',
          key: `k_${id}`,
          demand: { any: demand },
          instanceId: 'i-a',
        })),
        instances: [{ id: 'i-a', typeName: 'a.x', state: 'running', taskIds: ids }],
      };
      const plan = new EvaScheduler(table3Catalog(), { reservationPrice: prices }).plan(snapshot);
      return plan.decision.candidates.find((c) => c.name === 'partial')?.migrationCost ?? Number.NaN;
    };
    // [0, 2, 8] on the Table 3 catalog: standalone d.x $0.40/h; packed: half a d.x, $0.20 / θ = 0.7 ≈ $0.2857/h.
    const expected = (jobPricePerHour: number) => (160 * 0.4 + 220 * jobPricePerHour) / 3600;
    expect(moveCost([0, 2, 8], 1, 'standalone')).toBeCloseTo(expected(0.4), 12);
    expect(moveCost([0, 2, 8], 1, 'packed')).toBeCloseTo(expected(0.2 / 0.7), 12);
    // A two-task job's tasks are priced standalone even with packed prices (see EvaOptions.reservationPrice).
    expect(moveCost([0, 2, 8], 2, 'packed')).toBeCloseTo(expected(0.8), 12);
  });
});
