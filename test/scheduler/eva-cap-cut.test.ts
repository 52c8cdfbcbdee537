import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot, SchedJob } from '../../src/core/model.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import type { Plan } from '../../src/scheduler/types.js';

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
