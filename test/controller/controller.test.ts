import { describe, expect, it } from 'vitest';
import { TAG_CLUSTER, TAG_INSTANCE_KEY, TAG_LAUNCH_TOKEN, TAG_PLAN } from '../../src/cloud/provider.js';
import { SCHEDULER_STATE_KEY } from '../../src/controller/scheduler-state.js';
import { CloudOnlyTaskControl, type TaskControl } from '../../src/controller/seams.js';
import { LAUNCH_BACKOFF_KEY } from '../../src/controller/reconcile/effects/registrations.js';
import type { InstanceRecord } from '../../src/controller/state-store.js';
import { recordPreviousStoreId } from '../../src/controller/state/lineage.js';
import { transitionInstance } from '../../src/controller/state/lifecycle.js';
import type { Scheduler } from '../../src/scheduler/types.js';
import {
  CPU_SMALL,
  FakeCloud,
  GPU_ONE,
  jobSpec,
  liveRecords,
  MEM_BIG,
  rig,
  waitFor,
} from './controller-fixtures.js';

describe('controller rounds against an in-memory cloud', () => {
  it('launches the cheapest fitting type, tags it, and runs the task once the instance runs', async () => {
    const { controller, store, cloud } = rig();
    const job = controller.submit(jobSpec('small', CPU_SMALL), 'research');
    const outcome = await controller.runRound('test');
    expect(outcome.round).toBe(1);
    expect(outcome.actions.map((a) => a.kind)).toEqual(['launch-instance', 'start-task']);
    const live = cloud.live();
    expect(live.map((i) => i.typeName)).toEqual(['c7i.xlarge']); // $0.1785/h, the cheapest with 4 vCPU and 8 GiB
    const record = store.getInstance('inst-1') as InstanceRecord;
    expect(record.cloudId).toBe(live[0]?.id);
    expect(live[0]?.tags).toMatchObject({
      [TAG_CLUSTER]: 'test',
      [TAG_PLAN]: 'round-1',
      [TAG_INSTANCE_KEY]: 'inst-1',
      [TAG_LAUNCH_TOKEN]: record.launchToken,
    });
    // Cloud-only task control: the task runs as soon as EC2 runs the instance (the fake boots at once).
    expect(store.getTask(`${job.id}.0`)).toMatchObject({ state: 'running', instanceId: 'inst-1' });
    expect(store.getJob(job.id)?.state).toBe('running');
    expect(store.listIntents({ states: ['pending'] })).toEqual([]);
    // A second round with nothing new changes nothing.
    const again = await controller.runRound('test');
    expect(again.actions).toEqual([]);
    expect(cloud.calls.runInstances).toBe(1);
  });

  it('waits for the instance to run before starting its task', async () => {
    const cloud = new FakeCloud();
    cloud.bootInstantly = false;
    const { controller, store } = rig({}, { cloud });
    const job = controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await controller.runRound();
    expect(store.getInstance('inst-1')?.state).toBe('launching');
    expect(store.getTask(`${job.id}.0`)?.state).toBe('starting');
    expect(store.getJob(job.id)?.state).toBe('starting');
    cloud.bootAll();
    await controller.reconcile();
    expect(store.getInstance('inst-1')?.state).toBe('running');
    expect(store.getTask(`${job.id}.0`)?.state).toBe('running');
    expect(store.getJob(job.id)?.state).toBe('running');
  });

  it('terminates every instance within two rounds of cancelling all jobs, and reports the cost', async () => {
    const { controller, store, cloud, clock } = rig();
    const a = controller.submit(jobSpec('cpu', CPU_SMALL), 'research');
    const b = controller.submit(jobSpec('mem', MEM_BIG, { team: 'graphs' }), 'graphs');
    const c = controller.submit(jobSpec('gpu', GPU_ONE, { team: 'vision' }), 'vision');
    await controller.runRound();
    expect(
      cloud
        .live()
        .map((i) => i.typeName)
        .sort(),
    ).toEqual(['c7i.xlarge', 'p3.2xlarge', 'r7i.2xlarge']);
    clock.advance(3600);
    for (const job of [a, b, c]) expect(controller.cancel(job.id).state).toBe('cancelled');
    await controller.runRound('cancel');
    await controller.runRound('period');
    expect(cloud.live()).toEqual([]);
    expect(liveRecords(store)).toEqual([]);
    // One hour of $0.1785 + $0.5292 + $3.06 = $3.7677, all attributed (one task per instance, no idle time).
    const costs = controller.costs();
    expect(costs.totalCost).toBeCloseTo(3.7677, 4);
    expect(costs.idleCost).toBeCloseTo(0, 6);
    expect(costs.byTeam.map((t) => [t.id, Number(t.cost.toFixed(4))])).toEqual([
      ['vision', 3.06],
      ['graphs', 0.5292],
      ['research', 0.1785],
    ]);
    // Cancelling twice is harmless.
    expect(controller.cancel(a.id).state).toBe('cancelled');
  });

  it('makes no cloud call in dry-run, yet plans and records every round', async () => {
    const cloud = new FakeCloud();
    const { controller, store } = rig({ dryRun: true }, { cloud, provider: cloud });
    await controller.recover();
    controller.submit(jobSpec('small', CPU_SMALL), 'research');
    const first = await controller.runRound();
    const second = await controller.runRound();
    expect(first.notApplied).toBe('dry run');
    expect(first.actions.map((a) => a.kind)).toEqual(['launch-instance', 'start-task']);
    expect(second.round).toBe(2);
    expect(cloud.calls).toEqual({ launch: 0, list: 0, terminate: 0, runInstances: 0 });
    expect(store.listInstances()).toEqual([]);
    expect(store.listJobs()[0]?.state).toBe('queued');
    expect(store.listEvents({ kind: 'round.dry-run' })).toHaveLength(2);
    expect(store.latestRound()?.decision.scheduler).toBe('eva');
  });

  it('plans with the configured Eva options (payback margin shown in the decision only when k ≠ 1)', async () => {
    const reasonWith = async (overrides: Parameters<typeof rig>[0]): Promise<string> => {
      const { controller, store } = rig({ dryRun: true, ...overrides });
      await controller.recover();
      controller.submit(jobSpec('small', CPU_SMALL), 'research');
      await controller.runRound();
      return store.latestRound()?.decision.reason ?? '';
    };
    expect(await reasonWith({})).toContain('×8');
    expect(await reasonWith({ eva: { paybackMargin: 1 } })).not.toContain('×');
  });

  it('launches the next-cheapest type that fits the planned tasks on insufficient capacity', async () => {
    const { controller, store, cloud } = rig();
    cloud.noCapacity.add('c7i.xlarge');
    // Fits c7i.xlarge ($0.1785), then r7i.xlarge ($0.2646, 4 vCPU 32 GiB), then c7i.2xlarge ($0.357).
    const job = controller.submit(jobSpec('either', { c7i: [0, 4, 8], r7i: [0, 4, 8] }), 'research');
    await controller.runRound();
    expect(cloud.live().map((i) => i.typeName)).toEqual(['r7i.xlarge']);
    expect(store.getInstance('inst-1')?.state).toBe('terminated');
    expect(store.getInstance('inst-1')?.cloudId).toBeUndefined();
    expect(store.getInstance('inst-2')).toMatchObject({ typeName: 'r7i.xlarge', state: 'running' });
    expect(store.getTask(`${job.id}.0`)).toMatchObject({ state: 'running', instanceId: 'inst-2' });
    expect(store.listEvents({ kind: 'instance.fallback' })[0]?.message).toContain('launching r7i.xlarge');
    // Both capacity-refused types are skipped for the next fallback too.
    cloud.noCapacity.add('r7i.xlarge');
    const second = controller.submit(jobSpec('either2', { c7i: [0, 4, 8], r7i: [0, 4, 8] }), 'research');
    await controller.runRound();
    expect(store.getTask(`${second.id}.0`)?.instanceId).toBeDefined();
    const host = store.getInstance(store.getTask(`${second.id}.0`)?.instanceId as string);
    expect(host?.typeName === 'c7i.2xlarge' || host?.id === 'inst-2').toBe(true);
  });

  it('leaves the tasks queued when no other type fits under the $/hour cap', async () => {
    const { controller, store, cloud } = rig({ caps: { maxCostPerHour: 0.2 } });
    cloud.noCapacity.add('c7i.xlarge');
    const job = controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await controller.runRound();
    expect(cloud.calls.runInstances).toBe(0);
    expect(store.getInstance('inst-1')?.state).toBe('terminated');
    expect(store.getJob(job.id)?.state).toBe('queued');
    expect(store.getTask(`${job.id}.0`)?.state).toBe('pending');
  });

  it('retries a throttled launch later with the same token and launches exactly one instance', async () => {
    const { controller, store, cloud, clock } = rig();
    cloud.throttleNextLaunches = 1;
    controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await controller.runRound();
    expect(cloud.live()).toEqual([]);
    expect(store.listIntents({ states: ['pending'], kind: 'launch' })).toHaveLength(1);
    expect(store.listEvents({ kind: 'instance.launch-error' })[0]?.message).toContain('retry in 10 s');
    await controller.reconcile(); // too early: backoff
    expect(cloud.calls.launch).toBe(1);
    clock.advance(10);
    await controller.reconcile();
    expect(cloud.live()).toHaveLength(1);
    expect(store.getInstance('inst-1')?.state).toBe('running');
    expect(store.listIntents({ states: ['pending'] })).toEqual([]);
  });

  it('replaces an instance whose worker never registers, with doubling backoff between launches', async () => {
    const registered = new Set<string>();
    const tasks: TaskControl = {
      ...new CloudOnlyTaskControl(),
      name: 'never-registers',
      start: async () => {},
      stop: async () => 'stopped',
      status: async () => 'running',
      workerRegistered: (inst: InstanceRecord) => registered.has(inst.id),
    };
    const { controller, store, cloud, clock } = rig(
      {
        registrationTimeoutSeconds: 600,
        registrationBackoffBaseSeconds: 60,
        registrationBackoffMaxSeconds: 3600,
      },
      { tasks },
    );
    const job = controller.submit(jobSpec('small', CPU_SMALL), 'research');
    const launchTimes: number[] = [];
    const start = clock.nowSeconds();
    let launches = 0;
    // Two simulated hours: a round every 300 s, a reconcile pass every 30 s.
    for (let t = 0; t <= 7200; t += 30) {
      if (t % 300 === 0) await controller.runRound();
      else await controller.reconcile();
      if (cloud.calls.runInstances > launches) {
        launches = cloud.calls.runInstances;
        launchTimes.push(clock.nowSeconds() - start);
      }
      // The task never starts: the instance never becomes ready.
      expect(store.getTask(`${job.id}.0`)?.state).not.toBe('running');
      clock.advance(30);
    }
    // Without backoff: a launch every ~600 s (12 in two hours). With 60, 120, 240, … s pauses: 6.
    expect(launchTimes.length).toBeLessThanOrEqual(6);
    expect(launchTimes.length).toBeGreaterThanOrEqual(4);
    const gaps = launchTimes.slice(1).map((t, i) => t - (launchTimes[i] as number));
    for (let i = 1; i < gaps.length; i++)
      expect(gaps[i] as number).toBeGreaterThanOrEqual(gaps[i - 1] as number);
    expect(gaps[0]).toBeGreaterThanOrEqual(600 + 60);
    expect(gaps[gaps.length - 1] as number).toBeGreaterThan((gaps[0] as number) + 600);
    expect(cloud.live().length).toBeLessThanOrEqual(1); // replaced, never accumulated
    expect(store.listEvents({ kind: 'instance.registration-timeout' }).length).toBe(
      launchTimes.length - (cloud.live().length > 0 ? 1 : 0),
    );
    // A worker that finally registers resets the backoff and the task starts.
    const current = liveRecords(store).find((i) => i.state === 'running');
    if (current === undefined) {
      clock.advance(3600);
      await controller.runRound();
    }
    const running = liveRecords(store).find((i) => i.state === 'running') as InstanceRecord;
    registered.add(running.id);
    await controller.reconcile();
    expect(store.getTask(`${job.id}.0`)).toMatchObject({ state: 'running', instanceId: running.id });
    expect(store.getValue(LAUNCH_BACKOFF_KEY)).toEqual({ failures: 0, notBeforeSeconds: 0 });
  });

  it('drains an instance: its task moves to a new instance, then the drained one terminates', async () => {
    let migrationsCounted = 0;
    const metrics = {
      observeRound: () => {},
      countMigrations: (jobs = 1) => void (migrationsCounted += jobs),
      countCapHit: () => {},
    };
    const { controller, store, cloud } = rig({}, { metrics });
    const job = controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await controller.runRound();
    const first = cloud.live()[0]?.id as string;
    expect(controller.drain(first).state).toBe('draining'); // by cloud id too
    await controller.runRound('drain');
    expect(store.getInstance('inst-1')?.state).toBe('terminated');
    expect(store.getTask(`${job.id}.0`)).toMatchObject({ state: 'running', instanceId: 'inst-2' });
    expect(store.getJob(job.id)).toMatchObject({ state: 'running', migrations: 1 });
    expect(migrationsCounted).toBe(1); // Prometheus counts the move as the job record does
    expect(cloud.live().map((i) => i.id)).not.toContain(first);
    expect(cloud.live()).toHaveLength(1);
    const why = controller.why(job.id);
    expect(why[0]?.summary).toBe('moved to inst-2 (c7i.xlarge, new) because inst-1 was drained');
    expect(why[1]?.summary).toMatch(/^placed on inst-1 \(c7i\.xlarge, new\)/);
  });

  it('drains an instance a task is still on its way to: the job is placed again and the instance terminates', async () => {
    // Workers that have not registered yet: the task's start waits for its instance.
    const registered = new Set<string>();
    const tasks: TaskControl = {
      ...new CloudOnlyTaskControl(),
      name: 'registers-on-demand',
      start: async () => {},
      stop: async () => 'stopped',
      status: async () => 'running',
      workerRegistered: (inst: InstanceRecord) => registered.has(inst.id),
    };
    const { controller, store } = rig({}, { tasks });
    const job = controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await controller.runRound();
    expect(store.getTask(`${job.id}.0`)).toMatchObject({ state: 'starting', instanceId: 'inst-1' });
    controller.drain('inst-1');
    await controller.reconcile();
    // Its start could never happen there: the job is back in the queue, and nothing keeps inst-1.
    expect(store.getJob(job.id)?.state).toBe('queued');
    expect(store.listIntents({ states: ['pending'], kind: 'start-task' })).toEqual([]);
    await controller.runRound('drain');
    for (const i of liveRecords(store)) registered.add(i.id);
    await controller.reconcile();
    expect(store.getInstance('inst-1')?.state).toBe('terminated');
    expect(store.getTask(`${job.id}.0`)).toMatchObject({ state: 'running', instanceId: 'inst-2' });
    expect(store.getJob(job.id)?.state).toBe('running');
  });

  it('a plan that drops an instance whose launch keeps failing ends it, and the rounds go on', async () => {
    const { controller, store, cloud } = rig();
    cloud.throttleNextLaunches = 100;
    const job = controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await controller.runRound();
    expect(store.getInstance('inst-1')?.state).toBe('requested');
    controller.cancel(job.id);
    // The next plan has no use for it: it is ended, not drained (a requested instance cannot be).
    await controller.runRound('cancel');
    await controller.reconcile();
    expect(store.getInstance('inst-1')?.state).toBe('terminated');
    expect(store.listIntents({ states: ['pending'] })).toEqual([]);
    expect(cloud.live()).toEqual([]);
    // And the rounds after it plan as before.
    cloud.throttleNextLaunches = 0;
    const next = controller.submit(jobSpec('next', CPU_SMALL), 'research');
    await controller.runRound();
    expect(store.getTask(`${next.id}.0`)?.state).toBe('running');
  });

  it('draining an instance whose launch keeps failing ends it, and its job is planned again', async () => {
    const { controller, store, cloud } = rig();
    cloud.throttleNextLaunches = 100;
    const job = controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await controller.runRound();
    expect(store.getInstance('inst-1')?.state).toBe('requested');
    // A requested instance cannot drain: an operator's drain ends it instead of answering 409.
    expect(controller.drain('inst-1').state).toBe('terminating');
    await controller.reconcile();
    expect(store.getInstance('inst-1')?.state).toBe('terminated');
    expect(store.getJob(job.id)?.state).toBe('queued');
    cloud.throttleNextLaunches = 0;
    await controller.runRound('drained');
    expect(store.getTask(`${job.id}.0`)?.state).toBe('running');
    expect(cloud.live()).toHaveLength(1);
  });

  it('an instance EC2 will not terminate is retried each pass with one intent, and blocks nothing else', async () => {
    const { controller, store, cloud } = rig();
    const job = controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await controller.runRound();
    const stopped = cloud.live()[0]?.id as string;
    // Someone stopped it in EC2: its record is closed and its job planned elsewhere; the instance must go.
    (cloud.instances.get(stopped) as { state: string }).state = 'stopped';
    cloud.refuseTerminations = 3;
    for (let pass = 0; pass < 3; pass++) await controller.reconcile();
    const record = store.findInstanceByCloudId(stopped)?.id as string;
    expect(store.getInstance(record)?.state).toBe('terminated');
    expect(store.listIntents({ states: ['pending'], kind: 'terminate' })).toHaveLength(1);
    expect(store.listEvents({ instanceId: record, kind: 'instance.terminate-error' }).length).toBeGreaterThan(
      0,
    );
    // The passes went on meanwhile: the job runs on its new instance.
    await controller.runRound();
    expect(store.getJob(job.id)?.state).toBe('running');
    await controller.reconcile();
    expect(cloud.instances.get(stopped)?.state).toBe('terminated');
    expect(store.listIntents({ states: ['pending'], kind: 'terminate' })).toEqual([]);
  });

  it('replans the tasks of an instance that vanished from EC2 (after the grace period)', async () => {
    const { controller, store, cloud, clock } = rig({ vanishGraceSeconds: 60 });
    const job = controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await controller.runRound();
    const gone = cloud.live()[0]?.id as string;
    await cloud.terminate([gone]); // someone else terminated it
    clock.advance(61);
    await controller.runRound('period');
    expect(store.getInstance('inst-1')).toMatchObject({ state: 'terminated', reason: 'vanished from EC2' });
    expect(store.getTask(`${job.id}.0`)).toMatchObject({ state: 'running', instanceId: 'inst-2' });
    expect(cloud.live()).toHaveLength(1);
  });

  it('says a vanished instance went in its own cloud’s words (a local worker process gone)', async () => {
    const cloud = new (class extends FakeCloud {
      readonly vanishedReason = 'its worker process is gone';
    })();
    const { controller, store, clock } = rig({ vanishGraceSeconds: 60 }, { cloud });
    controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await controller.runRound();
    await cloud.terminate([cloud.live()[0]?.id as string]);
    clock.advance(61);
    await controller.runRound('period');
    expect(store.getInstance('inst-1')).toMatchObject({
      state: 'terminated',
      reason: 'its worker process is gone',
    });
  });

  it('closes a vanished instance when the cloud says it ended, not when the sync noticed, within its life', async () => {
    const { controller, store, cloud, clock } = rig({ vanishGraceSeconds: 60 });
    controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await controller.runRound();
    const launched = store.getInstance('inst-1')?.launchedAtSeconds as number;
    const gone = cloud.live()[0]?.id as string;
    await cloud.terminate([gone]);
    const ended = launched + 90;
    (cloud.instances.get(gone) as { endedAt?: Date }).endedAt = new Date(ended * 1000);
    // Noticed an hour later (a controller stopped meanwhile): billed for its 90 s, not the hour.
    clock.advance(3600);
    await controller.runRound('period');
    expect(store.getInstance('inst-1')).toMatchObject({
      state: 'terminated',
      reason: 'vanished from EC2',
      terminatedAtSeconds: ended,
    });
    expect(controller.costs().byInstance.find((l) => l.id === 'inst-1')?.billedSeconds).toBeCloseTo(90, 6);

    // A time the cloud gives outside the instance's life is kept within it: never after now, never before its launch.
    const live = store.getInstance('inst-2') as InstanceRecord;
    const now = clock.nowSeconds();
    const close = (at: number): number | undefined =>
      transitionInstance(live, 'terminated', { endedAtSeconds: at }, now).record.terminatedAtSeconds;
    expect(close(now + 600)).toBe(now);
    expect(close(0)).toBe(live.launchedAtSeconds);
    expect(live.launchedAtSeconds).toBeGreaterThan(0);
  });

  it('adopts or terminates instances of the cluster that the state does not know', async () => {
    const adopt = rig({ orphanPolicy: 'adopt' });
    const orphan = adopt.cloud.addForeign('test', 'c7i.xlarge');
    const exotic = adopt.cloud.addForeign('test', 't2.micro'); // not in the catalog: always terminated
    adopt.cloud.addForeign('another-cluster', 'c7i.xlarge');
    const job = adopt.controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await adopt.controller.recover();
    expect(adopt.store.findInstanceByCloudId(orphan)).toMatchObject({
      state: 'running',
      typeName: 'c7i.xlarge',
    });
    await adopt.controller.runRound();
    // The plan used the adopted instance instead of launching one.
    expect(adopt.cloud.calls.runInstances).toBe(0);
    expect(adopt.store.getTask(`${job.id}.0`)?.instanceId).toBe(
      adopt.store.findInstanceByCloudId(orphan)?.id,
    );
    expect(adopt.cloud.instances.get(exotic)?.state).toBe('terminated');
    expect(
      adopt.cloud
        .live()
        .map((i) => i.id)
        .sort(),
    ).toHaveLength(2); // the adopted one and the other cluster's

    const terminate = rig({ orphanPolicy: 'terminate' });
    const stray = terminate.cloud.addForeign('test', 'c7i.xlarge');
    await terminate.controller.recover();
    expect(terminate.cloud.instances.get(stray)?.state).toBe('terminated');
    expect(terminate.store.findInstanceByCloudId(stray)).toMatchObject({
      state: 'terminated',
      reason: 'orphan (policy: terminate)',
    });
  });

  it('keeps and reports an orphan under the keep policy: never used, never terminated', async () => {
    const errors: string[] = [];
    const logger = { info() {}, warn() {}, error: (message: string) => void errors.push(message) };
    const keep = rig({ orphanPolicy: 'keep' }, { logger });
    const orphan = keep.cloud.addForeign('test', 'c7i.xlarge');
    const exotic = keep.cloud.addForeign('test', 't2.micro'); // not in the catalog: kept all the same
    const job = keep.controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await keep.controller.recover();
    for (let round = 0; round < 3; round++) {
      await keep.controller.runRound('period');
      keep.clock.advance(301);
    }
    // Not recorded, not planned on (the job got an instance of its own), not terminated.
    expect(keep.store.findInstanceByCloudId(orphan)).toBeUndefined();
    expect(keep.cloud.calls.runInstances).toBe(1);
    expect(keep.store.getTask(`${job.id}.0`)?.instanceId).toBe('inst-1');
    for (const id of [orphan, exotic]) expect(keep.cloud.instances.get(id)?.state).toBe('running');
    expect(keep.controller.cluster().orphans).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ cloudId: orphan, typeName: 'c7i.xlarge', policy: 'keep' }),
        expect.objectContaining({ cloudId: exotic, typeName: 't2.micro', policy: 'keep' }),
      ]),
    );
    // Reported once each at error level, not on every pass.
    expect(errors.filter((e) => e.includes(orphan))).toHaveLength(1);
    expect(errors.find((e) => e.includes(orphan))).toMatch(/not accounted for.*--orphans adopt/);
    // Once it is gone (the operator stopped it), it is no longer reported.
    await keep.cloud.terminate([orphan]);
    await keep.controller.reconcile();
    expect(keep.controller.cluster().orphans.map((o) => o.cloudId)).toEqual([exotic]);
  });

  it('terminates a second instance of its own launch under the keep policy: no task of ours can be on it', async () => {
    const keep = rig({ orphanPolicy: 'keep' });
    keep.controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await keep.controller.runRound();
    const record = keep.store.getInstance('inst-1') as InstanceRecord;
    const twin = keep.cloud.addForeign('test', record.typeName);
    const twinRecord = keep.cloud.instances.get(twin);
    if (twinRecord === undefined) throw new Error('no twin');
    keep.cloud.instances.set(twin, {
      ...twinRecord,
      tags: { ...twinRecord.tags, [TAG_LAUNCH_TOKEN]: record.launchToken },
    });
    await keep.controller.reconcile();
    await keep.controller.reconcile();
    expect(keep.cloud.instances.get(twin)?.state).toBe('terminated');
    expect(keep.store.findInstanceByCloudId(twin)?.reason).toMatch(/a second instance of a launch of ours/);
    expect(keep.controller.cluster().orphans).toEqual([]);
  });

  it('adopts under the keep policy an instance launched under the store id a restored state had before', async () => {
    const keep = rig({ orphanPolicy: 'keep' });
    recordPreviousStoreId(keep.store, 'old-box');
    const ours = keep.cloud.addForeign('test', 'c7i.xlarge');
    const foreign = keep.cloud.addForeign('test', 'c7i.xlarge');
    const tagged = keep.cloud.instances.get(ours);
    if (tagged === undefined) throw new Error('no instance');
    keep.cloud.instances.set(ours, {
      ...tagged,
      tags: { ...tagged.tags, [TAG_LAUNCH_TOKEN]: 'old-box-inst-7' },
    });
    await keep.controller.reconcile();
    expect(keep.store.findInstanceByCloudId(ours)?.state).toBe('running');
    expect(keep.store.findInstanceByCloudId(foreign)).toBeUndefined();
    expect(keep.controller.cluster().orphans.map((o) => o.cloudId)).toEqual([foreign]);
  });

  it('keeps a plan within the instance cap and explains who waits', async () => {
    const { controller, cloud } = rig({ caps: { maxInstances: 1 } });
    const a = controller.submit(jobSpec('gpu-a', { p3: [1, 8, 61] }), 'research');
    const b = controller.submit(jobSpec('cpu-b', { c7i: [0, 32, 64] }), 'research');
    await controller.runRound();
    expect(cloud.live()).toHaveLength(1);
    // The queue layer admits one job under the cap (its reservation-price instance); the other waits at the head
    // of the queue, and the round record says so.
    const waiting = [a, b].map((j) => controller.why(j.id)[0]?.summary ?? '');
    expect(
      waiting.filter(
        (s) => s === 'kept waiting: admitting it now would break maxInstances (position 1 in its queue)',
      ),
    ).toHaveLength(1);
  });

  it('refuses a plan that breaks a hard cap, whatever scheduler made it, and counts cap hits', async () => {
    const rogue: Scheduler = {
      name: 'rogue',
      observe() {},
      plan(snapshot) {
        // One instance per task plus a spare, ignoring the cap of one instance.
        return {
          configuration: {
            instances: [
              ...snapshot.tasks.map((t, i) => ({
                id: `new-${i + 1}`,
                typeName: 'c7i.xlarge',
                isNew: true,
                taskIds: [t.id],
              })),
              { id: 'new-spare', typeName: 'c7i.xlarge', isNew: true, taskIds: [] },
            ],
          },
          decision: {
            scheduler: 'rogue',
            nowSeconds: snapshot.nowSeconds,
            candidates: [],
            chosen: 'baseline',
            reason: 'x',
            waiting: [],
            pinned: [],
          },
        };
      },
    };
    const hits: string[] = [];
    const metrics = {
      observeRound: () => {},
      countMigrations: () => {},
      countCapHit: (cap: string) => void hits.push(cap),
    };
    const { controller, store, cloud } = rig({ caps: { maxInstances: 1 } }, { scheduler: rogue, metrics });
    controller.submit(jobSpec('a', CPU_SMALL), 'research');
    controller.submit(jobSpec('b', CPU_SMALL), 'research');
    const outcome = await controller.runRound();
    expect(outcome.notApplied).toBe('plan breaks a cap: maxInstances: 2 instances over the cap of 1');
    expect(cloud.calls.runInstances).toBe(0);
    expect(store.listInstances()).toEqual([]);
    expect(store.listEvents({ kind: 'round.rejected' })).toHaveLength(1);
    // Job b waits in the queue for the cap, and the plan is refused for it: each counted under the cap's name.
    expect(hits).toEqual(['maxInstances', 'maxInstances']);
  });

  it('counts a job no cap admits each round, on an idle cluster too, where nothing is planned', async () => {
    const hits: string[] = [];
    const metrics = {
      observeRound: () => {},
      countMigrations: () => {},
      countCapHit: (cap: string) => void hits.push(cap),
    };
    const { controller, store } = rig({ caps: { maxCostPerHour: 1 } }, { metrics });
    controller.submit(jobSpec('gpu', GPU_ONE), 'research');
    for (let round = 0; round < 2; round++) {
      const outcome = await controller.runRound();
      expect(outcome.actions).toEqual([]);
    }
    // No instance and no job admitted: the rounds planned nothing and recorded no decision, and still kept it waiting.
    expect(store.latestRound()).toBeUndefined();
    expect(hits).toEqual(['maxCostPerHour', 'maxCostPerHour']);
  });

  it('saves the scheduler state after each round and loads it in a new controller', async () => {
    const first = rig();
    first.controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await first.controller.runRound();
    const saved = first.store.getValue(SCHEDULER_STATE_KEY) as { knownJobs: string[] };
    expect(saved.knownJobs).toEqual(['job-1']);
    const second = rig({}, { store: first.store, cloud: first.cloud, clock: first.clock });
    await second.controller.recover();
    expect((second.controller.scheduler.exportState?.() as { knownJobs: string[] }).knownJobs).toEqual([
      'job-1',
    ]);
    const round = await second.controller.runRound();
    expect(round.actions).toEqual([]);
  });

  it('saves no scheduler state when told not to (a controller never started again on its store)', async () => {
    const { controller, store } = rig({}, { saveSchedulerState: false });
    controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await controller.runRound();
    expect(store.getValue(SCHEDULER_STATE_KEY)).toBeUndefined();
    // It still learned: only the saving is skipped.
    expect((controller.scheduler.exportState?.() as { knownJobs: string[] }).knownJobs).toEqual(['job-1']);
  });

  it('runs the loop: a submission wakes it for an early round, and stop ends it', async () => {
    const { controller, cloud, clock } = rig({ roundSeconds: 300, pollSeconds: 15, minRoundGapSeconds: 0 });
    await controller.start();
    await waitFor(() => clock.pendingSleeps > 0);
    controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await waitFor(() => cloud.calls.runInstances === 1);
    expect(cloud.live()).toHaveLength(1);
    await controller.stop();
  });
});

describe('a job that ends before it starts', () => {
  it('ends its tasks that were never placed (stopped), whether cancelled queued or failed for a dependency', async () => {
    const { controller, store } = rig({ dryRun: true });
    const first = controller.submit(jobSpec('first', CPU_SMALL), 'research');
    const waiting = controller.submit({ ...jobSpec('waits', CPU_SMALL), dependsOn: [first.id] }, 'research');
    expect(store.getTask(`${first.id}.0`)?.state).toBe('pending');
    controller.cancel(first.id);
    expect(store.getJob(first.id)?.state).toBe('cancelled');
    expect(store.getTask(`${first.id}.0`)?.state).toBe('stopped');
    // Its dependent can never start now: it fails before the next round's plan, and its task ends with it.
    await controller.runRound('dependency ended');
    expect(store.getJob(waiting.id)?.state).toBe('failed');
    expect(store.getTask(`${waiting.id}.0`)?.state).toBe('stopped');
  });
});
