import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { describeQueue } from '../../src/queue/admission-views.js';
import { planCapViolations } from '../../src/round/plan-caps.js';
import { readQueueRecord } from '../../src/controller/queue-records.js';
import type { StateStore } from '../../src/controller/state-store.js';
import { InjectedCrash, type FaultInjector } from '../../src/controller/faults.js';
import type { QueueCaps } from '../../src/queue/caps.js';
import type { Resources } from '../../src/core/resources.js';
import { singleClassConfig, type WfqConfig } from '../../src/queue/wfq.js';
import type { Scheduler } from '../../src/scheduler/types.js';
import { catalog, CPU_SMALL, GPU_ONE, jobSpec, liveRecords, rig } from './controller-fixtures.js';

/** vCPUs and GPUs of the live instances, per AWS quota group. */
function groupUse(store: StateStore): { standard: number; p: number } {
  const types = new Map(catalog.types.map((t) => [t.name, t]));
  let standard = 0;
  let p = 0;
  for (const i of liveRecords(store)) {
    const t = types.get(i.typeName);
    if (t === undefined) continue;
    if (t.family.startsWith('p')) p += t.capacity[0];
    else standard += t.capacity[1];
  }
  return { standard, p };
}

describe('controller queue layer: admission under caps', () => {
  it('keeps the plan within a vCPU quota and queues the rest in FIFO order, saying why', async () => {
    const caps: QueueCaps = { quotas: [{ group: 'standard', maxVcpus: 8 }] };
    const { controller, store, clock } = rig({ caps });
    const jobs = ['a', 'b', 'c', 'd'].map((name) => {
      clock.advance(1);
      return controller.submit(jobSpec(name, CPU_SMALL), 'research'); // 4 vCPUs each
    });
    const outcome = await controller.runRound('test');
    expect(outcome.queue?.result.admitted).toEqual([jobs[0]?.id, jobs[1]?.id]);
    expect(groupUse(store).standard).toBeLessThanOrEqual(8);
    expect(store.getJob(jobs[0]?.id as string)?.state).toBe('running');
    expect(store.getJob(jobs[1]?.id as string)?.state).toBe('running');
    for (const [i, job] of [jobs[2], jobs[3]].entries()) {
      expect(store.getJob(job?.id as string)?.state).toBe('queued');
      const view = readQueueRecord(store, job?.id as string)?.queue;
      expect(view).toMatchObject({ classId: 'all', status: 'waiting', position: i + 1, reason: 'caps' });
      expect(view?.detail).toContain(i === 0 ? 'quota standard maxVcpus' : '1 job(s) ahead');
    }
    expect(readQueueRecord(store, jobs[0]?.id as string)?.queue).toMatchObject({ status: 'admitted' });
    // The round record says why they were not placed (fleetwise why).
    const why = controller.why(jobs[2]?.id as string);
    expect(why[0]?.summary).toBe(
      'kept waiting: admitting it now would break quota standard maxVcpus (position 1 in its queue)',
    );

    // A job ends: the head of the queue is admitted at the next round, the other moves up.
    controller.cancel(jobs[0]?.id as string);
    await controller.runRound('cancel');
    expect(store.getJob(jobs[2]?.id as string)?.state).toBe('running');
    expect(readQueueRecord(store, jobs[3]?.id as string)?.queue).toMatchObject({
      status: 'waiting',
      position: 1,
    });
    expect(groupUse(store).standard).toBeLessThanOrEqual(8);
  });

  it('orders waiting jobs by the configured ordering (srpt: shortest declared work first)', async () => {
    const caps: QueueCaps = { maxInstances: 1 };
    const queue: WfqConfig = singleClassConfig('srpt', { srptAgingPerSecond: 0 });
    const { controller, store, clock } = rig({ caps, queue });
    const long = controller.submit(jobSpec('long', GPU_ONE, { expectedDurationSeconds: 36_000 }), 'research');
    clock.advance(1);
    const mid = controller.submit(jobSpec('mid', GPU_ONE, { expectedDurationSeconds: 7200 }), 'research');
    clock.advance(1);
    const short = controller.submit(jobSpec('short', GPU_ONE, { expectedDurationSeconds: 600 }), 'research');
    const outcome = await controller.runRound('test');
    expect(outcome.queue?.result.admitted).toEqual([short.id]);
    expect(liveRecords(store)).toHaveLength(1);
    expect(readQueueRecord(store, mid.id)?.queue).toMatchObject({ position: 1, reason: 'caps' });
    expect(readQueueRecord(store, long.id)?.queue).toMatchObject({ position: 2, reason: 'caps' });
  });

  it('success-rank serves the lowest expected size over P(success) first', async () => {
    const caps: QueueCaps = { maxInstances: 1 };
    const { controller, store, clock } = rig({ caps, queue: singleClassConfig('success-rank') });
    const blocker = controller.submit(
      jobSpec('blocker', GPU_ONE, { expectedDurationSeconds: 60 }),
      'research',
    );
    await controller.runRound('blocker');
    expect(store.getJob(blocker.id)?.state).toBe('running');
    clock.advance(1);
    // Short but unlikely to succeed: rank 600 / 0.1 = 6000.
    const risky = controller.submit(
      {
        ...jobSpec('risky', GPU_ONE, { expectedDurationSeconds: 600 }),
        success: { kind: 'success', successProbability: 0.1, expectedSizeSeconds: 600 },
      },
      'research',
    );
    clock.advance(1);
    // Longer but sure: rank 3000 / 1 = 3000 (srpt would serve risky first).
    const sure = controller.submit(
      {
        ...jobSpec('sure', GPU_ONE, { expectedDurationSeconds: 3000 }),
        success: { kind: 'success', successProbability: 1, expectedSizeSeconds: 3000 },
      },
      'research',
    );
    clock.advance(1);
    // Two stages: 1000 s then 4000 s, continuing with probability 0.25 → rank (0.75·1000 + 0.25·5000) / 0.25 = 8000.
    const staged = controller.submit(
      {
        ...jobSpec('staged', GPU_ONE, { expectedDurationSeconds: 5000 }),
        success: { kind: 'stages', stageSeconds: [1000, 4000], continueProbabilities: [0.25] },
      },
      'research',
    );
    await controller.runRound('queued');
    expect(readQueueRecord(store, sure.id)?.queue).toMatchObject({ position: 1 });
    expect(readQueueRecord(store, risky.id)?.queue).toMatchObject({ position: 2 });
    expect(readQueueRecord(store, staged.id)?.queue).toMatchObject({ position: 3 });
    // The blocker ends: the head (sure) is admitted, not the shortest.
    controller.cancel(blocker.id);
    const next = await controller.runRound('cancel');
    expect(next.queue?.result.admitted).toEqual([sure.id]);
  });

  it('shares the capped capacity between team classes by weight and lets an idle class’s share flow', async () => {
    const queue: WfqConfig = {
      classifyBy: 'team',
      classes: [
        { id: 'vision', weight: 1, teams: ['vision'], ordering: 'fifo' },
        { id: 'rest', weight: 1, ordering: 'fifo' },
      ],
      preemption: { enabled: false, marginShare: 0.05, minShortRounds: 2 },
    };
    const { controller, store, clock } = rig({
      caps: { quotas: [{ group: 'standard', maxVcpus: 16 }] },
      queue,
    });
    const research = ['r1', 'r2', 'r3', 'r4'].map((n) => {
      clock.advance(1);
      return controller.submit(jobSpec(n, CPU_SMALL), 'research');
    });
    clock.advance(1);
    const vision = ['v1', 'v2'].map((n) =>
      controller.submit(jobSpec(n, CPU_SMALL, { team: 'vision' }), 'vision'),
    );
    const first = await controller.runRound('test');
    // Each class is guaranteed half of 16 vCPUs: two research jobs and two vision jobs, although research came first.
    expect(new Set(first.queue?.result.admitted)).toEqual(
      new Set([research[0]?.id, research[1]?.id, vision[0]?.id, vision[1]?.id]),
    );
    expect(readQueueRecord(store, research[2]?.id as string)?.queue).toMatchObject({
      classId: 'rest',
      status: 'waiting',
      position: 1,
    });
    // Vision's jobs end: its share flows to the busy class.
    for (const v of vision) controller.cancel(v.id);
    const second = await controller.runRound('cancel');
    expect(second.queue?.result.admitted).toEqual([research[2]?.id, research[3]?.id]);
    expect(groupUse(store).standard).toBeLessThanOrEqual(16);
  });

  it('preempts the most recently admitted job of a class over its share when another class reclaims its guarantee', async () => {
    const teams = (enabled: boolean): WfqConfig => ({
      classifyBy: 'team',
      classes: [
        { id: 'vision', weight: 1, teams: ['vision'], ordering: 'fifo' },
        { id: 'rest', weight: 1, ordering: 'fifo' },
      ],
      preemption: { enabled, marginShare: 0.05, minShortRounds: 2 },
    });
    const scenario = async (enabled: boolean) => {
      const r = rig({ caps: { quotas: [{ group: 'standard', maxVcpus: 8 }] }, queue: teams(enabled) });
      const research = ['r1', 'r2'].map((n) => {
        r.clock.advance(1);
        return r.controller.submit(jobSpec(n, CPU_SMALL), 'research');
      });
      await r.controller.runRound('research'); // vision is idle: its share flows to research
      expect(research.map((j) => r.store.getJob(j.id)?.state)).toEqual(['running', 'running']);
      r.clock.advance(600);
      const vision = r.controller.submit(jobSpec('v1', CPU_SMALL, { team: 'vision' }), 'vision');
      for (let i = 0; i < 4; i++) {
        r.clock.advance(300);
        await r.controller.runRound('period');
      }
      return { ...r, research, vision };
    };

    const on = await scenario(true);
    // Hysteresis: short at two consecutive rounds, then r2 (admitted last) is checkpointed back to the queue.
    expect(on.store.listEvents({ kind: 'queue.preempted' }).map((e) => e.jobId)).toEqual([
      on.research[1]?.id,
    ]);
    expect(on.store.getJob(on.vision.id)?.state).toBe('running');
    expect(on.store.getJob(on.research[0]?.id as string)?.state).toBe('running');
    const r2 = on.store.getJob(on.research[1]?.id as string);
    expect(r2).toMatchObject({ state: 'queued', migrations: 1 });
    expect(readQueueRecord(on.store, r2?.id as string)?.queue).toMatchObject({
      classId: 'rest',
      status: 'waiting',
      reason: 'class-share',
    });
    expect(groupUse(on.store).standard).toBeLessThanOrEqual(8);

    const off = await scenario(false);
    expect(off.store.listEvents({ kind: 'queue.preempted' })).toEqual([]);
    expect(off.store.getJob(off.vision.id)?.state).toBe('queued');
    expect(readQueueRecord(off.store, off.vision.id)?.queue).toMatchObject({
      classId: 'vision',
      position: 1,
    });
  });

  it('records a preemption in the transaction of the plan that makes it: a crash after commit loses no event', async () => {
    const queue: WfqConfig = {
      classifyBy: 'team',
      classes: [
        { id: 'vision', weight: 1, teams: ['vision'], ordering: 'fifo' },
        { id: 'rest', weight: 1, ordering: 'fifo' },
      ],
      preemption: { enabled: true, marginShare: 0.05, minShortRounds: 2 },
    };
    let r2Id = '';
    let crashedWith: string | undefined;
    let armed = false;
    // Crashes right after the commit of the round that sends r2, running, back to the queue.
    const faults: FaultInjector = {
      hit(point) {
        if (!armed || point !== 'round:committed' || crashedWith !== undefined) return;
        const state = r.store.getJob(r2Id)?.state;
        if (state === undefined || state === 'running') return;
        crashedWith = state;
        throw new InjectedCrash(point);
      },
    };
    const r = rig({ caps: { quotas: [{ group: 'standard', maxVcpus: 8 }] }, queue }, { faults });
    const research = ['r1', 'r2'].map((n) => {
      r.clock.advance(1);
      return r.controller.submit(jobSpec(n, CPU_SMALL), 'research');
    });
    r2Id = research[1]?.id as string;
    await r.controller.runRound('research');
    expect(r.store.getJob(r2Id)?.state).toBe('running');
    armed = true;
    r.clock.advance(600);
    r.controller.submit(jobSpec('v1', CPU_SMALL, { team: 'vision' }), 'vision');
    for (let i = 0; i < 4 && crashedWith === undefined; i++) {
      r.clock.advance(300);
      try {
        await r.controller.runRound('period');
      } catch (e) {
        if (!(e instanceof InjectedCrash)) throw e;
      }
    }
    expect(crashedWith, 'a round preempted r2').toBeDefined();
    // The plan that checkpoints r2 back to the queue and the event saying so committed together.
    expect(r.store.listEvents({ kind: 'queue.preempted' }).map((e) => e.jobId)).toEqual([r2Id]);
  });

  it('marks a job that can never fit the caps, and never plans it', async () => {
    const { controller, store } = rig({ caps: { quotas: [{ group: 'p', maxGpus: 0 }] } });
    const gpu = controller.submit(jobSpec('gpu', GPU_ONE), 'research');
    const cpu = controller.submit(jobSpec('cpu', CPU_SMALL), 'research');
    await controller.runRound('test');
    expect(store.getJob(gpu.id)?.state).toBe('queued');
    expect(store.getJob(cpu.id)?.state).toBe('running');
    const view = readQueueRecord(store, gpu.id)?.queue;
    expect(view).toMatchObject({ status: 'waiting', reason: 'never-fits' });
    expect(view?.detail).toContain('quota p maxGpus');
  });

  it('holds a team class to its maxShare even with the other class idle, and says so for a job over it', async () => {
    const queue: WfqConfig = {
      classifyBy: 'team',
      classes: [
        { id: 'vision', weight: 1, teams: ['vision'], ordering: 'fifo', maxShare: 0.25 },
        { id: 'rest', weight: 1, ordering: 'fifo' },
      ],
      preemption: { enabled: true, marginShare: 0.05, minShortRounds: 2 },
    };
    const { controller, store, clock } = rig({
      caps: { quotas: [{ group: 'standard', maxVcpus: 16 }] },
      queue,
    });
    const small = ['v1', 'v2'].map((n) => {
      clock.advance(1);
      return controller.submit(jobSpec(n, CPU_SMALL, { team: 'vision' }), 'vision');
    });
    const big = controller.submit(jobSpec('v3', { c7i: [0, 8, 16] }, { team: 'vision' }), 'vision');
    await controller.runRound('test');
    // 4 of 16 vCPUs = the class's 25%: one job runs, the next waits for the class share, the 8-vCPU one never can.
    expect(small.map((j) => store.getJob(j.id)?.state)).toEqual(['running', 'queued']);
    expect(readQueueRecord(store, small[1]?.id as string)?.queue).toMatchObject({ reason: 'class-share' });
    const view = readQueueRecord(store, big.id)?.queue;
    expect(view).toMatchObject({ status: 'waiting', reason: 'never-fits' });
    expect(view?.detail).toBe(
      "it can never run in class vision: it needs 50.0% of the capped capacity, over the class's maxShare of 25.0%",
    );
    expect(describeQueue(queue, {})).toContain('vision (vision) (weight 1, fifo, at most 25.0%)');
  });

  it('refuses a plan whose instances break a quota (the safety rail under admission)', async () => {
    // A scheduler that ignores admission's footprints and puts a small CPU job on a GPU instance.
    const greedy: Scheduler = {
      name: 'greedy',
      observe() {},
      plan(snapshot) {
        return {
          configuration: {
            instances: [
              { id: 'new-1', typeName: 'p3.2xlarge', isNew: true, taskIds: snapshot.tasks.map((t) => t.id) },
            ],
          },
          decision: {
            scheduler: 'greedy',
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
    const { controller, store, cloud } = rig(
      { caps: { quotas: [{ group: 'p', maxGpus: 0 }] } },
      { scheduler: greedy },
    );
    controller.submit(jobSpec('cpu', { any: [0, 4, 8] }), 'research');
    const outcome = await controller.runRound('test');
    expect(outcome.notApplied).toContain('quota p maxGpus');
    expect(cloud.calls.runInstances).toBe(0);
    expect(store.listEvents({ kind: 'round.rejected' })).toHaveLength(1);
  });

  it('never lets the plan exceed $/hour, instance and quota caps, whatever is submitted (property)', async () => {
    const demands: Record<string, Resources>[] = [
      CPU_SMALL,
      GPU_ONE,
      { any: [0, 2, 4] },
      { c7i: [0, 8, 16] },
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: demands.length - 1 }), { minLength: 1, maxLength: 8 }),
        fc.record({
          maxCostPerHour: fc.option(fc.double({ min: 0.5, max: 8, noNaN: true }), { nil: undefined }),
          maxInstances: fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined }),
          standardVcpus: fc.option(fc.integer({ min: 4, max: 32 }), { nil: undefined }),
          pGpus: fc.option(fc.integer({ min: 0, max: 2 }), { nil: undefined }),
        }),
        async (picks, c) => {
          const quotas = [
            ...(c.standardVcpus === undefined ? [] : [{ group: 'standard', maxVcpus: c.standardVcpus }]),
            ...(c.pGpus === undefined ? [] : [{ group: 'p', maxGpus: c.pGpus }]),
          ];
          const caps: QueueCaps = {
            ...(c.maxCostPerHour === undefined ? {} : { maxCostPerHour: c.maxCostPerHour }),
            ...(c.maxInstances === undefined ? {} : { maxInstances: c.maxInstances }),
            quotas,
          };
          const { controller, store, clock } = rig({ caps });
          const ids = picks.map((k, i) => {
            clock.advance(1);
            return controller.submit(jobSpec(`j${i}`, demands[k] as Record<string, Resources>), 'research')
              .id;
          });
          for (let round = 0; round < 3; round++) {
            await controller.runRound('prop');
            const configuration = {
              instances: liveRecords(store).map((i) => ({
                id: i.id,
                typeName: i.typeName,
                isNew: false,
                taskIds: [],
              })),
            };
            expect(planCapViolations(configuration, catalog, caps)).toEqual([]);
            // Every live job is either admitted or queued with a position and a reason.
            for (const id of ids) {
              const view = readQueueRecord(store, id)?.queue;
              if (store.getJob(id)?.state === 'queued' && view?.status === 'waiting')
                expect(view.reason).not.toBeNull();
            }
            clock.advance(600);
          }
        },
      ),
      { numRuns: 25 },
    );
  });
});
