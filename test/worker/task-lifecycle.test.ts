import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { checkpointKeys } from '../../src/protocol/object-keys.js';
import { heartbeatRequestSchema, type DesiredTask } from '../../src/protocol/worker-protocol.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readAll } from '../../src/storage/streams.js';
import { restoreLatestCheckpoint, uploadCheckpoint } from '../../src/worker/checkpoints.js';
import { readExitRecord } from '../../src/worker/exit-record.js';
import type {
  Executor,
  LogChunk,
  LogPosition,
  TaskLaunch,
  TaskRunStatus,
} from '../../src/worker/executor.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { persistTask, readPersistedTask, type LocalTask } from '../../src/worker/task-record.js';
import { offlineLifecycle } from './agent-fixtures.js';

/**
 * A task's lifecycle on a worker, driven directly (no heartbeats): the moment a checkpoint-stop meets a task that has
 * just ended on its own. The stop used to swallow that end (reported "stopped", never "succeeded"), and the
 * controller ran the task again from its last checkpoint elsewhere.
 */
const tmp = mkdtempSync(join(tmpdir(), 'fw-lifecycle-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function runOnce(taskId: string, command: string[]): DesiredTask {
  return {
    taskId,
    jobId: taskId.replace(/\.\d+$/, ''),
    action: 'run',
    restore: false,
    attempt: 1,
    launch: { command, env: {}, vcpus: 1, memoryGiB: 0, gpus: 0, shmSizeGiB: 0 },
    checkpoint: { signal: 'SIGTERM', timeoutSeconds: 5 },
  };
}

describe('task lifecycle', () => {
  it('a task that ended as its checkpoint-stop arrived (or did its last step) reports and records its own end; one the signal ended is stopped', async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'executor') });
    const store = new FsObjectStore(join(tmp, 'store'));
    const tasks = offlineLifecycle(executor, store, join(tmp, 'work'));
    const settings = { signal: 'SIGTERM', timeoutSeconds: 5 } as const;

    tasks.start(runOnce('ends-1.0', ['sh', '-c', 'sleep 0.2']));
    await tasks.settle();
    const ending = tasks.get('ends-1.0');
    expect(ending?.phase).toBe('running');
    // It exits on its own; the worker has not looked yet when the controller's checkpoint-stop comes in.
    for (let i = 0; (await executor.status('ends-1.0'))?.state !== 'exited'; i += 1) {
      if (i > 200) throw new Error('the task never exited');
      await new Promise((r) => setTimeout(r, 25));
    }
    await tasks.stop(ending as NonNullable<typeof ending>, true, settings);
    expect(ending).toMatchObject({ phase: 'succeeded', exitCode: 0 });
    expect(await readExitRecord(store, { jobId: 'ends-1', taskId: 'ends-1.0' }, 1)).toMatchObject({
      state: 'succeeded',
      exitCode: 0,
      instanceId: 'local-test',
    });

    // A task that checkpoints on the signal and exits 0: the signal ended it (once its trap is set).
    tasks.start(
      runOnce('moves-2.0', ['sh', '-c', 'trap "exit 0" TERM; echo ready; while :; do sleep 0.05; done']),
    );
    await tasks.settle();
    for (let i = 0; !(await readAll(await executor.logs('moves-2.0'))).toString().includes('ready'); i += 1) {
      if (i > 200) throw new Error('the task never got ready');
      await new Promise((r) => setTimeout(r, 25));
    }
    const moving = tasks.get('moves-2.0');
    await tasks.stop(moving as NonNullable<typeof moving>, true, settings);
    expect(moving?.phase).toBe('stopped');
    expect(await readExitRecord(store, { jobId: 'moves-2', taskId: 'moves-2.0' }, 1)).toBeUndefined();

    // The signal reaches a task in its last step: it exits 0 having reported all the iterations its job declares.
    const lastStep = [
      'sh',
      '-c',
      'echo "$(date +%s) 3" >> "$FLEETWISE_PROGRESS_FILE"; trap "exit 0" TERM; echo ready; while :; do sleep 0.05; done',
    ];
    for (const [taskId, total, phase] of [
      ['last-4.0', 3, 'succeeded'],
      ['unknown-5.0', undefined, 'stopped'],
    ] as const) {
      tasks.start({
        ...runOnce(taskId, lastStep),
        ...(total === undefined ? {} : { totalIterations: total }),
      });
      await tasks.settle();
      for (let i = 0; !(await readAll(await executor.logs(taskId))).toString().includes('ready'); i += 1) {
        if (i > 200) throw new Error(`${taskId} never got ready`);
        await new Promise((r) => setTimeout(r, 25));
      }
      const task = tasks.get(taskId);
      await tasks.stop(task as NonNullable<typeof task>, true, settings);
      // Done: its end is recorded. Without a declared total, an exit on the signal is a checkpoint-stop.
      expect(task?.phase).toBe(phase);
    }
  });
});

/**
 * On the signal it writes its checkpoint with a link out of the directory: no restore could take that, so the upload
 * refuses it (a permanent error, not retried).
 */
const unsafeOnSignal = [
  'sh',
  '-c',
  'trap \'echo state > "$FLEETWISE_CHECKPOINT_DIR/state"; ln -s /etc/hostname "$FLEETWISE_CHECKPOINT_DIR/out"; ' +
    'touch "$FLEETWISE_CHECKPOINT_DIR/COMPLETE"; exit 0\' TERM; echo ready; while :; do sleep 0.05; done',
];

async function untilReady(executor: ProcessExecutor, taskId: string): Promise<void> {
  await until(async () =>
    (await readAll(await executor.logs(taskId))).toString().includes('ready') ? true : undefined,
  );
}

async function until<T>(probe: () => Promise<T | undefined>): Promise<T> {
  for (let i = 0; ; i += 1) {
    const value = await probe();
    if (value !== undefined) return value;
    if (i > 400) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('a checkpoint-stop whose checkpoint cannot be uploaded', () => {
  it('stops the task and reports why, naming the checkpoint it resumes from', async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'executor-unsafe') });
    const store = new FsObjectStore(join(tmp, 'store-unsafe'));
    const tasks = offlineLifecycle(executor, store, join(tmp, 'work-unsafe'), 50);
    tasks.start(runOnce('unsafe-1.0', unsafeOnSignal));
    await tasks.settle();
    await untilReady(executor, 'unsafe-1.0');
    const task = tasks.get('unsafe-1.0');
    await tasks.stop(task as NonNullable<typeof task>, true, { signal: 'SIGTERM', timeoutSeconds: 5 });
    const [report] = tasks.reports();
    expect(report).toMatchObject({ taskId: 'unsafe-1.0', state: 'stopped' });
    expect(report?.reason).toMatch(
      /^its checkpoint at the stop could not be uploaded \(checkpoint \d+ of unsafe-1\.0: entry "out" is a symlink to \/etc\/hostname, outside the checkpoint directory.*\); it resumes from its start$/,
    );
    expect(report?.checkpoint).toBeUndefined();

    // A run that restored a checkpoint and uploaded none of its own resumes from the one it restored.
    const ref = { jobId: 'restored-2', taskId: 'restored-2.0' };
    const saved = join(tmp, 'saved-state');
    mkdirSync(saved, { recursive: true });
    writeFileSync(join(saved, 'state'), 'iteration 5000\n');
    await uploadCheckpoint(store, ref, saved, 1);
    tasks.start({ ...runOnce(ref.taskId, unsafeOnSignal), restore: true });
    await tasks.settle();
    await untilReady(executor, ref.taskId);
    const restored = tasks.get(ref.taskId);
    expect(restored?.restoredFrom).toBe(checkpointKeys(ref, 1).manifest);
    await tasks.stop(restored as NonNullable<typeof restored>, true, {
      signal: 'SIGTERM',
      timeoutSeconds: 5,
    });
    expect(tasks.reports().find((r) => r.taskId === ref.taskId)?.reason).toMatch(
      /^its checkpoint at the stop could not be uploaded \(checkpoint 2 of restored-2\.0: entry "out" is a symlink to \/etc\/hostname.*\); it resumes from checkpoint 1$/,
    );
  });
});

describe('a running task whose checkpoint cannot be packed', () => {
  it('has its marker answered with why, goes on, and is reported with the error until an upload succeeds', async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'executor-unpacked') });
    const store = new FsObjectStore(join(tmp, 'store-unpacked'));
    const tasks = offlineLifecycle(executor, store, join(tmp, 'work-unpacked'), 20);
    const go = join(tmp, 'unpacked-go');
    // It follows the contract: marks its checkpoint and waits for the marker to go; then says what it found, and, once
    // told to, mends its directory and marks the next one.
    const script =
      'cd "$FLEETWISE_CHECKPOINT_DIR"; echo 1 > state; ln -s /etc/hostname out; touch COMPLETE; ' +
      'while [ -e COMPLETE ]; do sleep 0.02; done; echo "answered: $(cat COMPLETE.failed)"; ' +
      'while [ ! -e "$GO" ]; do sleep 0.02; done; rm out; echo 2 > state; touch COMPLETE; ' +
      'while :; do sleep 0.05; done';
    const desired = runOnce('unpacked-3.0', ['sh', '-c', script]);
    tasks.start({ ...desired, launch: { ...desired.launch, env: { GO: go } } });
    await tasks.settle();
    const output = async (): Promise<string> =>
      (await readAll(await executor.logs('unpacked-3.0'))).toString();
    await until(async () => ((await output()).includes('answered:') ? true : undefined));
    expect(await output()).toMatch(
      /answered: checkpoint 1 of unpacked-3\.0: entry "out" is a symlink to \/etc\/hostname, outside the checkpoint directory/,
    );
    const [failing] = tasks.reports();
    expect(failing).toMatchObject({ taskId: 'unpacked-3.0', state: 'running' });
    expect(failing?.checkpointError).toMatch(/^checkpoint 1 of unpacked-3\.0: entry "out" is a symlink/);
    expect(failing?.checkpoint).toBeUndefined();
    // What the controller takes.
    expect(heartbeatRequestSchema.parse({ tasks: [failing] }).tasks[0]?.checkpointError).toBe(
      failing?.checkpointError,
    );

    writeFileSync(go, '');
    const uploaded = await until(async () => {
      const [report] = tasks.reports();
      return report?.checkpoint === undefined ? undefined : report;
    });
    expect(uploaded.checkpointError).toBeUndefined();
    expect(uploaded.checkpoint?.key).toBe(
      checkpointKeys({ jobId: 'unpacked-3', taskId: 'unpacked-3.0' }, 1).manifest,
    );
    const task = tasks.get('unpacked-3.0');
    await tasks.stop(task as NonNullable<typeof task>, false, { signal: 'SIGTERM', timeoutSeconds: 1 });
  });
});

describe('a start that fails', () => {
  it('stops watching the task: nothing it leaves is uploaded, so a next attempt here numbers its checkpoints alone', async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'executor-fail') });
    const store = new FsObjectStore(join(tmp, 'store-fail'));
    const workDir = join(tmp, 'work-fail');
    const tasks = offlineLifecycle(executor, store, workDir, 20);
    // No command: the executor refuses it after the task's directory is prepared and watched.
    tasks.start(runOnce('broken-6.0', []));
    await tasks.settle();
    const task = tasks.get('broken-6.0');
    expect(task?.phase).toBe('failed');
    expect(task?.watcher).toBeUndefined();
    // Something writes a checkpoint where the watcher was looking: it is not uploaded.
    const checkpointDir = join(workDir, 'tasks', 'broken-6.0', 'checkpoint');
    mkdirSync(checkpointDir, { recursive: true });
    writeFileSync(join(checkpointDir, 'state'), 'left behind\n');
    writeFileSync(join(checkpointDir, 'COMPLETE'), '');
    await new Promise((r) => setTimeout(r, 200));
    const uploaded: unknown[] = [];
    for await (const object of store.list('checkpoints/')) uploaded.push(object);
    expect(uploaded).toEqual([]);
  });
});

describe('task records', () => {
  it('writes of one task’s record at the same time all land, and the record reads back whole', async () => {
    const dir = join(tmp, 'record');
    const task: LocalTask = {
      taskId: 'rec-1.0',
      jobId: 'rec-1',
      phase: 'running',
      startedAtMs: 1,
      stopRequested: false,
      lastLogUploadMs: 0,
    };
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        persistTask(dir, { ...task, phase: i % 2 === 0 ? 'running' : 'checkpointing' }),
      ),
    );
    expect((await readPersistedTask(dir))?.jobId).toBe('rec-1');
  });
});

/** The process executor, with a listing that is taken at once but answered only when the test says so. */
class SlowListing implements Executor {
  readonly kind = 'process' as const;
  private release: () => void = () => undefined;
  private held: Promise<void> | undefined;
  constructor(private readonly inner: ProcessExecutor) {}
  hold(): void {
    this.held = new Promise((resolve) => (this.release = resolve));
  }
  letGo(): void {
    this.release();
    this.held = undefined;
  }
  async list(): Promise<TaskRunStatus[]> {
    const listed = await this.inner.list();
    await this.held;
    return listed;
  }
  start(launch: TaskLaunch): Promise<void> {
    return this.inner.start(launch);
  }
  signal(taskId: string, signal: NodeJS.Signals): Promise<void> {
    return this.inner.signal(taskId, signal);
  }
  kill(taskId: string): Promise<void> {
    return this.inner.kill(taskId);
  }
  remove(taskId: string): Promise<void> {
    return this.inner.remove(taskId);
  }
  status(taskId: string): Promise<TaskRunStatus | undefined> {
    return this.inner.status(taskId);
  }
  logs(taskId: string): Promise<Readable> {
    return this.inner.logs(taskId);
  }
  readLogs(taskId: string, from: LogPosition, maxBytes: number): Promise<LogChunk> {
    return this.inner.readLogs(taskId, from, maxBytes);
  }
  logTail(taskId: string, lines: number): Promise<string> {
    return this.inner.logTail(taskId, lines);
  }
}

describe('task lifecycle: observing', () => {
  it('a task that started while the executor was being listed is not taken for gone', async () => {
    const inner = new ProcessExecutor({ stateDir: join(tmp, 'slow-executor') });
    const executor = new SlowListing(inner);
    const store = new FsObjectStore(join(tmp, 'slow-store'));
    const tasks = offlineLifecycle(executor, store, join(tmp, 'slow-work'));
    executor.hold();
    const observing = tasks.observe(); // lists now (no task yet), answers later
    tasks.start(runOnce('late-3.0', ['sleep', '30']));
    await tasks.settle();
    expect(tasks.get('late-3.0')?.phase).toBe('running');
    executor.letGo();
    await observing;
    const late = tasks.get('late-3.0');
    expect([late?.phase, late?.reason]).toEqual(['running', undefined]);
    await inner.remove('late-3.0');
  });
});

describe('task lifecycle: a worker restarted during a checkpoint-stop', () => {
  it('uploads the final checkpoint the task wrote on the signal while no worker ran, before reporting it stopped', async () => {
    const stateDir = join(tmp, 'midstop-executor');
    const store = new FsObjectStore(join(tmp, 'midstop-store'));
    const workDir = join(tmp, 'midstop-work');
    const ref = { jobId: 'midstop-1', taskId: 'midstop-1.0' };
    // A periodic checkpoint at once; on the signal, some work, then the final state, marked, and a clean exit.
    const script =
      'echo 1 > "$FLEETWISE_CHECKPOINT_DIR/state"; touch "$FLEETWISE_CHECKPOINT_DIR/COMPLETE"; ' +
      'trap \'sleep 0.3; echo FINAL > "$FLEETWISE_CHECKPOINT_DIR/state"; ' +
      'touch "$FLEETWISE_CHECKPOINT_DIR/COMPLETE"; exit 0\' TERM; echo ready; while :; do sleep 0.05; done';
    const executor = new ProcessExecutor({ stateDir });
    const first = offlineLifecycle(executor, store, workDir, 20);
    first.start(runOnce(ref.taskId, ['sh', '-c', script]));
    await first.settle();
    const task = first.get(ref.taskId);
    if (task === undefined) throw new Error('not started');
    for (let i = 0; task.checkpoint === undefined; i += 1) {
      if (i > 200) throw new Error('the first checkpoint was never uploaded');
      await new Promise((r) => setTimeout(r, 25));
    }
    for (let i = 0; !(await readAll(await executor.logs(ref.taskId))).toString().includes('ready'); i += 1) {
      if (i > 200) throw new Error('the task never got ready');
      await new Promise((r) => setTimeout(r, 25));
    }
    const periodic = task.checkpoint.key;
    // The first steps of a checkpoint-stop (recorded, then the signal), and the worker dies: nothing watches any more.
    task.stopRequested = true;
    task.phase = 'checkpointing';
    await persistTask(join(workDir, 'tasks', ref.taskId), task);
    await first.stopWatchers();
    await executor.signal(ref.taskId, 'SIGTERM');
    for (let i = 0; (await executor.status(ref.taskId))?.state !== 'exited'; i += 1) {
      if (i > 200) throw new Error('the task never exited');
      await new Promise((r) => setTimeout(r, 25));
    }

    // The next worker adopts the exited task.
    const second = offlineLifecycle(new ProcessExecutor({ stateDir }), store, workDir, 20);
    await second.adopt();
    for (let i = 0; second.get(ref.taskId)?.phase !== 'stopped'; i += 1) {
      if (i > 200) throw new Error('the adopted task was never reported stopped');
      await second.observe();
      await second.settle();
    }
    const [report] = second.reports();
    expect(report).toMatchObject({ taskId: ref.taskId, state: 'stopped', exitCode: 0 });
    expect(report?.checkpoint?.key).not.toBe(periodic);
    // What the report names is the final state: the task resumes from it.
    const restored = join(tmp, 'midstop-restored');
    const { manifest } = await restoreLatestCheckpoint(store, ref, restored);
    expect(report?.checkpoint?.key).toBe(checkpointKeys(ref, manifest?.seq ?? 0).manifest);
    expect(readFileSync(join(restored, 'state'), 'utf8')).toBe('FINAL\n');
    // A stop, not the task's end: no exit is recorded.
    expect(await readExitRecord(store, ref, 1)).toBeUndefined();
    await second.stopWatchers();
  });
});
