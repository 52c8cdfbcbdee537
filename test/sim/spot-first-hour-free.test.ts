import { describe, expect, it } from 'vitest';
import { Admission } from '../../src/queue/admission.js';
import {
  createSimulatedCloud,
  type SimulatedInstance,
} from '../../src/sim/controller-runtime/simulated-cloud.js';
import { CommandIssuer } from '../../src/world/commands.js';
import { COST_PARTS, CostLedger } from '../../src/world/cost-ledger.js';
import type { SimInstance } from '../../src/world/entities.js';
import { FleetMeter } from '../../src/world/fleet-meter.js';
import { FREE_INTERRUPTED_SPOT_SECONDS } from '../../src/core/spot.js';
import { SpotWorld, type NoticeHandling } from '../../src/world/spot-world.js';
import { spotEngineOver } from './spot-world-fixtures.js';
import { WorldState } from '../../src/world/world-state.js';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { createScheduler } from '../../src/scheduler/registry.js';
import { runControllerSimulation } from '../../src/sim/controller-runtime/run-controller.js';
import { groundTruthFor, loadRequestTrace } from '../../src/sim/run-request.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { withControllerJobIds } from '../../src/sim/traces/controller-job-ids.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import {
  currentConfiguration,
  EventLog,
  instanceType,
  ScriptedScheduler,
  testCatalog,
  testSpotMarket,
  trace,
  traceJob,
} from './sim-fixtures.js';

/**
 * AWS charges nothing for a spot instance EC2 interrupts within its first instance hour (its owner pays for one it
 * ends itself), and the controller's cost reports follow AWS (controller/cost-accounting.ts `billedNothing`). Both
 * simulator runtimes bill alike: the engine's FleetMeter and CostLedger, and the controller runtime's simulated cloud.
 */

const small = instanceType('small.x', [1, 8, 32], 3.6);

/** small.x on spot at $1.2/h in one zone; the test catalog's delays: up 10 s after its launch, registered at 60 s. */
function catalog() {
  return {
    ...testCatalog(),
    spot: testSpotMarket({ typeName: 'small.x', zone: 'z-a', pricePerHour: 1.2, interruption: '<5%' }),
  } as const;
}

describe('the first hour of a spot instance EC2 reclaims is free', () => {
  it('FleetMeter: billed nothing, the cumulative cost gives back what it accrued, its seconds still on spot', () => {
    const meter = new FleetMeter();
    meter.startBilling(small, 1.2); // reclaimed at 1,800 s: free
    meter.startBilling(small, 3.6); // on demand, ended at 3,600 s: charged
    meter.sample(0, true);
    meter.advanceTo(1800);
    meter.sample(1800, false);
    expect(meter.costSoFar).toBeCloseTo(0.6 + 1.8, 9);
    meter.stopBilling(small, 1.2, 1800, true, true);
    expect(meter.costSoFar).toBeCloseTo(1.8, 9);
    expect(meter.billedInstances).toBe(1);
    meter.advanceTo(3600);
    meter.stopBilling(small, 3.6, 3600, false);
    meter.sample(3600, true);
    expect(meter.totalCost).toBeCloseTo(3.6, 9);
    expect(meter.series(100).cumulativeCost.at(-1)).toBeCloseTo(meter.totalCost, 9);
    // 1,800 of its 5,400 instance-seconds ran on spot.
    expect(meter.spotShare).toBeCloseTo(1 / 3, 9);
    // Charged as any when EC2 did not reclaim it free.
    const charged = new FleetMeter();
    charged.startBilling(small, 1.2);
    charged.advanceTo(1800);
    charged.stopBilling(small, 1.2, 1800, true);
    expect(charged.totalCost).toBeCloseTo(0.6, 9);
  });

  it('CostLedger: a forgiven spot instance leaves the breakdown, which still adds up to the bill', () => {
    const ledger = new CostLedger();
    const free = {};
    const kept = {};
    const late = {};
    ledger.accrue(small, 1.2, true, [], 1800, free); // idle 1,800 s, reclaimed in its first hour
    ledger.accrue(small, 1.2, false, [], 60, kept); // booting, then ended by its owner
    ledger.accrue(small, 3.6, true, [], 600); // on demand
    ledger.accrue(small, 1.2, true, [], 3000, late); // two steps past its first hour, then reclaimed
    ledger.accrue(small, 1.2, true, [], 1200, late);
    // Before any end, every second counts.
    expect(ledger.breakdown().idle).toBeCloseTo(0.6 + 0.6 + 1.4, 9);
    ledger.forgive(free);
    ledger.forgive(late); // past its first hour: EC2's reclaim is charged, nothing is taken back
    const parts = ledger.breakdown();
    expect(parts.idle).toBeCloseTo(0.6 + 1.4, 9);
    expect(parts.bootAndShutdown).toBeCloseTo(0.02, 9);
    expect(COST_PARTS.reduce((sum, part) => sum + parts[part], 0)).toBeCloseTo(0.6 + 1.4 + 0.02, 9);
  });

  it('the simulated cloud: EC2 reclaiming a spot instance within an hour of its launch charges nothing', async () => {
    const stopped: [string, number, boolean | undefined][] = [];
    const { cloud, advance } = createSimulatedCloud({
      catalog: catalog(),
      availabilityZones: ['z-a'],
      spot: true,
      hooks: { billingStopped: (i, seconds) => stopped.push([i.instanceId, seconds, i.billedNothing]) },
    });
    const launch = async (token: string, market: 'spot' | 'on-demand' = 'spot') => {
      const r = await cloud.launch({
        typeName: 'small.x',
        idempotencyToken: token,
        clusterName: 'c1',
        planId: 'round-1',
        instanceKey: `inst-${token}`,
        availabilityZones: ['z-a'],
        market,
        onDemandFallback: true,
        tags: {},
      });
      return cloud.get(r.instanceIds[0] as string) as SimulatedInstance;
    };
    const early = await launch('1');
    const late = await launch('2');
    const ownEnd = await launch('3');
    const onDemand = await launch('4', 'on-demand');
    advance(3599); // launched at 0, up at 10
    cloud.reclaim(early.instanceId); // 3,599 s after its launch: free
    await cloud.terminate([ownEnd.instanceId]); // its owner ends it: charged
    cloud.reclaim(onDemand.instanceId); // not spot: charged
    advance(1);
    cloud.reclaim(late.instanceId); // a full hour after its launch: charged
    expect(stopped).toEqual([
      [early.instanceId, 3589, true],
      [onDemand.instanceId, 3589, false],
      [late.instanceId, 3590, false],
    ]);
    advance(10);
    expect(stopped.at(-1)).toEqual([ownEnd.instanceId, 3594, undefined]);
  });

  describe('the engine', () => {
    /** An engine world whose spot world records the reclaims it bills (the simulation's wiring). */
    function world(noticeHandling: NoticeHandling = 'checkpoint-and-drain') {
      const cat = catalog();
      const state = new WorldState([], new EventLog().record);
      const commands = new CommandIssuer(state, cat, new Admission(cat, { caps: {} }), false);
      const reclaims: [string, boolean][] = [];
      const spot = new SpotWorld(
        cat,
        { seed: 1, noticeHandling },
        spotEngineOver(state, commands, (inst, billedNothing) => reclaims.push([inst.id, billedNothing])),
      );
      state.spot = spot;
      /** A spot small.x launched now. */
      const launch = (): SimInstance => {
        commands.apply([
          {
            kind: 'launch-instance',
            instanceId: `new-${state.instances.size}`,
            typeName: 'small.x',
            market: 'spot',
            placement: { zone: 'z-a' },
          },
        ]);
        return [...state.instances.values()].at(-1) as SimInstance;
      };
      const event = (kind: 'spot-notice' | 'spot-reclaim', instance: SimInstance, reclaimAt?: number) =>
        spot.handle({ kind, timeSeconds: state.now, instance, reclaimAtSeconds: reclaimAt });
      return { state, commands, spot, reclaims, launch, event, at: (t: number) => state.advanceTo(t) };
    }

    it('leaves a drained instance EC2 takes back in its first hour to it, and bills that reclaim nothing', () => {
      const { commands, spot, reclaims, launch, event, at } = world();
      const early = launch(); // launched at 0
      at(1000);
      event('spot-notice', early, 1120);
      commands.issueGated();
      // Empty and drained, yet not terminated: EC2's reclaim at 1,120 s is free, a termination now is not.
      expect(early.assignable).toBe(false);
      expect(early.lifecycle).toBe('instantiating');
      expect(spot.leftForEc2(early)).toBe(true);
      at(1120);
      event('spot-reclaim', early);
      expect(reclaims).toEqual([[early.id, true]]);
      expect(spot.interruptions).toBe(1);
    });

    it('terminates a drained instance whose reclaim falls after its first hour, as the controller does', () => {
      const { commands, spot, reclaims, launch, event, at } = world();
      const inst = launch();
      at(3500);
      event('spot-notice', inst, 3620);
      expect(spot.leftForEc2(inst)).toBe(false);
      commands.issueGated();
      expect(inst.lifecycle).toBe('terminating');
      expect(reclaims).toEqual([]);
    });

    it('bills a reclaim after the first hour from the launch, as a baseline that hears no notice takes it', () => {
      const { reclaims, launch, event, at } = world('none');
      const early = launch();
      const late = launch();
      at(FREE_INTERRUPTED_SPOT_SECONDS - 1);
      event('spot-reclaim', early);
      at(FREE_INTERRUPTED_SPOT_SECONDS);
      event('spot-reclaim', late);
      expect(reclaims).toEqual([
        [early.id, true],
        [late.id, false],
      ]);
    });
  });
});

describe('a run whose spot instance EC2 reclaims in its first hour (engine and controller runtime)', () => {
  it('bills that instance nothing: the total, the cost breakdown and the cumulative series agree', () => {
    // J runs on a spot small.x (i-1, launched at 0, $1.08/h); at 300 it moves to an on-demand big.x (i-2) that is
    // ready only at 930. The pool's burst gives i-1 its notice at 490.5: J checkpoints at once, and i-1, in its first
    // hour, is left for EC2, which takes it at 610.5 and charges nothing for it.
    const base = testCatalog();
    const cat = {
      ...base,
      types: base.types.map((t) =>
        t.name === 'big.x' ? { ...t, delays: { ...t.delays, workerRegisterSeconds: 600 } } : t,
      ),
      spot: testSpotMarket({ typeName: 'small.x', zone: 'testa', pricePerHour: 1.08, interruption: '>20%' }),
    };
    const scheduler = new ScriptedScheduler('mover', (snapshot, round) => {
      if (round === 0)
        return {
          instances: [
            {
              id: 'new-1',
              typeName: 'small.x',
              isNew: true,
              taskIds: ['J/node0'],
              market: 'spot',
              placement: { zone: 'testa' },
            },
          ],
        };
      if (round === 1)
        return { instances: [{ id: 'new-1', typeName: 'big.x', isNew: true, taskIds: ['J/node0'] }] };
      return currentConfiguration(snapshot);
    });
    const log = new EventLog();
    const result = runSimulation({
      trace: trace(traceJob('J', { iterations: 5000 })),
      scheduler,
      catalog: cat,
      groundTruth: constantPairwise(1),
      onEvent: log.record,
      makeBeforeBreak: true,
      spot: { seed: 5, noticeHandling: 'checkpoint-and-drain', burstsPerPoolPerMonth: 4320 },
    });
    expect(result.spot).toMatchObject({ interruptions: 1, lostWorkHours: 0 });
    const on = (kind: 'instantiated' | 'terminated', id: string) => log.time(kind, { instanceId: id });
    // Only i-2 is billed: from its instantiate to its terminate, at $10.8/h.
    const billed = (10.8 * (on('terminated', 'i-2') - on('instantiated', 'i-2'))) / 3600;
    expect(result.summary.totalCost).toBeCloseTo(billed, 9);
    expect(Object.values(result.costBreakdown ?? {}).reduce((a, b) => a + b, 0)).toBeCloseTo(billed, 9);
    expect(result.series.cumulativeCost.at(-1)).toBeCloseTo(billed, 9);
  });

  it('bills the same in the controller runtime, the breakdown and series adding up to the total in both', async () => {
    const catalog = loadCatalogFile();
    const groundTruth = groundTruthFor({});
    const t = withControllerJobIds(loadRequestTrace({ trace: { format: 'eva', jobs: 20 } }, catalog));
    const spot = { seed: 0, noticeHandling: 'none', burstsPerPoolPerMonth: 60 } as const;
    const scheduler = () =>
      createScheduler('skypilot-spot', { catalog, interferenceProfile: groundTruth, spot: true });
    const engine = runSimulation({ trace: t, scheduler: scheduler(), catalog, groundTruth, spot });
    const controller = await runControllerSimulation({
      trace: t,
      scheduler: scheduler(),
      catalog,
      groundTruth,
      spot,
    });
    expect(engine.spot?.interruptions).toBeGreaterThan(0);
    expect(controller.spot?.interruptions).toBe(engine.spot?.interruptions);
    for (const run of [engine, controller]) {
      const total = run.summary.totalCost;
      expect(Object.values(run.costBreakdown ?? {}).reduce((a, b) => a + b, 0)).toBeCloseTo(total, 6);
      expect(run.series.cumulativeCost.at(-1)).toBeCloseTo(total, 6);
    }
    expect(controller.summary.totalCost).toBeCloseTo(engine.summary.totalCost, 4);
  });
});
