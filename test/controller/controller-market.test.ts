import { describe, expect, it } from 'vitest';
import type { Market } from '../../src/core/market.js';
import { InjectedCrash } from '../../src/controller/faults.js';
import { launchedOnSpot, MARKET_FALLBACK_EVENT } from '../../src/controller/instance-market.js';
import { CloudOnlyTaskControl } from '../../src/controller/seams.js';
import type { PlannedInstance, Scheduler } from '../../src/scheduler/types.js';
import { spotOffering } from '../../src/core/spot.js';
import {
  catalog,
  CPU_SMALL,
  CrashAt,
  handPlan,
  jobSpec,
  priceOf,
  reconcilerFor,
  rig,
} from './controller-fixtures.js';

/**
 * A plan's purchase option reaches the cloud: a new instance the planner buys as spot is launched with the spot
 * market (its launch intent keeps it across a restart); one without a market is launched on demand.
 */
function marketScheduler(
  market: (jobName: string) => Market | undefined,
  typeName = 'c7i.xlarge',
): Scheduler {
  let n = 0;
  return {
    name: 'market',
    observe() {},
    plan(snapshot) {
      const instances: PlannedInstance[] = snapshot.instances
        .filter((i) => i.taskIds.length > 0)
        .map((i) => ({ id: i.id, typeName: i.typeName, isNew: false, taskIds: [...i.taskIds] }));
      for (const t of snapshot.tasks)
        if (t.instanceId === undefined) {
          const chosen = market(t.jobId);
          // The planner's instance as spot planning gives it (PlannedInstance with a market).
          const planned: PlannedInstance & { readonly market?: Market } = {
            id: `new-${++n}`,
            typeName,
            isNew: true,
            taskIds: [t.id],
            ...(chosen === undefined ? {} : { market: chosen }),
          };
          instances.push(planned);
        }
      return {
        configuration: { instances },
        decision: {
          scheduler: 'market',
          nowSeconds: snapshot.nowSeconds,
          candidates: [],
          chosen: 'full',
          reason: 'test',
          waiting: [],
          pinned: [],
        },
      };
    },
  };
}

describe('the market from the plan to the cloud', () => {
  it('launches a planned spot instance as spot and one without a market on demand', async () => {
    let spotJob = '';
    const scheduler = marketScheduler((jobId) => (jobId === spotJob ? 'spot' : undefined));
    const { controller, store, cloud } = rig({}, { scheduler });
    spotJob = controller.submit(jobSpec('cheap', CPU_SMALL), 'research').id;
    controller.submit(jobSpec('plain', CPU_SMALL), 'research');
    await controller.runRound();
    expect(cloud.requests.map((r) => r.market).sort()).toEqual(['on-demand', 'spot']);
    const intents = store.listIntents({ kind: 'launch' }).map((i) => i.payload as { market?: Market });
    expect(intents.map((p) => p.market ?? 'on-demand').sort()).toEqual(['on-demand', 'spot']);
  });

  it('a spot instance whose type has no capacity is replaced by another type, still asked for on spot', async () => {
    const scheduler = marketScheduler(() => 'spot');
    const { controller, store, cloud } = rig({}, { scheduler });
    cloud.noCapacity.add('c7i.xlarge');
    controller.submit(jobSpec('cheap', CPU_SMALL), 'research');
    await controller.runRound();
    const requests = cloud.requests.map((r) => [r.typeName, r.market]);
    expect(requests[0]).toEqual(['c7i.xlarge', 'spot']);
    expect(requests.length).toBeGreaterThan(1);
    const replacement = requests.at(-1) as [string, Market];
    expect(replacement[0]).not.toBe('c7i.xlarge');
    expect(replacement[1]).toBe('spot');
    const launched = store
      .listIntents({ kind: 'launch' })
      .filter((i) => i.state !== 'failed')
      .map((i) => (i.payload as { market?: Market }).market);
    expect(launched).toEqual(['spot']);
  });

  it('an instance a spot launch got on demand counts as on demand, with the reason', async () => {
    const scheduler = marketScheduler(() => 'spot');
    const { controller, store, cloud } = rig({}, { scheduler });
    cloud.noSpotCapacity.add('c7i.xlarge');
    controller.submit(jobSpec('cheap', CPU_SMALL), 'research');
    await controller.runRound();
    const inst = store.listInstances()[0]?.id as string;
    expect(launchedOnSpot(store, inst)).toBe(false);
    expect(store.listEvents({ instanceId: inst, kind: MARKET_FALLBACK_EVENT })[0]?.message).toMatch(
      /^launched on demand instead of spot: no spot capacity: insufficient capacity for c7i\.xlarge: refused in [a-z0-9, -]+$/,
    );
  });

  it('a spot launch with no spot capacity is not bought on demand over the $/hour cap; later rounds still apply', async () => {
    // The job fits the cap on a c7i.xlarge on demand; the plan buys a c7i.2xlarge, which fits it only on spot.
    const scheduler = marketScheduler(() => 'spot', 'c7i.2xlarge');
    const spot = spotOffering(catalog.spot, 'c7i.2xlarge', 'us-east-1a')?.pricePerHour as number;
    const maxCostPerHour = Math.max(spot, priceOf('c7i.xlarge')) * 1.05;
    expect(priceOf('c7i.2xlarge')).toBeGreaterThan(maxCostPerHour);
    const { controller, store, cloud } = rig({ caps: { maxCostPerHour } }, { scheduler });
    for (const t of catalog.types) cloud.noSpotCapacity.add(t.name);
    controller.submit(jobSpec('cheap', CPU_SMALL), 'research');
    const first = await controller.runRound();
    expect(first.notApplied).toBeUndefined();
    expect(cloud.requests[0]).toMatchObject({
      typeName: 'c7i.2xlarge',
      market: 'spot',
      onDemandFallback: false,
    });
    // Refused as a capacity error, not bought on demand: the next type that fits went instead (a c7i.xlarge, whose
    // on-demand price the cap allows), and nothing runs over the cap.
    expect(cloud.live().map((i) => i.typeName)).not.toContain('c7i.2xlarge');
    const billed = cloud
      .live()
      .reduce(
        (sum, i) =>
          sum +
          (i.market === 'spot'
            ? (spotOffering(catalog.spot, i.typeName, i.zone)?.pricePerHour as number)
            : priceOf(i.typeName)),
        0,
      );
    expect(billed).toBeLessThanOrEqual(maxCostPerHour);
    // The next round plans again, and is applied.
    const second = await controller.runRound();
    expect(second.notApplied).toBeUndefined();
    expect(store.listEvents({ kind: 'round.rejected' })).toEqual([]);
  });

  it('a capped spot launch may go only to the zones whose spot price the cap allows', async () => {
    // c7i.4xlarge on spot: about 0.336 in us-east-1a (the pool planned), 0.322 in b, 0.352 in c; 0.714 on demand.
    const scheduler = marketScheduler(() => 'spot', 'c7i.4xlarge');
    const price = (zone: string): number =>
      spotOffering(catalog.spot, 'c7i.4xlarge', zone)?.pricePerHour as number;
    const maxCostPerHour = 0.34;
    expect(price('us-east-1c')).toBeGreaterThan(maxCostPerHour);
    expect(Math.max(price('us-east-1a'), price('us-east-1b'))).toBeLessThan(maxCostPerHour);
    const { controller, cloud } = rig({ caps: { maxCostPerHour } }, { scheduler });
    controller.submit(jobSpec('cheap', CPU_SMALL), 'research');
    await controller.runRound();
    expect(cloud.requests[0]).toMatchObject({
      typeName: 'c7i.4xlarge',
      market: 'spot',
      onDemandFallback: false,
    });
    expect([...(cloud.requests[0]?.spotZones ?? [])].sort()).toEqual(['us-east-1a', 'us-east-1b']);
  });

  it('an uncapped spot launch, or one the cap allows at the on-demand price, may go to every zone with a pool', async () => {
    const pools = (catalog.spot?.offerings ?? [])
      .filter((o) => o.typeName === 'c7i.xlarge')
      .map((o) => o.zone);
    expect(pools.length).toBeGreaterThan(1);
    for (const caps of [{}, { maxCostPerHour: 2 * priceOf('c7i.xlarge') }]) {
      const { controller, cloud } = rig({ caps }, { scheduler: marketScheduler(() => 'spot') });
      controller.submit(jobSpec('cheap', CPU_SMALL), 'research');
      await controller.runRound();
      expect(cloud.requests[0]).toMatchObject({ market: 'spot' });
      expect([...(cloud.requests[0]?.spotZones ?? [])].sort()).toEqual([...pools].sort());
    }
  });

  it('an on-demand launch names no spot zones', async () => {
    const { controller, cloud } = rig({}, { scheduler: marketScheduler(() => undefined) });
    controller.submit(jobSpec('plain', CPU_SMALL), 'research');
    await controller.runRound();
    expect(cloud.requests[0]).toMatchObject({ market: 'on-demand' });
    expect(cloud.requests[0]?.spotZones).toBeUndefined();
  });

  it('a spot launch the cap allows on demand too may fall back to on demand', async () => {
    const scheduler = marketScheduler(() => 'spot');
    const { controller, store, cloud } = rig(
      { caps: { maxCostPerHour: 2 * priceOf('c7i.xlarge') } },
      { scheduler },
    );
    cloud.noSpotCapacity.add('c7i.xlarge');
    controller.submit(jobSpec('cheap', CPU_SMALL), 'research');
    await controller.runRound();
    expect(cloud.requests[0]).toMatchObject({
      typeName: 'c7i.xlarge',
      market: 'spot',
      onDemandFallback: true,
    });
    const inst = store.listInstances()[0]?.id as string;
    expect(launchedOnSpot(store, inst)).toBe(false);
  });

  // A crash between RunInstances and the record of its result: the restarted controller finds the instance either by
  // retrying the launch (the launch token finds it) or in the cloud sync (adopted by its token). Either way the market
  // it really runs in is what counts, for the caps, the prices and Eva's spot risk.
  for (const found of ['by the retried launch', 'by the cloud sync'] as const)
    for (const spotCapacity of [true, false])
      it(`after a crash the market is the cloud's, found ${found} (${spotCapacity ? 'spot' : 'fell back to on demand'})`, async () => {
        const r = rig();
        if (!spotCapacity) r.cloud.noSpotCapacity.add('c7i.xlarge');
        const job = r.controller.submit(jobSpec('cheap', CPU_SMALL), 'research');
        const control = new CloudOnlyTaskControl();
        const crashing = reconcilerFor(r, control, { faults: new CrashAt('launch:after-call') });
        const spot: PlannedInstance & { readonly market: Market } = {
          id: 'new-1',
          typeName: 'c7i.xlarge',
          isNew: true,
          taskIds: [`${job.id}.0`],
          market: 'spot',
        };
        const { plan, diff } = handPlan(r, { instances: [spot] });
        crashing.applyPlan(plan, diff);
        await expect(crashing.progress()).rejects.toThrow(InjectedCrash);
        expect(r.cloud.live()).toHaveLength(1);
        const restarted = reconcilerFor(r, control);
        if (found === 'by the cloud sync') await restarted.syncWithCloud();
        await restarted.progress();
        const inst = r.store.listInstances()[0];
        expect(inst?.cloudId).toBe(r.cloud.live()[0]?.id);
        expect(r.cloud.live()).toHaveLength(1);
        expect(launchedOnSpot(r.store, inst?.id as string)).toBe(spotCapacity);
        expect(r.store.listEvents({ kind: MARKET_FALLBACK_EVENT })).toHaveLength(spotCapacity ? 0 : 1);
      });

  it('an instance adopted from EC2 keeps the market EC2 lists it in', async () => {
    const { controller, store, cloud } = rig({ orphanPolicy: 'adopt' });
    const spot = cloud.addForeign('test', 'c7i.xlarge', 'spot');
    const onDemand = cloud.addForeign('test', 'c7i.xlarge');
    await controller.recover();
    const record = (cloudId: string): string => store.findInstanceByCloudId(cloudId)?.id as string;
    expect(launchedOnSpot(store, record(spot))).toBe(true);
    expect(launchedOnSpot(store, record(onDemand))).toBe(false);
  });
});
