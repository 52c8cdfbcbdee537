import { describe, expect, it } from 'vitest';
import { setupSeconds } from '../../src/core/catalog.js';
import type { Resources } from '../../src/core/resources.js';
import type { QueueCaps } from '../../src/queue/caps.js';
import { FIFO_CONFIG, type WfqConfig } from '../../src/queue/wfq.js';
import { BetweenRoundsPlacer } from '../../src/controller/between-rounds-placement.js';
import type { BetweenRoundsStart } from '../../src/controller/reconcile/plan-intents.js';
import { whyJob } from '../../src/controller/explain.js';
import { silentLogger } from '../../src/controller/seams.js';
import type { ControllerSettings } from '../../src/controller/settings.js';
import type { StateStore } from '../../src/controller/state-store.js';
import { catalog, GPU_ONE, jobSpec, liveRecords, rig, waitFor, type Rig } from './controller-fixtures.js';

/** Six of a c7i.2xlarge's eight vCPUs: Eva's cheapest host for it leaves [0, 2, 4] free. */
const CPU_SIX = { c7i: [0, 6, 12] as Resources };
/** One vCPU: its reservation price is a c7i.large's ($0.08925/h); its share of a c7i.2xlarge is half that. */
const CPU_ONE = { c7i: [0, 1, 2] as Resources };

/** One instance at most: a round admits the CPU job, and the GPU job waits for the cap. */
const caps: QueueCaps = { maxInstances: 1 };

/**
 * A controller whose last round kept a job out for the caps, with one running c7i.2xlarge holding a 6-vCPU task;
 * `place` is its placement-between-rounds switch.
 */
async function cappedCluster(
  place: boolean,
  options: { bind?: boolean; boot?: boolean; settings?: Partial<ControllerSettings> } = {},
) {
  const r = rig({
    caps,
    placeBetweenRounds: place,
    bindBetweenRounds: options.bind ?? place,
    ...options.settings,
  });
  r.cloud.bootInstantly = options.boot ?? true;
  const big = r.controller.submit(jobSpec('six', CPU_SIX), 'research');
  r.clock.advance(1);
  const gpu = r.controller.submit(jobSpec('gpu', GPU_ONE), 'research');
  const outcome = await r.controller.runRound('test');
  expect(outcome.queue?.result.admitted).toEqual([big.id]);
  expect(outcome.queue?.result.queued.map((q) => q.jobId)).toEqual([gpu.id]);
  await r.controller.reconcile();
  const [host] = liveRecords(r.store);
  expect(host?.typeName).toBe('c7i.2xlarge');
  expect(r.store.getJob(big.id)?.state).toBe(options.boot === false ? 'starting' : 'running');
  return { ...r, hostId: host?.id as string, gpu };
}

/** `cappedCluster` with its loop running: rounds only by period (300 s), passes woken by submissions, parked. */
async function runningCappedCluster() {
  const r = await cappedCluster(true, {
    settings: { earlyRounds: false, roundSeconds: 300, pollSeconds: 1000 },
  });
  await r.controller.start();
  await waitFor(() => r.clock.pendingSleeps > 0);
  return r;
}

/** Counts the store's snapshot reads from now on (the one read of the live jobs' tasks, snapshot.ts). */
function countSnapshotReads(store: StateStore): { placementReads: () => number } {
  let reads = 0;
  const listTasks = store.listTasks.bind(store);
  store.listTasks = (filter) => {
    if (filter?.jobStates !== undefined) reads += 1;
    return listTasks(filter);
  };
  return { placementReads: () => reads };
}

describe('controller: placement between rounds on paid capacity', () => {
  it('places a job that fits on paid room at its submission, in a pass that is not a round', async () => {
    const { controller, store, clock, cloud, hostId, gpu } = await cappedCluster(true);
    const roundsBefore = store.listRounds().length;
    const launchesBefore = cloud.calls.launch;
    clock.advance(5);
    const small = controller.submit(jobSpec('one', CPU_ONE), 'research');
    await controller.reconcile();

    const [task] = store.listTasks({ jobId: small.id });
    expect(task?.instanceId).toBe(hostId);
    expect(['starting', 'running']).toContain(task?.state);
    expect(store.getJob(small.id)?.state).not.toBe('queued');
    const [placed] = store.listEvents({ jobId: small.id, kind: 'job.placed-between-rounds' });
    expect(placed?.message).toContain(`on paid capacity (${hostId})`);
    // No round ran, nothing was launched, and the job the cap holds back still waits.
    expect(store.listRounds()).toHaveLength(roundsBefore);
    expect(cloud.calls.launch).toBe(launchesBefore);
    expect(liveRecords(store)).toHaveLength(1);
    expect(store.getJob(gpu.id)?.state).toBe('queued');

    // The next round sees it placed where it is: no move, still one instance.
    clock.advance(5);
    await controller.runRound('after');
    expect(store.listTasks({ jobId: small.id })[0]?.instanceId).toBe(hostId);
    expect(liveRecords(store)).toHaveLength(1);
    // `why` credits the placement to where it happened, and that round with keeping it.
    const [kept] = whyJob(store, small.id);
    expect(kept?.summary).toMatch(
      new RegExp(
        `^placed between rounds on paid capacity \\(${hostId}\\); kept there by this round \\(placed on ${hostId} `,
      ),
    );
  });

  it('keeps no room for a job that never fits the caps: the job behind it is placed', async () => {
    const { controller, store, clock, hostId } = await cappedCluster(true);
    clock.advance(5);
    // Two 128-vCPU tasks: two instances alone under a cap of one, and no type holds both (256 vCPUs), so no round
    // admits it; neither fits the host's free [0, 2, 4]. Ahead of the small job in the queue, it must not hold the
    // host's room for itself.
    const wide = controller.submit(
      jobSpec('wide', { c7i: [0, 128, 256] as Resources }, { replicas: 2 }),
      'research',
    );
    clock.advance(1);
    const small = controller.submit(jobSpec('one', CPU_ONE), 'research');
    await controller.reconcile();
    expect(store.listTasks({ jobId: small.id })[0]?.instanceId).toBe(hostId);
    expect(store.getJob(wide.id)?.state).toBe('queued');
    expect(store.listEvents({ jobId: wide.id, kind: 'job.placed-between-rounds' })).toEqual([]);
  });

  it("places no job over its class's maxShare, though the paid room would take it", async () => {
    // Two classes by team; 'capped' may hold at most half the capped capacity (one instance of two). Its job 'six'
    // holds that half, so its second job waits for a round, and the other team's job takes the room.
    const queue: WfqConfig = {
      classifyBy: 'team',
      classes: [
        { id: 'capped', weight: 1, teams: ['research'], ordering: 'fifo', maxShare: 0.5 },
        { id: 'rest', weight: 1, ordering: 'fifo' },
      ],
      preemption: { ...FIFO_CONFIG.preemption, enabled: false },
    };
    const r = rig({ caps: { maxInstances: 2 }, queue, placeBetweenRounds: true, bindBetweenRounds: true });
    r.cloud.bootInstantly = true;
    const six = r.controller.submit(jobSpec('six', CPU_SIX), 'research');
    r.clock.advance(1);
    // Two GPU jobs of the other team: one is admitted beside 'six', the other waits for the cap.
    r.controller.submit(jobSpec('gpu-a', GPU_ONE, { team: 'vision' }), 'vision');
    r.clock.advance(1);
    const held = r.controller.submit(jobSpec('gpu-b', GPU_ONE, { team: 'vision' }), 'vision');
    await r.controller.runRound('test');
    await r.controller.reconcile();
    expect(r.store.getJob(held.id)?.state).toBe('queued');
    const host = r.store.listTasks({ jobId: six.id })[0]?.instanceId as string;
    r.clock.advance(5);
    const over = r.controller.submit(jobSpec('one', CPU_ONE), 'research');
    r.clock.advance(1);
    const other = r.controller.submit(jobSpec('one-v', CPU_ONE, { team: 'vision' }), 'vision');
    await r.controller.reconcile();
    expect(r.store.listTasks({ jobId: over.id })[0]?.instanceId).toBeUndefined();
    expect(r.store.getJob(over.id)?.state).toBe('queued');
    expect(r.store.listTasks({ jobId: other.id })[0]?.instanceId).toBe(host);
  });

  it('places a held-back job on the room a job leaves when it ends, with no round and no launch (digest E2)', async () => {
    const { controller, store, clock, cloud, hostId } = await cappedCluster(true);
    const roundsBefore = store.listRounds().length;
    const launchesBefore = cloud.calls.launch;
    clock.advance(5);
    // Six vCPUs do not fit next to the six already there: it waits.
    const next = controller.submit(jobSpec('six-b', CPU_SIX), 'research');
    await controller.reconcile();
    expect(store.getJob(next.id)?.state).toBe('queued');
    // The job on the host ends (here by a cancel): its room goes to the waiting job at once.
    const occupant = store.listTasks({ instanceId: hostId })[0]?.jobId as string;
    clock.advance(5);
    controller.cancel(occupant);
    await controller.reconcile();
    await controller.reconcile();
    expect(store.listTasks({ jobId: next.id })[0]?.instanceId).toBe(hostId);
    expect(store.listEvents({ jobId: next.id, kind: 'job.placed-between-rounds' })).toHaveLength(1);
    expect(store.listRounds()).toHaveLength(roundsBefore);
    expect(cloud.calls.launch).toBe(launchesBefore);
  });

  it('places a burst of submissions by one pass a second after the last, not one read of the store each', async () => {
    const { controller, store, clock, hostId } = await cappedCluster(true);
    clock.advance(5);
    const first = controller.submit(jobSpec('one-a', CPU_ONE), 'research');
    await controller.reconcile();
    expect(store.listTasks({ jobId: first.id })[0]?.instanceId).toBe(hostId);
    // Within the second after that pass: asked for, not yet run.
    clock.advance(0.5);
    const second = controller.submit(jobSpec('one-b', CPU_ONE), 'research');
    const reads = countSnapshotReads(store);
    await controller.reconcile();
    expect(store.getJob(second.id)?.state).toBe('queued');
    expect(reads.placementReads()).toBe(0);
    // A second after the last pass it runs, and places what came meanwhile.
    clock.advance(0.5);
    await controller.reconcile();
    expect(store.listTasks({ jobId: second.id })[0]?.instanceId).toBe(hostId);
    expect(reads.placementReads()).toBe(1);
  });

  it('a round places what was asked for at once, however soon after the last pass', async () => {
    const { controller, store, clock, hostId } = await cappedCluster(true);
    clock.advance(5);
    const first = controller.submit(jobSpec('one-a', CPU_ONE), 'research');
    await controller.reconcile();
    clock.advance(0.5);
    const second = controller.submit(jobSpec('one-b', CPU_ONE), 'research');
    const outcome = await controller.runRound('test');
    for (const job of [first, second]) expect(store.listTasks({ jobId: job.id })[0]?.instanceId).toBe(hostId);
    expect(store.listEvents({ jobId: second.id, kind: 'job.placed-between-rounds' })).toHaveLength(1);
    expect(outcome.queue?.result.admitted ?? []).not.toContain(second.id);
  });

  it('places nothing when switched off: the job waits for the next round', async () => {
    const { controller, store, clock } = await cappedCluster(false);
    clock.advance(5);
    const small = controller.submit(jobSpec('one', CPU_ONE), 'research');
    await controller.reconcile();
    expect(store.listTasks({ jobId: small.id })[0]?.instanceId).toBeUndefined();
    expect(store.getJob(small.id)?.state).toBe('queued');
    expect(store.listEvents({ kind: 'job.placed-between-rounds' })).toHaveLength(0);
  });

  it('places nothing while no cap holds a job back (the next round packs it with the others)', async () => {
    const { controller, store, clock } = rig({ placeBetweenRounds: true });
    controller.submit(jobSpec('six', CPU_SIX), 'research');
    await controller.runRound('test');
    await controller.reconcile();
    clock.advance(5);
    const small = controller.submit(jobSpec('one', CPU_ONE), 'research');
    await controller.reconcile();
    expect(store.getJob(small.id)?.state).toBe('queued');
    expect(store.listEvents({ kind: 'job.placed-between-rounds' })).toHaveLength(0);
  });

  it('does not place a task where its share of the instance costs more than it is worth there', async () => {
    const { controller, store, clock } = await cappedCluster(true);
    clock.advance(5);
    // Two vCPUs and 4 GiB fill the free corner exactly, but at the co-location rate next to the 6-vCPU task its
    // reservation-priced work no longer pays for a quarter of a c7i.2xlarge.
    const two = controller.submit(jobSpec('two', { c7i: [0, 2, 4] as Resources }), 'research');
    await controller.reconcile();
    expect(store.getJob(two.id)?.state).toBe('queued');
  });

  it('binds to an instance still coming up when it is ready before a launch made now would be (digest E2)', async () => {
    const { controller, store, clock, cloud, hostId } = await cappedCluster(true, { boot: false });
    expect(store.getInstance(hostId)?.state).toBe('launching');
    clock.advance(30);
    const small = controller.submit(jobSpec('one', CPU_ONE), 'research');
    await controller.reconcile();
    // The c7i.2xlarge is ready 156 s after its launch (126 s from now); a c7i.large launched now, in 170 s.
    expect(store.listTasks({ jobId: small.id })[0]?.instanceId).toBe(hostId);
    const [placed] = store.listEvents({ jobId: small.id, kind: 'job.placed-between-rounds' });
    expect(placed?.message).toContain('still coming up');
    expect(placed?.data).toMatchObject({ bindChoice: { choice: 'bind', instanceId: hostId } });
    expect(cloud.calls.launch).toBe(1);
  });

  it('without binding, an instance still coming up is not a slot', async () => {
    const { controller, store, clock } = await cappedCluster(true, { boot: false, bind: false });
    clock.advance(30);
    const small = controller.submit(jobSpec('one', CPU_ONE), 'research');
    await controller.reconcile();
    expect(store.getJob(small.id)?.state).toBe('queued');
  });

  it('in the running loop, a submission wakes a pass that places it, with no round (early rounds off)', async () => {
    const { controller, store, hostId } = await runningCappedCluster();
    const rounds = store.listRounds().length;
    const small = controller.submit(jobSpec('one', CPU_ONE), 'research');
    await waitFor(() => store.listTasks({ jobId: small.id })[0]?.instanceId === hostId);
    expect(store.listRounds()).toHaveLength(rounds);
    await controller.stop();
  });

  it('in the running loop, submissions within a second of the last pass wake it once and are placed when the second is up', async () => {
    const { controller, store, clock, hostId } = await runningCappedCluster();
    const first = controller.submit(jobSpec('one-a', CPU_ONE), 'research');
    await waitFor(() => store.listTasks({ jobId: first.id })[0]?.instanceId === hostId);
    const placedAt = clock.nowSeconds();
    clock.advance(0.5);
    const second = controller.submit(jobSpec('one-b', CPU_ONE), 'research');
    // The loop sleeps until a second after the pass that placed the first, not longer and not spinning.
    await waitFor(() => clock.nextWakeSeconds() === placedAt + 1);
    const reads = countSnapshotReads(store);
    let passes = 0;
    const reconcile = controller.reconcile.bind(controller);
    controller.reconcile = () => {
      passes += 1;
      return reconcile();
    };
    const third = controller.submit(jobSpec('one-c', CPU_ONE), 'research');
    await new Promise((resolve) => setTimeout(resolve, 50));
    // A pass is asked for already: the third submission does not wake the loop.
    expect(passes).toBe(0);
    expect(clock.nextWakeSeconds()).toBe(placedAt + 1);
    expect(reads.placementReads()).toBe(0);
    expect(store.getJob(second.id)?.state).toBe('queued');
    clock.advance(0.5);
    await waitFor(() => store.listTasks({ jobId: second.id })[0]?.instanceId === hostId);
    expect(reads.placementReads()).toBe(1);
    // One pass placed what came meanwhile in the queue's order: the paid room ([0, 2, 4] free) held two one-vCPU tasks.
    expect(store.listTasks({ jobId: third.id })[0]?.instanceId).toBeUndefined();
    expect(store.getJob(third.id)?.state).toBe('queued');
    await controller.stop();
  });

  it('a pass that fails is not tried again at once, though the placement asked for is due', async () => {
    const { controller, store, clock, cloud } = await runningCappedCluster();
    let lists = 0;
    cloud.list = () => {
      lists += 1;
      return Promise.reject(new Error('the cloud is down'));
    };
    const small = controller.submit(jobSpec('one', CPU_ONE), 'research');
    await waitFor(() => lists > 0 && clock.pendingSleeps > 0);
    await new Promise((resolve) => setTimeout(resolve, 50));
    // One failed pass, then a second's wait: not a pass per turn of the event loop.
    expect(lists).toBe(1);
    expect(clock.nextWakeSeconds()).toBe(clock.nowSeconds() + 1);
    expect(store.getJob(small.id)?.state).toBe('queued');
    expect(store.listEvents({ kind: 'controller.error' }).length).toBeGreaterThan(0);
    await controller.stop();
  });

  describe('onto a running instance whose worker has not registered', () => {
    /** A placer over the rig's store, its workers registered when the store has their token, as workers do. */
    function placerFor(r: Rig, bind: boolean, applied: BetweenRoundsStart[]): BetweenRoundsPlacer {
      const placer = new BetweenRoundsPlacer({
        store: r.store,
        clock: r.clock,
        catalog: () => catalog,
        admission: r.controller.admission,
        scheduler: () => r.controller.scheduler,
        bind,
        workerRegistered: (i) => i.workerTokenHash !== undefined,
        apply: (jobs) => applied.push(...jobs),
        log: silentLogger,
      });
      placer.noteRound(true);
      return placer;
    }

    it('without binding, is not a slot until its worker registers', async () => {
      // No placer of the controller's own: only the one under test places.
      const r = await cappedCluster(false);
      const { controller, store, clock, hostId } = r;
      expect(store.getInstance(hostId)?.state).toBe('running');
      const applied: BetweenRoundsStart[] = [];
      const placer = placerFor(r, false, applied);
      clock.advance(5);
      const small = controller.submit(jobSpec('one', CPU_ONE), 'research');
      placer.request();
      expect(placer.placeIfRequested(true)).toEqual([]);
      store.setWorkerToken(hostId, 'worker-token-between-rounds-0123456789abcdef');
      placer.request();
      expect(placer.placeIfRequested(true)).toEqual([small.id]);
      expect(applied[0]?.starts).toEqual([{ taskId: `${small.id}.0`, instanceId: hostId }]);
      expect(applied[0]?.message).toContain('on paid capacity');
    });

    it('with binding, is bound to as an instance still coming up, with its bind-or-launch figures', async () => {
      const r = await cappedCluster(false);
      const { controller, store, clock, hostId } = r;
      const applied: BetweenRoundsStart[] = [];
      const placer = placerFor(r, true, applied);
      clock.advance(5);
      const small = controller.submit(jobSpec('one', CPU_ONE), 'research');
      placer.request();
      expect(placer.placeIfRequested(true)).toEqual([small.id]);
      expect(applied[0]?.message).toContain('still coming up');
      // Expected ready when its worker registers: the type's worker start and registration after it was running.
      const type = catalog.types.find((t) => t.name === store.getInstance(hostId)?.typeName)!;
      const registers =
        (store.getInstance(hostId)?.runningAtSeconds as number) +
        type.delays.workerStartSeconds +
        type.delays.workerRegisterSeconds;
      expect(applied[0]?.data).toMatchObject({
        bindChoice: { choice: 'bind', instanceId: hostId },
        expectedStartSeconds: registers,
      });
    });

    it('an instance still launching past its expected setup is no slot, with binding or without', async () => {
      for (const bind of [false, true]) {
        const r = await cappedCluster(false, { boot: false });
        const { controller, store, clock, hostId } = r;
        const record = store.getInstance(hostId)!;
        expect(record.state).toBe('launching');
        const type = catalog.types.find((t) => t.name === record.typeName)!;
        const applied: BetweenRoundsStart[] = [];
        const placer = placerFor(r, bind, applied);
        clock.advance(setupSeconds(type) + 60);
        controller.submit(jobSpec('one', CPU_ONE), 'research');
        placer.request();
        expect(placer.placeIfRequested(true)).toEqual([]);
        expect(applied).toEqual([]);
      }
    });

    it('with binding, is no slot once its worker is later than expected (it may never come)', async () => {
      const r = await cappedCluster(false);
      const { controller, store, clock, hostId } = r;
      const applied: BetweenRoundsStart[] = [];
      const placer = placerFor(r, true, applied);
      const type = catalog.types.find((t) => t.name === store.getInstance(hostId)?.typeName)!;
      const registers =
        (store.getInstance(hostId)?.runningAtSeconds as number) +
        type.delays.workerStartSeconds +
        type.delays.workerRegisterSeconds;
      clock.advance(registers - clock.nowSeconds() + 1);
      controller.submit(jobSpec('one', CPU_ONE), 'research');
      placer.request();
      expect(placer.placeIfRequested(true)).toEqual([]);
      expect(applied).toEqual([]);
    });
  });
});
