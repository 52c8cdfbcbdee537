import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot, SchedJob, SchedTask } from '../../src/core/model.js';
import type { FamilyDemand } from '../../src/core/resources.js';
import { Admission } from '../../src/queue/admission.js';
import { isQueueWait, runRound } from '../../src/round/round.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';

const catalog = loadCatalogFile();
const CAP = 0.8;
const SMALL: FamilyDemand = { any: [0, 1, 2] };
/** Twelve vCPUs: a c7i.4xlarge ($0.714/h) of its own, most of the cap. */
const BIG: FamilyDemand = { any: [0, 12, 24] };

function job(id: string, arrivalSeconds: number, running: boolean): SchedJob {
  return {
    id,
    taskIds: [`${id}/t`],
    reconfigurable: true,
    arrivalSeconds,
    migrationDelaySeconds: 60,
    expectedRemainingSeconds: 3600,
    ...(running ? { runningSinceSeconds: 0, lastCheckpointSeconds: 0 } : {}),
  };
}

/**
 * One-vCPU jobs running packed, four on a c7i.xlarge and the rest on a c7i.large (six: $0.27/h, half their $0.54/h
 * standalone), and the waiting jobs and their tasks.
 */
function packedFleet(
  running: readonly string[],
  waiting: readonly SchedJob[],
  waitingTasks: readonly SchedTask[],
): ClusterSnapshot {
  const onL = running.slice(4);
  return {
    nowSeconds: 600,
    jobs: [...running.map((id) => job(id, 0, true)), ...waiting],
    tasks: [
      ...running.map((id, i) => ({
        id: `${id}/t`,
        jobId: id,
        key: id,
        demand: SMALL,
        instanceId: i < 4 ? 'i-x' : 'i-l',
      })),
      ...waitingTasks,
    ],
    instances: [
      {
        id: 'i-x',
        typeName: 'c7i.xlarge',
        state: 'running',
        taskIds: running.slice(0, 4).map((id) => `${id}/t`),
      },
      ...(onL.length === 0
        ? []
        : [
            {
              id: 'i-l',
              typeName: 'c7i.large',
              state: 'running' as const,
              taskIds: onL.map((id) => `${id}/t`),
            },
          ]),
    ],
  };
}

/** Six running jobs, then three more one-vCPU jobs and a job needing a c7i.4xlarge, waiting in that order. */
function fleet(): ClusterSnapshot {
  const waiting = ['s0', 's1', 's2', 'big'];
  return packedFleet(
    ['r0', 'r1', 'r2', 'r3', 'r4', 'r5'],
    waiting.map((id, i) => job(id, 100 + i, false)),
    waiting.map((id) => ({ id: `${id}/t`, jobId: id, key: id, demand: id === 'big' ? BIG : SMALL })),
  );
}

/** The waiting jobs a round's plan places, and those its caps cut after admission let them in. */
function round(admission: Admission, eva: EvaScheduler) {
  const outcome = runRound({
    snapshot: fleet(),
    jobInfo: () => ({}),
    admission,
    scheduler: eva,
    observations: [],
    catalog,
    carriedOut: true,
  });
  const plan = outcome.planned?.plan;
  const placed = new Set(plan?.configuration.instances.flatMap((i) => i.taskIds) ?? []);
  return {
    admitted: [...outcome.queue.result.admitted].sort(),
    placed: ['big', 's0', 's1', 's2'].filter((id) => placed.has(`${id}/t`)),
    cut: (plan?.decision.waiting ?? []).filter((w) => !isQueueWait(w.cap)).map((w) => w.jobId),
  };
}

describe('a job a plan was cut without, sized by the packing (plan-cost)', () => {
  it('is sized at its own price until it runs, so the jobs behind it are placed instead of cut with it', () => {
    const admission = new Admission(catalog, { caps: { maxCostPerHour: CAP }, admitBy: 'plan-cost' });
    const eva = new EvaScheduler(catalog, { caps: { maxCostPerHour: CAP }, valueOfTimePerJobHour: 0 });
    const first = round(admission, eva);
    // At half its price the big job is let in with the others, but its instance alone is most of the cap: the plan is
    // cut without it, and without the small jobs packed on that instance with it.
    expect(first.admitted).toContain('big');
    expect(first.cut).toContain('big');
    // Before, the next round did the same again, and every round after it: nothing placed while the fleet ran at a
    // third of the cap. At its own price the big job now waits, and the small ones are placed.
    const second = round(admission, eva);
    expect(second.admitted).not.toContain('big');
    expect(second.placed).toEqual(['s0', 's1', 's2']);
    expect(second.cut).toEqual([]);
  });
});

describe('a job a plan was cut without, that fits the cap only packed', () => {
  /** The running jobs packed as above, and `m`, a job of nine one-vCPU tasks, waiting. */
  function withGang(running: readonly string[]): ClusterSnapshot {
    const gang: SchedJob = {
      ...job('m', 100, false),
      taskIds: Array.from({ length: 9 }, (_, k) => `m/t${k}`),
    };
    return packedFleet(
      running,
      [gang],
      gang.taskIds.map((id, k) => ({ id, jobId: 'm', key: `m${k}`, demand: SMALL })),
    );
  }

  it('keeps its packed size, so it still runs once room frees instead of waiting as never-fits', () => {
    // Nine one-vCPU tasks: $0.80/h as nine c7i.large, over the $0.70 cap alone; about half that packed.
    const cap = 0.7;
    const admission = new Admission(catalog, { caps: { maxCostPerHour: cap }, admitBy: 'plan-cost' });
    const eva = new EvaScheduler(catalog, { caps: { maxCostPerHour: cap }, valueOfTimePerJobHour: 0 });
    const roundOn = (running: readonly string[]) => {
      const outcome = runRound({
        snapshot: withGang(running),
        jobInfo: () => ({}),
        admission,
        scheduler: eva,
        observations: [],
        catalog,
        carriedOut: true,
      });
      return {
        reason: outcome.queue.result.queued.find((q) => q.jobId === 'm')?.reason,
        placed: (outcome.planned?.plan.configuration.instances ?? []).some((i) =>
          i.taskIds.some((t) => t.startsWith('m/')),
        ),
      };
    };
    const six = ['r0', 'r1', 'r2', 'r3', 'r4', 'r5'];
    expect(roundOn(six).placed).toBe(false); // let in at its packed size, and cut
    expect(roundOn(six).reason).not.toBe('never-fits');
    // Two jobs end: the room it needs packed is there.
    expect(roundOn(six.slice(0, 4)).placed).toBe(true);
  });
});
