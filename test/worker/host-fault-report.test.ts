import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packContext } from '../../src/cli/context-archive.js';
import { buildContextKey } from '../../src/protocol/object-keys.js';
import {
  heartbeatRequestSchema,
  type DesiredTask,
  type TaskReport,
} from '../../src/protocol/worker-protocol.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { uploadCheckpoint } from '../../src/worker/checkpoints.js';
import { DockerExecutor } from '../../src/worker/executors/docker.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import type { Executor } from '../../src/worker/executor.js';
import type { TaskLifecycle } from '../../src/worker/task-lifecycle.js';
import { readPersistedTask } from '../../src/worker/task-record.js';
import { BASE_IMAGE, describeWithDocker } from '../helpers/dockerd.js';
import { offlineLifecycle, shellTask, untilTaskEnded } from './agent-fixtures.js';

/**
 * A task whose start fails because of the worker's host, not its job, says so in its report (`hostFault`), so the
 * controller places the job elsewhere without counting an attempt: restoring its checkpoint or unpacking its build
 * context on a full disk. A 1 MiB tmpfs stands for the worker's full disk (tests run as root, as the restore-disk
 * tests do), so writes there fail with ENOSPC as a real full disk's do. The job's own failures (no command, a non-zero
 * exit, a build context over its limits, an image that does not build or is nowhere to be pulled) never say so.
 */
let tmp = '';
let small = '';
let store: FsObjectStore;
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'fw-host-fault-'));
  small = join(tmp, 'small');
  mkdirSync(small);
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'fleetwise-host-fault', small]);
  store = new FsObjectStore(join(tmp, 'store'));
});
afterAll(() => {
  execFileSync('umount', [small]);
  rmSync(tmp, { recursive: true, force: true });
});

/** A checkpoint (seq 1) of `taskId` with 1.5 MiB of weights: more than the small disk holds. */
async function storeBigCheckpoint(taskId: string): Promise<void> {
  const src = join(tmp, `${taskId}-src`);
  mkdirSync(src, { recursive: true });
  writeFileSync(join(src, 'weights.bin'), randomBytes(1536 * 1024));
  await uploadCheckpoint(store, { jobId: taskId.replace(/\.\d+$/, ''), taskId }, src, 1);
}

/** A build context with `files`, uploaded as `fleetwise submit` uploads it; its reference. */
async function uploadContext(name: string, files: Record<string, string | Buffer>): Promise<string> {
  const dir = join(tmp, `${name}-context`);
  mkdirSync(dir, { recursive: true });
  for (const [file, content] of Object.entries(files)) writeFileSync(join(dir, file), content);
  const { archive } = await packContext(dir);
  const ref = buildContextKey(createHash('sha256').update(archive).digest('hex'), 'gzip');
  await store.put(ref, archive);
  return ref;
}

/** Start `d` and wait for its start to end; its report as the next heartbeat would carry it (checked valid). */
async function startAndReport(tasks: TaskLifecycle, d: DesiredTask): Promise<TaskReport | undefined> {
  tasks.start(d);
  await tasks.settle();
  const reports = tasks.reports();
  expect(heartbeatRequestSchema.safeParse({ tasks: reports }).success).toBe(true);
  return reports.find((r) => r.taskId === d.taskId);
}

describe('a start on a worker whose container engine is down', () => {
  it('reports hostFault: the engine, not the job, kept the task from starting', async () => {
    // An engine whose socket is gone (dockerd stopped, or not up yet at boot): connecting fails with ENOENT.
    const executor = new DockerExecutor({
      docker: new Docker({ socketPath: join(tmp, 'no-dockerd.sock') }),
      queryTimeoutMs: 2000,
      changeTimeoutMs: 2000,
    });
    const tasks = offlineLifecycle(executor, store, join(tmp, 'engine-down'));
    const report = await startAndReport(tasks, shellTask('down-1.0', 'true', {}, { image: BASE_IMAGE }));
    expect(report).toMatchObject({ state: 'failed', hostFault: 'broken' });
    expect(report?.reason).toMatch(/^could not start: .*ENOENT/);
  });
});

describe('a start that fails on the worker host', () => {
  it("reports hostFault when restoring its checkpoint fails on the worker's full disk, and keeps it across a restart; the job's own failures do not", async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'executor-restore') });
    const workDir = join(small, 'restore');
    const tasks = offlineLifecycle(executor, store, workDir);
    await storeBigCheckpoint('full-1.0');

    const full = await startAndReport(tasks, shellTask('full-1.0', 'sleep 30', { restore: true }));
    expect(full).toMatchObject({ state: 'failed', hostFault: 'space' });
    expect(full?.reason).toMatch(
      /^could not start: restoring checkpoint 1 of full-1\.0: this worker's disk failed \(ENOSPC/,
    );
    // Recorded with the task: a restarted worker reports the failure as the host's too.
    expect(await readPersistedTask(join(workDir, 'tasks', 'full-1.0'))).toMatchObject({
      phase: 'failed',
      hostFault: 'space',
    });
    const restarted = offlineLifecycle(executor, store, workDir);
    expect((await restarted.recordedReports()).find((r) => r.taskId === 'full-1.0')).toMatchObject({
      state: 'failed',
      hostFault: 'space',
    });

    // On the same small disk, what the job decides fails it as before: no command, a non-zero exit.
    const nothing = await startAndReport(tasks, shellTask('nocmd-2.0', '', {}, { command: [] }));
    expect(nothing).toMatchObject({ state: 'failed' });
    expect(nothing?.reason).toMatch(/^could not start: .*needs a command/);
    expect(nothing?.hostFault).toBeUndefined();
    expect((await readPersistedTask(join(workDir, 'tasks', 'nocmd-2.0')))?.hostFault).toBeUndefined();

    const exits = await startAndReport(tasks, shellTask('exits-3.0', 'exit 3'));
    expect(exits?.state).toBe('running');
    await untilTaskEnded(tasks, 'exits-3.0');
    const exited = tasks.reports().find((r) => r.taskId === 'exits-3.0');
    expect(exited).toMatchObject({ state: 'failed', exitCode: 3 });
    expect(exited?.hostFault).toBeUndefined();
    await tasks.forget(tasks.get('exits-3.0') as NonNullable<ReturnType<TaskLifecycle['get']>>);
  });

  it("reports hostFault when its build context cannot be unpacked on the worker's full disk; not when the context is over its limits", async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'executor-context') });
    const tasks = offlineLifecycle(executor, store, join(small, 'context'));
    const context = await uploadContext('big', {
      Dockerfile: `FROM ${BASE_IMAGE}\nCOPY data.bin /\n`,
      'data.bin': randomBytes(1536 * 1024),
    });

    const full = await startAndReport(tasks, shellTask('ctx-1.0', 'sleep 30', {}, { build: { context } }));
    expect(full).toMatchObject({ state: 'failed', hostFault: 'space' });
    expect(full?.reason).toMatch(/^could not start: .*ENOSPC/);
    // The space is given back: no half-unpacked context is left on the disk.
    expect(readdirSync(join(small, 'context', 'contexts'))).toEqual([]);

    const limits = { maxArchiveBytes: 64 * 1024, maxExpandedBytes: 1024 * 1024, maxExpansionRatio: 100 };
    const refused = await startAndReport(
      tasks,
      shellTask('ctx-2.0', 'sleep 30', {}, { build: { context, limits } }),
    );
    expect(refused).toMatchObject({ state: 'failed' });
    expect(refused?.reason).toMatch(/^could not start: .*maxArchiveBytes/);
    expect(refused?.hostFault).toBeUndefined();
  });
});

describeWithDocker('a start that fails on the worker host (Docker)', (engine) => {
  let executor: Executor;
  beforeAll(() => {
    executor = new DockerExecutor({ docker: engine.docker });
  });
  afterAll(async () => {
    for (const t of await executor.list()) await executor.remove(t.taskId);
  });

  it("reports hostFault for a checkpoint the worker's full disk cannot take; never for an image that does not build or cannot be pulled", async () => {
    const tasks = offlineLifecycle(executor, store, join(small, 'docker'));
    await storeBigCheckpoint('dfull-1.0');
    const full = await startAndReport(
      tasks,
      shellTask('dfull-1.0', 'sleep 30', { restore: true }, { image: BASE_IMAGE }),
    );
    expect(full).toMatchObject({ state: 'failed', hostFault: 'space' });
    expect(full?.reason).toMatch(/this worker's disk failed \(ENOSPC/);

    const context = await uploadContext('broken', {
      Dockerfile: `FROM ${BASE_IMAGE}\nRUN exit 3\n`,
      nonce: `${process.pid}-${Date.now()}-${Math.random()}\n`,
    });
    const broken = await startAndReport(tasks, shellTask('dbuild-2.0', 'true', {}, { build: { context } }));
    expect(broken).toMatchObject({ state: 'failed' });
    expect(broken?.reason).toMatch(/^could not start: building .* failed: /);
    expect(broken?.hostFault).toBeUndefined();

    // No registry answers there: the pull fails, as for an image that does not exist.
    const missing = await startAndReport(
      tasks,
      shellTask('dpull-3.0', 'true', {}, { image: '127.0.0.1:9/fleetwise/no-such-image:1' }),
    );
    expect(missing).toMatchObject({ state: 'failed' });
    expect(missing?.reason).toMatch(/^could not start: /);
    expect(missing?.hostFault).toBeUndefined();
  });
});
