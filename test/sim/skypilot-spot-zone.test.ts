import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../src/core/catalog.js';
import { SpotBaseline } from '../../src/scheduler/baselines/spot-baseline.js';
import type { Scheduler } from '../../src/scheduler/types.js';
import { runControllerSimulation } from '../../src/sim/controller-runtime/run-controller.js';
import { noticeHandlingOf } from '../../src/sim/run-request.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { withControllerJobIds } from '../../src/sim/traces/controller-job-ids.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import { burstEvents, type SpotSimulation } from '../../src/world/spot-world.js';
import { EventLog, testCatalog, testSpotMarket, trace, traceJob } from './sim-fixtures.js';

/**
 * skypilot-spot picks zones as SkyPilot's optimizer does (digest industry-anchors §3): the cheapest feasible one (cost =
 * nodes × $/h × runtime), and after a preemption the cheapest but the zone it lost (EAGER_NEXT_REGION, zones for
 * regions), not EC2's price-capacity-optimized order. small.x's pools: testa $1.0/h (>20%), testb $1.3/h (<5%), testc
 * $1.2/h (10-15%): price-capacity-optimized testb, testc, testa; by price testa, testc, testb. Seed 16 at 60 bursts per
 * pool per 30 days empties testa at ≈ 3,048.75 s (the reclaim two minutes later: SkyPilot hears no notice), and neither
 * other pool while the 20,000 s job runs; no instance's own reclaim comes before.
 */

function catalog(): Catalog {
  return {
    ...testCatalog(),
    spot: testSpotMarket(
      { typeName: 'small.x', zone: 'testa', pricePerHour: 1.0, interruption: '>20%' },
      { typeName: 'small.x', zone: 'testb', pricePerHour: 1.3, interruption: '<5%' },
      { typeName: 'small.x', zone: 'testc', pricePerHour: 1.2, interruption: '10-15%' },
    ),
  };
}

const SPOT: SpotSimulation = {
  seed: 16,
  burstsPerPoolPerMonth: 60,
  noticeHandling: noticeHandlingOf('skypilot-spot'),
};
const JOB = withControllerJobIds(trace(traceJob('J', { iterations: 20_000 })));

/** skypilot-spot, recording the zone of every new spot instance its plans buy. */
function recording(zones: (string | undefined)[]): Scheduler {
  const inner = new SpotBaseline(catalog(), 'skypilot-spot');
  return {
    name: inner.name,
    observe: (snapshot, observations) => inner.observe(snapshot, observations),
    plan: (snapshot) => {
      const plan = inner.plan(snapshot);
      for (const i of plan.configuration.instances)
        if (i.isNew && i.market === 'spot') zones.push(i.placement?.zone);
      return plan;
    },
  };
}

describe('skypilot-spot zone choice', () => {
  it('launches in the cheapest zone, and after a preemption there in the next cheapest, in both runtimes', async () => {
    const testa = catalog().spot?.offerings[0];
    if (testa === undefined) throw new Error('the catalog has no testa pool');
    const burst = burstEvents(SPOT, testa, 0, 0).burstAt;
    expect(burst).toBeCloseTo(3048.75, 2);
    const options = { trace: JOB, catalog: catalog(), groundTruth: constantPairwise(1), spot: SPOT };
    const engineZones: (string | undefined)[] = [];
    const log = new EventLog();
    const engine = runSimulation({ ...options, scheduler: recording(engineZones), onEvent: log.record });
    expect(engineZones).toEqual(['testa', 'testc']);
    expect(engine.spot?.interruptions).toBe(1);
    // i-1 in testa went to EC2 in its first hour (free); the bill is i-2's, at testc's $1.2/h, not testb's $1.3/h.
    expect(log.time('terminated', { instanceId: 'i-1' })).toBeCloseTo(burst + 120, 6);
    const billed =
      log.time('terminated', { instanceId: 'i-2' }) - log.time('instantiated', { instanceId: 'i-2' });
    expect(engine.summary.totalCost).toBeCloseTo((billed * 1.2) / 3600, 9);

    const controllerZones: (string | undefined)[] = [];
    const bought: (string | undefined)[] = [];
    const controller = await runControllerSimulation({
      ...options,
      scheduler: recording(controllerZones),
      inspectStore: (store) =>
        bought.push(
          ...store
            .listInstances()
            .sort((a, b) => a.id.localeCompare(b.id))
            .map((i) => i.availabilityZone),
        ),
    });
    expect(controllerZones).toEqual(['testa', 'testc']);
    expect(bought).toEqual(['testa', 'testc']);
    expect(controller.spot).toEqual(engine.spot);
    expect(controller.summary.totalCost).toBeCloseTo(engine.summary.totalCost, 6);
  });
});
