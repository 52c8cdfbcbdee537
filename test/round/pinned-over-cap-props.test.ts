import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot, SchedInstance, SchedJob, SchedTask } from '../../src/core/model.js';
import type { FamilyDemand } from '../../src/core/resources.js';
import { Admission } from '../../src/queue/admission.js';
import type { QueueCaps } from '../../src/queue/caps.js';
import { runRound } from '../../src/round/round.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { plannedPricePerHour } from '../../src/scheduler/market-choice.js';

/**
 * Whatever the fleet and whichever of its jobs are pinned (being launched or moved, each on instances of its own), a
 * round under caps lowered below the fleet is never refused for the instances the pinned jobs hold, though the
 * round's check counts them: a cut stops what it may (a pinned job cut from the plan runs on), a plan that leaves the
 * fleet over the cap beyond what the pinned jobs hold launches nothing, and no pinned job is listed as waiting.
 */

const catalog = loadCatalogFile();

const DEMANDS: FamilyDemand[] = [
  { any: [1, 8, 30] },
  { any: [0, 4, 8] },
  { any: [0, 2, 20] },
  { any: [0, 1, 2] },
  { any: [2, 16, 64] },
  { p3: [0, 8, 8], c7i: [0, 6, 8], r7i: [0, 6, 8] },
];

const jobArb = fc.record({
  demand: fc.integer({ min: 0, max: DEMANDS.length - 1 }),
  tasks: fc.constantFrom(1, 1, 2),
  pinned: fc.boolean(),
});
type JobDraft = { demand: number; tasks: number; pinned: boolean };

function jobsAndTasks(drafts: readonly JobDraft[], prefix: string): { jobs: SchedJob[]; tasks: SchedTask[] } {
  const jobs: SchedJob[] = [];
  const tasks: SchedTask[] = [];
  drafts.forEach((d, i) => {
    const id = `${prefix}${i}`;
    const taskIds = Array.from({ length: d.tasks }, (_, k) => `${id}/${k}`);
    jobs.push({
      id,
      taskIds,
      reconfigurable: true,
      arrivalSeconds: i,
      migrationDelaySeconds: 60,
      expectedRemainingSeconds: 36_000,
    });
    for (const t of taskIds)
      tasks.push({ id: t, jobId: id, key: id, demand: DEMANDS[d.demand] as FamilyDemand });
  });
  return { jobs, tasks };
}

/**
 * The running jobs packed as Eva packs them, the pinned ones each on instances of its own (as a job being launched
 * is), and the waiting jobs beside them.
 */
function fleet(running: readonly JobDraft[], waiting: readonly JobDraft[]): ClusterSnapshot {
  const first = jobsAndTasks(running, 'r');
  const pinned = new Set(first.jobs.filter((_, i) => running[i]?.pinned === true).map((j) => j.id));
  const groups = [
    first.jobs.filter((j) => !pinned.has(j.id)),
    ...first.jobs.filter((j) => pinned.has(j.id)).map((j) => [j]),
  ];
  const where = new Map<string, string>();
  const instances: SchedInstance[] = [];
  for (const jobs of groups) {
    const ids = new Set(jobs.map((j) => j.id));
    const tasks = first.tasks.filter((t) => ids.has(t.jobId));
    const packed = new EvaScheduler(catalog).plan({ nowSeconds: 0, jobs, tasks, instances: [] });
    for (const inst of packed.configuration.instances) {
      const id = `i-${instances.length}`;
      inst.taskIds.forEach((t) => where.set(t, id));
      instances.push({ id, typeName: inst.typeName, state: 'running', taskIds: inst.taskIds });
    }
  }
  const fresh = jobsAndTasks(waiting, 'w');
  return {
    nowSeconds: 3600,
    jobs: [
      ...first.jobs.map((j) => ({
        ...j,
        reconfigurable: !pinned.has(j.id),
        runningSinceSeconds: 0,
        lastCheckpointSeconds: 3600,
      })),
      ...fresh.jobs,
    ],
    tasks: [...first.tasks.map((t) => ({ ...t, instanceId: where.get(t.id) })), ...fresh.tasks],
    instances,
  };
}

function costOf(snapshot: ClusterSnapshot, ids: Iterable<string>): number {
  const byId = new Map(snapshot.instances.map((i) => [i.id, i]));
  let sum = 0;
  for (const id of ids) {
    const i = byId.get(id);
    if (i !== undefined) sum += plannedPricePerHour(catalog, { ...i, isNew: false });
  }
  return sum;
}

describe('rounds under caps lowered below a fleet with pinned jobs', () => {
  it('are carried out, stop what they may, and list no pinned job as waiting', () => {
    fc.assert(
      fc.property(
        fc.array(jobArb, { minLength: 1, maxLength: 10 }),
        fc.array(jobArb, { maxLength: 4 }),
        fc.double({ min: 0.05, max: 1, noNaN: true }),
        fc.option(fc.integer({ min: 0, max: 4 }), { nil: undefined }),
        fc.option(fc.integer({ min: 0, max: 2 }), { nil: undefined }),
        (running, waiting, share, maxInstances, maxGpus) => {
          const snapshot = fleet(running, waiting);
          const fleetCost = costOf(
            snapshot,
            snapshot.instances.map((i) => i.id),
          );
          const caps: QueueCaps = {
            maxCostPerHour: Math.max(0.01, fleetCost * share),
            ...(maxInstances === undefined ? {} : { maxInstances }),
            ...(maxGpus === undefined ? {} : { quotas: [{ group: 'p', maxGpus }] }),
          };
          const out = runRound({
            snapshot,
            jobInfo: () => ({}),
            admission: new Admission(catalog, { caps }),
            scheduler: new EvaScheduler(catalog, { caps }),
            observations: [],
            catalog,
            carriedOut: true,
          });
          const planned = out.planned;
          if (planned === undefined) return;
          expect(planned.capViolation).toBeUndefined();
          const pinned = new Set(snapshot.jobs.filter((j) => !j.reconfigurable).map((j) => j.id));
          expect(planned.plan.decision.waiting.filter((w) => pinned.has(w.jobId))).toEqual([]);
          // The fleet left: the plan's instances and those kept for pinned tasks it left out.
          const terminated = new Set(
            planned.diff.actions.flatMap((a) => (a.kind === 'terminate-instance' ? [a.instanceId] : [])),
          );
          const left =
            planned.plan.configuration.instances.reduce((s, i) => s + plannedPricePerHour(catalog, i), 0) +
            costOf(
              snapshot,
              snapshot.instances
                .filter(
                  (i) =>
                    !terminated.has(i.id) && !planned.plan.configuration.instances.some((p) => p.id === i.id),
                )
                .map((i) => i.id),
            );
          const floor = costOf(
            snapshot,
            new Set(snapshot.tasks.filter((t) => pinned.has(t.jobId)).map((t) => t.instanceId as string)),
          );
          const cap = caps.maxCostPerHour as number;
          const launches = planned.diff.actions.some((a) => a.kind === 'launch-instance');
          // Over the cap, the cut stops what it may: something, when anything but the pinned jobs' instances runs.
          if (fleetCost > cap + 1e-9 && fleetCost > floor + 1e-9) expect(left).toBeLessThan(fleetCost - 1e-9);
          // Left over the cap and beyond the pinned jobs' instances only by a plan that launches nothing (a scheduler
          // that cut a pinned job as if its instance freed): no larger than the fleet was.
          if (left > Math.max(cap, floor) + 1e-9) {
            expect(launches).toBe(false);
            expect(left).toBeLessThanOrEqual(fleetCost + 1e-9);
          }
        },
      ),
      { numRuns: 150, seed: 7 },
    );
  });
});
