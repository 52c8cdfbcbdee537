import type { ObjectStore } from '../storage/object-store.js';
import { readAll } from '../storage/streams.js';
import { taskLogKey } from '../protocol/object-keys.js';
import type { Executor } from './executor.js';
import type { LocalTask } from './task-record.js';

/**
 * Upload the run's whole output (tasks are batch jobs; a few MiB at most is expected) to `logs/<job>/…`, one object
 * per run, where `fleetwise logs` reads it. Returns it ('' when the executor has no output to give).
 */
export async function uploadTaskLog(
  store: ObjectStore,
  executor: Executor,
  t: LocalTask,
  /** Read when the log is stored: the agent may re-register meanwhile. */
  instanceId: () => string | undefined,
): Promise<string> {
  const text = await readTaskLog(executor, t.taskId);
  if (text === undefined) return '';
  await store.put(taskLogKey(t.jobId, t.taskId, t.startedAtMs, instanceId() ?? 'unknown'), Buffer.from(text));
  t.lastLogUploadMs = Date.now();
  return text;
}

/** The run's whole output as the executor has it; undefined when it has none to give. */
export async function readTaskLog(executor: Executor, taskId: string): Promise<string | undefined> {
  try {
    return (await readAll(await executor.logs(taskId))).toString('utf8');
  } catch {
    return undefined;
  }
}
