import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/controller/clock.js';
import type { JobSpec, RetryStrategy } from '../../src/controller/job-spec/spec.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { StateStore } from '../../src/controller/state-store.js';
import {
  CPU_SMALL,
  FakeCloud,
  jobSpec,
  rig,
  RUNS_ON,
  ScriptedExits,
  type Rig,
} from './controller-fixtures.js';

function withRetry(spec: JobSpec, retryStrategy: RetryStrategy): JobSpec {
  return { ...spec, retryStrategy };
}

/** Rounds and reconcile passes (a round after each pass, as the requested early round would) until the job ends. */
async function runUntilEnded(r: Pick<Rig, 'controller' | 'store' | 'clock'>, jobId: string): Promise<void> {
  for (let pass = 0; pass < 20; pass++) {
    await r.controller.runRound('test');
    await r.controller.reconcile();
    const state = r.store.getJob(jobId)?.state;
    if (state === 'succeeded' || state === 'failed' || state === 'unsuccessful') return;
    r.clock.advance(5);
  }
  throw new Error(`job ${jobId} did not end: ${JSON.stringify(r.store.getJob(jobId))}`);
}

describe('retryStrategy in the controller', () => {
  it('retries a task killed with 137 twice and succeeds on attempt 3, each retry resuming from its checkpoint', async () => {
    const control = new ScriptedExits(new Map([['job-1.0', [137, 137, 0]]]));
    const r = rig({}, { tasks: control });
    control.store = r.store;
    const requested = vi.spyOn(r.controller, 'requestRound');
    const job = r.controller.submit(
      withRetry(jobSpec('flaky', CPU_SMALL), {
        attempts: 3,
        evaluateOnExit: [{ onExitCode: '137', action: 'retry' }],
      }),
      'research',
    );
    await runUntilEnded(r, job.id);
    expect(r.store.getJob(job.id)).toMatchObject({ state: 'succeeded', attempts: 3 });
    expect(control.starts).toEqual([
      { taskId: 'job-1.0', attempt: 1, fromCheckpoint: undefined },
      { taskId: 'job-1.0', attempt: 2, fromCheckpoint: 'checkpoints/job-1/job-1.0/1/manifest.json' },
      { taskId: 'job-1.0', attempt: 3, fromCheckpoint: 'checkpoints/job-1/job-1.0/2/manifest.json' },
    ]);
    const failures = r.store.getJob(job.id)?.attemptFailures ?? [];
    expect(failures.map((f) => [f.attempt, f.taskId, f.exitCode])).toEqual([
      [1, 'job-1.0', 137],
      [2, 'job-1.0', 137],
    ]);
    expect(failures[0]?.reason).toBe('exit code 137; last output:\nKilled');
    expect(r.store.listEvents({ jobId: job.id, kind: 'job.retry' }).map((e) => e.data)).toEqual([
      expect.objectContaining({ attempt: 1, next: 2, exitCode: 137 }),
      expect.objectContaining({ attempt: 2, next: 3, exitCode: 137 }),
    ]);
    const queued = r.store
      .listEvents({ jobId: job.id, kind: 'job.state' })
      .filter((e) => (e.data as { to: string }).to === 'queued');
    expect(queued.map((e) => (e.data as { reason: string }).reason)).toEqual([
      'attempt 1 of 3 failed: task job-1.0, exit code 137 matches evaluateOnExit[0] (137: retry); retrying (attempt 2 of 3)',
      'attempt 2 of 3 failed: task job-1.0, exit code 137 matches evaluateOnExit[0] (137: retry); retrying (attempt 3 of 3)',
    ]);
    // A retry is an event, not lost capacity: it waits for the period when early rounds are off.
    expect(requested).toHaveBeenCalledWith('job job-1 retried (attempt 2)', undefined);
    expect(requested).toHaveBeenCalledWith('job job-1 retried (attempt 3)', undefined);
  });

  it('fails at once on an exit rule, and with the attempt and why once attempts run out', async () => {
    const control = new ScriptedExits(
      new Map([
        ['job-1.0', [2]],
        ['job-2.0', [137, 1, 137]],
      ]),
    );
    const r = rig({}, { tasks: control });
    control.store = r.store;
    const rules: RetryStrategy = {
      attempts: 3,
      evaluateOnExit: [
        { onExitCode: '137', action: 'retry' },
        { onExitCode: '2', action: 'exit' },
      ],
    };
    const exits = r.controller.submit(withRetry(jobSpec('exits', CPU_SMALL), rules), 'research');
    await runUntilEnded(r, exits.id);
    expect(r.store.getJob(exits.id)).toMatchObject({
      state: 'failed',
      attempts: 1,
      reason:
        'attempt 1 of 3, exit code 2 matches evaluateOnExit[1] (2: exit): task job-1.0 failed: exit code 2; last output:\nKilled',
    });
    expect(r.store.listEvents({ jobId: exits.id, kind: 'job.retry' })).toEqual([]);

    const exhausted = r.controller.submit(withRetry(jobSpec('exhausted', CPU_SMALL), rules), 'research');
    await runUntilEnded(r, exhausted.id);
    expect(r.store.getJob(exhausted.id)).toMatchObject({
      state: 'failed',
      attempts: 3,
      reason:
        'attempt 3 of 3, exit code 137 matches evaluateOnExit[0] (137: retry); no attempts left: task job-2.0 failed: exit code 137; last output:\nKilled',
    });
    // Exit code 1 matches no rule: retried, as in AWS Batch.
    expect(r.store.getJob(exhausted.id)?.attemptFailures?.map((f) => f.exitCode)).toEqual([137, 1]);
    expect(control.starts.filter((s) => s.taskId === 'job-2.0').map((s) => s.attempt)).toEqual([1, 2, 3]);
  });

  it('without a retryStrategy a failure fails the job as before', async () => {
    const control = new ScriptedExits(new Map([['job-1.0', [137]]]));
    const r = rig({}, { tasks: control });
    control.store = r.store;
    const job = r.controller.submit(jobSpec('plain', CPU_SMALL), 'research');
    await runUntilEnded(r, job.id);
    expect(r.store.getJob(job.id)).toMatchObject({
      state: 'failed',
      attempts: 1,
      reason: 'task job-1.0 failed: exit code 137; last output:\nKilled',
    });
  });

  it('restarts a gang whole: the other task checkpoints and stops, both resume in the next attempt', async () => {
    const control = new ScriptedExits(
      new Map([
        ['job-1.0', [137, 0]],
        ['job-1.1', [RUNS_ON, 0]],
      ]),
    );
    const r = rig({}, { tasks: control });
    control.store = r.store;
    const job = r.controller.submit(
      withRetry(jobSpec('gang', CPU_SMALL, { replicas: 2 }), { attempts: 2 }),
      'research',
    );
    await runUntilEnded(r, job.id);
    expect(r.store.getJob(job.id)).toMatchObject({ state: 'succeeded', attempts: 2 });
    expect(control.stops).toContain('job-1.1 (checkpoint)');
    expect(control.starts.map((s) => [s.taskId, s.attempt])).toEqual([
      ['job-1.0', 1],
      ['job-1.1', 1],
      ['job-1.0', 2],
      ['job-1.1', 2],
    ]);
  });

  describe('with SQLite', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleetwise-retry-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it('a controller restarted between attempts keeps counting them', async () => {
      const path = join(dir, 'state.db');
      const clock = new ManualClock();
      const cloud = new FakeCloud();
      let store: StateStore = new SqliteStateStore(path, { nowSeconds: () => clock.nowSeconds() });
      const scripts = new Map([['job-1.0', [137]]]);
      const first = new ScriptedExits(scripts);
      first.store = store;
      const r1 = rig({}, { tasks: first, store, clock, cloud });
      const job = r1.controller.submit(
        withRetry(jobSpec('restarted', CPU_SMALL), { attempts: 3 }),
        'research',
      );
      await r1.controller.runRound('test');
      await r1.controller.reconcile();
      expect(store.getJob(job.id)).toMatchObject({ state: 'queued', attempts: 2 });
      store.close();

      // A new controller process: the store on disk, the same cloud; its task control has no memory of the runs.
      store = new SqliteStateStore(path, { nowSeconds: () => clock.nowSeconds() });
      const second = new ScriptedExits(new Map([['job-1.0', [137, 0]]]));
      second.store = store;
      const r2 = rig({}, { tasks: second, store, clock, cloud });
      await r2.controller.recover();
      expect(store.getJob(job.id)).toMatchObject({ state: 'queued', attempts: 2 });
      await runUntilEnded(r2, job.id);
      expect(store.getJob(job.id)).toMatchObject({ state: 'succeeded', attempts: 3 });
      expect(second.starts.map((s) => [s.attempt, s.fromCheckpoint])).toEqual([
        [2, 'checkpoints/job-1/job-1.0/1/manifest.json'],
        [3, 'checkpoints/job-1/job-1.0/1/manifest.json'],
      ]);
      expect(store.getJob(job.id)?.attemptFailures?.map((f) => f.attempt)).toEqual([1, 2]);
      store.close();
    });
  });
});
