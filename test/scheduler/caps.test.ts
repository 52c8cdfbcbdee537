import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { capRankValue, enforceCaps } from '../../src/scheduler/caps.js';
import { ColocationTable } from '../../src/scheduler/colocation-table.js';
import type { PackTask, RateModel } from '../../src/scheduler/packing.js';
import { draftWithTasks } from '../../src/scheduler/reconfiguration.js';
import { PriceBook } from '../../src/scheduler/reservation-price.js';

const book = new PriceBook(loadCatalogFile());
const model: RateModel = { table: new ColocationTable(0.8), throughputAware: true, multiTaskAware: true };

function task(id: string, jobId: string, jobTaskCount: number, currentInstanceId?: string): PackTask {
  const demand = { any: [0, 4, 8] as [number, number, number] };
  return {
    id,
    jobId,
    key: jobId,
    demand,
    rp: book.reservationPrice(demand),
    jobTaskCount,
    ...(currentInstanceId === undefined ? {} : { currentInstanceId }),
  };
}

describe('enforceCaps', () => {
  it('values an instance it keeps by the tasks left on it, once a job it shared the instance with waits', () => {
    // r runs beside g's first task on i-1 (c7i.2xlarge); g's second task needs a new c7i.xlarge. Under a cap
    // of one c7i.2xlarge the new instance goes, and with it the whole gang g: i-1 keeps r alone.
    const r = task('r-t0', 'r', 1, 'i-1');
    const g0 = task('g-t0', 'g', 2);
    const g1 = task('g-t1', 'g', 2);
    const tasks = new Map([r, g0, g1].map((t) => [t.id, t]));
    const big = book.type('c7i.2xlarge');
    const drafts = [
      draftWithTasks({ id: 'i-1', type: big, isNew: false }, [r, g0]),
      draftWithTasks({ id: 'new-1', type: book.type('c7i.xlarge'), isNew: true }, [g1]),
    ];
    const valueOf = capRankValue(model);
    const cut = enforceCaps(drafts, { maxCostPerHour: big.costPerHour }, tasks, new Set(), valueOf);
    expect(cut.waiting).toEqual([{ jobId: 'g', cap: 'maxCostPerHour' }]);
    expect(cut.drafts.map((d) => [d.id, d.taskIds])).toEqual([['i-1', ['r-t0']]]);
    const alone = draftWithTasks({ id: 'i-1', type: big, isNew: false }, [r]);
    const kept = cut.drafts[0];
    expect(kept?.used).toEqual(alone.used);
    expect(kept?.composition.size).toBe(1);
    // Alone, r runs at full rate: worth its whole reservation price, not r and g's interference.
    expect(valueOf(kept ?? alone)).toBeCloseTo(r.rp, 12);
  });
});

describe('enforceCaps and jobs being launched or moved', () => {
  it('says a cap that drops such a job leaves it running until its launch or move ends', () => {
    // p is pinned on i-1 (being launched or moved: no plan may stop it), alone over a cap of nothing: the cut drops
    // it, but the diff keeps it where it is, so the note must not say it was stopped.
    const p = task('p-t0', 'p', 1, 'i-1');
    const tasks = new Map([[p.id, p]]);
    const drafts = [draftWithTasks({ id: 'i-1', type: book.type('c7i.xlarge'), isNew: false }, [p])];
    const cut = enforceCaps(drafts, { maxCostPerHour: 0.01 }, tasks, new Set([p.id]), capRankValue(model));
    expect(cut.drafts).toEqual([]);
    expect(cut.note).toBe(
      'a cap would stop jobs being launched or moved: they run on until that ends, then stop (and resume from their ' +
        'last checkpoint)',
    );
  });
});

describe('enforceCaps under a quota', () => {
  it('drops the least cost-efficient instance that counts against the broken quota, naming it', () => {
    // Three new instances: a c7i.xlarge for x (4 vCPUs, all used), a c7i.2xlarge for y (8 vCPUs, half used), a
    // p3.2xlarge for g. Under `standard` at 8 vCPUs, y's half-empty instance goes; the p3.2xlarge, in group `p`, stays,
    // though it is the least cost-efficient of all and is what a $ cap drops first.
    const x = task('x-t0', 'x', 1);
    const y = task('y-t0', 'y', 1);
    const g = task('g-t0', 'g', 1);
    const tasks = new Map([x, y, g].map((t) => [t.id, t]));
    const drafts = [
      draftWithTasks({ id: 'new-1', type: book.type('c7i.xlarge'), isNew: true }, [x]),
      draftWithTasks({ id: 'new-2', type: book.type('c7i.2xlarge'), isNew: true }, [y]),
      draftWithTasks({ id: 'new-3', type: book.type('p3.2xlarge'), isNew: true }, [g]),
    ];
    const valueOf = capRankValue(model);
    const cut = enforceCaps(
      drafts,
      { quotas: [{ group: 'standard', maxVcpus: 8 }] },
      tasks,
      new Set(),
      valueOf,
    );
    expect(cut.waiting).toEqual([{ jobId: 'y', cap: 'quota standard maxVcpus' }]);
    expect(cut.drafts.map((d) => d.id)).toEqual(['new-1', 'new-3']);
    // For a spot quota, an on-demand plan uses none of it.
    const spot = enforceCaps(
      drafts,
      { quotas: [{ group: 'standard-spot', maxVcpus: 0 }] },
      tasks,
      new Set(),
      valueOf,
    );
    expect(spot.waiting).toEqual([]);
    // A $ cap drops the p3.2xlarge first.
    const dollars = enforceCaps(drafts, { maxCostPerHour: 1 }, tasks, new Set(), valueOf);
    expect(dollars.waiting[0]).toEqual({ jobId: 'g', cap: 'maxCostPerHour' });
  });
});
