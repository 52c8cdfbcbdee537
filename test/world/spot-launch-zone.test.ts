import { describe, expect, it } from 'vitest';
import { Admission } from '../../src/queue/admission.js';
import { CommandIssuer } from '../../src/world/commands.js';
import { networkConfigSchema, resolveNetworkConfig } from '../../src/world/network-config.js';
import { NetworkWorld } from '../../src/world/network-world.js';
import { WorldState } from '../../src/world/world-state.js';
import { EventLog, testCatalog, testSpotMarket } from '../sim/sim-fixtures.js';

/** small.x sold on spot in three zones of us-east-1, cheapest in 1b, dearest in 1c. */
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

/** An engine world whose simulated network has only `zones`. */
function world(zones: readonly string[] | undefined) {
  const cat = catalog();
  const network =
    zones === undefined
      ? undefined
      : new NetworkWorld(resolveNetworkConfig(networkConfigSchema.parse({ zones }), cat.region), 3, 0.01);
  const state = new WorldState([], new EventLog().record, network);
  const commands = new CommandIssuer(state, cat, new Admission(cat, { caps: {} }), false);
  const launched = (planId: string) => {
    const inst = [...state.instances.values()].at(-1);
    if (inst === undefined) throw new Error(`${planId} was not launched`);
    return { zone: inst.placement?.zone, market: inst.market, pricePerHour: inst.pricePerHour };
  };
  return { commands, launched };
}

describe('a spot launch in the engine', () => {
  it('goes to the cheapest pool when nothing says where, and to the zone asked for', () => {
    const { commands, launched } = world(undefined);
    commands.apply([{ kind: 'launch-instance', instanceId: 'p1', typeName: 'small.x', market: 'spot' }]);
    expect(launched('p1')).toEqual({ zone: 'us-east-1b', market: 'spot', pricePerHour: 1.0 });
    commands.apply([
      {
        kind: 'launch-instance',
        instanceId: 'p2',
        typeName: 'small.x',
        market: 'spot',
        placement: { zone: 'us-east-1c' },
      },
    ]);
    expect(launched('p2')).toEqual({ zone: 'us-east-1c', market: 'spot', pricePerHour: 1.4 });
  });

  it('buys only in the zones the simulated network has', () => {
    const { commands, launched } = world(['us-east-1a', 'us-east-1c']);
    commands.apply([{ kind: 'launch-instance', instanceId: 'p1', typeName: 'small.x', market: 'spot' }]);
    // us-east-1b is cheapest but not a zone of this network: the cheapest of its own zones.
    expect(launched('p1')).toEqual({ zone: 'us-east-1a', market: 'spot', pricePerHour: 1.2 });
  });

  it('never lands, nor is priced, in a zone the network lacks, whatever the launch asks', () => {
    const { commands, launched } = world(['us-east-1a', 'us-east-1c']);
    // us-east-1b has the type's cheapest pool, but the network has no such zone: its own cheapest pool, 1a's.
    commands.apply([
      {
        kind: 'launch-instance',
        instanceId: 'p1',
        typeName: 'small.x',
        market: 'spot',
        placement: { zone: 'us-east-1b' },
      },
    ]);
    expect(launched('p1')).toEqual({ zone: 'us-east-1a', market: 'spot', pricePerHour: 1.2 });
    commands.apply([
      {
        kind: 'launch-instance',
        instanceId: 'p2',
        typeName: 'small.x',
        market: 'spot',
        placement: { zone: 'us-east-1b', placementGroup: 'g' },
      },
    ]);
    expect(launched('p2')).toEqual({ zone: 'us-east-1a', market: 'spot', pricePerHour: 1.2 });
    for (const id of ['p3', 'p4', 'p5']) {
      commands.apply([
        { kind: 'launch-instance', instanceId: id, typeName: 'small.x', placement: { zone: 'us-east-1b' } },
      ]);
      expect(['us-east-1a', 'us-east-1c']).toContain(launched(id).zone);
      expect(launched(id).market).toBe('on-demand');
    }
  });

  it("lands in, and is priced at, its placement group's zone once the group has one", () => {
    const { commands, launched } = world(['us-east-1a', 'us-east-1b', 'us-east-1c']);
    commands.apply([
      {
        kind: 'launch-instance',
        instanceId: 'p1',
        typeName: 'small.x',
        market: 'spot',
        placement: { zone: 'us-east-1c', placementGroup: 'g' },
      },
    ]);
    expect(launched('p1')).toEqual({ zone: 'us-east-1c', market: 'spot', pricePerHour: 1.4 });
    // A later launch into the group without a zone (or asking another) lands in 1c, so it pays 1c's pool, not 1b's.
    commands.apply([
      {
        kind: 'launch-instance',
        instanceId: 'p2',
        typeName: 'small.x',
        market: 'spot',
        placement: { placementGroup: 'g' },
      },
    ]);
    expect(launched('p2')).toEqual({ zone: 'us-east-1c', market: 'spot', pricePerHour: 1.4 });
    commands.apply([
      {
        kind: 'launch-instance',
        instanceId: 'p3',
        typeName: 'small.x',
        market: 'spot',
        placement: { zone: 'us-east-1b', placementGroup: 'g' },
      },
    ]);
    expect(launched('p3')).toEqual({ zone: 'us-east-1c', market: 'spot', pricePerHour: 1.4 });
  });
});
