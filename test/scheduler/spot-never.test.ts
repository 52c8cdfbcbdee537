import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot, SchedJob } from '../../src/core/model.js';
import type { SpotPreference } from '../../src/core/spot.js';
import { SpotBaseline } from '../../src/scheduler/baselines/spot-baseline.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import type { PlannedInstance } from '../../src/scheduler/types.js';

const catalog = loadCatalogFile();

/**
 * A spot c7i.2xlarge half used by job a ([0, 4, 8], spot allowed), and a new job n of the same shape. The free half
 * is the cheapest place for n by far (it adds nothing to the fleet's $/hour); n says whether it may run on spot.
 */
function halfUsedSpot(spot: SpotPreference): ClusterSnapshot {
  const job = (id: string, arrivalSeconds: number, pref: SpotPreference): SchedJob => ({
    id,
    taskIds: [`${id}-t0`],
    reconfigurable: true,
    arrivalSeconds,
    migrationDelaySeconds: 60,
    lastCheckpointSeconds: 5000,
    expectedRemainingSeconds: 100_000,
    spot: pref,
  });
  return {
    nowSeconds: 5000,
    jobs: [job('a', 0, 'allowed'), job('n', 4900, spot)],
    tasks: [
      { id: 'a-t0', jobId: 'a', key: 'resnet18', demand: { any: [0, 4, 8] }, instanceId: 'i-s' },
      { id: 'n-t0', jobId: 'n', key: 'gpt2', demand: { any: [0, 4, 8] } },
    ],
    instances: [
      {
        id: 'i-s',
        typeName: 'c7i.2xlarge',
        state: 'running',
        taskIds: ['a-t0'],
        market: 'spot',
        placement: { zone: 'us-east-1a' },
      },
    ],
  };
}

function hostOf(instances: readonly PlannedInstance[], taskId: string): PlannedInstance | undefined {
  return instances.find((i) => i.taskIds.includes(taskId));
}

describe('spot: never keeps a job off spot capacity', () => {
  it('an allowed job fills the free half of the spot instance', () => {
    const plan = new EvaScheduler(catalog, { spot: true }).plan(halfUsedSpot('allowed'));
    expect(hostOf(plan.configuration.instances, 'n-t0')?.id).toBe('i-s');
  });

  it('a spot: never job does not go on the spot instance, however cheap its room: it gets an on-demand one', () => {
    const plan = new EvaScheduler(catalog, { spot: true }).plan(halfUsedSpot('never'));
    const host = hostOf(plan.configuration.instances, 'n-t0');
    expect(host).toBeDefined();
    expect(host?.id).not.toBe('i-s');
    expect(host?.market ?? 'on-demand').toBe('on-demand');
    // a stays where it is: keeping n off spot moves nobody.
    expect(hostOf(plan.configuration.instances, 'a-t0')?.id).toBe('i-s');
  });

  it('karpenter-spot too: a pod requiring on-demand capacity schedules on no spot node', () => {
    const baseline = new SpotBaseline(catalog, 'karpenter-spot');
    expect(hostOf(baseline.plan(halfUsedSpot('allowed')).configuration.instances, 'n-t0')?.id).toBe('i-s');
    const host = hostOf(baseline.plan(halfUsedSpot('never')).configuration.instances, 'n-t0');
    expect(host?.id).not.toBe('i-s');
    expect(host?.market ?? 'on-demand').toBe('on-demand');
  });
});
