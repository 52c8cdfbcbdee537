import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateSecurityGroupCommand, EC2ServiceException } from '@aws-sdk/client-ec2';
import { afterAll, expect, it } from 'vitest';
import { createEc2Client, ec2ApiFromClient, type Ec2Api } from '../../src/cloud/aws/ec2-api.js';
import { Ec2Provider } from '../../src/cloud/aws/ec2-provider.js';
import { launchErrorLine } from '../../src/cli/commands/cluster.js';
import { clusterForScope, visibleJobIds } from '../../src/controller/api/views.js';
import { ManualClock } from '../../src/controller/clock.js';
import { Controller } from '../../src/controller/controller.js';
import { readLaunchError } from '../../src/controller/launch-error-records.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { StateStore } from '../../src/controller/state-store.js';
import { describeWithMoto } from '../helpers/moto.js';
import { BASE_SETTINGS, catalog, CPU_SMALL, jobSpec } from './controller-fixtures.js';

/**
 * A launch EC2 (moto) refuses: a refusal a retry cannot change waits the longest backoff at once, a transient failure
 * still backs off from the base, and the last error stays with the instance (stored, so over a restart) until a
 * launch succeeds, for the cluster view and `fleetwise cluster`.
 */

const AMI = 'ami-12c6146b';
const MISSING_GROUP = 'sg-0123456789abcdef0';
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-launch-errors-moto-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The moto-backed API counting RunInstances calls, failing the first `failFirst` with `code` when given. */
function seam(real: Ec2Api, fail?: { code: string; times: number }): Ec2Api & { runs: () => number } {
  let runs = 0;
  return {
    runs: () => runs,
    runInstances: async (input) => {
      runs += 1;
      if (fail !== undefined && runs <= fail.times)
        throw new EC2ServiceException({
          name: fail.code,
          $fault: 'server',
          $metadata: { httpStatusCode: 500 },
          message: `${fail.code} (injected by the test)`,
        });
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

/** The cluster view's instances as the API builds them, for the admin or a team. */
function clusterInstances(controller: Controller, store: StateStore, team?: string) {
  return clusterForScope(
    controller.cluster(),
    visibleJobIds(store, team),
    () => 'on-demand',
    (id) => readLaunchError(store, id),
  ).instances;
}

describeWithMoto('launch errors against moto', (moto) => {
  let counter = 0;

  function build(cluster: string, clock: ManualClock, api: Ec2Api, securityGroupIds: readonly string[] = []) {
    const store = new SqliteStateStore(join(scratch, `${cluster}.db`), {
      nowSeconds: () => clock.nowSeconds(),
      synchronous: 'normal',
    });
    const provider = new Ec2Provider(
      {
        region: 'us-east-1',
        amiId: AMI,
        placements: [{ availabilityZone: 'us-east-1a' }],
        securityGroupIds: [...securityGroupIds],
        throttling: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1 },
      },
      { api, sleep: async () => {} },
    );
    const controller = new Controller({
      store,
      catalog,
      provider,
      clock,
      settings: { ...BASE_SETTINGS, clusterName: cluster },
    });
    return { store, controller };
  }

  it('a security group EC2 does not have: tried again only after the longest backoff, shown until a launch succeeds', async () => {
    const cluster = `missing-group-${++counter}`;
    const clock = new ManualClock(Math.floor(Date.now() / 1000));
    const api = seam(ec2ApiFromClient(createEc2Client(moto.clientOptions)));
    const first = build(cluster, clock, api, [MISSING_GROUP]);
    const job = first.controller.submit(jobSpec('small', CPU_SMALL), 'research');
    first.store.addTeamToken('research', 'research-token-0123456789abcdef', 'test');
    await first.controller.recover();
    const startedAt = clock.nowSeconds();
    await first.controller.runRound('submitted');
    expect(api.runs()).toBe(1);
    expect(first.store.getInstance('inst-1')?.state).toBe('requested');
    const refused = readLaunchError(first.store, 'inst-1');
    expect(refused).toMatchObject({
      code: 'InvalidGroup.NotFound',
      permanent: true,
      attempts: 1,
      atSeconds: startedAt,
      nextAttemptAtSeconds: startedAt + 300,
    });
    expect(refused?.message).toContain(MISSING_GROUP);
    expect(first.store.listEvents({ kind: 'instance.launch-error' })[0]?.message).toContain('retry in 300 s');

    // The view: the admin reads the error whole; a team (whose job waits on it) without EC2's message.
    const [shown] = clusterInstances(first.controller, first.store);
    expect(shown).toMatchObject({ id: 'inst-1', state: 'requested', launchError: refused });
    const [teamShown] = clusterInstances(first.controller, first.store, 'research');
    expect(teamShown?.launchError).toEqual({
      code: 'InvalidGroup.NotFound',
      permanent: true,
      attempts: 1,
      atSeconds: startedAt,
      nextAttemptAtSeconds: startedAt + 300,
    });
    expect(launchErrorLine(shown as object, startedAt)).toBe(
      `  launch failed once (InvalidGroup.NotFound: refused until its cause is fixed), last at ` +
        `${new Date(startedAt * 1000)
          .toISOString()
          .replace('T', ' ')
          .replace(/\.\d+Z$/, 'Z')}, ` +
        `next try in 5m00s: ${refused?.message}`,
    );

    // No try at 10, 20, 40 s…: the same refusal would come back.
    for (const step of [10, 20, 40, 80, 149]) {
      clock.advance(step);
      await first.controller.reconcile();
    }
    expect(api.runs()).toBe(1);
    clock.advance(1);
    await first.controller.reconcile();
    expect(api.runs()).toBe(2);
    expect(readLaunchError(first.store, 'inst-1')).toMatchObject({
      attempts: 2,
      permanent: true,
      nextAttemptAtSeconds: startedAt + 600,
    });
    first.store.close();

    // The operator creates the group and starts the controller again with it: the error is still shown, and the
    // launch is tried at once, not after the backoff the last controller was waiting out.
    const group = await createEc2Client(moto.clientOptions).send(
      new CreateSecurityGroupCommand({ GroupName: `${cluster}-workers`, Description: 'workers' }),
    );
    clock.advance(30);
    const second = build(cluster, clock, api, [group.GroupId ?? '']);
    expect(clusterInstances(second.controller, second.store)[0]?.launchError).toMatchObject({
      code: 'InvalidGroup.NotFound',
      attempts: 2,
    });
    await second.controller.recover();
    await second.controller.reconcile();
    expect(api.runs()).toBe(3);
    expect(second.store.getTask(`${job.id}.0`)?.state).toBe('running');
    expect(readLaunchError(second.store, 'inst-1')).toBeUndefined();
    const [launched] = clusterInstances(second.controller, second.store);
    expect(launched?.state).not.toBe('requested');
    expect(launched).not.toHaveProperty('launchError');
    second.store.close();
  });

  it('a transient failure backs off from the base, doubling, and its error goes once the launch succeeds', async () => {
    const cluster = `transient-${++counter}`;
    const clock = new ManualClock(Math.floor(Date.now() / 1000));
    const api = seam(ec2ApiFromClient(createEc2Client(moto.clientOptions)), {
      code: 'InternalError',
      times: 2,
    });
    const { store, controller } = build(cluster, clock, api);
    const job = controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await controller.recover();
    const startedAt = clock.nowSeconds();
    await controller.runRound('submitted');
    expect(readLaunchError(store, 'inst-1')).toMatchObject({
      code: 'InternalError',
      permanent: false,
      attempts: 1,
      nextAttemptAtSeconds: startedAt + 10,
    });
    clock.advance(10);
    await controller.reconcile();
    expect(api.runs()).toBe(2);
    expect(readLaunchError(store, 'inst-1')).toMatchObject({
      attempts: 2,
      nextAttemptAtSeconds: startedAt + 30,
    });
    expect(launchErrorLine(clusterInstances(controller, store)[0] as object, startedAt + 10)).toMatch(
      /^ {2}launch failed 2 times \(InternalError\), last at .*, next try in 20s: .*InternalError/,
    );
    clock.advance(19);
    await controller.reconcile();
    expect(api.runs()).toBe(2);
    clock.advance(1);
    await controller.reconcile();
    expect(api.runs()).toBe(3);
    expect(store.getTask(`${job.id}.0`)?.state).toBe('running');
    expect(readLaunchError(store, 'inst-1')).toBeUndefined();
    expect(clusterInstances(controller, store)[0]).not.toHaveProperty('launchError');
    store.close();
  });
});
