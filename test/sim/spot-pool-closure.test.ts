import { describe, expect, it } from 'vitest';
import { UNAVAILABLE_OFFERING_SECONDS } from '../../src/core/spot.js';
import type { InstancePlacement } from '../../src/core/network.js';
import { Admission } from '../../src/queue/admission.js';
import { createSimulatedCloud } from '../../src/sim/controller-runtime/simulated-cloud.js';
import { CommandIssuer } from '../../src/world/commands.js';
import type { SimInstance } from '../../src/world/entities.js';
import { networkConfigSchema, resolveNetworkConfig } from '../../src/world/network-config.js';
import { NetworkWorld } from '../../src/world/network-world.js';
import { SpotWorld, type NoticeHandling } from '../../src/world/spot-world.js';
import { spotEngineOver } from './spot-world-fixtures.js';
import { WorldState } from '../../src/world/world-state.js';
import { EventLog, testCatalog, testSpotMarket } from './sim-fixtures.js';

/**
 * After a spot interruption notice the controller marks the instance's offering unavailable (spot-interruptions.ts),
 * so for three minutes its launches skip that pool, as EC2Provider and the controller runtime's simulated cloud do:
 * the type's next pool, price-capacity-optimized, else on demand. The engine closes the pool the same way, so that
 * both runtimes buy the replacement in the same pool.
 */

/** small.x on spot in three zones of us-east-1: price-capacity-optimized order 1b ($1.0), 1a ($1.2), 1c ($1.4). */
function catalog() {
  return {
    ...testCatalog(),
    region: 'us-east-1',
    spot: testSpotMarket(
      { typeName: 'small.x', zone: 'us-east-1a', pricePerHour: 1.2, interruption: '<5%' },
      { typeName: 'small.x', zone: 'us-east-1b', pricePerHour: 1.0, interruption: '<5%' },
      { typeName: 'small.x', zone: 'us-east-1c', pricePerHour: 1.4, interruption: '<5%' },
    ),
  } as const;
}

const ZONES = ['us-east-1a', 'us-east-1b', 'us-east-1c'];

/** An engine world (its state, command issuer and spot world wired as the simulation wires them). */
function world(options: { noticeHandling?: NoticeHandling; network?: boolean } = {}) {
  const cat = catalog();
  const network =
    options.network === true
      ? new NetworkWorld(
          resolveNetworkConfig(networkConfigSchema.parse({ zones: ZONES }), cat.region),
          3,
          0.01,
        )
      : undefined;
  const state = new WorldState([], new EventLog().record, network);
  const commands = new CommandIssuer(state, cat, new Admission(cat, { caps: {} }), false);
  state.spot = new SpotWorld(
    cat,
    { seed: 1, noticeHandling: options.noticeHandling ?? 'checkpoint-and-drain' },
    spotEngineOver(state, commands),
  );
  const spot = state.spot;
  let plans = 0;
  /** Launch one small.x on spot as a plan asks it, and say where it went and how it was bought. */
  const launch = (placement?: InstancePlacement) => {
    plans += 1;
    commands.apply([
      {
        kind: 'launch-instance',
        instanceId: `new-${plans}`,
        typeName: 'small.x',
        market: 'spot',
        ...(placement === undefined ? {} : { placement }),
      },
    ]);
    const inst = [...state.instances.values()].at(-1) as SimInstance;
    return {
      inst,
      zone: inst.placement?.zone,
      group: inst.placement?.placementGroup,
      market: inst.market,
      pricePerHour: inst.pricePerHour,
    };
  };
  /** EC2's two-minute notice for the instance, now. */
  const notice = (inst: SimInstance) =>
    spot.handle({
      kind: 'spot-notice',
      timeSeconds: state.now,
      instance: inst,
      reclaimAtSeconds: state.now + 120,
    });
  return { state, spot, launch, notice, at: (t: number) => state.advanceTo(t) };
}

describe('a spot notice closes its pool to launches (engine)', () => {
  it("sends a launch asked there to the type's next open pool for three minutes, then lets it back", () => {
    const { launch, notice, at, spot } = world();
    const first = launch({ zone: 'us-east-1b' });
    expect(first).toMatchObject({ zone: 'us-east-1b', market: 'spot', pricePerHour: 1.0 });
    at(100);
    notice(first.inst);
    expect(spot.poolOpen('small.x', 'us-east-1b')).toBe(false);
    // Asked in 1b, or nowhere in particular: 1a, the next pool price-capacity-optimized, at its own price.
    expect(launch({ zone: 'us-east-1b' })).toMatchObject({
      zone: 'us-east-1a',
      market: 'spot',
      pricePerHour: 1.2,
    });
    expect(launch()).toMatchObject({ zone: 'us-east-1a', market: 'spot', pricePerHour: 1.2 });
    // A pool still open takes the launch asked there.
    expect(launch({ zone: 'us-east-1c' })).toMatchObject({
      zone: 'us-east-1c',
      market: 'spot',
      pricePerHour: 1.4,
    });
    at(100 + UNAVAILABLE_OFFERING_SECONDS - 0.5);
    expect(launch({ zone: 'us-east-1b' }).zone).toBe('us-east-1a');
    at(100 + UNAVAILABLE_OFFERING_SECONDS);
    expect(launch({ zone: 'us-east-1b' })).toMatchObject({
      zone: 'us-east-1b',
      market: 'spot',
      pricePerHour: 1.0,
    });
  });

  it('launches on demand in the zone asked when every pool of the type is closed', () => {
    const { launch, notice } = world();
    for (const zone of ZONES) notice(launch({ zone }).inst);
    expect(launch({ zone: 'us-east-1b' })).toMatchObject({
      zone: 'us-east-1b',
      market: 'on-demand',
      pricePerHour: 3.6,
    });
  });

  it('skips the closed pool among the simulated network’s zones, and leaves a placement group settled in it', () => {
    const { launch, notice } = world({ network: true });
    const inGroup = launch({ zone: 'us-east-1b', placementGroup: 'g' });
    expect(inGroup).toMatchObject({ zone: 'us-east-1b', group: 'g', market: 'spot' });
    notice(inGroup.inst);
    // The group's instances are in 1b, whose pool is closed: EC2 refuses the group elsewhere, so it goes without it.
    expect(launch({ placementGroup: 'g' })).toMatchObject({
      zone: 'us-east-1a',
      group: undefined,
      market: 'spot',
    });
    // A group with no instance yet settles where the launch lands.
    expect(launch({ zone: 'us-east-1b', placementGroup: 'h' })).toMatchObject({
      zone: 'us-east-1a',
      group: 'h',
      pricePerHour: 1.2,
    });
  });

  it('is closed by a notice the runtime hears only: Karpenter closes it, SkyPilot, which hears none, buys there again', () => {
    const karpenter = world({ noticeHandling: 'drain-and-evict' });
    karpenter.notice(karpenter.launch({ zone: 'us-east-1b' }).inst);
    expect(karpenter.spot.poolOpen('small.x', 'us-east-1b')).toBe(false);
    expect(karpenter.launch({ zone: 'us-east-1b' })).toMatchObject({ zone: 'us-east-1a', market: 'spot' });
    const skypilot = world({ noticeHandling: 'none' });
    skypilot.notice(skypilot.launch({ zone: 'us-east-1b' }).inst);
    expect(skypilot.spot.poolOpen('small.x', 'us-east-1b')).toBe(true);
    expect(skypilot.launch({ zone: 'us-east-1b' })).toMatchObject({ zone: 'us-east-1b', market: 'spot' });
  });

  it('is closed by a notice, not by a rebalance recommendation (as the controller marks it)', () => {
    const { launch, state, spot } = world();
    const inst = launch({ zone: 'us-east-1b' }).inst;
    spot.handle({ kind: 'spot-rebalance', timeSeconds: state.now, instance: inst });
    expect(inst.rebalanceRecommended).toBe(true);
    expect(launch({ zone: 'us-east-1b' }).zone).toBe('us-east-1b');
  });

  it('picks the pool the controller runtime’s simulated cloud picks once the controller marks it', async () => {
    const cat = catalog();
    const { cloud } = createSimulatedCloud({ catalog: cat, availabilityZones: ZONES, spot: true });
    const engine = world();
    engine.notice(engine.launch({ zone: 'us-east-1b' }).inst);
    cloud.markOfferingUnavailable('small.x', 'us-east-1b', 'spot');
    for (const zone of [...ZONES, undefined]) {
      const result = await cloud.launch({
        typeName: 'small.x',
        idempotencyToken: `t-${zone ?? 'any'}`,
        clusterName: 'c1',
        planId: 'round-1',
        instanceKey: `inst-${zone ?? 'any'}`,
        availabilityZones: zone === undefined ? [] : [zone],
        market: 'spot',
        onDemandFallback: true,
        tags: {},
      });
      const launched = engine.launch(zone === undefined ? undefined : { zone });
      expect(launched.zone, `asked ${zone ?? 'no zone'}`).toBe(result.availabilityZone);
      expect(launched.pricePerHour).toBe(cloud.get(result.instanceIds[0] as string)?.pricePerHour);
    }
  });
});
