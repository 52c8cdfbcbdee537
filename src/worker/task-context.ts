import type { ObjectStore } from '../storage/object-store.js';
import type { AgentLogger, AgentOptions } from './agent-options.js';
import type { StoreStepRetry } from './checkpoint-watcher.js';
import type { TaskLogUploads } from './task-log-uploads.js';
import type { LocalTask } from './task-record.js';

/** What the steps of a task's life on this host share: task-lifecycle.ts builds it, the task-*.ts steps take it. */

/** The agent's registration as the task operations see it: both undefined until it registers (and after a 401). */
export interface Registration {
  readonly store: ObjectStore | undefined;
  readonly instanceId: string | undefined;
}

export interface TaskContext {
  readonly options: AgentOptions;
  readonly log: AgentLogger;
  /** The tasks on this host, by id. */
  readonly tasks: Map<string, LocalTask>;
  /** Retries a step while the object store fails (storage/retry.ts), until the agent leaves. */
  readonly retry: StoreStepRetry;
  /** The log uploads of the tasks. */
  readonly logs: TaskLogUploads;
  readonly registration: () => Registration;
  /** The object store this worker registered with; throws when it is not registered. */
  requireStore(): ObjectStore;
  /** The task's directory on this host. */
  taskDir(taskId: string): string;
  /** Writes the task's record, after any write already under way for it. */
  persist(t: LocalTask): Promise<void>;
  /** Runs a long operation of the task in the background (`busy`), its failure logged. */
  background(t: LocalTask, op: () => Promise<void>): void;
}
