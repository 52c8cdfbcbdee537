import { describe, expect, it } from 'vitest';
import type { Market } from '../../src/core/market.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { silentLogger } from '../../src/controller/seams.js';
import { SpotInterruptions } from '../../src/controller/spot-interruptions.js';
import type { CloudProvider } from '../../src/cloud/provider.js';

/** The controller's answer to EC2's two warnings, on a store and a provider that records the offerings it marks. */
function setup() {
  const store = new MemoryStateStore({ nowSeconds: () => 1000, storeId: 't' });
  const marked: [string, string, Market][] = [];
  const rounds: string[] = [];
  const provider = {
    markOfferingUnavailable: (typeName: string, zone: string, market: Market) =>
      marked.push([typeName, zone, market]),
  } as unknown as CloudProvider;
  const interruptions = new SpotInterruptions({
    store,
    log: silentLogger,
    provider,
    requestRound: (reason) => rounds.push(reason),
  });
  const inst = store.createInstance({ typeName: 'p3.2xlarge', availabilityZone: 'us-east-1b' });
  store.setInstanceState(inst.id, 'launching', { cloudId: 'i-0abc', availabilityZone: 'us-east-1b' });
  store.setInstanceState(inst.id, 'running');
  return { store, marked, rounds, interruptions, id: inst.id };
}

describe('spot interruptions and rebalance recommendations in the controller', () => {
  it('a rebalance recommendation is recorded once and asks for a round, but leaves the pool open to launches', () => {
    const { store, marked, rounds, interruptions, id } = setup();
    expect(interruptions.handle(id, { kind: 'rebalance-recommendation', source: 'worker' })).toBe(true);
    // Repeated in the next heartbeat: nothing changes.
    expect(interruptions.handle(id, { kind: 'rebalance-recommendation', source: 'worker' })).toBe(false);
    expect(store.listEvents({ kind: 'instance.rebalance-recommendation' })).toHaveLength(1);
    expect(rounds).toEqual([`${id} rebalance recommendation`]);
    // As Karpenter: a recommendation marks no offering (a launch moved off the pool would pay a dearer one's price).
    expect(marked).toEqual([]);
    expect(store.getInstance(id)?.state).toBe('running');
  });

  it('a spot interruption drains the instance and marks its offering unavailable for spot launches', () => {
    const { store, marked, rounds, interruptions, id } = setup();
    expect(interruptions.handle(id, { kind: 'spot-interruption', source: 'interruption-queue' })).toBe(true);
    expect(store.getInstance(id)?.state).toBe('draining');
    expect(marked).toEqual([['p3.2xlarge', 'us-east-1b', 'spot']]);
    expect(rounds).toEqual([`${id} spot interruption`]);
    expect(interruptions.handle(id, { kind: 'spot-interruption', source: 'worker' })).toBe(false);
    expect(marked).toHaveLength(1);
  });

  it('a spot interruption of an instance already draining is recorded and marks its offering, once', () => {
    const { store, marked, rounds, interruptions, id } = setup();
    // Dropped by a plan after a rebalance recommendation: its tasks still run while their new instances boot.
    store.setInstanceState(id, 'draining', { reason: 'not in the plan' });
    expect(interruptions.handle(id, { kind: 'spot-interruption', source: 'interruption-queue' })).toBe(true);
    // The notice is what lets its tasks' checkpoint-stops go without waiting for those boots (moveStopWait).
    expect(store.listEvents({ instanceId: id, kind: 'instance.spot-interruption' })).toHaveLength(1);
    expect(store.getInstance(id)).toMatchObject({ state: 'draining', reason: 'not in the plan' });
    expect(marked).toEqual([['p3.2xlarge', 'us-east-1b', 'spot']]);
    expect(rounds).toEqual([`${id} spot interruption`]);
    // The worker's copy of the same notice changes nothing.
    expect(interruptions.handle(id, { kind: 'spot-interruption', source: 'worker' })).toBe(false);
    expect(store.listEvents({ instanceId: id, kind: 'instance.spot-interruption' })).toHaveLength(1);
    expect(marked).toHaveLength(1);
  });
});
