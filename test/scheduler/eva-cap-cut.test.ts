import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot, SchedJob } from '../../src/core/model.js';
import { planCapViolation } from '../../src/round/plan-caps.js';
import { diffConfiguration } from '../../src/scheduler/actions.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import type { Plan } from '../../src/scheduler/types.js';
import { spotInstance } from '../helpers/spot-instances.js';

const catalog = loadCatalogFile();

/**
 * Two running c7i.2xlarge ($0.357/h each), each half used by one [0, 4, 8] job (a, b), and a newly admitted job n of
 * [0, 8, 16] that needs a whole c7i.2xlarge. Under a $0.80/h cap, placing n where the fleet is (a new instance,
 * $1.071/h) breaks the cap; consolidating a onto b's instance and n onto a's fits ($0.714/h) but moves a.
 */
function capBound(lastCheckpointSeconds: number): ClusterSnapshot {
  const job = (id: string, arrivalSeconds: number, taskCount = 1): SchedJob => ({
    id,
    taskIds: Array.from({ length: taskCount }, (_, k) => `${id}-t${k}`),
    reconfigurable: true,
    arrivalSeconds,
    migrationDelaySeconds: 60,
    lastCheckpointSeconds,
    expectedRemainingSeconds: 100_000,
  });
  return {
    nowSeconds: 5000,
    jobs: [job('a', 0), job('b', 100), job('n', 4900)],
    tasks: [
      { id: 'a-t0', jobId: 'a', key: 'resnet18', demand: { any: [0, 4, 8] }, instanceId: 'i-a' },
      { id: 'b-t0', jobId: 'b', key: 'gpt2', demand: { any: [0, 4, 8] }, instanceId: 'i-b' },
      { id: 'n-t0', jobId: 'n', key: 'gcn', demand: { any: [0, 8, 16] } },
    ],
    instances: [
      { id: 'i-a', typeName: 'c7i.2xlarge', state: 'running', taskIds: ['a-t0'] },
      { id: 'i-b', typeName: 'c7i.2xlarge', state: 'running', taskIds: ['b-t0'] },
    ],
  };
}

const CAPS = { maxCostPerHour: 0.8 };

function placed(plan: Plan): Map<string, string | undefined> {
  const where = new Map<string, string | undefined>();
  for (const inst of plan.configuration.instances) for (const t of inst.taskIds) where.set(t, inst.id);
  return where;
}

describe('Eva under a binding cap: candidates over it are weighed as cut to the caps', () => {
  it('does not move a job whose move does not pay only to fit a new job under the cap: the new job waits', () => {
    // a and b last checkpointed at 0: a move redoes 5,000 s of work, far more than what placing n now would earn
    // before the horizon. Weighed as cut (n waits), staying wins eq. 1; rejected outright, it left only the moves.
    const plan = new EvaScheduler(catalog, { caps: CAPS }).plan(capBound(0));
    const chosen = plan.decision.candidates.find((c) => c.name === plan.decision.chosen);
    expect(chosen?.movedJobs).toEqual([]);
    expect(placed(plan)).toEqual(
      new Map([
        ['a-t0', 'i-a'],
        ['b-t0', 'i-b'],
      ]),
    );
    expect(plan.decision.waiting).toEqual([{ jobId: 'n', cap: 'maxCostPerHour' }]);
    // The round is then packed again without n (eva-cap-repack.ts), where staying needs no cut.
    expect(plan.decision.reason).toContain('packed again without the 1 job(s) a cap keeps waiting');
  });

  it('still makes the move when it pays: a fresh checkpoint makes consolidating and placing n the better plan', () => {
    const plan = new EvaScheduler(catalog, { caps: CAPS }).plan(capBound(5000));
    const chosen = plan.decision.candidates.find((c) => c.name === plan.decision.chosen);
    expect(chosen?.movedJobs.length).toBe(1);
    expect(chosen?.leftWaiting).toBeUndefined();
    expect(plan.decision.waiting).toEqual([]);
    expect(placed(plan).has('n-t0')).toBe(true);
    const cost = plan.configuration.instances.reduce(
      (s, i) => s + (catalog.types.find((t) => t.name === i.typeName)?.costPerHour ?? 0),
      0,
    );
    expect(cost).toBeLessThanOrEqual(CAPS.maxCostPerHour);
  });
});

describe('Eva holds the $ cap to market prices, not to the rebalance risk premium', () => {
  const c7iSpot = catalog.spot?.offerings.find((o) => o.typeName === 'c7i.xlarge' && o.zone === 'us-east-1a');

  /** Job a alone on a spot c7i.xlarge EC2 flagged for rebalancing, checkpointed 10 s ago. */
  function flagged(): ClusterSnapshot {
    return {
      nowSeconds: 7200,
      jobs: [
        {
          id: 'a',
          taskIds: ['a-t0'],
          reconfigurable: true,
          arrivalSeconds: 0,
          migrationDelaySeconds: 600,
          lastCheckpointSeconds: 7190,
          runningSinceSeconds: 0,
          checkpointIntervalSeconds: 600,
          expectedRemainingSeconds: 36_000,
        },
      ],
      tasks: [{ id: 'a-t0', jobId: 'a', key: 'resnet18', demand: { any: [0, 4, 8] }, instanceId: 'i-1' }],
      instances: [spotInstance('i-1', ['a-t0'])],
    };
  }

  it('keeps a fleet that pays less than the cap, and decides as without the cap', () => {
    const price = c7iSpot?.pricePerHour ?? Number.NaN;
    const uncapped = new EvaScheduler(catalog, { spot: true, valueOfTimePerJobHour: 0 }).plan(flagged());
    const capped = new EvaScheduler(catalog, {
      spot: true,
      valueOfTimePerJobHour: 0,
      caps: { maxCostPerHour: price + 0.001 },
    }).plan(flagged());
    // The premium makes staying look dearer than its $0.084/h, but only what the fleet pays counts against the cap.
    expect(uncapped.decision.chosen).toBe('stay');
    expect(capped.decision.chosen).toBe('stay');
    expect(capped.decision.candidates.every((c) => c.rejectedBecause === undefined)).toBe(true);
    expect(placed(capped)).toEqual(new Map([['a-t0', 'i-1']]));
    expect(capped.decision.waiting).toEqual([]);
  });
});

describe('Eva when every candidate breaks a cap', () => {
  /** Jobs a and b, each alone on a c7i.xlarge ($0.1785/h), checkpointed just now: moves are cheap. */
  function overLoweredCap(now: number): ClusterSnapshot {
    const job = (id: string): SchedJob => ({
      id,
      taskIds: [`${id}-t0`],
      reconfigurable: true,
      arrivalSeconds: 0,
      migrationDelaySeconds: 60,
      lastCheckpointSeconds: now,
      expectedRemainingSeconds: 100_000,
    });
    return {
      nowSeconds: now,
      jobs: [job('a'), job('b')],
      tasks: [
        { id: 'a-t0', jobId: 'a', key: 'resnet18', demand: { any: [0, 2, 4] }, instanceId: 'i-1' },
        { id: 'b-t0', jobId: 'b', key: 'gpt2', demand: { any: [0, 2, 4] }, instanceId: 'i-2' },
      ],
      instances: [
        { id: 'i-1', typeName: 'c7i.xlarge', state: 'running', taskIds: ['a-t0'] },
        { id: 'i-2', typeName: 'c7i.xlarge', state: 'running', taskIds: ['b-t0'] },
      ],
    };
  }

  it('never picks a plan over the migrations cap: the fleet gets under the $ cap by sending a job back to the queue', () => {
    // $0.357/h over a lowered $0.2/h cap, and no migration allowed: staying cut to the cap stops a running job, every
    // other candidate moves one. Only the cut repairs its cap; a move over the migrations cap is refused every round.
    const caps = { maxCostPerHour: 0.2, maxMigrationsPerRound: 0 };
    for (const now of [7200, 100_000]) {
      const snapshot = overLoweredCap(now);
      const plan = new EvaScheduler(catalog, { caps }).plan(snapshot);
      const diff = diffConfiguration(snapshot, plan.configuration, catalog);
      expect(diff.movedJobIds).toEqual([]);
      expect(diff.queuedJobIds).toHaveLength(1);
      expect(planCapViolation(plan.configuration, diff, catalog, caps)).toBeUndefined();
      expect(plan.decision.waiting).toEqual([{ jobId: diff.queuedJobIds[0], cap: 'maxCostPerHour' }]);
    }
  });
});
