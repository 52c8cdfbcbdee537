import fc from 'fast-check';
import { ControllerMetrics } from '../../src/controller/api/metrics.js';
import { describe, expect, it } from 'vitest';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { readJobWarnings } from '../../src/controller/execution-check.js';
import {
  JOB_HISTORY_EVENT_KINDS,
  jobTransitions,
  lastEnteredRunning,
  runningSecondsOf,
  worksNow,
  type JobTransition,
} from '../../src/controller/job-transitions.js';
import { JOB_RAN_UNTIL_EVENT } from '../../src/controller/job-transitions.js';
import { JOB_MOVE_WAITS_EVENT, WORKS_ON_UNTIL_READY } from '../../src/controller/reconcile/plan-intents.js';
import { RunLimits } from '../../src/controller/run-limits.js';
import { silentLogger } from '../../src/controller/seams.js';
import { runningSeconds } from '../../src/sim/controller-runtime/state-history.js';
import {
  JOB_STATES,
  type EventRecord,
  type JobState,
  type JsonValue,
} from '../../src/controller/state-store.js';
import { recordStoppedWithController } from '../../src/controller/stopped-with-controller.js';
import { catalog, CPU_SMALL, jobSpec, rig, RUNS_ON, ScriptedExits, type Rig } from './controller-fixtures.js';

const at = (atSeconds: number, to: JobState): JobTransition => ({ atSeconds, to });

describe('a job’s running time', () => {
  it('sums its spells in running: queueing, starting and moving do not count, the current spell does', () => {
    const moved = [
      at(0, 'starting'),
      at(10, 'running'),
      at(40, 'migrating'), // 30 s
      at(45, 'starting'),
      at(50, 'running'),
    ];
    expect(runningSecondsOf(moved, 70)).toBe(30 + 20);
    // Preempted back to the queue, then a retried attempt: both spells count, the waits do not.
    const requeued = [...moved, at(80, 'queued'), at(200, 'starting'), at(205, 'running'), at(215, 'failed')];
    expect(runningSecondsOf(requeued, 1000)).toBe(30 + 30 + 10);
    expect(runningSecondsOf([], 50)).toBe(0);
    expect(runningSecondsOf([at(0, 'starting')], 50)).toBe(0);
  });

  it('ends a spell where its work ended when the change back to the queue was written later', () => {
    const stoppedUnseen = [
      at(0, 'starting'),
      at(10, 'running'),
      // Worked until 80; the restarted controller wrote the requeue at 700.
      { atSeconds: 700, to: 'queued' as const, workedUntilSeconds: 80 },
      at(710, 'starting'),
      at(720, 'running'),
    ];
    expect(runningSecondsOf(stoppedUnseen, 750)).toBe(70 + 30);
    // Never before the spell began, nor after the change.
    expect(
      runningSecondsOf([at(10, 'running'), { atSeconds: 50, to: 'queued', workedUntilSeconds: 5 }], 99),
    ).toBe(0);
    expect(
      runningSecondsOf([at(10, 'running'), { atSeconds: 50, to: 'queued', workedUntilSeconds: 90 }], 99),
    ).toBe(40);
  });

  it('reads the end of a run from the job.ran-until events before the change that follows them', () => {
    const event = (seq: number, atSeconds: number, kind: string, data: JsonValue): EventRecord => ({
      seq,
      atSeconds,
      kind,
      jobId: 'job-1',
      message: kind,
      data,
    });
    const transitions = jobTransitions([
      event(1, 10, 'job.state', { from: 'starting', to: 'running' }),
      event(2, 700, JOB_RAN_UNTIL_EVENT, { ranUntilSeconds: 90 }),
      event(3, 700, JOB_RAN_UNTIL_EVENT, { ranUntilSeconds: 80 }),
      event(4, 700, 'job.state', { from: 'running', to: 'queued' }),
      event(5, 720, 'job.state', { from: 'starting', to: 'running' }),
      event(6, 730, JOB_RAN_UNTIL_EVENT, { ranUntilSeconds: 'soon' }),
      event(7, 740, 'job.state', { from: 'running', to: 'queued' }),
    ]);
    expect(transitions).toEqual([
      at(10, 'running'),
      { atSeconds: 700, to: 'queued', workedUntilSeconds: 80 },
      at(720, 'running'),
      at(740, 'queued'),
    ]);
    expect(JOB_HISTORY_EVENT_KINDS).toEqual([
      'job.state',
      JOB_RAN_UNTIL_EVENT,
      JOB_MOVE_WAITS_EVENT,
      'task.state',
    ]);
  });

  it('counts a move that makes before it breaks as run time until its task is told to checkpoint and stop', () => {
    const waiting: JobTransition = { atSeconds: 13, to: 'migrating', worksOn: true };
    // Ran 3 s, worked on while its new instance booted until 50, restored from 50 to 65, ran again.
    const moved = [
      at(0, 'starting'),
      at(10, 'running'),
      { ...waiting, workStoppedSeconds: 50 },
      at(60, 'starting'),
      at(65, 'running'),
    ];
    expect(runningSecondsOf(moved, 80)).toBe(40 + 15);
    expect(worksNow(moved)).toBe(true);
    // Still waiting: its run grows with the clock.
    const stillWaiting = [at(0, 'starting'), at(10, 'running'), waiting];
    expect(runningSecondsOf(stillWaiting, 30)).toBe(20);
    expect(runningSecondsOf(stillWaiting, 37) - runningSecondsOf(stillWaiting, 30)).toBe(7);
    expect(worksNow(stillWaiting)).toBe(true);
    // Told to stop: checkpointing and restoring do not count.
    const checkpointing = [at(10, 'running'), { ...waiting, workStoppedSeconds: 50 }];
    expect(runningSecondsOf(checkpointing, 90)).toBe(40);
    expect(worksNow(checkpointing)).toBe(false);
    // Called off: back to running, one stretch.
    expect(runningSecondsOf([at(10, 'running'), waiting, at(40, 'running')], 70)).toBe(60);
    // Its instance lost unseen while it waited: the stretch ends where the work did.
    expect(
      runningSecondsOf(
        [at(10, 'running'), waiting, { atSeconds: 90, to: 'queued', workedUntilSeconds: 30 }],
        99,
      ),
    ).toBe(20);
    // A plain move (checkpoint at once) still ends the stretch at the change.
    expect(runningSecondsOf([at(10, 'running'), at(13, 'migrating'), at(60, 'running')], 80)).toBe(3 + 20);
  });

  it('reads a waiting move from its job.move-waits event (or its reason), its end from a task told to stop', () => {
    let seq = 0;
    const event = (atSeconds: number, kind: string, data: JsonValue): EventRecord => ({
      seq: ++seq,
      atSeconds,
      kind,
      jobId: 'job-1',
      message: kind,
      data,
    });
    const toRunning = { from: 'starting', to: 'running' };
    const movesLater = {
      from: 'running',
      to: 'migrating',
      reason: `moving (round 2): ${WORKS_ON_UNTIL_READY}`,
    };
    const transitions = jobTransitions([
      event(10, 'job.state', toRunning),
      event(13, JOB_MOVE_WAITS_EVENT, { round: 2 }),
      event(13, 'job.state', { from: 'running', to: 'migrating', reason: 'moving (round 2)' }),
      event(50, 'task.state', { from: 'running', to: 'checkpointing' }),
      event(52, 'task.state', { from: 'checkpointing', to: 'stopped' }),
      event(52, 'task.state', { from: 'stopped', to: 'checkpointing' }),
      event(60, 'job.state', { from: 'migrating', to: 'starting' }),
      event(65, 'job.state', toRunning),
      // A store written before the move's own event: the reason says the job works on.
      event(100, 'job.state', movesLater),
      event(120, 'job.state', { from: 'migrating', to: 'running' }),
      // A plain move: its task checkpoints first, then the job moves.
      event(130, 'task.state', { from: 'running', to: 'checkpointing' }),
      event(130, 'job.state', { from: 'running', to: 'migrating', reason: 'moving (round 3)' }),
      event(140, 'task.state', { from: 'starting', to: 'checkpointing' }),
      event(150, 'job.state', { from: 'migrating', to: 'starting' }),
    ]);
    expect(transitions).toEqual([
      at(10, 'running'),
      { atSeconds: 13, to: 'migrating', worksOn: true, workStoppedSeconds: 50 },
      at(60, 'starting'),
      at(65, 'running'),
      { atSeconds: 100, to: 'migrating', worksOn: true },
      at(120, 'running'),
      at(130, 'migrating'),
      at(150, 'starting'),
    ]);
    // 40 s up to the stop, then 65 s from 65 to 130 (the move called off at 120 is one stretch).
    expect(runningSecondsOf(transitions, 200)).toBe(40 + 65);
  });

  it('sums a job’s work as export-trace measures it, moves that make before they break included (property)', () => {
    type Step =
      | { readonly kind: 'state'; readonly gap: number; readonly to: JobState; readonly saysWorksOn: boolean }
      | { readonly kind: 'waits' }
      | { readonly kind: 'task'; readonly gap: number; readonly to: 'checkpointing' | 'stopped' }
      | { readonly kind: 'ran-until'; readonly back: number };
    const step: fc.Arbitrary<Step> = fc.oneof(
      fc.record({
        kind: fc.constant('state' as const),
        gap: fc.integer({ min: 0, max: 100 }),
        to: fc.constantFrom<JobState>('starting', 'running', 'migrating', 'queued'),
        saysWorksOn: fc.boolean(),
      }),
      fc.constant({ kind: 'waits' as const }),
      fc.record({
        kind: fc.constant('task' as const),
        gap: fc.integer({ min: 0, max: 100 }),
        to: fc.constantFrom('checkpointing' as const, 'stopped' as const),
      }),
      fc.record({ kind: fc.constant('ran-until' as const), back: fc.integer({ min: 0, max: 150 }) }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 30 }), (steps) => {
        const events: EventRecord[] = [];
        let clock = 0;
        let state: JobState = 'queued';
        const push = (kind: string, data: JsonValue): void => {
          events.push({
            seq: events.length + 1,
            atSeconds: clock,
            kind,
            jobId: 'job-1',
            message: kind,
            data,
          });
        };
        const change = (to: JobState, reason?: string): void => {
          if (to === state) return;
          push('job.state', { from: state, to, ...(reason === undefined ? {} : { reason }) });
          state = to;
        };
        for (const s of steps) {
          if (s.kind === 'state') {
            clock += s.gap;
            change(s.to, s.saysWorksOn ? `moving: ${WORKS_ON_UNTIL_READY}` : 'moving');
          } else if (s.kind === 'waits') push(JOB_MOVE_WAITS_EVENT, { round: 1 });
          else if (s.kind === 'task') {
            clock += s.gap;
            push('task.state', { from: 'running', to: s.to });
          } else push(JOB_RAN_UNTIL_EVENT, { ranUntilSeconds: clock - s.back });
        }
        // Ended: export-trace counts closed stretches only.
        clock += 1;
        change('failed');
        const transitions = jobTransitions(events);
        expect(runningSecondsOf(transitions, clock + 1000)).toBe(runningSeconds(events).get('job-1') ?? 0);
        expect(worksNow(transitions)).toBe(false);
      }),
    );
  });

  it('is never more than the time since it first ran, and grows with the clock only while it runs (property)', () => {
    const spells = fc.array(fc.tuple(fc.integer({ min: 0, max: 500 }), fc.constantFrom(...JOB_STATES)), {
      maxLength: 40,
      size: 'max',
    });
    fc.assert(
      fc.property(spells, fc.integer({ min: 0, max: 1000 }), (steps, extra) => {
        let clock = 0;
        const transitions = steps.map(([gap, to]) => at((clock += gap), to));
        const now = clock + extra;
        const ran = runningSecondsOf(transitions, now);
        const first = transitions.find((t) => t.to === 'running');
        expect(ran).toBeGreaterThanOrEqual(0);
        expect(ran).toBeLessThanOrEqual(first === undefined ? 0 : now - first.atSeconds);
        const runningNow = transitions[transitions.length - 1]?.to === 'running';
        expect(runningSecondsOf(transitions, now + 7) - ran).toBe(runningNow ? 7 : 0);
        // Where each run really ended, when written later: never more run time than the changes alone give.
        const ended = transitions.map((t, i) => ({
          ...t,
          workedUntilSeconds: t.atSeconds - ((i * 37) % 200),
        }));
        const ranUntil = runningSecondsOf(ended, now);
        expect(ranUntil).toBeGreaterThanOrEqual(0);
        expect(ranUntil).toBeLessThanOrEqual(ran);
      }),
    );
  });
});

describe('maxRunSeconds in the job spec', () => {
  it('takes seconds or a duration, more than 0, and names the field otherwise', () => {
    const base = { name: 'capped', team: 'research', tasks: [{ command: ['true'], demand: [0, 1, 1] }] };
    expect(validateJobSpec({ ...base, maxRunSeconds: '2h' }, 'spec', catalog).maxRunSeconds).toBe(7200);
    expect(validateJobSpec({ ...base, maxRunSeconds: 90 }, 'spec', catalog).maxRunSeconds).toBe(90);
    expect(() => validateJobSpec({ ...base, maxRunSeconds: 0 }, 'spec', catalog)).toThrow(
      /maxRunSeconds: must be more than 0/,
    );
    expect(() => validateJobSpec({ ...base, maxRunSeconds: 'soon' }, 'spec', catalog)).toThrow(
      /maxRunSeconds: expected seconds/,
    );
  });
});

/** Rounds and reconcile passes, `step` seconds apart, until `done` or `passes` run out. */
async function passes(r: Rig, count: number, step: number, done: () => boolean): Promise<void> {
  for (let pass = 0; pass < count && !done(); pass++) {
    await r.controller.runRound('test');
    await r.controller.reconcile();
    r.clock.advance(step);
  }
}

function setClock(r: Rig, atSeconds: number): void {
  r.clock.advance(atSeconds - r.clock.nowSeconds());
}

function limited(spec: JobSpec, maxRunSeconds: number): JobSpec {
  return { ...spec, maxRunSeconds };
}

describe('the controller and maxRunSeconds', () => {
  it('warns a submission whose limit is shorter than its expected run, and takes it', () => {
    const r = rig();
    const short = r.controller.submit(
      { ...limited(jobSpec('short', CPU_SMALL), 3600), expectedDurationSeconds: 7200 },
      'research',
    );
    expect(readJobWarnings(r.store, short.id)).toEqual([
      'maxRunSeconds (3600 s) is shorter than expectedDurationSeconds (7200 s): the job will be stopped before it ' +
        'is expected to finish',
    ]);
    const roomy = r.controller.submit(
      { ...limited(jobSpec('roomy', CPU_SMALL), 7200), expectedDurationSeconds: 3600 },
      'research',
    );
    expect(readJobWarnings(r.store, roomy.id)).toEqual([]);
  });

  it('stops a job that runs past its limit without a checkpoint and ends it failed, not retried, saying why', async () => {
    const control = new ScriptedExits(new Map([['job-1.0', [RUNS_ON]]]));
    const metrics = new ControllerMetrics();
    const r = rig({}, { tasks: control, metrics });
    control.store = r.store;
    const job = r.controller.submit(
      {
        ...limited(jobSpec('runaway', CPU_SMALL), 120),
        retryStrategy: { attempts: 3 },
      },
      'research',
    );
    await passes(r, 40, 10, () => r.store.getJob(job.id)?.state === 'running');
    const startedAt = r.store.getJob(job.id)?.startedAtSeconds as number;
    expect(startedAt).toBeDefined();
    // Short of the limit: it runs on.
    setClock(r, startedAt + 110);
    await r.controller.reconcile();
    expect(r.store.getJob(job.id)?.state).toBe('running');
    setClock(r, startedAt + 125);
    await r.controller.reconcile();
    const ended = r.store.getJob(job.id);
    expect(ended).toMatchObject({ state: 'failed', attempts: 1 });
    expect(ended?.reason).toBe(
      'ran 125 s, past its maxRunSeconds (120 s): stopped without a checkpoint, not retried',
    );
    expect(control.stops).toEqual(['job-1.0']);
    expect(await metrics.registry.metrics()).toMatch(
      /^fleetwise_jobs_failed_by_rule_total\{rule="run-limit"\} 1$/m,
    );
    // Its instance is let go by the next round, and nothing starts it again.
    await passes(r, 10, 10, () => false);
    expect(control.starts).toHaveLength(1);
    expect(r.store.getJob(job.id)?.state).toBe('failed');
    expect(r.cloud.live().length).toBe(0);
  });

  it('wakes the loop when a limit comes due instead of at its next pass', async () => {
    const control = new ScriptedExits(new Map([['job-1.0', [RUNS_ON]]]));
    // Passes ten minutes apart, rounds an hour apart: only the limit can wake the loop two minutes in.
    const r = rig({ pollSeconds: 600, roundSeconds: 3600, minRoundGapSeconds: 0 }, { tasks: control });
    control.store = r.store;
    const job = r.controller.submit(limited(jobSpec('runaway', CPU_SMALL), 120), 'research');
    await passes(r, 40, 10, () => r.store.getJob(job.id)?.state === 'running');
    const startedAt = r.store.getJob(job.id)?.startedAtSeconds as number;
    await r.controller.start();
    try {
      const wakes: number[] = [];
      const deadline = Date.now() + 10_000;
      while (r.store.getJob(job.id)?.state === 'running') {
        if (Date.now() > deadline) throw new Error(`still running after waking at ${wakes.join(', ')}`);
        const next = r.clock.pendingSleeps > 0 ? r.clock.nextWakeSeconds() : undefined;
        if (next === undefined) {
          await new Promise((resolve) => setTimeout(resolve, 5));
          continue;
        }
        wakes.push(next - startedAt);
        r.clock.advance(next - r.clock.nowSeconds());
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      expect(wakes.at(-1)).toBe(120);
      expect(r.store.getJob(job.id)?.reason).toMatch(/^ran 120 s, past its maxRunSeconds \(120 s\)/);
    } finally {
      await r.controller.stop();
    }
  });

  it('does not count the time a move takes, nor a job without a limit', async () => {
    const control = new ScriptedExits(
      new Map([
        ['job-1.0', [RUNS_ON, RUNS_ON]],
        ['job-2.0', [RUNS_ON]],
      ]),
    );
    const r = rig({}, { tasks: control });
    control.store = r.store;
    const capped = r.controller.submit(limited(jobSpec('capped', CPU_SMALL), 100), 'research');
    const free = r.controller.submit(jobSpec('free', CPU_SMALL), 'research');
    await passes(r, 40, 10, () => r.store.getJob(capped.id)?.state === 'running');
    const startedAt = r.store.getJob(capped.id)?.startedAtSeconds as number;
    // 60 s running, then a 300 s move (checkpoint, restore elsewhere), then running again.
    setClock(r, startedAt + 60);
    r.store.setJobState(capped.id, 'migrating', 'moved by the test');
    setClock(r, startedAt + 360);
    r.store.setJobState(capped.id, 'running');
    setClock(r, startedAt + 390); // 90 s of running in all
    await r.controller.reconcile();
    expect(r.store.getJob(capped.id)?.state).toBe('running');
    setClock(r, startedAt + 401); // 101 s
    await r.controller.reconcile();
    expect(r.store.getJob(capped.id)?.state).toBe('failed');
    setClock(r, startedAt + 100_000);
    await r.controller.reconcile();
    expect(r.store.getJob(free.id)?.state).not.toBe('failed');
  });

  it('counts a run on an instance that ended unseen until it ended, whichever pass notices it', async () => {
    for (const pass of ['reconcile', 'round'] as const) {
      const control = new ScriptedExits(new Map([['job-1.0', [RUNS_ON, RUNS_ON]]]));
      const r = rig({}, { tasks: control });
      control.store = r.store;
      const job = r.controller.submit(limited(jobSpec('capped', CPU_SMALL), 120), 'research');
      await passes(r, 40, 10, () => r.store.getJob(job.id)?.state === 'running');
      const startedAt = r.store.getJob(job.id)?.startedAtSeconds as number;
      // EC2 ends the instance 70 s in; the next pass to look comes 60 s after the limit.
      const [instance] = r.cloud.live();
      if (instance === undefined) throw new Error('nothing launched');
      await r.cloud.terminate([instance.id]);
      (r.cloud.instances.get(instance.id) as { endedAt?: Date }).endedAt = new Date((startedAt + 70) * 1000);
      setClock(r, startedAt + 180);
      await (pass === 'reconcile' ? r.controller.reconcile() : r.controller.runRound('period'));
      // It ran 70 s: back to the queue to run the 50 s left, not failed for the 180 s since it started.
      expect(r.store.getJob(job.id)?.state, pass).not.toBe('failed');
      expect(r.store.listEvents({ jobId: job.id, kind: JOB_RAN_UNTIL_EVENT }).map((e) => e.data)).toEqual([
        { ranUntilSeconds: startedAt + 70 },
      ]);
    }
  });

  it('does not count the time the controller was stopped: the job runs again for what is left of its limit', async () => {
    const control = new ScriptedExits(new Map([['job-1.0', [RUNS_ON, RUNS_ON]]]));
    const r = rig({}, { tasks: control });
    control.store = r.store;
    const job = r.controller.submit(limited(jobSpec('capped', CPU_SMALL), 120), 'research');
    await passes(r, 40, 10, () => r.store.getJob(job.id)?.state === 'running');
    const startedAt = r.store.getJob(job.id)?.startedAtSeconds as number;
    setClock(r, startedAt + 70);
    await r.controller.reconcile();
    expect(r.store.getJob(job.id)?.state).toBe('running');
    // A clean stop after 70 s of running: its (local) instance is terminated with it, and when is written down.
    const [instance] = r.cloud.live();
    if (instance === undefined) throw new Error('nothing launched');
    recordStoppedWithController(r.store, [{ cloudId: instance.id, atSeconds: r.clock.nowSeconds() }]);
    instance.state = 'terminated';
    // Down for ten minutes, far past the limit; a new controller over the same state recovers the job.
    setClock(r, startedAt + 670);
    const restarted = rig({}, { store: r.store, clock: r.clock, cloud: r.cloud, tasks: control });
    await restarted.controller.recover();
    expect(r.store.getJob(job.id)?.state).toBe('queued');
    expect(r.store.listEvents({ jobId: job.id, kind: JOB_RAN_UNTIL_EVENT }).map((e) => e.data)).toEqual([
      { ranUntilSeconds: startedAt + 70 },
    ]);
    // It starts again rather than failing on its way there.
    await passes(restarted, 40, 10, () => r.store.getJob(job.id)?.state !== 'queued');
    await passes(restarted, 40, 10, () => r.store.getJob(job.id)?.state !== 'starting');
    expect(r.store.getJob(job.id)?.state).toBe('running');
    expect(control.starts.map((s) => s.taskId)).toEqual(['job-1.0', 'job-1.0']);
    const rerunAt = lastEnteredRunning(
      jobTransitions(r.store.listEvents({ jobId: job.id, kinds: JOB_HISTORY_EVENT_KINDS })),
    ) as number;
    expect(rerunAt).toBeGreaterThanOrEqual(startedAt + 670);
    // 70 s before the stop and 40 s since: under the limit.
    setClock(r, rerunAt + 40);
    await restarted.controller.reconcile();
    expect(r.store.getJob(job.id)?.state).toBe('running');
    // 70 + 55 s: past it, and the reason gives the time it really ran.
    setClock(r, rerunAt + 55);
    await restarted.controller.reconcile();
    expect(r.store.getJob(job.id)).toMatchObject({
      state: 'failed',
      reason: 'ran 125 s, past its maxRunSeconds (120 s): stopped without a checkpoint, not retried',
    });
  });
});

describe('the controller, maxRunSeconds and a move that makes before it breaks', () => {
  it('counts the time a moving job works on, wakes for its limit and ends it there, move called off', async () => {
    const control = new ScriptedExits(new Map([['job-1.0', [RUNS_ON, RUNS_ON]]]));
    const r = rig({ makeBeforeBreak: true }, { tasks: control });
    control.store = r.store;
    const job = r.controller.submit(limited(jobSpec('capped', CPU_SMALL), 100), 'research');
    await passes(r, 40, 10, () => r.store.getJob(job.id)?.state === 'running');
    const startedAt = r.store.getJob(job.id)?.startedAtSeconds as number;
    const limits = new RunLimits({
      store: r.store,
      clock: r.clock,
      log: silentLogger,
      fail: () => {
        throw new Error('not this one');
      },
    });
    // 20 s running, then a 200 s move that checkpoints at once (no run time), then running again: 20 s so far, and
    // the time since it first ran is past its limit, so what is left is read from its events.
    setClock(r, startedAt + 20);
    r.store.setJobState(job.id, 'migrating', 'moved by the test');
    setClock(r, startedAt + 220);
    r.store.setJobState(job.id, 'running');
    // 10 s more (30 s), then its instance is drained: it moves to one that boots slowly, working on meanwhile.
    setClock(r, startedAt + 230);
    r.cloud.bootInstantly = false;
    const [from] = r.cloud.live();
    if (from === undefined) throw new Error('nothing launched');
    r.controller.drain(from.id);
    await r.controller.runRound('test');
    await r.controller.reconcile();
    expect(r.store.getJob(job.id)?.state).toBe('migrating');
    expect(r.store.listEvents({ jobId: job.id, kind: JOB_MOVE_WAITS_EVENT })).toHaveLength(1);
    expect(r.store.getTask(`${job.id}.0`)?.state).toBe('running');
    expect(r.cloud.live().map((i) => i.state)).toContain('pending');
    // 50 s of run at +250: its limit comes due 50 s later, and the loop is to wake then.
    setClock(r, startedAt + 250);
    expect(limits.nextDueSeconds()).toBe(startedAt + 300);
    setClock(r, startedAt + 295);
    await r.controller.reconcile();
    expect(r.store.getJob(job.id)?.state).toBe('migrating');
    // Past it while the new instance still boots: stopped without a checkpoint, its move called off.
    setClock(r, startedAt + 301);
    await r.controller.reconcile();
    expect(r.store.getJob(job.id)).toMatchObject({
      state: 'failed',
      reason: 'ran 101 s, past its maxRunSeconds (100 s): stopped without a checkpoint, not retried',
    });
    expect(limits.nextDueSeconds()).toBe(Number.POSITIVE_INFINITY);
    await r.controller.reconcile();
    expect(control.stops).toEqual([`${job.id}.0`]);
    expect(control.starts).toHaveLength(1);
    expect(r.store.listIntents({ states: ['pending'] })).toEqual([]);
    // The instance it was moving to is let go with the one it left: nothing leaks.
    r.cloud.bootAll();
    await passes(r, 10, 10, () => r.cloud.live().length === 0);
    expect(r.cloud.live()).toEqual([]);
    expect(control.starts).toHaveLength(1);
  });

  it('stops counting once the waiting move’s task is told to checkpoint: restoring is not run time', async () => {
    const control = new ScriptedExits(new Map([['job-1.0', [RUNS_ON, RUNS_ON]]]));
    const r = rig({ makeBeforeBreak: true }, { tasks: control });
    control.store = r.store;
    const job = r.controller.submit(limited(jobSpec('capped', CPU_SMALL), 100), 'research');
    await passes(r, 40, 10, () => r.store.getJob(job.id)?.state === 'running');
    const startedAt = r.store.getJob(job.id)?.startedAtSeconds as number;
    setClock(r, startedAt + 30);
    r.cloud.bootInstantly = false;
    const [from] = r.cloud.live();
    if (from === undefined) throw new Error('nothing launched');
    r.controller.drain(from.id);
    await r.controller.runRound('test');
    await r.controller.reconcile();
    expect(r.store.getJob(job.id)?.state).toBe('migrating');
    // Its new instance ready at +90: the stop goes then, after 90 s of work.
    setClock(r, startedAt + 90);
    r.cloud.bootAll();
    await r.controller.reconcile();
    expect(control.stops).toEqual([`${job.id}.0 (checkpoint)`]);
    const ran = (): number =>
      runningSecondsOf(
        jobTransitions(r.store.listEvents({ jobId: job.id, kinds: JOB_HISTORY_EVENT_KINDS })),
        r.clock.nowSeconds(),
      );
    expect(ran()).toBe(90);
    await passes(r, 10, 10, () => r.store.getJob(job.id)?.state === 'running');
    const rerunAt = lastEnteredRunning(
      jobTransitions(r.store.listEvents({ jobId: job.id, kinds: JOB_HISTORY_EVENT_KINDS })),
    ) as number;
    // 90 s before the stop, 5 s since it runs again: running; 12 s since: past its limit.
    setClock(r, rerunAt + 5);
    await r.controller.reconcile();
    expect(r.store.getJob(job.id)?.state).toBe('running');
    setClock(r, rerunAt + 12);
    await r.controller.reconcile();
    expect(r.store.getJob(job.id)).toMatchObject({
      state: 'failed',
      reason: 'ran 102 s, past its maxRunSeconds (100 s): stopped without a checkpoint, not retried',
    });
  });
});
