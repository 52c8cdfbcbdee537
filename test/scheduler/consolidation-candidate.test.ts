import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot, SchedJob } from '../../src/core/model.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import type { CandidateSummary, Plan } from '../../src/scheduler/types.js';
import { spotInstance } from '../helpers/spot-instances.js';

const catalog = loadCatalogFile();

/**
 * Two running c7i.2xlarge ($0.357/h each, 8 vCPU / 16 GiB), each half used by one [0, 4, 8] task whose own cheapest
 * type is c7i.xlarge ($0.1785/h). Karpenter's search: removing both at once only allows a replace with r7i.2xlarge
 * ($0.5292), whose Balanced score (0.1848/0.714) / (4/4) = 0.26 fails k = 2; removing i-a alone deletes it, its task
 * fitting beside b's (score (0.357/0.714) / (2/4) = 1). So the candidate moves job a onto i-b and costs $0.357/h.
 */
function twoHalfEmpty(
  opts: { arrivals?: [number, number]; pinned?: readonly string[] } = {},
): ClusterSnapshot {
  const [ta, tb] = opts.arrivals ?? [0, 100];
  const job = (id: string, arrivalSeconds: number): SchedJob => ({
    id,
    taskIds: [`${id}-t0`],
    reconfigurable: !(opts.pinned ?? []).includes(id),
    arrivalSeconds,
    migrationDelaySeconds: 60,
    lastCheckpointSeconds: 5000,
    expectedRemainingSeconds: 100_000,
  });
  return {
    nowSeconds: 5000,
    jobs: [job('a', ta), job('b', tb)],
    tasks: [
      { id: 'a-t0', jobId: 'a', key: 'resnet18', demand: { any: [0, 4, 8] }, instanceId: 'i-a' },
      { id: 'b-t0', jobId: 'b', key: 'gpt2', demand: { any: [0, 4, 8] }, instanceId: 'i-b' },
    ],
    instances: [
      { id: 'i-a', typeName: 'c7i.2xlarge', state: 'running', taskIds: ['a-t0'] },
      { id: 'i-b', typeName: 'c7i.2xlarge', state: 'running', taskIds: ['b-t0'] },
    ],
  };
}

function candidate(plan: Plan, name: CandidateSummary['name']): CandidateSummary | undefined {
  return plan.decision.candidates.find((c) => c.name === name);
}

describe('Eva consolidation candidate', () => {
  it('offers the delete Karpenter-Balanced would make, priced by Eva (hand case)', () => {
    const plan = new EvaScheduler(catalog).plan(twoHalfEmpty());
    const c = candidate(plan, 'consolidate');
    expect(c).toBeDefined();
    expect(c?.movedJobs).toEqual(['a']);
    expect(c?.instances).toBe(1);
    expect(c?.newInstances).toBe(0);
    expect(c?.costPerHour).toBeCloseTo(0.357, 6);
    // TNRP of the pair at the default 0.95 each, 2 × 0.1785 × 0.95 = 0.33915 $/h, minus the price in cents ($0.36).
    expect((c?.savingPerSecond ?? 0) * 3600).toBeCloseTo(2 * 0.1785 * 0.95 - 0.36, 9);
    // Moving a: 60 s out of service at its reservation price, no lost work, no new instance.
    expect(c?.migrationCost).toBeCloseTo((60 * 0.1785) / 3600, 9);
  });

  it('is taken when it pays back over the horizon better than Full and Partial, and applied as planned', () => {
    // Horizon T = 1,000 s (time since the first arrival). The pair is not worth a c7i.2xlarge by reservation price
    // (0.339 < 0.357), so Full and Partial move both jobs onto two new c7i.xlarge: $0.35/h saved over T, minus two
    // launches and both jobs' wait for them (net ≈ $0.04). Consolidating saves $0.33/h net of interference by
    // moving one job onto a running instance (net ≈ $0.09).
    // In dollars only (a value of time of 0): the figures above are Eva's.
    const plan = new EvaScheduler(catalog, { valueOfTimePerJobHour: 0 }).plan(
      twoHalfEmpty({ arrivals: [4000, 4100] }),
    );
    expect(plan.decision.horizonSeconds).toBe(1000);
    expect(plan.decision.chosen).toBe('consolidate');
    expect(plan.configuration.instances).toEqual([
      { id: 'i-b', typeName: 'c7i.2xlarge', isNew: false, taskIds: ['a-t0', 'b-t0'] },
    ]);
  });

  it('is not taken when the horizon is too short to pay back the move', () => {
    // Arrivals 10 s apart just before now: the bootstrap horizon T is 10 s, so no move pays back.
    const plan = new EvaScheduler(catalog).plan(twoHalfEmpty({ arrivals: [4990, 5000] }));
    expect(candidate(plan, 'consolidate')).toBeDefined();
    expect(plan.decision.chosen).toBe('stay');
  });

  it('never moves a pinned job: the other one moves instead, or nothing when both are pinned', () => {
    const one = new EvaScheduler(catalog).plan(twoHalfEmpty({ pinned: ['a'] }));
    expect(candidate(one, 'consolidate')?.movedJobs).toEqual(['b']);
    const both = new EvaScheduler(catalog).plan(twoHalfEmpty({ pinned: ['a', 'b'] }));
    expect(candidate(both, 'consolidate')).toBeUndefined();
  });

  it('is absent when switched off and in the full-only and partial-only ablations', () => {
    expect(
      candidate(new EvaScheduler(catalog, { consolidation: false }).plan(twoHalfEmpty()), 'consolidate'),
    ).toBe(undefined);
    for (const variant of ['eva-full-only', 'eva-partial-only'] as const)
      expect(candidate(new EvaScheduler(catalog, { variant }).plan(twoHalfEmpty()), 'consolidate')).toBe(
        undefined,
      );
  });

  it('gives the same plan on a repeated round (memoized search) as a fresh scheduler', () => {
    const s = new EvaScheduler(catalog);
    const first = s.plan(twoHalfEmpty());
    const again = s.plan({ ...twoHalfEmpty(), nowSeconds: 5001 });
    const fresh = new EvaScheduler(catalog).plan({ ...twoHalfEmpty(), nowSeconds: 5001 });
    expect(candidate(again, 'consolidate')).toEqual(candidate(fresh, 'consolidate'));
    expect(candidate(first, 'consolidate')?.movedJobs).toEqual(['a']);
  });
});

describe('Eva consolidation candidate next to an instance EC2 recommended rebalancing', () => {
  /**
   * Job a in its no-move window on a spot c7i.xlarge flagged for rebalancing; b and c each alone on an on-demand
   * c7i.xlarge, with 3,000 s moves. Every candidate keeps a's instance, so its risk premium is the same in all of them.
   */
  function flaggedNeighbour(flagged: boolean): ClusterSnapshot {
    const job = (id: string, extra: Partial<SchedJob>): SchedJob => ({
      id,
      taskIds: [`${id}-t0`],
      reconfigurable: true,
      arrivalSeconds: 3600,
      migrationDelaySeconds: 3000,
      lastCheckpointSeconds: 7100,
      expectedRemainingSeconds: 100_000,
      ...extra,
    });
    return {
      nowSeconds: 7200,
      jobs: [
        job('a', {
          arrivalSeconds: 0,
          migrationDelaySeconds: 60,
          lastCheckpointSeconds: 0,
          runningSinceSeconds: 7000,
          noMoveSeconds: 3600,
          checkpointIntervalSeconds: 0,
          expectedRemainingSeconds: 36_000,
        }),
        job('b', {}),
        job('c', {}),
      ],
      tasks: [
        { id: 'a-t0', jobId: 'a', key: 'a', demand: { any: [0, 4, 8] }, instanceId: 'i-1' },
        { id: 'b-t0', jobId: 'b', key: 'b', demand: { any: [0, 2, 4] }, instanceId: 'i-2' },
        { id: 'c-t0', jobId: 'c', key: 'c', demand: { any: [0, 2, 4] }, instanceId: 'i-3' },
      ],
      instances: [
        spotInstance('i-1', ['a-t0'], flagged),
        { id: 'i-2', typeName: 'c7i.xlarge', state: 'running', taskIds: ['b-t0'] },
        { id: 'i-3', typeName: 'c7i.xlarge', state: 'running', taskIds: ['c-t0'] },
      ],
    };
  }

  it('prices the flagged instance it keeps with its risk premium, as stay does: the premium buys no move', () => {
    for (const flagged of [false, true]) {
      const plan = new EvaScheduler(catalog, { spot: true, valueOfTimePerJobHour: 0 }).plan(
        flaggedNeighbour(flagged),
      );
      expect(plan.decision.pinned.map((p) => p.jobId)).toEqual(['a']);
      expect(plan.decision.chosen).toBe('stay');
      const stay = candidate(plan, 'stay');
      const consolidate = candidate(plan, 'consolidate');
      expect(consolidate?.movedJobs).toEqual(['b']);
      // Consolidating drops one c7i.xlarge (i-2) and keeps i-1 as stay does: it saves that instance's price only.
      const dropped = (stay?.costPerHour ?? 0) - (consolidate?.costPerHour ?? 0);
      expect(dropped).toBeGreaterThan(0.05);
      expect(dropped).toBeLessThan(0.2);
    }
  });
});
