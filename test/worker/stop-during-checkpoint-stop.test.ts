import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { DesiredTask } from '../../src/protocol/worker-protocol.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { WorkerAgent } from '../../src/worker/agent.js';
import { ControllerClient } from '../../src/worker/controller-client.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import { pidAlive, taskPid } from '../helpers/local-controller.js';
import { BOOTSTRAP, FakeController, RecordingLogger, until } from './agent-fixtures.js';

/**
 * A `stop` (no checkpoint: the task's job ended) answered while the task's checkpoint-stop waits for it to exit turns
 * that stop into a kill at once: a task that ignores the signal would otherwise run on until the job's checkpoint
 * timeout. Real WorkerAgent and process executor, a fake controller over HTTP.
 */
describe('a stop without a checkpoint during a checkpoint-stop under way', () => {
  let tmp: string;
  let controller: FakeController;
  const cleanups: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'fleetwise-stop-cut-'));
    controller = new FakeController(join(tmp, 'store'));
    await controller.start();
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });
  afterAll(async () => {
    await controller.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  /** The checkpoint-stop's timeout: the kill must come well within it. */
  const TIMEOUT_SECONDS = 60;
  // Ignores SIGTERM and works on.
  const STUBBORN = "trap 'echo ignoring TERM' TERM; echo started; while true; do sleep 0.1; done";

  function task(taskId: string, action: DesiredTask['action']): DesiredTask {
    return {
      taskId,
      jobId: taskId.replace(/\.\d+$/, ''),
      action,
      restore: false,
      attempt: 1,
      launch: { command: ['sh', '-c', STUBBORN], env: {}, vcpus: 1, memoryGiB: 0, gpus: 0, shmSizeGiB: 0 },
      checkpoint: { signal: 'SIGTERM', timeoutSeconds: TIMEOUT_SECONDS },
    };
  }

  it('kills the task now and reports it stopped, far within the checkpoint timeout', async () => {
    const taskId = 'cut-1.0';
    const workDir = join(tmp, 'worker');
    const logger = new RecordingLogger();
    const executor = new ProcessExecutor({ stateDir: join(workDir, 'executor') });
    const agent = new WorkerAgent({
      connection: new ControllerClient(controller.url),
      credentials: { launch: launchSecretCredential(BOOTSTRAP) },
      executor,
      openStore: (location) => new FsObjectStore(location),
      cloudInstanceId: 'local-cut',
      workDir,
      heartbeatSeconds: 0.2,
      checkpointPollMs: 50,
      logger,
    });
    const leave = new AbortController();
    const running = agent.run(leave.signal);
    cleanups.push(async () => {
      leave.abort();
      await running;
      for (const t of await executor.list()) await executor.remove(t.taskId);
    });
    controller.answer = [task(taskId, 'run')];
    await until('the task running', () =>
      Promise.resolve(controller.last(taskId)?.state === 'running' ? true : undefined),
    );
    const pid = taskPid(workDir, taskId);
    expect(pid).toBeGreaterThan(0);
    controller.answer = [task(taskId, 'checkpoint-stop')];
    await until('the checkpoint-stop under way', () =>
      Promise.resolve(controller.last(taskId)?.state === 'checkpointing' ? true : undefined),
    );
    // Still there a while into the stop: it ignores the signal, so only a kill ends it.
    await new Promise((r) => setTimeout(r, 1000));
    expect(pidAlive(pid as number)).toBe(true);
    const askedAt = Date.now();
    controller.answer = [task(taskId, 'stop')];
    // Before, the stop waited out the checkpoint timeout whatever the answer said.
    await until(
      'the task stopped',
      () => Promise.resolve(controller.last(taskId)?.state === 'stopped' ? true : undefined),
      (TIMEOUT_SECONDS * 1000) / 2,
    );
    expect(pidAlive(pid as number)).toBe(false);
    expect(Date.now() - askedAt).toBeLessThan((TIMEOUT_SECONDS * 1000) / 2);
    expect(logger.lines.some((l) => l.includes(`task ${taskId}: asked to stop without a checkpoint`))).toBe(
      true,
    );
    expect(logger.lines.some((l) => l.includes('killed as its controller asked'))).toBe(true);
  }, 90_000);
});
