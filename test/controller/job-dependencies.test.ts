import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ControllerMetrics } from '../../src/controller/api/metrics.js';
import { ManualClock } from '../../src/controller/clock.js';
import { jobDocument, jobSummary } from '../../src/controller/api/views.js';
import { dependencyViews, earliestStartSeconds } from '../../src/controller/job-dependencies.js';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import { readQueueRecord } from '../../src/controller/queue-records.js';
import type { JobRecord } from '../../src/controller/state-store.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { ValidationError } from '../../src/core/validation.js';
import { catalog, CPU_SMALL, jobSpec, rig, ScriptedExits, type Rig } from './controller-fixtures.js';

function after(spec: JobSpec, ...dependsOn: string[]): JobSpec {
  return { ...spec, dependsOn };
}

/** Rounds and reconcile passes, 10 s apart, checking `invariant` after each, until `done` or 40 passes. */
async function passes(r: Rig, done: () => boolean, invariant: () => void = () => undefined): Promise<void> {
  for (let pass = 0; pass < 40 && !done(); pass++) {
    await r.controller.runRound('test');
    invariant();
    await r.controller.reconcile();
    invariant();
    r.clock.advance(10);
  }
}

function problemsOf(submit: () => unknown): readonly string[] {
  try {
    submit();
  } catch (e) {
    if (e instanceof ValidationError) return e.problems;
    throw e;
  }
  throw new Error('the submission was taken');
}

describe('dependsOn in the job spec', () => {
  it('takes a list of job ids, each once', () => {
    const base = { name: 'step', team: 'research', tasks: [{ command: ['true'], demand: [0, 1, 1] }] };
    expect(validateJobSpec({ ...base, dependsOn: ['job-1', 'job-12'] }, 'spec', catalog).dependsOn).toEqual([
      'job-1',
      'job-12',
    ]);
    expect(validateJobSpec({ ...base, dependsOn: [] }, 'spec', catalog).dependsOn).toBeUndefined();
    expect(() => validateJobSpec({ ...base, dependsOn: ['job-1', 'job-1'] }, 'spec', catalog)).toThrow(
      /dependsOn: names a job twice/,
    );
    expect(() => validateJobSpec({ ...base, dependsOn: ['first'] }, 'spec', catalog)).toThrow(
      /dependsOn\.0: a job id \(job-<n>\)/,
    );
  });
});

describe('job dependencies in the controller', () => {
  it('refuses a submission naming an unknown job, another team’s job, or one that ended without success', () => {
    const r = rig({}, { tasks: new ScriptedExits(new Map()) });
    const theirs = r.controller.submit(jobSpec('theirs', CPU_SMALL), 'vision');
    const doomed = r.controller.submit(jobSpec('doomed', CPU_SMALL), 'research');
    r.controller.cancel(doomed.id);
    expect(
      problemsOf(() =>
        r.controller.submit(after(jobSpec('step', CPU_SMALL), 'job-99', theirs.id, doomed.id), 'research'),
      ),
    ).toEqual([
      'dependsOn: no job job-99 of team research',
      `dependsOn: no job ${theirs.id} of team research`,
      `dependsOn: ${doomed.id} ended cancelled, so this job could never start`,
    ]);
    // Nothing was recorded for the refused submission.
    expect(r.store.listJobs().map((j) => j.name)).toEqual(['theirs', 'doomed']);
  });

  it('keeps a job out of every round until its dependencies have succeeded, then runs it', async () => {
    const control = new ScriptedExits(
      new Map([
        ['job-1.0', [0]],
        ['job-2.0', [0]],
        ['job-3.0', [0]],
      ]),
    );
    const r = rig({}, { tasks: control });
    control.store = r.store;
    const first = r.controller.submit(jobSpec('first', CPU_SMALL), 'research');
    const second = r.controller.submit(jobSpec('second', CPU_SMALL), 'research');
    const last = r.controller.submit(after(jobSpec('last', CPU_SMALL), first.id, second.id), 'research');
    // While it waits: queued, its dependencies shown with their states, its first prediction pending (held jobs are
    // predicted too).
    const waiting = r.store.getJob(last.id);
    if (waiting === undefined) throw new Error('no job');
    expect(jobDocument(r.store, waiting, true).dependencies).toEqual([
      { id: first.id, state: 'queued' },
      { id: second.id, state: 'queued' },
    ]);
    expect(jobSummary(waiting, 1, r.store, true)).toMatchObject({
      etaPending: true,
      waitingFor: [first.id, second.id],
    });
    await r.controller.runRound('test');
    expect(r.controller.why(last.id).map((w) => w.summary)).toEqual([
      `held for its dependencies (${first.id}, ${second.id}): out of the round until they succeed`,
    ]);
    r.clock.advance(10);
    await passes(
      r,
      () => r.store.getJob(last.id)?.state === 'succeeded',
      () => {
        // It never starts before both have succeeded.
        if (control.starts.some((s) => s.taskId === `${last.id}.0`))
          expect([first.id, second.id].map((id) => r.store.getJob(id)?.state)).toEqual([
            'succeeded',
            'succeeded',
          ]);
      },
    );
    expect(r.store.getJob(last.id)?.state).toBe('succeeded');
    const lastStarted = r.store.getJob(last.id)?.startedAtSeconds as number;
    // In a later pass than the one they ended in (a job without dependencies would have started with them).
    for (const id of [first.id, second.id])
      expect(lastStarted).toBeGreaterThan(r.store.getJob(id)?.finishedAtSeconds as number);
  });

  it('says nothing of dependencies in why for a job without them, even in a round at time 0 (a simulated clock)', async () => {
    const r = rig({}, { clock: new ManualClock(0), tasks: new ScriptedExits(new Map()) });
    const alone = r.controller.submit(jobSpec('alone', CPU_SMALL), 'research');
    await r.controller.runRound('test');
    const summaries = r.controller.why(alone.id).map((w) => w.summary);
    expect(summaries).toHaveLength(1);
    expect(summaries[0]).not.toMatch(/held for its dependencies/);
  });

  it('fails the dependents of a cancelled job on a controller without metrics too', async () => {
    const r = rig({}, { tasks: new ScriptedExits(new Map()) });
    const first = r.controller.submit(jobSpec('first', CPU_SMALL), 'research');
    const second = r.controller.submit(after(jobSpec('second', CPU_SMALL), first.id), 'research');
    r.controller.cancel(first.id);
    await r.controller.runRound('test');
    expect(r.store.getJob(second.id)?.state).toBe('failed');
  });

  it('fails a job whose dependency is not in the state (a restored state that lacks it), rather than hold it for ever', async () => {
    const r = rig({}, { tasks: new ScriptedExits(new Map()) });
    // A submission refuses an unknown dependency; only a state written otherwise holds one.
    const orphan = r.store.submitJob(after(jobSpec('orphan', CPU_SMALL), 'job-99'));
    await r.controller.runRound('test');
    expect(r.store.getJob(orphan.id)).toMatchObject({
      state: 'failed',
      reason: 'dependency job-99 is not in the state: this job can never start',
    });
  });

  it('fails a job whose dependency ended without success, and the jobs that depend on it, saying which', async () => {
    const control = new ScriptedExits(new Map([['job-1.0', [3]]]));
    const metrics = new ControllerMetrics();
    const r = rig({}, { tasks: control, metrics });
    control.store = r.store;
    const broken = r.controller.submit(jobSpec('broken', CPU_SMALL), 'research');
    const next = r.controller.submit(after(jobSpec('next', CPU_SMALL), broken.id), 'research');
    const then = r.controller.submit(after(jobSpec('then', CPU_SMALL), next.id), 'research');
    const unrelated = r.controller.submit(jobSpec('unrelated', { c7i: [0, 2, 4] }), 'research');
    await passes(r, () => r.store.getJob(then.id)?.state === 'failed');
    expect(r.store.getJob(broken.id)?.state).toBe('failed');
    expect(r.store.getJob(next.id)).toMatchObject({
      state: 'failed',
      reason: `dependency ${broken.id} ended failed: this job can never start`,
    });
    expect(r.store.getJob(then.id)).toMatchObject({
      state: 'failed',
      reason: `dependency ${next.id} ended failed: this job can never start`,
    });
    expect(await metrics.registry.metrics()).toMatch(
      /^fleetwise_jobs_failed_by_rule_total\{rule="dependency"\} 2$/m,
    );
    // Neither ever started; a job without dependencies ran as usual.
    expect(control.starts.map((s) => s.taskId)).not.toContain(`${next.id}.0`);
    expect(control.starts.map((s) => s.taskId)).toContain(`${unrelated.id}.0`);
    // Nor can a new job depend on one of them.
    expect(
      problemsOf(() => r.controller.submit(after(jobSpec('late', CPU_SMALL), then.id), 'research')),
    ).toEqual([`dependsOn: ${then.id} ended failed, so this job could never start`]);
  });
});

describe('when a job held for its dependencies can start', () => {
  it('predicts a held job to start after its dependencies end, and shows their ends and the latest (through a held one without an end) as the earliest start', async () => {
    const r = rig({}, { tasks: new ScriptedExits(new Map()) });
    const t0 = r.clock.nowSeconds();
    const long = r.controller.submit(
      jobSpec('long', CPU_SMALL, { expectedDurationSeconds: 3600 }),
      'research',
    );
    const short = r.controller.submit(
      jobSpec('short', CPU_SMALL, { expectedDurationSeconds: 600 }),
      'research',
    );
    const next = r.controller.submit(
      after(jobSpec('next', CPU_SMALL, { expectedDurationSeconds: 60 }), long.id, short.id),
      'research',
    );
    // Held, and of unknown length: no end of its own to predict.
    const unsized = r.controller.submit(after(jobSpec('unsized', CPU_SMALL), long.id), 'research');
    const last = r.controller.submit(after(jobSpec('last', CPU_SMALL), unsized.id), 'research');
    await r.controller.predictionsSettled();
    const eta = (id: string) => readQueueRecord(r.store, id)?.eta;
    const [longEnd, shortEnd] = [long.id, short.id].map((id) => eta(id)?.completionSeconds) as [
      number,
      number,
    ];
    // Both run at once from t0: the longer one ends last.
    expect(longEnd).toBeGreaterThan(t0 + 3600);
    expect(shortEnd).toBeLessThan(longEnd);
    // The held job runs in the prediction once both have ended: it starts after the later end, and runs its 60 s.
    const nextEta = eta(next.id);
    expect(nextEta?.startSeconds as number).toBeGreaterThanOrEqual(longEnd);
    expect(nextEta?.completionSeconds as number).toBeGreaterThanOrEqual(
      (nextEta?.startSeconds as number) + 60,
    );
    expect(nextEta?.completionSeconds as number).toBeLessThan(longEnd + 600);
    expect(nextEta?.basis).toContain(`held until ${long.id}, ${short.id} succeed`);
    const view = (id: string) => jobDocument(r.store, r.store.getJob(id) as JobRecord, true);
    expect(view(next.id).dependencies).toEqual([
      { id: long.id, state: 'queued', predictedCompletionSeconds: longEnd },
      { id: short.id, state: 'queued', predictedCompletionSeconds: shortEnd },
    ]);
    expect(view(next.id).startsNoEarlierThanSeconds).toBe(longEnd);
    // A held dependency without a predicted end: the earliest it can start bounds the job after it.
    expect(eta(unsized.id)?.completionSeconds).toBeNull();
    expect(view(last.id).dependencies).toEqual([{ id: unsized.id, state: 'queued' }]);
    expect(view(last.id).startsNoEarlierThanSeconds).toBe(longEnd);
    // Neither holds for a job that waits for nothing.
    expect(view(long.id).startsNoEarlierThanSeconds).toBeNull();
  });

  it('leaves out of the predictions a held job whose dependency ended without success, and the jobs after it', async () => {
    const r = rig({}, { tasks: new ScriptedExits(new Map()) });
    const sized = (name: string) => jobSpec(name, CPU_SMALL, { expectedDurationSeconds: 600 });
    const doomed = r.controller.submit(sized('doomed'), 'research');
    const step = r.controller.submit(after(sized('step'), doomed.id), 'research');
    const next = r.controller.submit(after(sized('next'), step.id), 'research');
    await r.controller.predictionsSettled();
    expect(readQueueRecord(r.store, next.id)?.eta?.completionSeconds).toEqual(expect.any(Number));
    // Cancelled before a round has failed the jobs that wait for it: they can never start, and are not predicted
    // (the prediction neither runs them nor waits for them until its horizon).
    r.clock.advance(10);
    r.controller.cancel(doomed.id);
    const other = r.controller.submit(sized('other'), 'research');
    await r.controller.predictionsSettled();
    expect(r.store.getJob(step.id)?.state).toBe('queued');
    const eta = (id: string) => readQueueRecord(r.store, id)?.eta;
    expect(eta(other.id)?.completionSeconds).toEqual(expect.any(Number));
    expect(eta(step.id)?.computedAtSeconds).toBeLessThan(eta(other.id)?.computedAtSeconds as number);
    expect(eta(next.id)?.computedAtSeconds).toBeLessThan(eta(other.id)?.computedAtSeconds as number);
    // Once failed for it, they show no ETA (their last prediction, a start to come, is kept only in the record).
    await r.controller.runRound('test');
    for (const id of [step.id, next.id]) {
      const job = r.store.getJob(id) as JobRecord;
      expect(job.state).toBe('failed');
      expect(eta(id)?.startSeconds).toEqual(expect.any(Number));
      expect(jobDocument(r.store, job, true).eta).toBeNull();
      expect(jobSummary(job, 1, r.store, true).eta).toBeNull();
    }
  });

  it('is unknown while a dependency has no predicted end, and leaves out the ones that succeeded', () => {
    const r = rig({}, { tasks: new ScriptedExits(new Map()) });
    const a = r.controller.submit(jobSpec('a', CPU_SMALL), 'research');
    const b = r.controller.submit(jobSpec('b', CPU_SMALL), 'research');
    const c = r.controller.submit(after(jobSpec('c', CPU_SMALL), a.id, b.id), 'research');
    const job = r.store.getJob(c.id) as JobRecord;
    const ends = new Map([[a.id, 5000]]);
    expect(earliestStartSeconds(job.spec.dependsOn, r.store, (id) => ends.get(id))).toBeUndefined();
    ends.set(b.id, 7000);
    expect(earliestStartSeconds(job.spec.dependsOn, r.store, (id) => ends.get(id))).toBe(7000);
    // b succeeded: only a holds the job now, and b's stale prediction is not shown.
    r.store.setJobState(b.id, 'starting');
    r.store.setJobState(b.id, 'running');
    r.store.setJobState(b.id, 'succeeded');
    expect(earliestStartSeconds(job.spec.dependsOn, r.store, (id) => ends.get(id))).toBe(5000);
    expect(dependencyViews(job, r.store, (id) => ends.get(id))).toEqual([
      { id: a.id, state: 'queued', predictedCompletionSeconds: 5000 },
      { id: b.id, state: 'succeeded' },
    ]); // a cancelled: the job can never start, and a's last prediction is stale.
    r.controller.cancel(a.id);
    expect(earliestStartSeconds(job.spec.dependsOn, r.store, (id) => ends.get(id))).toBeUndefined();
    expect(dependencyViews(job, r.store, (id) => ends.get(id))).toEqual([
      { id: a.id, state: 'cancelled' },
      { id: b.id, state: 'succeeded' },
    ]);
  });
});

describe('job dependencies: any graph, any outcomes (property)', () => {
  it('every job ends; one runs only after all it depends on succeeded, and succeeds only if they all did', async () => {
    // Each job depends on some earlier ones and exits 0 (success) or 3 (failure, no retry) when it runs.
    const graph = fc
      .array(fc.record({ exit: fc.constantFrom(0, 3), picks: fc.array(fc.nat(), { maxLength: 3 }) }), {
        minLength: 1,
        maxLength: 8,
      })
      .map((jobs) =>
        jobs.map((j, i) => ({
          exit: j.exit,
          dependsOn: i === 0 ? [] : [...new Set(j.picks.map((p) => p % i))].sort((a, b) => a - b),
        })),
      );
    await fc.assert(
      fc.asyncProperty(graph, async (jobs) => {
        const control = new ScriptedExits(new Map(jobs.map((j, i) => [`job-${i + 1}.0`, [j.exit]])));
        const r = rig({}, { tasks: control });
        control.store = r.store;
        const ids = jobs.map(
          (j, i) =>
            r.controller.submit(
              after(jobSpec(`step-${i}`, CPU_SMALL), ...j.dependsOn.map((d) => `job-${d + 1}`)),
              'research',
            ).id,
        );
        const ended = (): boolean =>
          ids.every((id) => ['succeeded', 'failed'].includes(r.store.getJob(id)?.state ?? ''));
        await passes(r, ended);
        expect(ended(), 'every job ended').toBe(true);
        const started = new Set(control.starts.map((s) => s.taskId.replace(/\.0$/, '')));
        jobs.forEach((j, i) => {
          const job = r.store.getJob(ids[i] as string);
          const deps = j.dependsOn.map((d) => r.store.getJob(ids[d] as string));
          const depsSucceeded = deps.every((d) => d?.state === 'succeeded');
          expect(job?.state, ids[i]).toBe(depsSucceeded && j.exit === 0 ? 'succeeded' : 'failed');
          expect(started.has(ids[i] as string), `${ids[i]} started`).toBe(depsSucceeded);
          if (depsSucceeded)
            for (const d of deps)
              expect(job?.startedAtSeconds ?? -1).toBeGreaterThan(d?.finishedAtSeconds as number);
        });
      }),
      { numRuns: 40 },
    );
  });
});
