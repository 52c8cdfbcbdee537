import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EC2ServiceException, type RunInstancesCommandInput } from '@aws-sdk/client-ec2';
import { afterAll, expect, it } from 'vitest';
import { createEc2Client, ec2ApiFromClient, type Ec2Api } from '../../src/cloud/aws/ec2-api.js';
import { Ec2Provider } from '../../src/cloud/aws/ec2-provider.js';
import { ManualClock } from '../../src/controller/clock.js';
import { Controller } from '../../src/controller/controller.js';
import { InjectedCrash, type FaultInjector } from '../../src/controller/faults.js';
import { launchedOnSpot } from '../../src/controller/instance-market.js';
import { QUOTA_REFUSAL_SECONDS } from '../../src/controller/reconcile/effects/quota-refusals.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { describeWithMoto } from '../helpers/moto.js';
import { BASE_SETTINGS, catalog, CPU_SMALL, CrashAt, jobSpec, liveRecords } from './controller-fixtures.js';

/** Launches against moto: quota refusals remembered per quota group, and a relaunch that finds its instance ended. */

const AMI = 'ami-12c6146b';
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-launches-moto-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function ec2Error(code: string): EC2ServiceException {
  return new EC2ServiceException({
    name: code,
    $fault: 'client',
    $metadata: { httpStatusCode: 400 },
    message: `${code} (injected by the test)`,
  });
}

/** The moto-backed API with a hook in front of RunInstances and a log of the types it was asked for. */
function seam(
  real: Ec2Api,
  beforeRun?: (input: RunInstancesCommandInput) => void,
): Ec2Api & { runs: string[] } {
  const runs: string[] = [];
  return {
    runs,
    runInstances: async (input) => {
      runs.push(String(input.InstanceType));
      beforeRun?.(input);
      return real.runInstances(input);
    },
    describeInstances: (input) => real.describeInstances(input),
    terminateInstances: (input) => real.terminateInstances(input),
    describeInstanceTypes: (input) => real.describeInstanceTypes(input),
    createPlacementGroup: (input) => real.createPlacementGroup(input),
    describePlacementGroups: (input) => real.describePlacementGroups(input),
    deletePlacementGroup: (input) => real.deletePlacementGroup(input),
  };
}

function vcpusOf(typeName: string): number {
  return catalog.types.find((t) => t.name === typeName)?.capacity[1] ?? 0;
}

describeWithMoto('launches against moto', (moto) => {
  let counter = 0;

  function build(
    cluster: string,
    clock: ManualClock,
    api: Ec2Api,
    faults?: FaultInjector,
    spot?: { readonly zones: readonly string[] },
  ) {
    const store = new SqliteStateStore(join(scratch, `${cluster}.db`), {
      nowSeconds: () => clock.nowSeconds(),
      synchronous: 'normal',
    });
    const provider = new Ec2Provider(
      {
        region: 'us-east-1',
        amiId: AMI,
        placements: (spot?.zones ?? ['us-east-1a', 'us-east-1b']).map((availabilityZone) => ({
          availabilityZone,
        })),
        throttling: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1 },
      },
      { api, sleep: async () => {} },
    );
    const controller = new Controller({
      store,
      catalog,
      provider,
      clock,
      settings: { ...BASE_SETTINGS, clusterName: cluster, vanishGraceSeconds: 120 },
      ...(faults === undefined ? {} : { faults }),
      // Eva buying spot, as the EC2 controller's does.
      ...(spot === undefined
        ? {}
        : { spotMarket: true, schedulerRecipe: { kind: 'eva', options: { spot: true } } as const }),
    });
    return { store, provider, controller };
  }

  it('remembers a vCPU quota refusal for its group: no larger type of it is tried, this round or the next', async () => {
    const cluster = `quota-${++counter}`;
    const clock = new ManualClock(Math.floor(Date.now() / 1000));
    // The standard group's on-demand quota has room for fewer than 4 vCPUs.
    const api = seam(ec2ApiFromClient(createEc2Client(moto.clientOptions)), (input) => {
      if (vcpusOf(String(input.InstanceType)) >= 4) throw ec2Error('VcpuLimitExceeded');
    });
    const { store, controller } = build(cluster, clock, api);
    const job = controller.submit(jobSpec('four-vcpus', CPU_SMALL), 'research');
    await controller.recover();
    await controller.runRound('submitted');
    // One call: no walk from c7i.xlarge through every larger c7i type.
    expect(api.runs).toEqual(['c7i.xlarge']);
    expect(store.getJob(job.id)?.state).toBe('queued');
    expect(store.listInstances()).toHaveLength(1);
    expect(store.getInstance('inst-1')?.reason).toContain('VcpuLimitExceeded');

    clock.advance(300);
    await controller.runRound('next');
    expect(api.runs).toEqual(['c7i.xlarge']); // remembered: the next round's launch asks EC2 nothing
    expect(store.getJob(job.id)?.state).toBe('queued');

    // A smaller type of the group may still fit the quota: it is tried, and launched.
    const small = controller.submit(jobSpec('two-vcpus', { c7i: [0, 2, 4] }), 'research');
    await controller.runRound('small');
    expect(api.runs).toEqual(['c7i.xlarge', 'c7i.large']);
    expect(store.getTask(`${small.id}.0`)?.state).toBe('running');

    // Forgotten after a while: the quota may have grown or freed up.
    clock.advance(QUOTA_REFUSAL_SECONDS);
    await controller.runRound('later');
    expect(api.runs.slice(2)).toEqual(['c7i.xlarge']);
    store.close();
  });

  it("remembers an instance-count refusal for its type alone: the fallback tries the group's next type", async () => {
    const cluster = `quota-${++counter}`;
    const clock = new ManualClock(Math.floor(Date.now() / 1000));
    // A count limit of c7i.xlarge alone ("for the specified instance type"): the larger c7i types are not refused.
    const api = seam(ec2ApiFromClient(createEc2Client(moto.clientOptions)), (input) => {
      if (String(input.InstanceType) === 'c7i.xlarge') throw ec2Error('InstanceLimitExceeded');
    });
    const { store, controller } = build(cluster, clock, api);
    const job = controller.submit(jobSpec('four-vcpus', CPU_SMALL), 'research');
    await controller.recover();
    await controller.runRound('submitted');
    expect(api.runs).toEqual(['c7i.xlarge', 'c7i.2xlarge']);
    expect(store.getTask(`${job.id}.0`)?.instanceId).toBeDefined();
    store.close();
  });

  it('closes a record at once when the instance an earlier attempt launched has ended, and plans its task again', async () => {
    const cluster = `ended-${++counter}`;
    const clock = new ManualClock(Math.floor(Date.now() / 1000));
    const api = seam(ec2ApiFromClient(createEc2Client(moto.clientOptions)));
    // A crash between RunInstances and recording its result.
    const first = build(cluster, clock, api, new CrashAt('launch:after-call'));
    const job = first.controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await first.controller.recover();
    await expect(first.controller.runRound('submitted')).rejects.toBeInstanceOf(InjectedCrash);
    first.store.close();
    // Its instance ends while the controller is down (reclaimed, or terminated by someone).
    const launched = await first.provider.list(cluster);
    expect(launched).toHaveLength(1);
    const dead = launched[0]?.instanceId as string;
    await first.provider.terminate([dead]);

    clock.advance(30);
    const { store, provider, controller } = build(cluster, clock, api);
    await controller.recover();
    // Not recorded as launching with a dead id for the vanish grace: lost now, its task released.
    expect(store.getInstance('inst-1')).toMatchObject({ state: 'terminated', cloudId: dead });
    expect(store.getInstance('inst-1')?.reason).toMatch(
      /found by launch token, is (terminated|shutting-down)/,
    );
    await controller.runRound('after restart');
    const task = store.getTask(`${job.id}.0`);
    expect(task?.state).toBe('running');
    const host = store.getInstance(task?.instanceId as string);
    expect(host?.id).not.toBe('inst-1');
    const live = await provider.list(cluster);
    expect(live.map((i) => i.instanceId)).toEqual([host?.cloudId]);
    expect(liveRecords(store).map((r) => r.cloudId)).toEqual([host?.cloudId]);
    expect(api.runs).toHaveLength(2); // the crashed launch and the new record's: nothing launched twice
    store.close();
  });

  it("an uncapped spot launch is tried on spot only in zones where the catalog has the type's pool", async () => {
    const cluster = `spot-zones-${++counter}`;
    const clock = new ManualClock(Math.floor(Date.now() / 1000));
    // The subnets are in us-east-1a and us-east-1d; c7i.large has spot pools in us-east-1a, b and c only. No spot room
    // in us-east-1a: spot in us-east-1d would be granted (moto has room) at a price the catalog does not know.
    const pools = (catalog.spot?.offerings ?? [])
      .filter((o) => o.typeName === 'c7i.large')
      .map((o) => o.zone);
    expect(pools).toContain('us-east-1a');
    expect(pools).not.toContain('us-east-1d');
    const calls: [string, string][] = [];
    const api = seam(ec2ApiFromClient(createEc2Client(moto.clientOptions)), (input) => {
      const zone = input.Placement?.AvailabilityZone ?? '';
      const market = input.InstanceMarketOptions?.MarketType ?? 'on-demand';
      calls.push([zone, market]);
      if (market === 'spot' && zone === 'us-east-1a') throw ec2Error('InsufficientInstanceCapacity');
    });
    const { store, controller } = build(cluster, clock, api, undefined, {
      zones: ['us-east-1a', 'us-east-1d'],
    });
    const job = controller.submit({ ...jobSpec('spot', { c7i: [0, 2, 4] }), spot: 'preferred' }, 'research');
    await controller.recover();
    await controller.runRound('submitted');
    expect(api.runs.every((t) => t === 'c7i.large')).toBe(true);
    expect(calls.filter(([, market]) => market === 'spot').map(([zone]) => zone)).toEqual(['us-east-1a']);
    // Bought on demand instead (an uncapped launch may be), and known to be.
    const host = store.getInstance(store.getTask(`${job.id}.0`)?.instanceId ?? '');
    expect(host?.cloudId).toBeDefined();
    expect(launchedOnSpot(store, host?.id ?? '')).toBe(false);
    store.close();
  });
});
