import { describe, expect, it } from 'vitest';
import type { NetworkDeclaration } from '../../src/core/network.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import { networkConfigSchema, resolveNetworkConfig } from '../../src/world/network-config.js';
import { FleetMeter } from '../../src/world/fleet-meter.js';
import { ScriptedScheduler, testCatalog, trace, traceJob, traceTask } from '../sim/sim-fixtures.js';

const memcached: NetworkDeclaration = { sensitivity: 'memcached', pattern: 'star', gibPerHour: 36 };

/** One two-task job whose tasks round 0 launches in two zones, so all its traffic crosses ($0.72/h). */
function spreadRun() {
  const scheduler = new ScriptedScheduler('spread', (_snapshot, round) =>
    round === 0
      ? {
          instances: ['testa', 'testb'].map((zone, i) => ({
            id: `new-${i + 1}`,
            typeName: 'small.x',
            isNew: true,
            taskIds: [`J/node${i}`],
            placement: { zone },
          })),
        }
      : undefined,
  );
  const job = traceJob('J', { iterations: 3600, tasks: [traceTask('node0'), traceTask('node1')] });
  return runSimulation({
    trace: trace({ ...job, network: memcached }),
    scheduler,
    catalog: testCatalog(),
    groundTruth: constantPairwise(1),
    network: {
      config: resolveNetworkConfig(
        networkConfigSchema.parse({
          zones: ['testa', 'testb'],
          domainRttMicroseconds: { 'cross-zone': 400 },
          noise: { withinPlacementGroup: [1, 1], betweenDomains: [1, 1] },
        }),
        'test',
      ),
      seed: 1,
    },
  });
}

describe('the cumulative cost series with traffic across zones', () => {
  it('ends at the total cost, traffic included, and grows by the traffic while the job runs', () => {
    const result = spreadRun();
    const traffic = result.network?.crossZoneCost ?? 0;
    expect(traffic).toBeGreaterThan(0.1);
    const s = result.series;
    expect(s.cumulativeCost.at(-1)).toBeCloseTo(result.summary.totalCost, 9);
    // Between two samples the cost grows by the instances' $/h plus the traffic's while the job runs.
    const job = result.jobs[0];
    const start = job?.startSeconds as number;
    const end = job?.endSeconds as number;
    let extra = 0;
    for (let i = 1; i < s.timeSeconds.length; i++) {
      const t0 = s.timeSeconds[i - 1] as number;
      const t1 = s.timeSeconds[i] as number;
      const instances = ((s.costPerHour[i - 1] as number) * (t1 - t0)) / 3600;
      extra += (s.cumulativeCost[i] as number) - (s.cumulativeCost[i - 1] as number) - instances;
      if (t1 <= start) expect(extra).toBeCloseTo(0, 9);
    }
    expect(extra).toBeCloseTo(traffic, 9);
    expect(end).toBeGreaterThan(start);
  });
});

describe("the fleet meter's traffic across zones", () => {
  it('accrues each step at the rate set at the step before, into the cumulative cost only', () => {
    const meter = new FleetMeter();
    meter.sample(0, true);
    meter.setTrafficPerHour(0);
    meter.advanceTo(100);
    meter.setTrafficPerHour(36); // $36/h from t = 100
    meter.advanceTo(150);
    meter.sample(150, true);
    meter.advanceTo(200);
    meter.setTrafficPerHour(36);
    meter.advanceTo(300);
    meter.sample(300, true);
    meter.setTrafficPerHour(0);
    meter.setTrafficPerHour(72); // the same step again: its last rate holds
    meter.advanceTo(350);
    meter.sample(350, true);
    meter.advanceTo(400);
    meter.setTrafficPerHour(0);
    meter.advanceTo(1000);
    meter.sample(1000, true);
    const series = meter.series(100);
    expect(series.cumulativeCost.map((c) => Math.round(c * 1e9) / 1e9)).toEqual([0, 0.5, 2, 3, 4]);
    // The instances' bill and rate are the instances' alone.
    expect(meter.costSoFar).toBe(0);
    expect(series.costPerHour.every((r) => r === 0)).toBe(true);
  });
});
