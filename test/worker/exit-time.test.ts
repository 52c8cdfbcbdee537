import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { exitedAtMs, readExitRecord } from '../../src/worker/exit-record.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { taskReport } from '../../src/worker/task-report.js';
import {
  persistTask,
  readPersistedTask,
  taskFromRecord,
  type LocalTask,
} from '../../src/worker/task-record.js';
import { offlineLifecycle, shellTask, until, untilTaskEnded } from './agent-fixtures.js';

/**
 * When a task exited, as its worker reports it: the controller may hear of the exit long after (it was down), and
 * dates the task's end by the report. The time is the exit record's: the executor's finish of a task that exited while
 * no worker ran, kept with the task's record on the host for a worker restarted since.
 */

const tmp = mkdtempSync(join(tmpdir(), 'fw-exit-time-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("a task's report", () => {
  const task = (phase: LocalTask['phase']): LocalTask => ({
    taskId: 'job-1.0',
    jobId: 'job-1',
    phase,
    startedAtMs: 1_700_000_000_000,
    stopRequested: false,
    exitCode: 4,
    exitedAtMs: 1_700_000_006_500,
    lastLogUploadMs: 0,
  });

  it('says when an ended task exited, in seconds; nothing of the kind for one that did not end', () => {
    expect(taskReport(task('failed')).exitedAtSeconds).toBe(1_700_000_006.5);
    expect(taskReport(task('succeeded')).exitedAtSeconds).toBe(1_700_000_006.5);
    // A stop is no end of the task (it runs again from its checkpoint).
    expect(taskReport(task('stopped')).exitedAtSeconds).toBeUndefined();
    expect(taskReport(task('running')).exitedAtSeconds).toBeUndefined();
    expect(taskReport({ ...task('failed'), exitedAtMs: undefined }).exitedAtSeconds).toBeUndefined();
  });

  it("keeps the exit's time with the task's record on the host", async () => {
    const dir = join(tmp, 'record');
    await persistTask(dir, task('failed'));
    const saved = await readPersistedTask(dir);
    expect(saved?.exitedAtMs).toBe(1_700_000_006_500);
    expect(taskReport(taskFromRecord('job-1.0', saved as NonNullable<typeof saved>)).exitedAtSeconds).toBe(
      1_700_000_006.5,
    );
  });

  it("takes the executor's finish for the exit's time, never one after now; now when it gives none", () => {
    expect(exitedAtMs(new Date(5_000), 9_000)).toBe(5_000);
    expect(exitedAtMs(new Date(12_000), 9_000)).toBe(9_000);
    expect(exitedAtMs(undefined, 9_000)).toBe(9_000);
    expect(exitedAtMs(new Date(Number.NaN), 9_000)).toBe(9_000);
  });
});

describe('a task that exited while no worker ran', () => {
  it('is reported exited when the executor saw it end, by the worker that adopts it and by one restarted after', async () => {
    const stateDir = join(tmp, 'executor');
    const store = new FsObjectStore(join(tmp, 'store'));
    const workDir = join(tmp, 'work');
    const ref = { jobId: 'late-1', taskId: 'late-1.0' };
    const executor = new ProcessExecutor({ stateDir });
    const first = offlineLifecycle(executor, store, workDir);
    // Waits for the file `go` in its state dir ($HOME), then fails.
    first.start(shellTask(ref.taskId, 'while [ ! -e "$HOME/go" ]; do sleep 0.02; done; exit 4'));
    await first.settle();
    expect(first.get(ref.taskId)?.phase).toBe('running');
    // The worker dies; the task ends meanwhile.
    await first.stopWatchers();
    writeFileSync(join(stateDir, ref.taskId, 'go'), '');
    const finishedAt = await until('the task to exit', async () => {
      const s = await executor.status(ref.taskId);
      return s?.state === 'exited' ? s.finishedAt : undefined;
    });
    // The next worker starts later than that.
    await until('time to pass', async () => (Date.now() > finishedAt.getTime() + 100 ? true : undefined));

    const second = offlineLifecycle(new ProcessExecutor({ stateDir }), store, workDir);
    await second.adopt();
    await untilTaskEnded(second, ref.taskId);
    const recorded = await readExitRecord(store, ref, 1);
    expect(recorded).toMatchObject({ state: 'failed', exitCode: 4, exitedAt: finishedAt.toISOString() });
    expect(second.reports()).toEqual([
      expect.objectContaining({ state: 'failed', exitCode: 4, exitedAtSeconds: finishedAt.getTime() / 1000 }),
    ]);
    await second.stopWatchers();

    // Restarted once more before any controller heard of it: the same time, from the task's record.
    const third = offlineLifecycle(new ProcessExecutor({ stateDir }), store, workDir);
    expect(await third.recordedReports()).toEqual([
      expect.objectContaining({ state: 'failed', exitedAtSeconds: finishedAt.getTime() / 1000 }),
    ]);
    await third.adopt();
    await third.settle();
    expect(third.reports()).toEqual([
      expect.objectContaining({ state: 'failed', exitedAtSeconds: finishedAt.getTime() / 1000 }),
    ]);
    await third.stopWatchers();
  });
});
