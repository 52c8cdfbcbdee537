import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../src/core/catalog.js';
import type { ClusterSnapshot, SchedJob, SchedTask } from '../../src/core/model.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';

const HOUR = 3600;
const delays = {
  instantiateSeconds: 60,
  workerStartSeconds: 10,
  workerRegisterSeconds: 5,
  terminateSeconds: 30,
};
/** One instance type at $0.10/h with room for two of the jobs below: putting them together saves $0.10/h. */
const catalog: Catalog = {
  provider: 'aws',
  region: 'us-east-1',
  types: [{ name: 'm.small', family: 'm', capacity: [0, 2, 8], costPerHour: 0.1, delays }],
};

/**
 * Two single-task jobs, each alone on an m.small. Measured next to each other, `slow` runs at 0.8 of its speed (20%
 * slower) and `calm` at full speed: co-locating them saves one instance ($0.10/h) and costs `slow` a fifth of each
 * hour.
 */
function twoJobs(): ClusterSnapshot {
  const job = (id: string): SchedJob => ({
    id,
    taskIds: [`${id}-t0`],
    reconfigurable: true,
    arrivalSeconds: 0,
    runningSinceSeconds: 0,
    migrationDelaySeconds: 30,
    lastCheckpointSeconds: 50 * HOUR,
    expectedRemainingSeconds: 500 * HOUR,
  });
  const tasks: SchedTask[] = [
    { id: 'slow-t0', jobId: 'slow', key: 'slow', demand: { any: [0, 1, 4] }, instanceId: 'i-1' },
    { id: 'calm-t0', jobId: 'calm', key: 'calm', demand: { any: [0, 1, 4] }, instanceId: 'i-2' },
  ];
  return {
    nowSeconds: 50 * HOUR,
    jobs: [job('slow'), job('calm')],
    tasks,
    instances: [
      { id: 'i-1', typeName: 'm.small', state: 'running', taskIds: ['slow-t0'] },
      { id: 'i-2', typeName: 'm.small', state: 'running', taskIds: ['calm-t0'] },
    ],
  };
}

function planAt(valueOfTimePerJobHour: number) {
  const eva = new EvaScheduler(catalog, { valueOfTimePerJobHour, reservationPrice: 'standalone' });
  eva.table.record('slow', ['calm'], 0.8);
  eva.table.record('calm', ['slow'], 1);
  const plan = eva.plan(twoJobs());
  return {
    plan,
    instances: plan.configuration.instances.map((i) => [...i.taskIds].sort().join('+')).sort(),
  };
}

describe('value of time: a co-location saving $0.10/h that slows a job by 20%', () => {
  it('is taken when time is worth nothing', () => {
    const { plan, instances } = planAt(0);
    expect(instances).toEqual(['calm-t0+slow-t0']);
    expect(plan.configuration.instances[0]?.typeName).toBe('m.small');
  });

  it('is still taken when the slowdown is worth less than the saving ($0.10/job-hour: $0.02/h)', () => {
    const { plan, instances } = planAt(0.1);
    expect(instances).toEqual(['calm-t0+slow-t0']);
    const chosen = plan.decision.candidates.find((c) => c.name === plan.decision.chosen);
    expect(chosen?.timeCostPerHour).toBeCloseTo(0.02, 9);
  });

  it('is declined when an hour of the job is worth more ($1/job-hour: $0.20/h > $0.10/h)', () => {
    const { plan, instances } = planAt(1);
    expect(instances).toEqual(['calm-t0', 'slow-t0']);
    expect(plan.decision.chosen).toBe('stay');
    expect(plan.decision.valueOfTimePerJobHour).toBe(1);
    // Both parts are in the record: the co-location still saves dollars (the instance, less what Eva's prices already
    // charge for the slowdown), and adds $1 × 0.2 = $0.20/h of completion time; staying adds none.
    const together = plan.decision.candidates.find((c) => c.movedJobs.length > 0);
    expect((together?.savingPerSecond ?? 0) * HOUR).toBeGreaterThan(0.07);
    expect(together?.timeCostPerHour).toBeCloseTo(0.2, 9);
    expect(plan.decision.candidates.find((c) => c.name === 'stay')?.timeCostPerHour).toBe(0);
    expect(plan.decision.reason).toContain('time: −$0.20/h slowdown');
  });
});
