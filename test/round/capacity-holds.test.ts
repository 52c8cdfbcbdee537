import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { Catalog } from '../../src/core/catalog.js';
import type { ClusterSnapshot, NoCapacityOffering, SchedJob } from '../../src/core/model.js';
import { Admission } from '../../src/queue/admission.js';
import { capacityHolds, NO_CAPACITY } from '../../src/round/capacity-holds.js';
import { hosts } from '../../src/round/replacement.js';
import { isQueueWait, runRound } from '../../src/round/round.js';
import { waitInWords } from '../../src/controller/explain.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';

const catalog = loadCatalogFile();
const GPU = { p3: [1, 4, 32] as [number, number, number] };
const GPU_TYPES = catalog.types.filter((t) => hosts(t, [GPU])).map((t) => t.name);
const NOW = 1000;

function job(id: string, extra: Partial<SchedJob> = {}): SchedJob {
  return {
    id,
    taskIds: [`${id}/t`],
    reconfigurable: true,
    arrivalSeconds: 0,
    migrationDelaySeconds: 60,
    expectedRemainingSeconds: 3600,
    ...extra,
  };
}

function snapshot(
  noCapacity: readonly NoCapacityOffering[],
  more: Partial<ClusterSnapshot> = {},
): ClusterSnapshot {
  return {
    nowSeconds: NOW,
    jobs: [job('gpu')],
    tasks: [{ id: 'gpu/t', jobId: 'gpu', key: 'gpu', demand: GPU }],
    instances: [],
    noCapacity,
    ...more,
  };
}

/** Every GPU type out on demand, each until its own time. */
const allOnDemandOut = GPU_TYPES.map((typeName, i) => ({
  typeName,
  market: 'on-demand' as const,
  untilSeconds: NOW + 100 + 10 * i,
}));

/** The catalog with one spot pool for the cheapest GPU type. */
const withSpot: Catalog = {
  ...catalog,
  spot: {
    snapshotDate: '2025-01-01',
    source: 'test',
    offerings: [
      { typeName: GPU_TYPES[0] as string, zone: 'us-east-1a', pricePerHour: 1, interruption: '<5%' },
    ],
  },
};

describe('capacity holds', () => {
  it('holds a waiting job every fitting type of which is out, until the first of them may take it again', () => {
    expect(GPU_TYPES.length).toBeGreaterThan(1);
    const holds = capacityHolds(snapshot(allOnDemandOut), catalog, false);
    expect(holds).toEqual([{ jobId: 'gpu', untilSeconds: NOW + 100, typeNames: GPU_TYPES }]);
  });

  it('holds nothing while one fitting type has capacity, or once the windows ended', () => {
    expect(capacityHolds(snapshot(allOnDemandOut.slice(1)), catalog, false)).toEqual([]);
    const ended = allOnDemandOut.map((o) => ({ ...o, untilSeconds: NOW }));
    expect(capacityHolds(snapshot(ended), catalog, false)).toEqual([]);
    expect(capacityHolds(snapshot([]), catalog, false)).toEqual([]);
  });

  it('holds no job that holds capacity, nor one an existing instance of a fitting type may take', () => {
    const placed = snapshot(allOnDemandOut, {
      tasks: [{ id: 'gpu/t', jobId: 'gpu', key: 'gpu', demand: GPU, instanceId: 'i-1' }],
      instances: [{ id: 'i-1', typeName: GPU_TYPES.at(-1) as string, state: 'running', taskIds: ['gpu/t'] }],
    });
    expect(capacityHolds(placed, catalog, false)).toEqual([]);
    const room = snapshot(allOnDemandOut, {
      instances: [{ id: 'i-1', typeName: GPU_TYPES.at(-1) as string, state: 'running', taskIds: [] }],
    });
    expect(capacityHolds(room, catalog, false)).toEqual([]);
  });

  it('holds no job that may still go on spot where spot has capacity, and holds it when spot is out too', () => {
    expect(capacityHolds(snapshot(allOnDemandOut), withSpot, true)).toEqual([]);
    // Spot not bought, or the job never on spot: on demand alone decides.
    expect(capacityHolds(snapshot(allOnDemandOut), withSpot, false)).toHaveLength(1);
    const never = snapshot(allOnDemandOut, { jobs: [job('gpu', { spot: 'never' })] });
    expect(capacityHolds(never, withSpot, true)).toHaveLength(1);
    const spotOut = [
      ...allOnDemandOut,
      { typeName: GPU_TYPES[0] as string, market: 'spot' as const, untilSeconds: NOW + 50 },
    ];
    // The spot pool reopens first.
    expect(capacityHolds(snapshot(spotOut), withSpot, true)).toEqual([
      { jobId: 'gpu', untilSeconds: NOW + 50, typeNames: GPU_TYPES },
    ]);
  });

  it('leaves a job no type of the catalog hosts to admission (never-fits)', () => {
    const huge = snapshot(allOnDemandOut, {
      tasks: [{ id: 'gpu/t', jobId: 'gpu', key: 'gpu', demand: { p3: [64, 4, 32] } }],
    });
    expect(capacityHolds(huge, catalog, false)).toEqual([]);
  });

  it('keeps a held job out of the round: not planned, waiting for capacity, not counted as cut', () => {
    const cpu = job('cpu');
    const both = snapshot(allOnDemandOut, {
      jobs: [job('gpu'), cpu],
      tasks: [
        { id: 'gpu/t', jobId: 'gpu', key: 'gpu', demand: GPU },
        { id: 'cpu/t', jobId: 'cpu', key: 'cpu', demand: { c7i: [0, 4, 8] } },
      ],
    });
    const outcome = runRound({
      snapshot: both,
      jobInfo: () => ({}),
      admission: new Admission(catalog, { caps: {} }),
      scheduler: new EvaScheduler(catalog, {}),
      observations: [],
      catalog,
      carriedOut: true,
    });
    const planned = outcome.planned?.plan;
    const placedTasks = planned?.configuration.instances.flatMap((i) => i.taskIds) ?? [];
    expect(placedTasks).toEqual(['cpu/t']);
    const wait = planned?.decision.waiting.find((w) => w.jobId === 'gpu');
    expect(wait?.capName).toBe(NO_CAPACITY);
    // A wait in the queue: not a job the plan was cut without (admission sizes those apart), and worded as one.
    expect(isQueueWait(wait?.cap ?? '')).toBe(true);
    expect(waitInWords(wait?.cap ?? '', wait?.capName)).toBe(
      `in the queue for capacity: the cloud refused every instance type that fits it (${GPU_TYPES.join(', ')}) ` +
        `until 1970-01-01T00:18:20Z`,
    );
    expect(outcome.queue.snapshot.jobs.map((j) => j.id)).toEqual(['cpu']);

    // Held alone, the round has nothing to plan: the wait is told all the same.
    const alone = runRound({
      snapshot: snapshot(allOnDemandOut),
      jobInfo: () => ({}),
      admission: new Admission(catalog, { caps: {} }),
      scheduler: new EvaScheduler(catalog, {}),
      observations: [],
      catalog,
      carriedOut: true,
    });
    expect(alone.planned).toBeUndefined();
    expect(alone.idleWaits?.map((w) => w.capName)).toEqual([NO_CAPACITY]);
  });
});
