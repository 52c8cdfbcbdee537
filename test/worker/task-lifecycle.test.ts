import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { DesiredTask } from '../../src/protocol/worker-protocol.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readAll } from '../../src/storage/streams.js';
import { ControllerClient } from '../../src/worker/controller-client.js';
import { readExitRecord } from '../../src/worker/exit-record.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import { TaskLifecycle } from '../../src/worker/task-lifecycle.js';
import { persistTask, readPersistedTask, type LocalTask } from '../../src/worker/task-record.js';

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
  it('a task that ended as its checkpoint-stop arrived reports (and records) its own end; one the signal ended is stopped', async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'executor') });
    const store = new FsObjectStore(join(tmp, 'store'));
    const tasks = new TaskLifecycle(
      {
        connection: new ControllerClient('http://127.0.0.1:9'),
        credentials: { launch: launchSecretCredential('unused') },
        executor,
        openStore: () => store,
        cloudInstanceId: 'local-test',
        workDir: join(tmp, 'work'),
      },
      { info: () => undefined, warn: () => undefined },
      () => ({ store, instanceId: 'inst-1' }),
      new AbortController().signal,
    );
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
