import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { DesiredTask } from '../../src/protocol/worker-protocol.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readAll } from '../../src/storage/streams.js';
import { ControllerClient } from '../../src/worker/controller-client.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import { TaskLifecycle } from '../../src/worker/task-lifecycle.js';
import { RecordingLogger, shellTask, until } from './agent-fixtures.js';
import { UNREACHABLE_URL } from '../helpers/unreachable-url.js';

/**
 * What a worker's log says of a task killed at its checkpoint-stop (it ignored the signal past its timeout): where it
 * goes on from, its last uploaded checkpoint, or its beginning when it never uploaded one. The real task lifecycle and
 * process executor, a filesystem object store, no controller (the test drives the stops).
 */
const tmp = mkdtempSync(join(tmpdir(), 'fw-stop-kill-log-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A task that ignores SIGTERM; with `checkpointFirst`, it writes a checkpoint as it starts. */
function stubborn(taskId: string, checkpointFirst: boolean): DesiredTask {
  const checkpoint = checkpointFirst
    ? 'echo 1 > "$FLEETWISE_CHECKPOINT_DIR/counter"; touch "$FLEETWISE_CHECKPOINT_DIR/COMPLETE"; '
    : '';
  return shellTask(taskId, `trap "" TERM; ${checkpoint}echo ready; while :; do sleep 0.05; done`, {
    checkpoint: { signal: 'SIGTERM', timeoutSeconds: 1 },
  });
}

describe('a task killed at its checkpoint-stop', () => {
  it('is said to start again from the beginning when it uploaded no checkpoint, else to resume from its last', async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'executor') });
    const store = new FsObjectStore(join(tmp, 'store'));
    const logger = new RecordingLogger();
    const tasks = new TaskLifecycle(
      {
        connection: new ControllerClient(UNREACHABLE_URL),
        credentials: { launch: launchSecretCredential('unused') },
        executor,
        openStore: () => store,
        cloudInstanceId: 'local-test',
        workDir: join(tmp, 'work'),
        checkpointPollMs: 50,
      },
      logger,
      () => ({ store, instanceId: 'inst-1' }),
      new AbortController().signal,
    );
    const settings = { signal: 'SIGTERM', timeoutSeconds: 1 } as const;
    for (const [taskId, checkpointFirst] of [
      ['never-1.0', false],
      ['saved-2.0', true],
    ] as const) {
      tasks.start(stubborn(taskId, checkpointFirst));
      await tasks.settle();
      await until(`${taskId} to be ready`, async () =>
        (await readAll(await executor.logs(taskId))).toString().includes('ready') ? true : undefined,
      );
      if (checkpointFirst)
        await until(`${taskId}'s checkpoint upload`, async () =>
          tasks.get(taskId)?.checkpoint === undefined ? undefined : true,
        );
      const task = tasks.get(taskId);
      await tasks.stop(task as NonNullable<typeof task>, true, settings);
      expect(task?.phase).toBe('stopped');
    }
    const killed = (taskId: string): string | undefined =>
      logger.lines.find((l) => l.includes(`task ${taskId} checkpointed and stopped (killed`));
    expect(killed('never-1.0')).toMatch(
      /no exit within 1 s, killed; it starts again from the beginning \(no checkpoint uploaded\)$/,
    );
    expect(killed('saved-2.0')).toMatch(
      /no exit within 1 s, killed; it resumes from its last uploaded checkpoint$/,
    );
  });
});
