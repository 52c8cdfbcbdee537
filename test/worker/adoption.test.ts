import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readExitRecord } from '../../src/worker/exit-record.js';
import type { TaskLaunch } from '../../src/worker/executor.js';
import { DockerExecutor, launchedOfLabels } from '../../src/worker/executors/docker.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { TaskLifecycle } from '../../src/worker/task-lifecycle.js';
import { readPersistedTask } from '../../src/worker/task-record.js';
import { offlineLifecycle, shellTask, until, untilTaskEnded } from './agent-fixtures.js';

/**
 * A worker that died (SIGKILL) and restarts adopts what its executor still has. What it adopts must be the task as it
 * was launched (its attempt above all), whatever became of the worker's own record; an exit 0 it did not watch is the
 * task's end only with its work done; a task removed meanwhile is reported, not silently run again.
 */
const tmp = mkdtempSync(join(tmpdir(), 'fw-adoption-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const lifecycle = (executor: ProcessExecutor, store: FsObjectStore, workDir: string): TaskLifecycle =>
  offlineLifecycle(executor, store, workDir, 20);

/** Reports `n` iterations done, then waits for the file `go` (in its state dir, $HOME) and exits 0 having done `end`. */
function waitingTask(n: number, end: number): string {
  return (
    `echo "$(date +%s) ${n}" >> "$FLEETWISE_PROGRESS_FILE"; echo ready; ` +
    `while [ ! -e "$HOME/go" ]; do sleep 0.02; done; echo "$(date +%s) ${end}" >> "$FLEETWISE_PROGRESS_FILE"`
  );
}

describe('adoption: a worker whose record of a task is damaged or gone', () => {
  it('rebuilds the task from what the executor kept of its launch: its exit is attempt 2’s, not attempt 1’s', async () => {
    const stateDir = join(tmp, 'rebuild-executor');
    const store = new FsObjectStore(join(tmp, 'rebuild-store'));
    const workDir = join(tmp, 'rebuild-work');
    const ref = { jobId: 'rebuild-1', taskId: 'rebuild-1.0' };
    const executor = new ProcessExecutor({ stateDir });
    const first = lifecycle(executor, store, workDir);
    first.start(
      shellTask(ref.taskId, waitingTask(5, 400), {
        attempt: 2,
        totalIterations: 400,
        checkpoint: { signal: 'SIGINT', timeoutSeconds: 30 },
      }),
    );
    await first.settle();
    expect(first.get(ref.taskId)?.phase).toBe('running');
    // The worker dies, and its record of the task is torn.
    await first.stopWatchers();
    const recordPath = join(workDir, 'tasks', ref.taskId, 'agent.json');
    writeFileSync(recordPath, (await readFile(recordPath, 'utf8')).slice(0, 40));

    const second = lifecycle(new ProcessExecutor({ stateDir }), store, workDir);
    await second.adopt();
    expect(second.get(ref.taskId)).toMatchObject({
      jobId: ref.jobId,
      phase: 'running',
      attempt: 2,
      signal: 'SIGINT',
      timeoutSeconds: 30,
      total: 400,
    });
    // Rebuilt and recorded again, whole.
    expect(await readPersistedTask(join(workDir, 'tasks', ref.taskId))).toMatchObject({ attempt: 2 });
    writeFileSync(join(stateDir, ref.taskId, 'go'), '');
    await untilTaskEnded(second, ref.taskId);
    expect(second.reports()).toEqual([
      expect.objectContaining({ taskId: ref.taskId, state: 'succeeded', exitCode: 0, attempt: 2 }),
    ]);
    expect(await readExitRecord(store, ref, 2)).toMatchObject({ attempt: 2, state: 'succeeded' });
    expect(await readExitRecord(store, ref, 1)).toBeUndefined();
    await second.stopWatchers();
  });

  it('with nothing to rebuild it from, ends the task and reports it stopped (it resumes from its checkpoint)', async () => {
    const stateDir = join(tmp, 'lost-executor');
    const store = new FsObjectStore(join(tmp, 'lost-store'));
    const workDir = join(tmp, 'lost-work');
    const taskId = 'lost-1.0';
    const executor = new ProcessExecutor({ stateDir });
    const first = lifecycle(executor, store, workDir);
    first.start(shellTask(taskId, waitingTask(5, 400), { attempt: 2, totalIterations: 400 }));
    await first.settle();
    await first.stopWatchers();
    rmSync(join(workDir, 'tasks', taskId, 'agent.json'));
    // The executor's own record of the launch gone too: nothing says which attempt runs.
    rmSync(join(stateDir, taskId, 'launch.json'));

    const second = lifecycle(new ProcessExecutor({ stateDir }), store, workDir);
    await second.adopt();
    const [report] = second.reports();
    expect(report).toMatchObject({ taskId, state: 'stopped' });
    expect(report?.reason).toMatch(/lost its record/);
    // Nothing runs unwatched behind a "stopped".
    expect((await executor.status(taskId))?.state).toBe('exited');
    await executor.remove(taskId);
  });
});

describe('adoption: a task that exited 0 while no worker ran', () => {
  it('is stopped when short of its declared iterations, succeeded when it did them all or declares none', async () => {
    const stateDir = join(tmp, 'term-executor');
    const store = new FsObjectStore(join(tmp, 'term-store'));
    const workDir = join(tmp, 'term-work');
    // Checkpoints and exits 0 on SIGTERM (a host shutting down, `docker stop`), 3 of 100 iterations done.
    const onTerm =
      'trap \'echo 1 > "$FLEETWISE_CHECKPOINT_DIR/state"; exit 0\' TERM; ' +
      'echo "$(date +%s) 3" >> "$FLEETWISE_PROGRESS_FILE"; while :; do sleep 0.02; done';
    const executor = new ProcessExecutor({ stateDir });
    const first = lifecycle(executor, store, workDir);
    first.start(shellTask('short-1.0', onTerm, { totalIterations: 100 }));
    first.start(shellTask('whole-1.0', waitingTask(3, 100), { totalIterations: 100 }));
    first.start(shellTask('undeclared-1.0', onTerm));
    await first.settle();
    for (const t of first.all()) expect([t.taskId, t.phase]).toEqual([t.taskId, 'running']);
    await until(
      'progress to be written',
      async () =>
        ['short-1.0', 'undeclared-1.0'].every((id) =>
          readIfThere(join(workDir, 'tasks', id, 'progress')).includes(' 3'),
        ) || undefined,
    );
    // The worker dies; meanwhile two are sent SIGTERM and one finishes its work.
    await first.stopWatchers();
    await executor.signal('short-1.0', 'SIGTERM');
    await executor.signal('undeclared-1.0', 'SIGTERM');
    writeFileSync(join(stateDir, 'whole-1.0', 'go'), '');
    await until(
      'the tasks to exit',
      async () => (await executor.list()).every((s) => s.state === 'exited' && s.exitCode === 0) || undefined,
    );

    const second = lifecycle(new ProcessExecutor({ stateDir }), store, workDir);
    await second.adopt();
    for (const id of ['short-1.0', 'whole-1.0', 'undeclared-1.0']) await untilTaskEnded(second, id);
    const byId = new Map(second.reports().map((r) => [r.taskId, r]));
    expect(byId.get('short-1.0')).toMatchObject({ state: 'stopped', exitCode: 0, completedIterations: 3 });
    expect(byId.get('short-1.0')?.reason).toMatch(/short of its declared iterations/);
    expect(byId.get('whole-1.0')).toMatchObject({ state: 'succeeded', completedIterations: 100 });
    // No iterations declared: nothing tells a shutdown's exit 0 from the task's end.
    expect(byId.get('undeclared-1.0')).toMatchObject({ state: 'succeeded' });
    // A stop is not the task's end: no exit recorded, so the next run resumes it.
    expect(await readExitRecord(store, { jobId: 'short-1', taskId: 'short-1.0' }, 1)).toBeUndefined();
    expect(await readExitRecord(store, { jobId: 'whole-1', taskId: 'whole-1.0' }, 1)).toMatchObject({
      state: 'succeeded',
    });
    await second.stopWatchers();
  });
});

describe('adoption: a task removed while no worker ran', () => {
  it('is reported failed, not left for the controller to start afresh; a start the worker died in is not', async () => {
    const stateDir = join(tmp, 'gone-executor');
    const store = new FsObjectStore(join(tmp, 'gone-store'));
    const workDir = join(tmp, 'gone-work');
    const executor = new ProcessExecutor({ stateDir });
    const first = lifecycle(executor, store, workDir);
    first.start(shellTask('gone-1.0', 'while :; do sleep 0.02; done', { attempt: 3 }));
    await first.settle();
    expect(first.get('gone-1.0')?.phase).toBe('running');
    await first.stopWatchers();
    await executor.remove('gone-1.0');
    // A start that never reached the executor (the worker died restoring its checkpoint).
    const starting = join(workDir, 'tasks', 'starting-1.0');
    mkdirSync(starting, { recursive: true });
    writeFileSync(
      join(starting, 'agent.json'),
      JSON.stringify({
        jobId: 'starting-1',
        phase: 'starting',
        startedAtMs: 1,
        stopRequested: false,
        attempt: 1,
      }),
    );

    const second = lifecycle(new ProcessExecutor({ stateDir }), store, workDir);
    await second.adopt();
    expect(second.reports()).toEqual([
      expect.objectContaining({
        taskId: 'gone-1.0',
        state: 'failed',
        attempt: 3,
        reason: expect.stringMatching(/disappeared while the worker was down/) as unknown,
      }),
    ]);
    expect(await readPersistedTask(join(workDir, 'tasks', 'gone-1.0'))).toMatchObject({ phase: 'failed' });
    expect(existsSync(starting)).toBe(true);
  });
});

describe('adoption: what a container keeps of its launch', () => {
  it('labels a container with its attempt, checkpoint settings and iterations, and reads them back', () => {
    const executor = new DockerExecutor({ docker: undefined });
    const launch: TaskLaunch = {
      taskId: 'lab-1.0',
      jobId: 'lab-1',
      image: 'x',
      command: [],
      env: {},
      vcpus: 1,
      memoryGiB: 0,
      gpus: 0,
      shmSizeGiB: 0,
      checkpointDir: '/ck',
      progressFile: '/p/progress',
      restoring: false,
      attempt: 3,
      checkpointSignal: 'SIGUSR1',
      checkpointTimeoutSeconds: 45,
      totalIterations: 500,
    };
    const labels = executor.containerSpec(launch, 'img').Labels;
    expect(launchedOfLabels(labels)).toEqual({
      jobId: 'lab-1',
      attempt: 3,
      checkpointSignal: 'SIGUSR1',
      checkpointTimeoutSeconds: 45,
      totalIterations: 500,
    });
    // A container from before the attempt label: its attempt is not known.
    expect(launchedOfLabels({ 'fleetwise.task': 'lab-1.0', 'fleetwise.job': 'lab-1' })).toBeUndefined();
  });
});

function readIfThere(path: string): string {
  return existsSync(path) ? readFileSync(path, 'utf8') : '';
}
