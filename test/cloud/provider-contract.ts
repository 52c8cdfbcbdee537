/**
 * The behaviour every CloudProvider must have (src/cloud/provider.ts), run against each implementation: the local
 * provider (local-provider.test.ts), EC2 on moto_server (aws/ec2-provider.test.ts), and any other with one call of
 * cloudProviderContract. The controller's reconciliation relies on exactly this: launches validated before anything
 * happens, idempotency tokens, instances found again by their cluster tag (also by a restarted controller), a
 * terminate that can be retried, and the placement asked for (zone, placement group) honoured and reported as obtained.
 *
 * Every test uses cluster names of its own, so a provider may share one cloud across tests (moto keeps its state for
 * the whole file). Provider-specific timing (a cloud showing "pending" before "running", "shutting-down" before
 * "terminated", or a virtual clock to advance) goes in the wait hooks.
 */
import { expect, it } from 'vitest';
import {
  RESERVED_TAG_PREFIX,
  TAG_CLUSTER,
  TAG_INSTANCE_KEY,
  TAG_LAUNCH_TOKEN,
  TAG_PLACEMENT_GROUP,
  TAG_PLAN,
  type CloudInstance,
  type CloudProvider,
  type LaunchRequest,
  type LaunchResult,
} from '../../src/cloud/provider.js';

export interface ProviderFixture {
  readonly provider: CloudProvider;
  /** Another provider object over the same cloud: what a restarted controller constructs. */
  reopen(): CloudProvider | Promise<CloudProvider>;
}

export interface WaitContext {
  readonly provider: CloudProvider;
  readonly clusterName: string;
  readonly instanceIds: readonly string[];
}

export interface ProviderContractOptions {
  /** The provider for one test (called inside the test, so it may use state set up in beforeAll). */
  readonly open: () => ProviderFixture | Promise<ProviderFixture>;
  /** Two different instance types the provider can launch. */
  readonly typeNames: readonly [string, string];
  /** The availability zones the provider places instances in (at least one). */
  readonly zones: readonly string[];
  /** An instance id in the provider's own format that no launch returned: terminate must ignore it. */
  readonly unknownInstanceId: string;
  /** Returns once the launched instances are listed as running. Default: they are as soon as launch returns. */
  readonly waitRunning?: (context: WaitContext) => Promise<void>;
  /** Returns once the terminated instances are listed as terminated. Default: they are as soon as terminate returns. */
  readonly waitTerminated?: (context: WaitContext) => Promise<void>;
}

/** Unique across every contract run in the process, so runs sharing one cloud never see each other's instances. */
let clusterSequence = 0;
const RUN = Date.now().toString(36);

export function cloudProviderContract(options: ProviderContractOptions): void {
  const [typeA, typeB] = options.typeNames;
  const waitRunning = options.waitRunning ?? (async () => {});
  const waitTerminated = options.waitTerminated ?? (async () => {});

  /** A fresh cluster name and a request builder for it. */
  function cluster(): { name: string; request: (overrides?: Partial<LaunchRequest>) => LaunchRequest } {
    const name = `contract-${RUN}-${++clusterSequence}`;
    return {
      name,
      request: (overrides = {}) => ({
        typeName: typeA,
        idempotencyToken: `${name}-token-1`,
        clusterName: name,
        planId: 'plan-1',
        instanceKey: 'slot-1',
        ...overrides,
      }),
    };
  }

  async function launchOne(provider: CloudProvider, request: LaunchRequest): Promise<string> {
    const result = await provider.launch(request);
    expect(result.instanceIds).toHaveLength(1);
    return result.instanceIds[0] as string;
  }

  const ids = (instances: readonly CloudInstance[]): string[] => instances.map((i) => i.instanceId).sort();

  it('launches one instance and lists it under its cluster, running, with its type, tags and zone', async () => {
    const { provider } = await options.open();
    const c = cluster();
    const result: LaunchResult = await provider.launch(
      c.request({
        planId: 'plan-7',
        instanceKey: 'slot-3',
        tags: { team: 'ml-research', 'cost-center': '42' },
      }),
    );
    expect(result.reusedExisting).toBe(false);
    expect(result.instanceIds).toHaveLength(1);
    const id = result.instanceIds[0] as string;
    await waitRunning({ provider, clusterName: c.name, instanceIds: [id] });

    const listed = await provider.list(c.name);
    expect(listed).toHaveLength(1);
    const instance = listed[0] as CloudInstance;
    expect(instance).toMatchObject({
      instanceId: id,
      typeName: typeA,
      state: 'running',
      availabilityZone: result.availabilityZone,
    });
    expect(instance.launchTime).toBeInstanceOf(Date);
    expect(instance.tags).toMatchObject({
      team: 'ml-research',
      'cost-center': '42',
      [TAG_CLUSTER]: c.name,
      [TAG_PLAN]: 'plan-7',
      [TAG_INSTANCE_KEY]: 'slot-3',
      [TAG_LAUNCH_TOKEN]: `${c.name}-token-1`,
    });
    // The provider may add tags of its own (EC2's Name), but none in fleetwise's namespace.
    expect(Object.keys(instance.tags).filter((key) => key.startsWith(RESERVED_TAG_PREFIX))).toEqual(
      expect.arrayContaining([TAG_CLUSTER, TAG_PLAN, TAG_INSTANCE_KEY, TAG_LAUNCH_TOKEN]),
    );
    expect(Object.keys(instance.tags).filter((key) => key.startsWith(RESERVED_TAG_PREFIX))).toHaveLength(4);
  });

  it('answers a retried launch with the same instance, reusedExisting, however often and from a restarted provider', async () => {
    const fixture = await options.open();
    const { provider } = fixture;
    const c = cluster();
    const first = await provider.launch(c.request());
    // Right away: a controller that crashed after RunInstances retries at once.
    expect((await provider.launch(c.request())).instanceIds).toEqual(first.instanceIds);
    await waitRunning({ provider, clusterName: c.name, instanceIds: first.instanceIds });

    const again = await provider.launch(c.request());
    expect(again).toMatchObject({ instanceIds: first.instanceIds, reusedExisting: true });
    const restarted = await fixture.reopen();
    expect(await restarted.launch(c.request())).toMatchObject({
      instanceIds: first.instanceIds,
      reusedExisting: true,
    });
    expect(ids(await provider.list(c.name, { includeTerminated: true }))).toEqual([...first.instanceIds]);
  });

  it('launches a new instance for each new token, of the type asked for', async () => {
    const { provider } = await options.open();
    const c = cluster();
    const a = await launchOne(
      provider,
      c.request({ idempotencyToken: `${c.name}-a`, instanceKey: 'slot-a' }),
    );
    const b = await launchOne(
      provider,
      c.request({ idempotencyToken: `${c.name}-b`, instanceKey: 'slot-b', typeName: typeB }),
    );
    expect(a).not.toBe(b);
    await waitRunning({ provider, clusterName: c.name, instanceIds: [a, b] });
    const listed = await provider.list(c.name);
    expect(ids(listed)).toEqual([a, b].sort());
    const byId = new Map(listed.map((i) => [i.instanceId, i]));
    expect([byId.get(a)?.typeName, byId.get(a)?.tags[TAG_INSTANCE_KEY]]).toEqual([typeA, 'slot-a']);
    expect([byId.get(b)?.typeName, byId.get(b)?.tags[TAG_INSTANCE_KEY]]).toEqual([typeB, 'slot-b']);
  });

  it("keeps clusters apart: a token belongs to its cluster, and list shows no other cluster's instances", async () => {
    const { provider } = await options.open();
    const alpha = cluster();
    const beta = cluster();
    const token = `${alpha.name}-shared-token`;
    const a = await launchOne(provider, alpha.request({ idempotencyToken: token }));
    const second = await provider.launch(beta.request({ idempotencyToken: token }));
    expect(second.reusedExisting).toBe(false);
    expect(second.instanceIds).not.toContain(a);
    const b = second.instanceIds[0] as string;
    await waitRunning({ provider, clusterName: alpha.name, instanceIds: [a] });
    await waitRunning({ provider, clusterName: beta.name, instanceIds: [b] });

    expect(ids(await provider.list(alpha.name))).toEqual([a]);
    expect(ids(await provider.list(beta.name))).toEqual([b]);
    expect((await provider.list(beta.name))[0]?.tags[TAG_CLUSTER]).toBe(beta.name);
    expect(await provider.list(cluster().name, { includeTerminated: true })).toEqual([]);
  });

  it('terminates: the instance leaves the default list, shows as terminated on request, others stay', async () => {
    const { provider } = await options.open();
    const c = cluster();
    const a = await launchOne(
      provider,
      c.request({ idempotencyToken: `${c.name}-a`, instanceKey: 'slot-a' }),
    );
    const b = await launchOne(
      provider,
      c.request({ idempotencyToken: `${c.name}-b`, instanceKey: 'slot-b' }),
    );
    await waitRunning({ provider, clusterName: c.name, instanceIds: [a, b] });

    await provider.terminate([a]);
    await waitTerminated({ provider, clusterName: c.name, instanceIds: [a] });
    expect(ids(await provider.list(c.name))).toEqual([b]);
    const all = await provider.list(c.name, { includeTerminated: true });
    expect(Object.fromEntries(all.map((i) => [i.instanceId, i.state]))).toEqual({
      [a]: 'terminated',
      [b]: 'running',
    });
    // Still recognisable as the cluster's instance (reconciliation accounts for it by its tags).
    expect(all.find((i) => i.instanceId === a)?.tags).toMatchObject({
      [TAG_CLUSTER]: c.name,
      [TAG_LAUNCH_TOKEN]: `${c.name}-a`,
    });
  });

  it('terminates idempotently: repeated, duplicated, unknown and no ids all succeed', async () => {
    const fixture = await options.open();
    const { provider } = fixture;
    const c = cluster();
    const a = await launchOne(
      provider,
      c.request({ idempotencyToken: `${c.name}-a`, instanceKey: 'slot-a' }),
    );
    const b = await launchOne(
      provider,
      c.request({ idempotencyToken: `${c.name}-b`, instanceKey: 'slot-b' }),
    );
    await waitRunning({ provider, clusterName: c.name, instanceIds: [a, b] });

    await provider.terminate([a, a]);
    await expect(provider.terminate([a])).resolves.toBeUndefined();
    await expect(provider.terminate([])).resolves.toBeUndefined();
    // A retry after a crash: one id already gone, one the cloud never knew, one still to terminate.
    const restarted = await fixture.reopen();
    await expect(restarted.terminate([a, options.unknownInstanceId, b])).resolves.toBeUndefined();
    await waitTerminated({ provider, clusterName: c.name, instanceIds: [a, b] });
    expect(await provider.list(c.name)).toEqual([]);
    expect((await provider.list(c.name, { includeTerminated: true })).map((i) => i.state)).toEqual([
      'terminated',
      'terminated',
    ]);
  });

  it('finds the instances again from a restarted provider (level-triggered: the tags are the truth)', async () => {
    const fixture = await options.open();
    const c = cluster();
    const a = await launchOne(
      fixture.provider,
      c.request({ idempotencyToken: `${c.name}-a`, instanceKey: 'slot-a', tags: { team: 'ml' } }),
    );
    const b = await launchOne(
      fixture.provider,
      c.request({ idempotencyToken: `${c.name}-b`, typeName: typeB }),
    );
    await waitRunning({ provider: fixture.provider, clusterName: c.name, instanceIds: [a, b] });
    await fixture.provider.terminate([b]);
    await waitTerminated({ provider: fixture.provider, clusterName: c.name, instanceIds: [b] });

    const restarted = await fixture.reopen();
    const before = await fixture.provider.list(c.name, { includeTerminated: true });
    const after = await restarted.list(c.name, { includeTerminated: true });
    const view = (list: readonly CloudInstance[]): unknown[] =>
      [...list]
        .sort((x, y) => x.instanceId.localeCompare(y.instanceId))
        .map((i) => ({
          instanceId: i.instanceId,
          typeName: i.typeName,
          state: i.state,
          tags: i.tags,
          availabilityZone: i.availabilityZone,
        }));
    expect(view(after)).toEqual(view(before));
    expect(ids(await restarted.list(c.name))).toEqual([a]);
    expect((await restarted.list(c.name))[0]?.tags).toMatchObject({
      team: 'ml',
      [TAG_INSTANCE_KEY]: 'slot-a',
    });
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    ['a tag under the fleetwise: prefix', { tags: { 'fleetwise:owner': 'me' } }, /fleetwise:owner.*reserved/],
    ['a spoofed cluster tag', { tags: { [TAG_CLUSTER]: 'someone-else' } }, /reserved/],
    ['a spoofed plan tag', { tags: { [TAG_PLAN]: 'plan-0' } }, /reserved/],
    ['two instances in one request', { count: 2 }, /count/],
    ['a 65-character token', { idempotencyToken: 't'.repeat(65) }, /idempotencyToken/],
    ['a token with a space', { idempotencyToken: 'has space' }, /idempotencyToken/],
    ['an unlikely type name', { typeName: 'C7I LARGE' }, /typeName/],
    ['an empty cluster name', { clusterName: '' }, /clusterName/],
    ['a plan id with a slash', { planId: 'plan/1' }, /planId/],
    ['an empty instance key', { instanceKey: '' }, /instanceKey/],
    ['a 129-character tag key', { tags: { ['k'.repeat(129)]: 'v' } }, /tags/],
    ['a 257-character tag value', { tags: { owner: 'v'.repeat(257) } }, /tags\.owner/],
  ])('refuses %s, naming the field, and launches nothing', async (_label, override, reason) => {
    const { provider } = await options.open();
    const c = cluster();
    // A rejected promise, not a synchronous throw: callers chain .catch on launch().
    const launching = provider.launch({ ...c.request(), ...override } as LaunchRequest);
    await expect(launching).rejects.toThrow(reason);
    await expect(launching).rejects.toBeInstanceOf(Error);
    expect(await provider.list(c.name, { includeTerminated: true })).toEqual([]);
  });

  it('ignores preferred zones it has no placement for', async () => {
    const { provider } = await options.open();
    const c = cluster();
    const result = await provider.launch(c.request({ availabilityZones: ['nowhere-9z'] }));
    expect(result.instanceIds).toHaveLength(1);
    await waitRunning({ provider, clusterName: c.name, instanceIds: result.instanceIds });
    expect(ids(await provider.list(c.name))).toEqual([...result.instanceIds]);
  });

  it('launches into the zone asked for when it has a placement there', async () => {
    const { provider } = await options.open();
    const c = cluster();
    const zone = options.zones.at(-1) as string;
    const result = await provider.launch(c.request({ availabilityZones: [zone] }));
    expect(result.availabilityZone).toBe(zone);
    await waitRunning({ provider, clusterName: c.name, instanceIds: result.instanceIds });
    expect((await provider.list(c.name)).map((i) => i.availabilityZone)).toEqual([zone]);
  });

  it('launches into the placement group asked for, reports it, and keeps it across retries and restarts', async () => {
    const fixture = await options.open();
    const { provider } = fixture;
    const c = cluster();
    const zone = options.zones[0] as string;
    const a = await provider.launch(
      c.request({ idempotencyToken: `${c.name}-a`, placementGroup: 'job-7', availabilityZones: [zone] }),
    );
    const b = await provider.launch(
      c.request({ idempotencyToken: `${c.name}-b`, instanceKey: 'slot-b', placementGroup: 'job-7' }),
    );
    const plain = await provider.launch(
      c.request({ idempotencyToken: `${c.name}-p`, instanceKey: 'slot-p' }),
    );
    expect([a.placementGroup, b.placementGroup, plain.placementGroup]).toEqual(['job-7', 'job-7', undefined]);
    expect(a.availabilityZone).toBe(zone);
    expect(a.placementFallback).toBeUndefined();
    const all = [...a.instanceIds, ...b.instanceIds, ...plain.instanceIds];
    await waitRunning({ provider, clusterName: c.name, instanceIds: all });

    const view = (list: readonly CloudInstance[]): Record<string, unknown> =>
      Object.fromEntries(list.map((i) => [i.instanceId, [i.placementGroup, i.tags[TAG_PLACEMENT_GROUP]]]));
    const expected = {
      [a.instanceIds[0] as string]: ['job-7', 'job-7'],
      [b.instanceIds[0] as string]: ['job-7', 'job-7'],
      [plain.instanceIds[0] as string]: [undefined, undefined],
    };
    expect(view(await provider.list(c.name))).toEqual(expected);
    const restarted = await fixture.reopen();
    expect(view(await restarted.list(c.name))).toEqual(expected);
    expect(
      await restarted.launch(c.request({ idempotencyToken: `${c.name}-a`, placementGroup: 'job-7' })),
    ).toMatchObject({ instanceIds: a.instanceIds, placementGroup: 'job-7', reusedExisting: true });
  });

  it.each<[string, Record<string, unknown>]>([
    ['a placement group with a slash', { placementGroup: 'job/7' }],
    ['an empty placement group', { placementGroup: '' }],
    ['a 129-character placement group', { placementGroup: 'g'.repeat(129) }],
  ])('refuses %s, naming the field', async (_label, override) => {
    const { provider } = await options.open();
    const c = cluster();
    await expect(provider.launch({ ...c.request(), ...override } as LaunchRequest)).rejects.toThrow(
      /placementGroup/,
    );
    expect(await provider.list(c.name, { includeTerminated: true })).toEqual([]);
  });

  it('reports no capacity constraint for a type it was never refused (when it tracks capacity at all)', async () => {
    const { provider } = await options.open();
    expect(provider.isCapacityConstrained?.(typeA) ?? false).toBe(false);
    expect(provider.isCapacityConstrained?.(typeB) ?? false).toBe(false);
  });
}
