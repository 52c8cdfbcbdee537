import { describe, expect, it } from 'vitest';
import { curveOf } from '../../src/core/latency-curves.js';
import type { InstancePlacement, NetworkDeclaration } from '../../src/core/network.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { integrateProgress } from '../../src/world/entities.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import { jobOutcome, networkMetrics } from '../../src/world/metrics.js';
import {
  networkConfigSchema,
  resolveNetworkConfig,
  type NetworkConfigInput,
} from '../../src/world/network-config.js';
import { buildSimJobs } from '../../src/world/trace-jobs.js';
import type { TraceJob } from '../../src/world/trace.js';
import { ScriptedScheduler, testCatalog, trace, traceJob, traceTask } from './sim-fixtures.js';

const catalog = testCatalog();

/** A quiet network: two zones, no noise, cross-zone 400 µs. */
const QUIET: NetworkConfigInput = {
  zones: ['testa', 'testb'],
  domainRttMicroseconds: { 'cross-zone': 400 },
  noise: { withinPlacementGroup: [1, 1], betweenDomains: [1, 1] },
};

function network(input: NetworkConfigInput = QUIET) {
  return { config: resolveNetworkConfig(networkConfigSchema.parse(input), 'test'), seed: 1 };
}

function twoTaskJob(declared: NetworkDeclaration | undefined): TraceJob {
  const job = traceJob('J', { iterations: 3600, tasks: [traceTask('node0'), traceTask('node1')] });
  return declared === undefined ? job : { ...job, network: declared };
}

const memcached: NetworkDeclaration = { sensitivity: 'memcached', pattern: 'star', gibPerHour: 36 };

/** Round 0 launches one instance per task where `placements` say; later rounds keep everything. */
function placing(placements: readonly (InstancePlacement | undefined)[]): ScriptedScheduler {
  return new ScriptedScheduler('placing', (_snapshot, round) =>
    round === 0
      ? {
          instances: placements.map((placement, i) => ({
            id: `new-${i + 1}`,
            typeName: 'small.x',
            isNew: true,
            taskIds: [`J/node${i}`],
            ...(placement === undefined ? {} : { placement }),
          })),
        }
      : undefined,
  );
}

describe('the simulated network', () => {
  it('slows a job spread across zones by its curve at the round trip, bills its traffic, and shows the scheduler both', () => {
    const scheduler = placing([{ zone: 'testa' }, { zone: 'testb' }]);
    const result = runSimulation({
      trace: trace(twoTaskJob(memcached)),
      scheduler,
      catalog,
      groundTruth: constantPairwise(1),
      network: network(),
    });
    const p = curveOf('memcached').at(400);
    const job = result.jobs[0];
    expect(job?.appPerformance).toBeCloseTo(p, 12);
    // 3600 iterations at one per second, slowed to P_job (completion rounded up to whole seconds, as the engine does).
    const ran = (job?.endSeconds as number) - (job?.startSeconds as number);
    expect(ran).toBe(Math.ceil(3600 / p - 1e-6));
    // 36 GiB/h, all of it crossing, $0.01/GiB each way: $0.72/h while it runs.
    const traffic = (0.72 * ran) / 3600;
    expect(result.network?.crossZoneCost).toBeCloseTo(traffic, 9);
    expect(result.network?.appPerformanceMean).toBeCloseTo(p, 12);
    expect(result.network?.latencySensitiveJobs).toBe(1);
    // Traffic is part of the run's cost.
    expect(result.summary.totalCost - traffic).toBeGreaterThan(0);
    const running = scheduler.snapshots.find((s) => (s.measuredRtts ?? []).length > 0);
    expect(running?.instances.map((i) => i.placement?.zone).sort()).toEqual(['testa', 'testb']);
    expect(running?.measuredRtts?.[0]?.maxMicroseconds).toBe(400);
    expect(running?.jobs[0]?.network).toEqual({
      sensitivity: 'memcached',
      pattern: 'star',
      rootTaskId: 'J/node0',
      gibPerHour: 36,
    });
  });

  it('in one placement group the job runs at the group round trip and sends nothing billed', () => {
    const result = runSimulation({
      trace: trace(twoTaskJob(memcached)),
      scheduler: placing([{ placementGroup: 'g' }, { placementGroup: 'g' }]),
      catalog,
      groundTruth: constantPairwise(1),
      network: network(),
    });
    expect(result.jobs[0]?.appPerformance).toBeCloseTo(curveOf('memcached').at(50), 12);
    expect(result.network?.crossZoneCost).toBe(0);
  });

  it('a job without a network declaration, or `none`, runs at full speed wherever it is', () => {
    for (const declared of [undefined, { ...memcached, sensitivity: 'none' as const, gibPerHour: 0 }]) {
      const result = runSimulation({
        trace: trace(twoTaskJob(declared)),
        scheduler: placing([{ zone: 'testa' }, { zone: 'testb' }]),
        catalog,
        groundTruth: constantPairwise(1),
        network: network(),
      });
      const job = result.jobs[0];
      expect((job?.endSeconds as number) - (job?.startSeconds as number)).toBe(3600);
      expect(job?.appPerformance ?? null).toBeNull();
    }
  });

  it('congestion episodes slow a job down between its quiet performance and the episodes’ worst, deterministically', () => {
    const stormy: NetworkConfigInput = {
      ...QUIET,
      domainRttMicroseconds: { 'placement-group': 50 },
      noise: { intervalSeconds: 60, withinPlacementGroup: [1, 1], betweenDomains: [1, 1] },
      episodes: { perInstancePerDay: 48, durationMinutes: [10, 10], factor: [3, 3] },
    };
    const run = () =>
      runSimulation({
        trace: trace(twoTaskJob(memcached)),
        scheduler: placing([{ placementGroup: 'g' }, { placementGroup: 'g' }]),
        catalog,
        groundTruth: constantPairwise(1),
        network: network(stormy),
      });
    const a = run();
    const perf = a.jobs[0]?.appPerformance as number;
    expect(perf).toBeLessThan(curveOf('memcached').at(50));
    expect(perf).toBeGreaterThanOrEqual(curveOf('memcached').at(150) - 1e-12);
    expect(run().jobs[0]).toEqual(a.jobs[0]);
  });

  it('T6: the time-average of P_job over a job’s running time, and the mean over jobs (digest §11)', () => {
    const [job] = buildSimJobs(trace(twoTaskJob(memcached)), catalog);
    if (job === undefined) throw new Error('one job');
    job.throughput = 1;
    job.integratedToSeconds = 0;
    // Four measurement intervals of 60 s at 30, 100, 400 and 30 µs.
    [30, 100, 400, 30].forEach((us, i) => {
      job.latencyFactor = curveOf('memcached').at(us);
      integrateProgress(job, 60 * (i + 1));
    });
    expect(job.performanceSeconds / job.activeSeconds).toBeCloseTo(0.7896, 4);
    expect(jobOutcome(job, undefined).appPerformance).toBeCloseTo(0.7896, 4);

    const jobs = buildSimJobs(
      trace(...['a', 'b', 'c'].map((id) => ({ ...twoTaskJob(memcached), id }))),
      catalog,
    );
    [0.2, 0.6, 1].forEach((p, i) => {
      const j = jobs[i];
      if (j === undefined) return;
      j.performanceSeconds = p * 100;
      j.activeSeconds = 100;
    });
    expect(
      networkMetrics(
        jobs,
        jobs.map((j) => jobOutcome(j, undefined)),
      ).appPerformanceMean,
    ).toBeCloseTo(0.6, 12);
  });
});
