import { describe, expect, it } from 'vitest';
import { completionText, predictionErrorText } from '../../src/cli/commands/job.js';
import type { PredictFn } from '../../src/controller/eta-predictions.js';
import { capsOf } from '../../src/controller/settings.js';
import { controllerWorld } from '../../src/controller/eta-world.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { readQueueRecord } from '../../src/controller/queue-records.js';
import type { TaskControl, TaskStartRequest, TaskStatus } from '../../src/controller/seams.js';
import { launchedOnSpot } from '../../src/controller/instance-market.js';
import { readSnapshotInputs } from '../../src/controller/snapshot.js';
import type { TaskRecord } from '../../src/controller/state-store.js';
import type { ManualClock } from '../../src/controller/clock.js';
import { spotOffering } from '../../src/core/spot.js';
import { predictCompletions } from '../../src/predict/predict.js';
import { schedulerCaps } from '../../src/round/plan-caps.js';
import { FIFO_CONFIG } from '../../src/queue/wfq.js';
import {
  catalog,
  CPU_SMALL,
  FakeCloud,
  GPU_ONE,
  jobSpec,
  liveRecords,
  MEM_BIG,
  rig,
  ScriptedExits,
  type Rig,
} from './controller-fixtures.js';

/** Tasks succeed once they have run their job's declared duration (the world follows the model). */
class TimedTaskControl implements TaskControl {
  readonly name = 'timed';
  private readonly started = new Map<string, { at: number; seconds: number }>();
  constructor(private readonly clock: ManualClock) {}
  async start(r: TaskStartRequest): Promise<void> {
    this.started.set(r.task.id, {
      at: this.clock.nowSeconds(),
      seconds: r.job.spec.expectedDurationSeconds ?? 1e9,
    });
  }
  async stop(): Promise<'stopped'> {
    return 'stopped';
  }
  async status(task: TaskRecord): Promise<TaskStatus> {
    const s = this.started.get(task.id);
    return s !== undefined && this.clock.nowSeconds() >= s.at + s.seconds ? 'succeeded' : 'running';
  }
}

/** A stand-in for the simulator: every job starts at the world's first round and ends `seconds` later, in order. */
function stubPredict(calls: { n: number }): PredictFn {
  return ({ world }) => {
    calls.n += 1;
    const round = world.events.find((e) => e.kind === 'round')?.timeSeconds ?? world.nowSeconds;
    let at = round;
    return new Map(
      world.jobs.map((j) => {
        const remaining = (j.spec.totalIterations - j.completedIterations) / j.spec.fullThroughput;
        const start = j.startSeconds ?? at;
        at = Math.max(at, start) + remaining;
        return [j.spec.id, { startSeconds: start, endSeconds: at }];
      }),
    );
  };
}

describe('controller completion-time predictions', () => {
  it('predicts after a submission, off its path; keeps that prediction, updates the ETA each round only when something changed, and measures the error', async () => {
    const calls = { n: 0 };
    const base = rig();
    const control = new TimedTaskControl(base.clock);
    const { controller, store, clock } = rig(
      {},
      { clock: base.clock, tasks: control, predict: stubPredict(calls) },
    );
    const t0 = clock.nowSeconds();
    const a = controller.submit(jobSpec('a', CPU_SMALL, { expectedDurationSeconds: 3600 }), 'research');
    // The submission returned before any prediction ran.
    expect(calls.n).toBe(0);
    expect(readQueueRecord(store, a.id)?.eta).toBeUndefined();
    await controller.predictionsSettled();
    expect(calls.n).toBe(1);
    const first = readQueueRecord(store, a.id);
    expect(first?.eta).toMatchObject({ computedAtSeconds: t0, completionSeconds: t0 + 3600 });
    expect(first?.submissionEta?.completionSeconds).toBe(t0 + 3600);
    expect(first?.submissionEta?.basis).toMatch(/^at submission: /);

    await controller.runRound('submitted');
    await controller.predictionsSettled();
    expect(calls.n).toBe(1); // the round saw the world the submission's prediction covered
    clock.advance(60);
    await controller.runRound('period');
    await controller.predictionsSettled();
    expect(calls.n).toBe(2); // the job was placed and started: the cluster changed
    clock.advance(60);
    await controller.runRound('period');
    await controller.predictionsSettled();
    expect(calls.n).toBe(2); // nothing changed: the last prediction stands

    clock.advance(30);
    const b = controller.submit(jobSpec('b', CPU_SMALL, { expectedDurationSeconds: 600 }), 'research');
    await controller.predictionsSettled();
    expect(calls.n).toBe(3);
    // The submission prediction of a stays what it was.
    expect(readQueueRecord(store, a.id)?.submissionEta?.completionSeconds).toBe(t0 + 3600);
    expect(readQueueRecord(store, b.id)?.submissionEta).toBeDefined();

    clock.advance(3600);
    await controller.reconcile();
    expect(store.getJob(a.id)?.state).toBe('succeeded');
    const ended = readQueueRecord(store, a.id);
    const finished = store.getJob(a.id)?.finishedAtSeconds as number;
    expect(ended?.predictionError).toMatchObject({
      predictedCompletionSeconds: t0 + 3600,
      actualCompletionSeconds: finished,
      errorSeconds: finished - (t0 + 3600),
    });
    expect(ended?.predictionError?.errorPercent).toBeCloseTo((100 * (finished - t0 - 3600)) / 3600, 6);
    expect(store.listEvents({ kind: 'job.prediction-error', jobId: a.id })).toHaveLength(1);
  });

  it('gives no ETA to a job without a declared duration, and says why', async () => {
    const { controller, store } = rig({}, { predict: stubPredict({ n: 0 }) });
    const job = controller.submit(jobSpec('unknown', CPU_SMALL), 'research');
    await controller.predictionsSettled();
    const eta = readQueueRecord(store, job.id)?.eta;
    expect(eta?.completionSeconds).toBeNull();
    expect(eta?.basis).toContain('no expectedDurationSeconds');
  });

  it('says why a job gets no ETA when its prediction fails, keeps ETAs it had, and turns off with predict: false', async () => {
    let fail = true;
    const failing: PredictFn = (input) => {
      if (fail) throw new Error('boom');
      return stubPredict({ n: 0 })(input);
    };
    const r = rig({}, { predict: failing });
    const job = r.controller.submit(jobSpec('a', CPU_SMALL, { expectedDurationSeconds: 60 }), 'research');
    await r.controller.runRound();
    await r.controller.predictionsSettled();
    expect(r.store.getJob(job.id)?.state).toBe('running');
    expect(readQueueRecord(r.store, job.id)?.eta).toMatchObject({
      completionSeconds: null,
      basis: 'no ETA: the prediction failed (boom)',
    });
    fail = false;
    r.clock.advance(10);
    r.controller.submit(jobSpec('b', CPU_SMALL, { expectedDurationSeconds: 60 }), 'research');
    await r.controller.predictionsSettled();
    const predicted = readQueueRecord(r.store, job.id)?.eta;
    expect(predicted?.completionSeconds).not.toBeNull();
    fail = true;
    r.clock.advance(10);
    r.controller.submit(jobSpec('c', CPU_SMALL, { expectedDurationSeconds: 60 }), 'research');
    await r.controller.predictionsSettled();
    expect(readQueueRecord(r.store, job.id)?.eta).toEqual(predicted);

    const off = rig({}, { predict: false });
    const other = off.controller.submit(jobSpec('b', CPU_SMALL, { expectedDurationSeconds: 60 }), 'research');
    await off.controller.runRound();
    await off.controller.predictionsSettled();
    expect(off.controller.predictionsEnabled).toBe(false);
    expect(readQueueRecord(off.store, other.id)?.eta).toBeUndefined();
  });
});

describe('the controller state as a simulator world', () => {
  it('maps booting and running instances, starting, running and queued jobs, with delays as event times', async () => {
    const cloud = new FakeCloud();
    cloud.bootInstantly = false;
    const { controller, store, clock } = rig({ caps: { maxInstances: 2 } }, { cloud, predict: false });
    const gpu = controller.submit(
      {
        ...jobSpec('gpu', GPU_ONE, { expectedDurationSeconds: 7200 }),
        checkpoint: { signal: 'SIGTERM', timeoutSeconds: 60, restoreDelaySeconds: 30, initDelaySeconds: 20 },
      },
      'research',
    );
    const cpu = controller.submit(jobSpec('cpu', CPU_SMALL, { expectedDurationSeconds: 600 }), 'research');
    const queued = controller.submit(
      jobSpec('later', CPU_SMALL, { expectedDurationSeconds: 600 }),
      'research',
    );
    const now0 = clock.nowSeconds();
    await controller.runRound();
    const inputs = readSnapshotInputs(store, clock.nowSeconds());
    const { world, assumedDuration } = controllerWorld(inputs, {
      catalog,
      firstRoundSeconds: now0 + 300,
    });
    expect(assumedDuration.size).toBe(0);
    expect(world.nowSeconds).toBe(now0);
    expect(world.instances.map((i) => i.lifecycle)).toEqual(['instantiating', 'instantiating']);
    const p3 = catalog.types.find((t) => t.name === 'p3.2xlarge');
    expect(world.events).toContainEqual({
      kind: 'instantiated',
      timeSeconds: now0 + (p3?.delays.instantiateSeconds ?? NaN),
      instanceId: store.listTasks({ jobId: gpu.id })[0]?.instanceId,
    });
    expect(world.events[0]).toEqual({ kind: 'round', timeSeconds: now0 + 300 });
    const byId = new Map(world.jobs.map((j) => [j.spec.id, j]));
    // Starting on a booting instance: launching there, pinned (migrating).
    expect(byId.get(gpu.id)).toMatchObject({ status: 'migrating', completedIterations: 0 });
    expect(byId.get(gpu.id)?.tasks[0]).toMatchObject({ state: 'launching' });
    expect(byId.get(gpu.id)?.spec).toMatchObject({ durationSeconds: 7200, initDelaySeconds: 20 });
    expect(byId.get(gpu.id)?.spec.tasks[0]).toMatchObject({ fetchDelaySeconds: 30, uploadDelaySeconds: 30 });
    expect(byId.get(queued.id)).toMatchObject({ status: 'queued' });
    expect(byId.get(queued.id)?.tasks[0]).toEqual({ name: 'main', state: 'queued' });
    // The world's tasks carry the controller's workload keys: what the scheduler learned under.
    expect(byId.get(cpu.id)?.spec.tasks[0]?.key).toBe(store.listTasks({ jobId: cpu.id })[0]?.workloadKey);

    // Instances up, tasks running for 100 s: executing, active after the init delay, progress counted from then.
    cloud.bootAll();
    await controller.reconcile();
    clock.advance(100);
    const later = controllerWorld(readSnapshotInputs(store, clock.nowSeconds()), {
      catalog,
      firstRoundSeconds: clock.nowSeconds(),
    });
    const gpuJob = later.world.jobs.find((j) => j.spec.id === gpu.id);
    expect(gpuJob).toMatchObject({ status: 'executing', active: true, activeSinceSeconds: now0 + 20 });
    expect(gpuJob?.completedIterations).toBeCloseTo(80, 6);
    // A running instance within its worker start + register delays is still registering.
    expect(later.world.instances.every((i) => i.lifecycle !== 'instantiating')).toBe(true);
  });
});

describe('controller predictions with the simulator (src/predict/predict.ts)', () => {
  it('counts launch, worker, restore and init delays before the declared duration', async () => {
    const { controller, store, clock } = rig();
    const t0 = clock.nowSeconds();
    const job = controller.submit(
      {
        ...jobSpec('one', CPU_SMALL, { expectedDurationSeconds: 3600 }),
        checkpoint: { signal: 'SIGTERM', timeoutSeconds: 60, restoreDelaySeconds: 30, initDelaySeconds: 20 },
      },
      'research',
    );
    await controller.predictionsSettled();
    const eta = readQueueRecord(store, job.id)?.eta;
    const c7i = catalog.types.find((t) => t.name === 'c7i.xlarge');
    const d = c7i?.delays;
    expect(d).toBeDefined();
    const boot =
      (d?.instantiateSeconds ?? 0) + (d?.workerStartSeconds ?? 0) + (d?.workerRegisterSeconds ?? 0);
    // The first simulated round is the submission's early round; the instance boots, the task restores and
    // initializes, then runs its declared hour at full speed (alone: no interference).
    expect(eta?.startSeconds).toBeCloseTo(t0 + boot + 30 + 20, 6);
    expect(eta?.completionSeconds).toBeCloseTo(t0 + boot + 30 + 20 + 3600, 6);
    expect(eta?.basis).toMatch(/^simulated \d+ round\(s\) ahead with eva/);
    expect(eta?.basis).toContain('no future arrivals');
  });

  it('predicts with a baseline scheduler too (karpenter keeps no state to fork: it is rebuilt from its recipe)', async () => {
    const { controller, store, clock } = rig(
      {},
      { schedulerRecipe: { kind: 'registered', name: 'karpenter', options: {} } },
    );
    const job = controller.submit(jobSpec('one', CPU_SMALL, { expectedDurationSeconds: 3600 }), 'research');
    await controller.predictionsSettled();
    const eta = readQueueRecord(store, job.id)?.eta;
    expect(eta?.completionSeconds as number).toBeGreaterThanOrEqual(clock.nowSeconds() + 3600);
    expect(eta?.basis).toMatch(/^simulated \d+ round\(s\) ahead with karpenter/);
  });

  it('estimates a dry-run submission in its own lane, storing nothing', async () => {
    const { controller, store, clock } = rig({ caps: { quotas: [{ group: 'standard', maxVcpus: 4 }] } });
    controller.submit(jobSpec('first', CPU_SMALL, { expectedDurationSeconds: 3600 }), 'research');
    await controller.runRound('submitted');
    const eta = await controller.estimate(jobSpec('what-if', CPU_SMALL, { expectedDurationSeconds: 600 }));
    // Behind the first job under the quota: it would start once that one ends, an hour from now.
    expect(eta?.startSeconds as number).toBeGreaterThanOrEqual(clock.nowSeconds() + 3600);
    expect(eta?.completionSeconds as number).toBeGreaterThanOrEqual(clock.nowSeconds() + 3600 + 600);
    expect(eta?.basis).toMatch(/^simulated \d+ round\(s\) ahead with eva/);
    expect(store.listJobs()).toHaveLength(1);
    await controller.stop();
    expect(await controller.estimate(jobSpec('after-stop', CPU_SMALL))).toBeNull();
  });

  it('queues the prediction behind the caps: the second job starts after the first ends', async () => {
    const { controller, store } = rig({ caps: { quotas: [{ group: 'standard', maxVcpus: 4 }] } });
    const first = controller.submit(
      jobSpec('first', CPU_SMALL, { expectedDurationSeconds: 3600 }),
      'research',
    );
    const second = controller.submit(
      jobSpec('second', CPU_SMALL, { expectedDurationSeconds: 1800 }),
      'research',
    );
    await controller.runRound('submitted');
    await controller.predictionsSettled();
    const a = readQueueRecord(store, first.id)?.eta;
    const b = readQueueRecord(store, second.id)?.eta;
    expect(a?.completionSeconds).not.toBeNull();
    expect(b?.startSeconds as number).toBeGreaterThanOrEqual(a?.completionSeconds as number);
    expect(b?.completionSeconds as number).toBeGreaterThanOrEqual((a?.completionSeconds as number) + 1800);
    expect(b?.basis).toContain('0 job(s) ahead in class all');
  });

  it('measures the submission prediction’s error when the job ends (the fake cloud boots at once)', async () => {
    const base = rig();
    const control = new TimedTaskControl(base.clock);
    const { controller, store, clock } = rig({}, { clock: base.clock, tasks: control });
    const job = controller.submit(jobSpec('timed', CPU_SMALL, { expectedDurationSeconds: 3600 }), 'research');
    await controller.predictionsSettled();
    await controller.runRound('submitted');
    for (let i = 0; i < 14 && store.getJob(job.id)?.state !== 'succeeded'; i++) {
      clock.advance(300);
      await controller.runRound('period');
    }
    const error = readQueueRecord(store, job.id)?.predictionError;
    expect(store.getJob(job.id)?.state).toBe('succeeded');
    // The prediction counts ~3 min of instance boot the in-memory cloud skips; rounds add up to 5 min.
    expect(error?.errorPercent).not.toBeNull();
    expect(error?.errorPercent as number).toBeLessThan(15);
  });
});

/** The first task of each job ends after a minute; the others run on (a gang whose tasks end apart). */
class FirstTaskEndsEarly implements TaskControl {
  readonly name = 'first-ends-early';
  private readonly started = new Map<string, number>();
  constructor(private readonly clock: ManualClock) {}
  async start(r: TaskStartRequest): Promise<void> {
    this.started.set(r.task.id, this.clock.nowSeconds());
  }
  async stop(): Promise<'stopped'> {
    return 'stopped';
  }
  async status(task: TaskRecord): Promise<TaskStatus> {
    const at = this.started.get(task.id);
    return task.index === 0 && at !== undefined && this.clock.nowSeconds() >= at + 60
      ? 'succeeded'
      : 'running';
  }
}

describe('controller predictions while a job’s tasks end apart', () => {
  it('predicts with a task already done: the job keeps its ETA and the jobs behind it get theirs', async () => {
    const base = rig();
    const { controller, store, clock } = rig(
      {},
      { clock: base.clock, tasks: new FirstTaskEndsEarly(base.clock) },
    );
    const gang = controller.submit(
      jobSpec('gang', CPU_SMALL, { expectedDurationSeconds: 3600, replicas: 2 }),
      'research',
    );
    await controller.runRound('submitted');
    await controller.reconcile();
    clock.advance(120);
    await controller.reconcile();
    const tasks = store.listTasks({ jobId: gang.id });
    expect(tasks.map((t) => t.state).sort()).toEqual(['running', 'succeeded']);
    expect(store.getJob(gang.id)?.state).toBe('running');
    // A submission behind it asks for a prediction of the world with the finished task in it.
    const next = controller.submit(jobSpec('next', CPU_SMALL, { expectedDurationSeconds: 600 }), 'research');
    await controller.runRound('submitted');
    await controller.predictionsSettled();
    const eta = readQueueRecord(store, next.id)?.eta;
    expect(eta?.completionSeconds).not.toBeNull();
    expect(eta?.completionSeconds).toBeDefined();
    expect(readQueueRecord(store, gang.id)?.eta?.completionSeconds).toBeDefined();
  });
});

/** Tasks run until told otherwise and report no progress. */
class RunsOn implements TaskControl {
  readonly name = 'runs-on';
  async start(): Promise<void> {}
  async stop(): Promise<'stopped'> {
    return 'stopped';
  }
  async status(): Promise<TaskStatus> {
    return 'running';
  }
}

describe('controller predictions of a job past its declared duration', () => {
  it('give it no ETA (not "now", every round again) and ask for no new prediction while nothing changes', async () => {
    const { controller, store, clock } = rig({}, { tasks: new RunsOn() });
    const job = controller.submit(jobSpec('long', CPU_SMALL, { expectedDurationSeconds: 600 }), 'research');
    await controller.runRound('submitted');
    await controller.reconcile();
    await controller.predictionsSettled();
    expect(readQueueRecord(store, job.id)?.eta?.completionSeconds).toBeGreaterThan(clock.nowSeconds());
    // Past its 600 s, still running: a change (a round after its start) asks for a prediction of it.
    clock.advance(900);
    await controller.reconcile();
    await controller.runRound('period');
    await controller.predictionsSettled();
    const eta = readQueueRecord(store, job.id)?.eta;
    expect(eta?.completionSeconds).toBeNull();
    expect(eta?.basis).toMatch(/^no ETA: it has run past its declared expectedDurationSeconds \(600 s\)/);
    // Rounds later, nothing changed: no new prediction (its ETA was not due).
    for (let i = 0; i < 3; i += 1) {
      clock.advance(300);
      await controller.runRound('period');
      await controller.predictionsSettled();
    }
    expect(readQueueRecord(store, job.id)?.eta?.computedAtSeconds).toBe(eta?.computedAtSeconds);
  });
});

function after(spec: JobSpec, ...dependsOn: string[]): JobSpec {
  return { ...spec, dependsOn };
}

/** Rounds and reconcile passes, 10 s apart, until `done` or 40 passes. */
async function passes(r: Rig, done: () => boolean): Promise<void> {
  for (let pass = 0; pass < 40 && !done(); pass++) {
    await r.controller.runRound('test');
    await r.controller.reconcile();
    r.clock.advance(10);
  }
}

describe('controller predictions of jobs held for a job whose end is unknown', () => {
  it('give them no ETA, through a chain too, and keep no submission prediction or error of them', async () => {
    const ids = ['job-1.0', 'job-2.0', 'job-3.0'];
    const r = rig({}, { tasks: new ScriptedExits(new Map(ids.map((id) => [id, [0]]))) });
    const unsized = r.controller.submit(jobSpec('unsized', CPU_SMALL), 'research');
    const sized = (name: string) => jobSpec(name, CPU_SMALL, { expectedDurationSeconds: 60 });
    const step = r.controller.submit(after(sized('step'), unsized.id), 'research');
    const next = r.controller.submit(after(sized('next'), step.id), 'research');
    await r.controller.predictionsSettled();
    const record = (id: string) => readQueueRecord(r.store, id);
    // Not an end built on the day the unsized job is assumed to run.
    expect(record(step.id)?.eta).toMatchObject({ startSeconds: null, completionSeconds: null });
    expect(record(step.id)?.eta?.basis).toMatch(
      new RegExp(
        `^no ETA: it waits for ${unsized.id}, whose end is unknown \\(no expectedDurationSeconds\\); held until ${unsized.id} succeeds`,
      ),
    );
    expect(record(next.id)?.eta?.completionSeconds).toBeNull();
    expect(record(next.id)?.eta?.basis).toMatch(
      new RegExp(`^no ETA: it waits for ${step.id}, which waits for ${unsized.id}, whose end is unknown`),
    );
    expect(record(step.id)?.submissionEta?.completionSeconds).toBeNull();

    // All three end long before a day is out: no error is measured against a prediction that was never made.
    await passes(r, () => r.store.getJob(next.id)?.state === 'succeeded');
    for (const id of [step.id, next.id]) {
      expect(r.store.getJob(id)?.state).toBe('succeeded');
      expect(record(id)?.predictionError).toBeUndefined();
      expect(r.store.listEvents({ kind: 'job.prediction-error', jobId: id })).toHaveLength(0);
    }
  });

  it('give none to a job held for one that has run past its declared duration', async () => {
    const { controller, store, clock } = rig({}, { tasks: new RunsOn() });
    const long = controller.submit(jobSpec('long', CPU_SMALL, { expectedDurationSeconds: 600 }), 'research');
    await controller.runRound('submitted');
    await controller.reconcile();
    clock.advance(900);
    const held = controller.submit(
      after(jobSpec('after', CPU_SMALL, { expectedDurationSeconds: 60 }), long.id),
      'research',
    );
    await controller.predictionsSettled();
    const eta = readQueueRecord(store, held.id)?.eta;
    expect(eta?.completionSeconds).toBeNull();
    expect(eta?.basis).toMatch(
      new RegExp(
        `^no ETA: it waits for ${long.id}, whose end is unknown \\(it has run past its expectedDurationSeconds and reports no progress\\)`,
      ),
    );
  });
});

describe('controller predictions of jobs the caps can never admit', () => {
  it('answer "never" without simulating them, leave them and the jobs held for them out of the world, and say so at a dry run', async () => {
    const seen: { jobs: string[]; targets: string[] }[] = [];
    const spy: PredictFn = (input) => {
      seen.push({ jobs: input.world.jobs.map((j) => j.spec.id), targets: [...(input.jobIds ?? [])] });
      return predictCompletions(input);
    };
    // A c7i.xlarge ($0.18/h) fits the $0.5/h cap; an r7i.2xlarge ($0.53/h), the cheapest host of MEM_BIG, never does.
    const { controller, store } = rig({ caps: { maxCostPerHour: 0.5 } }, { predict: spy });
    const small = controller.submit(
      jobSpec('small', CPU_SMALL, { expectedDurationSeconds: 600 }),
      'research',
    );
    const huge = controller.submit(jobSpec('huge', MEM_BIG, { expectedDurationSeconds: 600 }), 'research');
    const held = controller.submit(
      after(jobSpec('held', CPU_SMALL, { expectedDurationSeconds: 60 }), huge.id),
      'research',
    );
    await controller.runRound('submitted');
    await controller.predictionsSettled();
    expect(seen.length).toBeGreaterThan(0);
    for (const run of seen) {
      expect(run.jobs).toEqual([small.id]);
      expect(run.targets).toEqual([small.id]);
    }
    const eta = (id: string) => readQueueRecord(store, id)?.eta;
    expect(eta(small.id)?.completionSeconds).toEqual(expect.any(Number));
    expect(eta(huge.id)).toMatchObject({ startSeconds: null, completionSeconds: null });
    expect(eta(huge.id)?.completesAfterSeconds).toBeUndefined();
    expect(eta(huge.id)?.basis).toMatch(
      /^never under the caps: alone it needs \$0\.53\/h, over the \$0\.5\/h cap; /,
    );
    expect(eta(held.id)?.basis).toMatch(
      new RegExp(
        `^never under the caps: it waits for ${huge.id}, which alone needs \\$0\\.53/h, over the \\$0\\.5/h cap; `,
      ),
    );
    expect(completionText(eta(huge.id) ?? { completionSeconds: 0, computedAtSeconds: 0 })).toBe('never');

    // A dry run of such a job runs no simulation at all.
    const runs = seen.length;
    const dry = await controller.estimate(jobSpec('what-if', MEM_BIG, { expectedDurationSeconds: 60 }));
    expect(dry?.basis).toMatch(/^never under the caps: alone it needs \$0\.53\/h, over the \$0\.5\/h cap/);
    expect(completionText(dry ?? { completionSeconds: 0, computedAtSeconds: 0 })).toBe('never');
    expect(seen).toHaveLength(runs);
  });

  it('answer "never" under plan-cost admission for a job whose cheapest host alone is over the $ cap', async () => {
    // A c7i.2xlarge ($0.357/h) is the cheapest host of [0, 8, 12]: alone it is over the $0.15/h cap, packed or not, and
    // the catalog's spot pools do not help a controller that buys no spot (the local provider's, this rig's).
    const { controller, store } = rig({ caps: { maxCostPerHour: 0.15 }, admitBy: 'plan-cost' });
    const big = controller.submit(
      jobSpec('big', { c7i: [0, 8, 12] }, { expectedDurationSeconds: 600 }),
      'research',
    );
    await controller.runRound('submitted');
    await controller.predictionsSettled();
    const eta = readQueueRecord(store, big.id)?.eta;
    expect(eta?.basis).toMatch(/^never under the caps: alone it needs \$0\.36\/h, over the \$0\.15\/h cap; /);
    expect(completionText(eta ?? { completionSeconds: 0, computedAtSeconds: 0 })).toBe('never');
    const dry = await controller.estimate(
      jobSpec('what-if', { c7i: [0, 8, 12] }, { expectedDurationSeconds: 60 }),
    );
    expect(completionText(dry ?? { completionSeconds: 0, computedAtSeconds: 0 })).toBe('never');
  });

  it('judge a job that may go on spot at spot prices only where the admission buys spot', async () => {
    // [0, 8, 12] alone: a c7i.2xlarge, $0.357/h on demand, about $0.17/h on spot; the cap is $0.2/h.
    const { controller, store, clock } = rig({ caps: { maxCostPerHour: 0.2 } });
    const allowed = controller.submit(
      jobSpec('allowed', { c7i: [0, 8, 12] }, { expectedDurationSeconds: 600 }),
      'research',
    );
    const refuses = controller.submit(
      { ...jobSpec('refuses', { c7i: [0, 8, 12] }, { expectedDurationSeconds: 600 }), spot: 'never' },
      'research',
    );
    const inputs = readSnapshotInputs(store, clock.nowSeconds());
    const neverAdmitted = (spot: boolean) =>
      [
        ...controllerWorld(inputs, {
          catalog,
          firstRoundSeconds: clock.nowSeconds(),
          admission: { caps: { maxCostPerHour: 0.2 }, admitBy: 'plan-cost', config: FIFO_CONFIG, spot },
        }).neverAdmitted.keys(),
      ].sort();
    expect(neverAdmitted(false)).toEqual([allowed.id, refuses.id].sort());
    expect(neverAdmitted(true)).toEqual([refuses.id]);
  });

  it('price a running spot instance at its pool under a $ cap: the jobs that fit on spot run side by side', async () => {
    // c7i.large: $0.08925/h on demand, about $0.04/h on spot; both jobs fit under $0.15/h only with the spot one
    // priced at its pool. Priced on demand, the prediction would run them one after the other (or stop the first).
    const caps = { maxCostPerHour: 0.15 };
    const { controller, store, clock } = rig(
      { caps },
      {
        spotMarket: true,
        schedulerRecipe: { kind: 'eva', options: { caps: schedulerCaps(caps), spot: true } },
      },
    );
    const onSpot = controller.submit(
      { ...jobSpec('spot', { c7i: [0, 2, 4] }, { expectedDurationSeconds: 36_000 }), spot: 'preferred' },
      'research',
    );
    await controller.runRound('submitted');
    const [instance] = liveRecords(store);
    expect(instance?.typeName).toBe('c7i.large');
    expect(launchedOnSpot(store, instance?.id ?? '')).toBe(true);
    const inputs = readSnapshotInputs(store, clock.nowSeconds());
    const world = controllerWorld(inputs, { catalog, firstRoundSeconds: clock.nowSeconds() }).world;
    expect(world.instances).toEqual([
      expect.objectContaining({
        market: 'spot',
        placement: { zone: instance?.availabilityZone },
        pricePerHour: spotOffering(catalog.spot, 'c7i.large', instance?.availabilityZone)?.pricePerHour,
      }),
    ]);
    const onDemand = controller.submit(
      { ...jobSpec('on-demand', { c7i: [0, 2, 4] }, { expectedDurationSeconds: 36_000 }), spot: 'never' },
      'research',
    );
    await controller.runRound('submitted');
    await controller.predictionsSettled();
    const first = readQueueRecord(store, onSpot.id)?.eta;
    const second = readQueueRecord(store, onDemand.id)?.eta;
    const now = clock.nowSeconds();
    // Its declared duration from when it started (no more than launch and start delays later), not twice that.
    expect(first?.completionSeconds as number).toBeLessThan(now + 36_000 + 600);
    expect(second?.startSeconds as number).toBeLessThan(now + 600);
    expect(second?.completionSeconds as number).toBeLessThan(now + 36_000 + 600);
  });

  it('name the quota such a job breaks, and what it needs of it', async () => {
    const { controller, store } = rig({ caps: { quotas: [{ group: 'p', maxGpus: 0 }] } });
    const gpu = controller.submit(jobSpec('gpu', GPU_ONE, { expectedDurationSeconds: 600 }), 'research');
    await controller.predictionsSettled();
    expect(readQueueRecord(store, gpu.id)?.eta?.basis).toMatch(
      /^never under the caps: alone it needs 1 GPU in group p, over its quota of 0; /,
    );
  });

  it("name a config's quota by its entry in the file", async () => {
    const caps = capsOf(
      {
        quotas: [
          { group: 'c', maxVcpus: 64 },
          { group: 'p', maxGpus: 0 },
        ],
      },
      'fleetwise.yaml',
    );
    const { controller, store } = rig({ caps });
    const gpu = controller.submit(jobSpec('gpu', GPU_ONE, { expectedDurationSeconds: 600 }), 'research');
    await controller.predictionsSettled();
    expect(readQueueRecord(store, gpu.id)?.eta?.basis).toMatch(
      /^never under the caps: alone it needs 1 GPU in group p, over its quota of 0, set by fleetwise\.yaml: caps\.quotas\.1 \(group p, maxGpus 0\); /,
    );
  });
});

describe('controller predictions of jobs over their class’s ceiling', () => {
  it('answer "never", naming the class and its maxShare, and leave them out of the world', async () => {
    const seen: string[][] = [];
    const spy: PredictFn = (input) => {
      seen.push(input.world.jobs.map((j) => j.spec.id));
      return predictCompletions(input);
    };
    // Team research may hold 20% of the $0.5/h cap: its c7i.xlarge job ($0.18/h, 35.7%) fits the cap, never the class.
    const { controller, store } = rig(
      {
        caps: { maxCostPerHour: 0.5 },
        queue: {
          ...FIFO_CONFIG,
          classifyBy: 'team',
          classes: [
            { id: 'capped', weight: 1, teams: ['research'], ordering: 'fifo', maxShare: 0.2 },
            { id: 'rest', weight: 1, ordering: 'fifo' },
          ],
        },
      },
      { predict: spy },
    );
    const over = controller.submit(jobSpec('over', CPU_SMALL, { expectedDurationSeconds: 600 }), 'research');
    const other = controller.submit(jobSpec('other', CPU_SMALL, { expectedDurationSeconds: 600 }), 'ops');
    await controller.runRound('submitted');
    await controller.predictionsSettled();
    expect(seen.length).toBeGreaterThan(0);
    for (const jobs of seen) expect(jobs).toEqual([other.id]);
    const eta = readQueueRecord(store, over.id)?.eta;
    expect(eta).toMatchObject({ startSeconds: null, completionSeconds: null });
    expect(eta?.completesAfterSeconds).toBeUndefined();
    expect(eta?.basis).toMatch(
      /^never under the caps: alone it needs 35\.7% of the capped capacity, over class capped's ceiling \(maxShare 20\.0%\); /,
    );
    expect(completionText(eta ?? { completionSeconds: 0, computedAtSeconds: 0 })).toBe('never');
    expect(readQueueRecord(store, other.id)?.eta?.completionSeconds).toEqual(expect.any(Number));
  });
});

describe('controller predictions of jobs that cannot end within the horizon', () => {
  it('answer a job held for one whose own work reaches past the horizon "beyond" too, without simulating', async () => {
    const calls = { n: 0 };
    const { controller, store } = rig({}, { predict: stubPredict(calls) });
    const long = controller.submit(
      jobSpec('long', CPU_SMALL, { expectedDurationSeconds: 40 * 86_400 }),
      'research',
    );
    const held = controller.submit(
      after(jobSpec('held', CPU_SMALL, { expectedDurationSeconds: 60 }), long.id),
      'research',
    );
    await controller.predictionsSettled();
    expect(calls.n).toBe(0);
    const eta = readQueueRecord(store, held.id)?.eta;
    expect(eta?.completionSeconds).toBeNull();
    expect(eta?.completesAfterSeconds).toBe((eta?.computedAtSeconds ?? 0) + 30 * 86_400);
    expect(eta?.basis).toMatch(
      new RegExp(
        `^beyond 30 days: it waits for ${long.id}, whose remaining work at full throughput alone reaches past`,
      ),
    );
  });
});

describe('the prediction error of an ended job, in words', () => {
  it('gives the magnitude and says which way, and says when the job ended as predicted', () => {
    expect(predictionErrorText({ errorSeconds: -86_297, errorPercent: 99.8 })).toBe(
      '23.97 h earlier than predicted at submission (99.8% of the predicted JCT)',
    );
    expect(predictionErrorText({ errorSeconds: 90, errorPercent: null })).toBe(
      '90 s later than predicted at submission',
    );
    expect(predictionErrorText({ errorSeconds: -0.4, errorPercent: 0 })).toBe(
      'none: it ended as predicted at submission',
    );
  });

  it('is recorded in an event that says how long before the prediction the job ended, with no minus sign', async () => {
    const r = rig(
      {},
      { tasks: new ScriptedExits(new Map([['job-1.0', [0]]])), predict: stubPredict({ n: 0 }) },
    );
    const job = r.controller.submit(
      jobSpec('quick', CPU_SMALL, { expectedDurationSeconds: 3600 }),
      'research',
    );
    await r.controller.predictionsSettled();
    await passes(r, () => r.store.getJob(job.id)?.state === 'succeeded');
    const error = readQueueRecord(r.store, job.id)?.predictionError;
    expect(error?.errorSeconds).toBeLessThan(-60);
    const [event] = r.store.listEvents({ kind: 'job.prediction-error', jobId: job.id });
    expect(event?.message).toBe(
      `job ${job.id} ended ${Math.round(-(error?.errorSeconds ?? 0))} s before its submission prediction`,
    );
  });

  it('says a job that ended when predicted ended as predicted', async () => {
    const base = rig();
    const control = new TimedTaskControl(base.clock);
    const r = rig({}, { clock: base.clock, tasks: control, predict: stubPredict({ n: 0 }) });
    const job = r.controller.submit(
      jobSpec('exact', CPU_SMALL, { expectedDurationSeconds: 600 }),
      'research',
    );
    await r.controller.predictionsSettled();
    const predicted = readQueueRecord(r.store, job.id)?.submissionEta?.completionSeconds as number;
    await r.controller.runRound('submitted');
    r.clock.advance(predicted - r.clock.nowSeconds());
    await r.controller.reconcile();
    expect(r.store.getJob(job.id)?.state).toBe('succeeded');
    expect(readQueueRecord(r.store, job.id)?.predictionError?.errorSeconds).toBe(0);
    const [event] = r.store.listEvents({ kind: 'job.prediction-error', jobId: job.id });
    expect(event?.message).toBe(`job ${job.id} ended as predicted at submission`);
  });
});
