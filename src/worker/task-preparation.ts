import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { checkpointKeys } from '../protocol/object-keys.js';
import type { DesiredTask } from '../protocol/worker-protocol.js';
import type { ObjectStore } from '../storage/object-store.js';
import type { AgentLogger, AgentOptions } from './agent-options.js';
import { fetchBuildContext } from './build-context.js';
import type { StoreStepRetry } from './checkpoint-watcher.js';
import { restoreLatestCheckpoint } from './checkpoints.js';
import type { TaskLaunch } from './executor.js';
import { readExitRecord, type TaskExitRecord } from './exit-record.js';
import { checkpointOf, type LocalTask } from './task-record.js';

export interface TaskPreparationDeps {
  readonly options: AgentOptions;
  readonly log: AgentLogger;
  /** The object store this worker registered with; throws when it is not registered. */
  readonly requireStore: () => ObjectStore;
  /** Retries a step while the object store fails (storage/retry.ts). */
  readonly retry: StoreStepRetry;
  /** The task's directory on this host. */
  readonly dir: string;
  /** Writes the task's record (task-lifecycle.ts). */
  readonly persist: (t: LocalTask) => Promise<void>;
  /** Starts watching the task's checkpoint directory and progress file. */
  readonly watch: (t: LocalTask) => Promise<void>;
}

/**
 * Everything a start needs before the task runs (restore its checkpoint, fetch its build context, pull or build its
 * image): the launch to hand the executor; or, when it already exited in this attempt (its exit record says so),
 * that exit. A held task is reported ready after this, so all of it is done by then: its job's release must start
 * every task at once, not one at once and another after minutes of pulling, and an image that fails to build must
 * fail the task before its siblings are released, not after.
 */
export async function prepareTask(
  deps: TaskPreparationDeps,
  t: LocalTask,
  d: DesiredTask,
): Promise<TaskExitRecord | TaskLaunch> {
  const { options, log, retry, dir } = deps;
  const store = deps.requireStore();
  if (d.restore) {
    // Retried while the store fails, like the restore: an outage must neither fail the task nor run it twice.
    // (Part of the restore: its retries are logged as the restore's.)
    const exited = await retry(`restore of ${t.taskId}`, () => readExitRecord(store, t, d.attempt ?? 1));
    if (exited !== undefined) return exited;
  }
  const executor = options.executor;
  const checkpointDir = join(dir, 'checkpoint');
  const progressFile = join(dir, 'progress');
  if ((await executor.status(t.taskId)) !== undefined) await executor.remove(t.taskId);
  await mkdir(dir, { recursive: true });
  await writeFile(progressFile, '');
  await deps.persist(t);
  let restoring = false;
  if (d.restore) {
    // Retried while the store fails: starting from zero (or an older checkpoint) because S3 was down would lose work.
    const restored = await retry(`restore of ${t.taskId}`, () =>
      restoreLatestCheckpoint(store, { jobId: t.jobId, taskId: t.taskId }, checkpointDir),
    );
    for (const s of restored.skipped) log.warn(`task ${t.taskId}: skipped checkpoint ${s.seq}: ${s.reason}`);
    if (restored.manifest !== undefined) {
      restoring = true;
      t.restoredFrom = checkpointKeys(t, restored.manifest.seq).manifest;
      t.checkpoint = checkpointOf(t, restored.manifest);
      log.info(`task ${t.taskId}: restored checkpoint ${restored.manifest.seq} in ${restored.durationMs} ms`);
    } else log.warn(`task ${t.taskId}: no good checkpoint to restore; starting from zero`);
  } else {
    await rm(checkpointDir, { recursive: true, force: true });
    await mkdir(checkpointDir, { recursive: true });
  }
  await deps.watch(t);
  const build = d.launch.build;
  const launch: TaskLaunch = {
    taskId: t.taskId,
    jobId: t.jobId,
    ...(d.launch.image === undefined ? {} : { image: d.launch.image }),
    ...(build === undefined
      ? {}
      : {
          build: await retry(`build context of ${t.taskId}`, () =>
            fetchBuildContext(build, options.workDir, deps.requireStore),
          ),
        }),
    command: d.launch.command,
    env: d.launch.env,
    vcpus: d.launch.vcpus,
    memoryGiB: d.launch.memoryGiB,
    gpus: d.launch.gpus,
    shmSizeGiB: d.launch.shmSizeGiB,
    checkpointDir,
    progressFile,
    restoring,
    attempt: d.attempt ?? 1,
    // Kept by the executor with the task: what a restarted worker that lost this record adopts it by (rebuild).
    checkpointSignal: d.checkpoint.signal,
    checkpointTimeoutSeconds: d.checkpoint.timeoutSeconds,
    ...(t.total === undefined ? {} : { totalIterations: t.total }),
  };
  await executor.prepare?.(launch);
  return launch;
}
