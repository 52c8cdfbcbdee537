import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot, SchedJob, SchedTask } from '../../src/core/model.js';
import type { FamilyDemand } from '../../src/core/resources.js';
import { Admission } from '../../src/queue/admission.js';
import type { QueueCaps } from '../../src/queue/caps.js';
import { pinnedHold, planCapViolation } from '../../src/round/plan-caps.js';
import { runRound, type RoundOutcome } from '../../src/round/round.js';
import { diffConfiguration } from '../../src/scheduler/actions.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import type { Configuration, Plan, Scheduler } from '../../src/scheduler/types.js';

/**
 * A job being launched or moved (pinned) cannot be stopped by a plan: a cap that cuts it from the plan leaves it
 * running where it is committed (the diff keeps its instance). It is not listed as waiting for the cap, and the
 * round's cap check counts the instance it holds: a plan that launches past a cap with it is refused. A cap lowered
 * below the fleet still lets the cut stop what it can: a plan keeping no more than the pinned jobs hold, or launching
 * nothing (the fleet it leaves is no larger than the fleet now), is carried out.
 */

const catalog = loadCatalogFile();
/** p3.2xlarge alone ($3.06/h). */
const GPU: FamilyDemand = { any: [1, 4, 10] };
const SMALL: FamilyDemand = { any: [0, 2, 2] };

function job(id: string, pinned: boolean, running: boolean): SchedJob {
  return {
    id,
    taskIds: [`${id}/t`],
    reconfigurable: !pinned,
    arrivalSeconds: 0,
    migrationDelaySeconds: 60,
    expectedRemainingSeconds: 36_000,
    ...(running ? { runningSinceSeconds: 0, lastCheckpointSeconds: 0 } : {}),
  };
}

function task(jobId: string, demand: FamilyDemand, instanceId?: string): SchedTask {
  return { id: `${jobId}/t`, jobId, key: jobId, demand, ...(instanceId === undefined ? {} : { instanceId }) };
}

/** a pinned on a p3.2xlarge; c (when asked) running on a c7i.xlarge it could leave; b waiting. */
function fleet(withC: boolean): ClusterSnapshot {
  return {
    nowSeconds: 600,
    jobs: [job('a', true, true), ...(withC ? [job('c', false, true)] : []), job('b', false, false)],
    tasks: [task('a', GPU, 'i-0'), ...(withC ? [task('c', SMALL, 'i-1')] : []), task('b', SMALL)],
    instances: [
      { id: 'i-0', typeName: 'p3.2xlarge', state: 'running', taskIds: ['a/t'] },
      ...(withC ? [{ id: 'i-1', typeName: 'c7i.xlarge', state: 'running' as const, taskIds: ['c/t'] }] : []),
    ],
  };
}

function round(snapshot: ClusterSnapshot, caps: QueueCaps, scheduler?: Scheduler): RoundOutcome {
  return runRound({
    snapshot,
    jobInfo: () => ({}),
    admission: new Admission(catalog, { caps }),
    scheduler: scheduler ?? new EvaScheduler(catalog, { caps }),
    observations: [],
    catalog,
    carriedOut: true,
  });
}

function actionsOf(out: RoundOutcome): string[] {
  return (out.planned?.diff.actions ?? []).map(
    (a) => `${a.kind} ${'jobId' in a ? `${a.jobId} ` : ''}${a.instanceId}${'then' in a ? ` ${a.then}` : ''}`,
  );
}

/** A scheduler that plans `configuration` whatever the snapshot. */
function fixed(configuration: Configuration): Scheduler {
  return {
    name: 'fixed',
    observe() {},
    plan(snapshot): Plan {
      return {
        configuration,
        decision: {
          scheduler: 'fixed',
          nowSeconds: snapshot.nowSeconds,
          candidates: [],
          chosen: 'baseline',
          reason: 'test',
          waiting: [],
          pinned: [],
        },
      };
    },
  };
}

describe('a pinned job over a $ cap', () => {
  it('is not listed as waiting for the cap: it runs on where it is, and the plan is carried out', () => {
    const out = round(fleet(false), { maxCostPerHour: 1 });
    const planned = out.planned;
    expect(planned?.plan.decision.waiting.map((w) => w.jobId)).toEqual(['b']);
    expect(actionsOf(out)).toEqual([]);
    expect(planned?.capViolation).toBeUndefined();
  });

  it('the cut still stops what it can: the running job it may move, with the pinned one over the cap alone', () => {
    const out = round(fleet(true), { maxCostPerHour: 1 });
    const planned = out.planned;
    expect(planned?.capViolation).toBeUndefined();
    expect(actionsOf(out)).toEqual(['checkpoint-stop c i-1 queue', 'terminate-instance i-1']);
    expect(
      planned?.plan.decision.waiting.filter((w) => !w.cap.startsWith('queue ')).map((w) => w.jobId),
    ).toEqual(['c']);
  });

  it('a plan launching nothing is carried out, though it cut a pinned job as if that freed its instance', () => {
    // r3 and r4 are pinned. Eva's cut to $0.95/h drops r0, r2 and r4 (pinned, its p3.8xlarge the last dropped), then
    // packs again without them: r1 stays on i-2, the plan costs $0.61/h, and the diff keeps i-5 ($12.24/h) for r4.
    const on = (jobId: string, k: number, demand: FamilyDemand, instanceId: string): SchedTask => ({
      id: `${jobId}/${k}`,
      jobId,
      key: jobId,
      demand,
      instanceId,
    });
    const multi = (id: string, tasks: number, pinned: boolean): SchedJob => ({
      ...job(id, pinned, true),
      taskIds: Array.from({ length: tasks }, (_, k) => `${id}/${k}`),
      arrivalSeconds: Number(id.slice(1)),
      lastCheckpointSeconds: 3600,
    });
    const GPU8: FamilyDemand = { any: [1, 8, 30] };
    const TINY: FamilyDemand = { any: [0, 1, 2] };
    const MEM: FamilyDemand = { any: [0, 2, 20] };
    const snapshot: ClusterSnapshot = {
      nowSeconds: 3600,
      jobs: [
        multi('r0', 1, false),
        multi('r1', 2, false),
        multi('r2', 1, false),
        multi('r3', 2, true),
        multi('r4', 1, true),
      ],
      tasks: [
        on('r0', 0, GPU8, 'i-0'),
        on('r2', 0, GPU8, 'i-1'),
        on('r1', 0, TINY, 'i-2'),
        on('r1', 1, TINY, 'i-2'),
        on('r3', 0, MEM, 'i-3'),
        on('r3', 1, MEM, 'i-4'),
        on('r4', 0, { any: [2, 16, 64] }, 'i-5'),
      ],
      instances: [
        { id: 'i-0', typeName: 'p3.2xlarge', state: 'running', taskIds: ['r0/0'] },
        { id: 'i-1', typeName: 'p3.2xlarge', state: 'running', taskIds: ['r2/0'] },
        { id: 'i-2', typeName: 'c7i.large', state: 'running', taskIds: ['r1/0', 'r1/1'] },
        { id: 'i-3', typeName: 'r7i.xlarge', state: 'running', taskIds: ['r3/0'] },
        { id: 'i-4', typeName: 'r7i.xlarge', state: 'running', taskIds: ['r3/1'] },
        { id: 'i-5', typeName: 'p3.8xlarge', state: 'running', taskIds: ['r4/0'] },
      ],
    };
    const out = round(snapshot, { maxCostPerHour: 0.95 });
    const planned = out.planned;
    expect(planned?.plan.configuration.instances.map((i) => i.id)).toEqual(['i-2', 'i-3', 'i-4']);
    expect(planned?.capViolation).toBeUndefined();
    expect(actionsOf(out)).toEqual([
      'checkpoint-stop r0 i-0 queue',
      'checkpoint-stop r2 i-1 queue',
      'terminate-instance i-0',
      'terminate-instance i-1',
    ]);
    expect(planned?.plan.decision.waiting.map((w) => w.jobId).sort()).toEqual(['r0', 'r2']);
  });

  it('a plan that launches past the cap with the instance kept for the pinned job is refused', () => {
    // Admitted beside a at $3.06 + $0.09 under $3.2: a plan that places b on a new instance but leaves a out (as if
    // cutting it freed its instance) costs $0.18 by its own instances and $3.24 with the instance kept for a.
    const scheduler = fixed({
      instances: [{ id: 'new-1', typeName: 'c7i.xlarge', isNew: true, taskIds: ['b/t'] }],
    });
    const out = round(fleet(false), { maxCostPerHour: 3.2 }, scheduler);
    expect(out.queue.result.admitted).toContain('b');
    expect(out.planned?.capViolation).toBe(
      'maxCostPerHour: $3.24/h over the $3.2/h cap ($3.06/h of it kept for jobs being launched or moved)',
    );
  });
});

describe('planCapViolation with the instances pinned jobs hold', () => {
  const snapshot = fleet(true);
  const check = (configuration: Configuration, caps: QueueCaps): string | undefined => {
    const diff = diffConfiguration(snapshot, configuration, catalog);
    return planCapViolation(configuration, diff, catalog, caps, pinnedHold(snapshot, configuration, diff));
  };
  const keepC: Configuration = {
    instances: [{ id: 'i-1', typeName: 'c7i.xlarge', isNew: false, taskIds: ['c/t'] }],
  };
  const launchB: Configuration = {
    instances: [...keepC.instances, { id: 'new-1', typeName: 'c7i.large', isNew: true, taskIds: ['b/t'] }],
  };
  const stopC: Configuration = { instances: [] };
  const listed: Configuration = {
    instances: [{ id: 'i-0', typeName: 'p3.2xlarge', isNew: false, taskIds: ['a/t'] }],
  };

  it('refuses a plan that launches past a cap with them, on the $, the instance count and the quotas', () => {
    expect(check(launchB, { maxCostPerHour: 1 })).toBe(
      'maxCostPerHour: $3.33/h over the $1/h cap ($3.06/h of it kept for jobs being launched or moved)',
    );
    expect(check(launchB, { maxInstances: 2 })).toBe(
      'maxInstances: 3 instances over the cap of 2 (1 of them kept for jobs being launched or moved)',
    );
    expect(check(launchB, { quotas: [{ group: 'standard', maxVcpus: 5 }] })).toMatch(
      /^quota standard maxVcpus/,
    );
    // A quota only the pinned job's instance counts against: what the plan keeps beyond it does not break it.
    expect(check(launchB, { quotas: [{ group: 'p', maxGpus: 0 }] })).toBeUndefined();
  });

  it('lets a plan through that keeps no more than they hold, or launches nothing', () => {
    for (const plan of [stopC, listed]) {
      expect(check(plan, { maxCostPerHour: 1 })).toBeUndefined();
      expect(check(plan, { maxInstances: 0 })).toBeUndefined();
      expect(check(plan, { quotas: [{ group: 'p', maxGpus: 0 }] })).toBeUndefined();
    }
    // Keeping c launches nothing: the fleet stays as it is, refused or not (a cut cannot stop a pinned job).
    expect(check(keepC, { maxCostPerHour: 1 })).toBeUndefined();
    expect(check(keepC, { maxInstances: 1 })).toBeUndefined();
    // Over a cap by its own instances, it is refused as before.
    expect(check(keepC, { maxCostPerHour: 0.1 })).toMatch(
      /^maxCostPerHour: \$3\.24\/h over the \$0\.1\/h cap/,
    );
    expect(check(keepC, { maxInstances: 0 })).toMatch(/^maxInstances: 2 instances/);
    expect(check(keepC, { quotas: [{ group: 'standard', maxVcpus: 2 }] })).toMatch(
      /^quota standard maxVcpus/,
    );
  });
});
