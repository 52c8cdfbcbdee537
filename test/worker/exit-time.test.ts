import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { exitedAtMs, readExitRecord } from '../../src/worker/exit-record.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import type { TaskReport } from '../../src/protocol/worker-protocol.js';
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
 * dates the task's end by the report, which says how long before it the task exited (an age, so the two hosts' clocks
 * need not agree). The age is counted from the exit record's time: the executor's finish of a task that exited while
 * no worker ran, kept with the task's record on the host for a worker restarted since.
 */

const tmp = mkdtempSync(join(tmpdir(), 'fw-exit-time-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("a task's report", () => {
  const exitedAt = 1_700_000_006_500;
  const task = (phase: LocalTask['phase']): LocalTask => ({
    taskId: 'job-1.0',
    jobId: 'job-1',
    phase,
    startedAtMs: 1_700_000_000_000,
    stopRequested: false,
    exitCode: 4,
    exitedAtMs: exitedAt,
    lastLogUploadMs: 0,
  });

  it('says how long ago an ended task exited, as of each report, in seconds; nothing of the kind for one that did not end', () => {
    expect(taskReport(task('failed'), 0, exitedAt + 2_500).exitedSecondsAgo).toBe(2.5);
    expect(taskReport(task('succeeded'), 0, exitedAt + 2_500).exitedSecondsAgo).toBe(2.5);
    // The next heartbeat's report is older by the time between them.
    expect(taskReport(task('failed'), 0, exitedAt + 12_500).exitedSecondsAgo).toBe(12.5);
    // This host's clock stepped back since the exit: it exited no later than now.
    expect(taskReport(task('failed'), 0, exitedAt - 60_000).exitedSecondsAgo).toBe(0);
    // A stop is no end of the task (it runs again from its checkpoint).
    expect(taskReport(task('stopped'), 0, exitedAt + 2_500).exitedSecondsAgo).toBeUndefined();
    expect(taskReport(task('running'), 0, exitedAt + 2_500).exitedSecondsAgo).toBeUndefined();
    expect(
      taskReport({ ...task('failed'), exitedAtMs: undefined }, 0, exitedAt + 2_500).exitedSecondsAgo,
    ).toBeUndefined();
    expect(
      taskReport({ ...task('failed'), exitedAtMs: Number.NaN }, 0, exitedAt + 2_500).exitedSecondsAgo,
    ).toBeUndefined();
  });

  it("keeps the exit's time with the task's record on the host", async () => {
    const dir = join(tmp, 'record');
    await persistTask(dir, task('failed'));
    const saved = await readPersistedTask(dir);
    expect(saved?.exitedAtMs).toBe(exitedAt);
    const restored = taskFromRecord('job-1.0', saved as NonNullable<typeof saved>);
    expect(taskReport(restored, 0, exitedAt + 90_000).exitedSecondsAgo).toBe(90);
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
    const record = await readExitRecord(store, ref, 1);
    expect(record).toMatchObject({ state: 'failed', exitCode: 4, exitedAt: finishedAt.toISOString() });
    expectExitedAt(finishedAt, () => second.reports(), { state: 'failed', exitCode: 4 });
    await second.stopWatchers();

    // Restarted once more before any controller heard of it: the same time, from the task's record.
    const third = offlineLifecycle(new ProcessExecutor({ stateDir }), store, workDir);
    const recorded = await timed(() => third.recordedReports());
    expectAged(finishedAt, recorded, { state: 'failed' });
    await third.adopt();
    await third.settle();
    expectExitedAt(finishedAt, () => third.reports(), { state: 'failed' });
    await third.stopWatchers();
  });
});

/** Reports made between `fromMs` and `toMs` (this host's clock). */
interface TimedReports {
  readonly reports: readonly TaskReport[];
  readonly fromMs: number;
  readonly toMs: number;
}

async function timed(make: () => Promise<readonly TaskReport[]>): Promise<TimedReports> {
  const fromMs = Date.now();
  const reports = await make();
  return { reports, fromMs, toMs: Date.now() };
}

/** The reports, one task's, say `fields` and that it exited at `finishedAt`: aged by when they were made. */
function expectAged(finishedAt: Date, made: TimedReports, fields: Partial<TaskReport>): void {
  expect(made.reports).toEqual([expect.objectContaining(fields)]);
  const age = made.reports[0]?.exitedSecondsAgo;
  expect(age).toBeGreaterThanOrEqual((made.fromMs - finishedAt.getTime()) / 1000);
  expect(age).toBeLessThanOrEqual((made.toMs - finishedAt.getTime()) / 1000);
}

function expectExitedAt(
  finishedAt: Date,
  make: () => readonly TaskReport[],
  fields: Partial<TaskReport>,
): void {
  const fromMs = Date.now();
  const reports = make();
  expectAged(finishedAt, { reports, fromMs, toMs: Date.now() }, fields);
}
