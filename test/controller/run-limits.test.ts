import fc from 'fast-check';
import { ControllerMetrics } from '../../src/controller/api/metrics.js';
import { describe, expect, it } from 'vitest';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { readJobWarnings } from '../../src/controller/execution-check.js';
import { runningSecondsOf, type JobTransition } from '../../src/controller/job-transitions.js';
import { JOB_STATES, type JobState } from '../../src/controller/state-store.js';
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
});
