import { expect, it } from 'vitest';
import { createEc2Client, ec2ApiFromClient } from '../../src/cloud/aws/ec2-api.js';
import { Ec2Provider } from '../../src/cloud/aws/ec2-provider.js';
import type { LaunchRequest } from '../../src/cloud/provider.js';
import { FencedCloudProvider } from '../../src/controller/ha/fenced-provider.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { silentLogger } from '../../src/controller/seams.js';
import { SpotInterruptions } from '../../src/controller/spot-interruptions.js';
import { UNAVAILABLE_OFFERING_SECONDS } from '../../src/core/spot.js';
import { describeWithMoto, TEST_REGION } from '../helpers/moto.js';

/** A spot launch of a c7i.large planned in us-east-1a, the pool the tests' notices close. */
const request = (key: string): LaunchRequest => ({
  typeName: 'c7i.large',
  idempotencyToken: key,
  clusterName: 'late-notice',
  planId: 'plan-1',
  instanceKey: key,
  market: 'spot',
  availabilityZones: ['us-east-1a'],
});

/**
 * Spot interruption notices keep spot launches out of the instance's pool for the unavailable window: the EC2
 * provider on moto_server, with a clock the test moves.
 */
describeWithMoto('a spot notice closes the pool to spot launches (EC2 on moto)', (moto) => {
  const ec2 = (nowMs: () => number, capacityErrorTtlSeconds?: number) =>
    new Ec2Provider(
      {
        region: TEST_REGION,
        amiId: 'ami-12c6146b',
        placements: [{ availabilityZone: 'us-east-1a' }, { availabilityZone: 'us-east-1b' }],
        ...(capacityErrorTtlSeconds === undefined ? {} : { capacityErrorTtlSeconds }),
      },
      { api: ec2ApiFromClient(createEc2Client(moto.clientOptions)), sleep: async () => {}, nowMs },
    );

  it('for an instance already terminating: the next spot launch goes to another zone until the window ends', async () => {
    let nowMs = Date.parse('2026-03-01T12:00:00Z');
    const provider = ec2(() => nowMs);
    const store = new MemoryStateStore({ nowSeconds: () => nowMs / 1000, storeId: 't' });
    const rounds: string[] = [];
    const interruptions = new SpotInterruptions({
      store,
      log: silentLogger,
      provider,
      requestRound: (reason) => rounds.push(reason),
      clock: { nowSeconds: () => nowMs / 1000 },
    });
    const inst = store.createInstance({ typeName: 'c7i.large', availabilityZone: 'us-east-1a' });
    store.setInstanceState(inst.id, 'launching', { cloudId: 'i-0abc', availabilityZone: 'us-east-1a' });
    store.setInstanceState(inst.id, 'running');
    store.setInstanceState(inst.id, 'terminating', { reason: 'empty' });

    expect(interruptions.handle(inst.id, { kind: 'spot-interruption', source: 'interruption-queue' })).toBe(
      true,
    );
    // Nothing else changes for an instance on its way out: no drain, no event, no round.
    expect(store.getInstance(inst.id)).toMatchObject({ state: 'terminating', reason: 'empty' });
    expect(store.listEvents({ instanceId: inst.id, kind: 'instance.spot-interruption' })).toHaveLength(0);
    expect(rounds).toEqual([]);
    // Its worker's copy in the next heartbeat marks nothing again (it would push the window on).
    expect(interruptions.handle(inst.id, { kind: 'spot-interruption', source: 'worker' })).toBe(false);

    nowMs += (UNAVAILABLE_OFFERING_SECONDS - 1) * 1000;
    expect(await provider.launch(request('within'))).toMatchObject({
      market: 'spot',
      availabilityZone: 'us-east-1b',
    });
    nowMs += 2000;
    expect(await provider.launch(request('after'))).toMatchObject({
      market: 'spot',
      availabilityZone: 'us-east-1a',
    });
  });

  it('after a controller restart inside the window: the pool stays closed to spot launches', async () => {
    let nowMs = Date.parse('2026-03-01T12:00:00Z');
    const store = new MemoryStateStore({ nowSeconds: () => nowMs / 1000, storeId: 't' });
    const clock = { nowSeconds: () => nowMs / 1000 };
    const controllerProcess = () => {
      const provider = ec2(() => nowMs);
      const spot = new SpotInterruptions({
        store,
        log: silentLogger,
        provider,
        requestRound: () => {},
        clock,
      });
      return { provider, spot };
    };
    const first = controllerProcess();
    const inst = store.createInstance({ typeName: 'c7i.large', availabilityZone: 'us-east-1a' });
    store.setInstanceState(inst.id, 'launching', { cloudId: 'i-0abc', availabilityZone: 'us-east-1a' });
    store.setInstanceState(inst.id, 'running');
    const notice = { kind: 'spot-interruption', source: 'worker' } as const;
    expect(first.spot.handle(inst.id, notice)).toBe(true);

    // Started again 20 s later (the store kept, the provider's memory gone), the worker's repeated notice coming
    // before any start-up pass: it closes the pool.
    nowMs += 20_000;
    const noticed = controllerProcess();
    expect(noticed.spot.handle(inst.id, notice)).toBe(false);
    expect(await noticed.provider.launch(request('after-notice'))).toMatchObject({
      market: 'spot',
      availabilityZone: 'us-east-1b',
    });

    // Started again: the start-up pass closes it before the first round can launch.
    nowMs += 20_000;
    const started = controllerProcess();
    expect(started.spot.reclosePools()).toBe(1);
    expect(await started.provider.launch(request('after-start'))).toMatchObject({
      market: 'spot',
      availabilityZone: 'us-east-1b',
    });
    // Open again when the notice's window ends, not a window after the restart.
    nowMs += (UNAVAILABLE_OFFERING_SECONDS - 40) * 1000;
    expect(await started.provider.launch(request('window-over'))).toMatchObject({
      market: 'spot',
      availabilityZone: 'us-east-1a',
    });
  });

  it('after a restart, behind the lease, with a longer window configured: the pool stays closed for all of it', async () => {
    let nowMs = Date.parse('2026-03-01T12:00:00Z');
    const store = new MemoryStateStore({ nowSeconds: () => nowMs / 1000, storeId: 't' });
    const clock = { nowSeconds: () => nowMs / 1000 };
    // ec2.capacityErrorTtlSeconds: 600, the cloud behind the lease as a controller sharing its state has it.
    const controllerProcess = () => {
      const provider = new FencedCloudProvider(
        ec2(() => nowMs, 600),
        { assertLeading: () => undefined },
      );
      const spot = new SpotInterruptions({
        store,
        log: silentLogger,
        provider,
        requestRound: () => {},
        clock,
      });
      return { provider, spot };
    };
    const inst = store.createInstance({ typeName: 'c7i.large', availabilityZone: 'us-east-1a' });
    store.setInstanceState(inst.id, 'launching', { cloudId: 'i-0abc', availabilityZone: 'us-east-1a' });
    store.setInstanceState(inst.id, 'running');
    expect(controllerProcess().spot.handle(inst.id, { kind: 'spot-interruption', source: 'worker' })).toBe(
      true,
    );

    // Started again four minutes on: past the default window, inside the configured one.
    nowMs += 240_000;
    expect(240).toBeGreaterThan(UNAVAILABLE_OFFERING_SECONDS);
    const started = controllerProcess();
    expect(started.spot.reclosePools()).toBe(1);
    expect(await started.provider.launch(request('after-start'))).toMatchObject({
      market: 'spot',
      availabilityZone: 'us-east-1b',
    });
    // Open again when the notice's 600 s are over.
    nowMs += 359_000;
    expect(await started.provider.launch(request('window-end'))).toMatchObject({
      market: 'spot',
      availabilityZone: 'us-east-1b',
    });
    nowMs += 1000;
    expect(await started.provider.launch(request('window-over'))).toMatchObject({
      market: 'spot',
      availabilityZone: 'us-east-1a',
    });
  });
});
