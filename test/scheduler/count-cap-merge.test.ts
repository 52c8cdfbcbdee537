import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { fits, type Resources } from '../../src/core/resources.js';
import { capRankValue, enforceCaps } from '../../src/scheduler/caps.js';
import { ColocationTable } from '../../src/scheduler/colocation-table.js';
import type { DraftInstance } from '../../src/scheduler/full-reconfiguration.js';
import type { PackTask, RateModel } from '../../src/scheduler/packing.js';
import { draftWithTasks } from '../../src/scheduler/reconfiguration.js';
import { PriceBook, sumOn } from '../../src/scheduler/reservation-price.js';

const book = new PriceBook(loadCatalogFile());
const valueOf = capRankValue({
  table: new ColocationTable(0.8),
  throughputAware: true,
  multiTaskAware: true,
} satisfies RateModel);

function task(id: string, jobId: string, jobTaskCount: number, demand: Resources = [0, 4, 8]): PackTask {
  const d = { any: demand };
  return { id, jobId, key: jobId, demand: d, rp: book.reservationPrice(d), jobTaskCount };
}

const onNew = (id: string, type: string, tasks: PackTask[]): DraftInstance =>
  draftWithTasks({ id, type: book.type(type), isNew: true }, tasks);

const byId = (tasks: readonly PackTask[]) => new Map(tasks.map((t) => [t.id, t]));

describe('a plan over its instance count', () => {
  it('puts a gang of two planned on two small instances on one that holds both, rather than making it wait', () => {
    // Eva buys two c7i.xlarge ($0.1785/h each) for g's tasks; under `maxInstances: 1` one c7i.2xlarge ($0.357/h)
    // holds both (8 vCPUs, 16 GiB), at no extra $/hour.
    const g0 = task('g-t0', 'g', 2);
    const g1 = task('g-t1', 'g', 2);
    const drafts = [onNew('new-1', 'c7i.xlarge', [g0]), onNew('new-2', 'c7i.xlarge', [g1])];
    const cut = enforceCaps(drafts, { maxInstances: 1 }, byId([g0, g1]), new Set(), valueOf, undefined, book);
    expect(cut.waiting).toEqual([]);
    expect(cut.drafts.map((d) => [d.id, d.type.name, d.taskIds])).toEqual([
      ['new-1', 'c7i.2xlarge', ['g-t0', 'g-t1']],
    ]);
    expect(cut.drafts[0]?.used).toEqual([0, 8, 16]);
    // Without the types to merge into, the gang waits, as it did before merging existed.
    const dropped = enforceCaps(drafts, { maxInstances: 1 }, byId([g0, g1]), new Set(), valueOf);
    expect(dropped.waiting).toEqual([{ jobId: 'g', cap: 'maxInstances' }]);
    expect(dropped.drafts).toEqual([]);
  });

  it('merges the pair that adds the least $/hour, and only as far as the count needs', () => {
    // x and y (4 vCPUs each) merge onto a c7i.2xlarge at +$0; either with the full-GPU job z would need a
    // p3.8xlarge (+$9.18/h). Under `maxInstances: 2` one merge is enough, and it is x with y.
    const x = task('x-t0', 'x', 1);
    const y = task('y-t0', 'y', 1);
    const z = task('z-t0', 'z', 1, [1, 8, 61]);
    const w = task('w-t0', 'w', 1);
    const drafts = [
      onNew('new-1', 'c7i.xlarge', [x]),
      onNew('new-2', 'p3.2xlarge', [z]),
      onNew('new-3', 'c7i.xlarge', [y]),
    ];
    const cut = enforceCaps(
      drafts,
      { maxInstances: 2 },
      byId([x, y, z]),
      new Set(),
      valueOf,
      undefined,
      book,
    );
    expect(cut.waiting).toEqual([]);
    expect(cut.drafts.map((d) => [d.id, d.type.name, d.taskIds])).toEqual([
      ['new-1', 'c7i.2xlarge', ['x-t0', 'y-t0']],
      ['new-2', 'p3.2xlarge', ['z-t0']],
    ]);
    // An existing instance is never merged away: with w running on one, the three new ones become one (x with y
    // first, then z with them on a p3.8xlarge).
    const running = draftWithTasks({ id: 'i-1', type: book.type('c7i.xlarge'), isNew: false }, [w]);
    const withRunning = enforceCaps(
      [running, ...drafts],
      { maxInstances: 2 },
      byId([w, x, y, z]),
      new Set(),
      valueOf,
      undefined,
      book,
    );
    expect(withRunning.waiting).toEqual([]);
    expect(withRunning.drafts.map((d) => [d.id, d.type.name, d.taskIds])).toEqual([
      ['i-1', 'c7i.xlarge', ['w-t0']],
      ['new-1', 'p3.8xlarge', ['x-t0', 'y-t0', 'z-t0']],
    ]);
  });

  it('leaves instances of a latency-aware placement as placed: the job waits', () => {
    const g0 = task('g-t0', 'g', 2);
    const g1 = task('g-t1', 'g', 2);
    const placement = { zone: 'us-east-1a', placementGroup: 'fleetwise-g' };
    const drafts = [
      { ...onNew('new-1', 'c7i.xlarge', [g0]), placement },
      { ...onNew('new-2', 'c7i.xlarge', [g1]), placement },
    ];
    const cut = enforceCaps(drafts, { maxInstances: 1 }, byId([g0, g1]), new Set(), valueOf, undefined, book);
    expect(cut.waiting).toEqual([{ jobId: 'g', cap: 'maxInstances' }]);
  });

  it('never keeps a plan over its caps, keeps every kept task once on room that holds it, and a gang whole', () => {
    const jobArb = fc.record({ tasks: fc.integer({ min: 1, max: 3 }), vcpus: fc.constantFrom(2, 4, 8, 16) });
    fc.assert(
      fc.property(
        fc.array(jobArb, { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 1, max: 6 }),
        fc.option(fc.double({ min: 0.2, max: 6, noNaN: true }), { nil: undefined }),
        (jobs, maxInstances, maxCostPerHour) => {
          const tasks: PackTask[] = [];
          const drafts: DraftInstance[] = [];
          jobs.forEach((j, k) => {
            for (let i = 0; i < j.tasks; i++) {
              const t = task(`j${k}-t${i}`, `j${k}`, j.tasks, [0, j.vcpus, j.vcpus * 2]);
              tasks.push(t);
              drafts.push(
                onNew(`new-${drafts.length + 1}`, (book.minType(t.demand) as { name: string }).name, [t]),
              );
            }
          });
          const caps = { maxInstances, ...(maxCostPerHour === undefined ? {} : { maxCostPerHour }) };
          const cut = enforceCaps(drafts, caps, byId(tasks), new Set(), valueOf, undefined, book);
          expect(cut.drafts.length).toBeLessThanOrEqual(maxInstances);
          const cost = cut.drafts.reduce((s, d) => s + d.type.costPerHour, 0);
          expect(cost).toBeLessThanOrEqual((maxCostPerHour ?? Infinity) + 1e-9);
          const kept = cut.drafts.flatMap((d) => d.taskIds);
          expect(new Set(kept).size).toBe(kept.length);
          for (const d of cut.drafts) {
            const sum = sumOn(
              d.taskIds.map((id) => (tasks.find((t) => t.id === id) as PackTask).demand),
              d.type.family,
            );
            expect(sum !== undefined && fits(sum, d.type.capacity)).toBe(true);
          }
          const waiting = new Set(cut.waiting.map((w) => w.jobId));
          for (const t of tasks) expect(kept.includes(t.id)).toBe(!waiting.has(t.jobId));
        },
      ),
      { seed: 20261205, numRuns: 300 },
    );
  });
});
