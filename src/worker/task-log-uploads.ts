import type { ObjectStore } from '../storage/object-store.js';
import type { AgentLogger, AgentOptions } from './agent-options.js';
import type { StoreStepRetry } from './checkpoint-watcher.js';
import { TaskLogShipper } from './task-log.js';
import type { LocalTask } from './task-record.js';

/** Milliseconds between two saves of a task's log position with its record. */
const LOG_POSITION_PERSIST_MS = 60_000;

/** The most of a running task's output one periodic upload ships (the rest follows on the next). */
const RUNNING_LOG_SHIP_BYTES = 64 * 1024 * 1024;

/** What the log uploads of a worker's tasks need from it (task-lifecycle.ts). */
export interface TaskLogUploadDeps {
  readonly options: AgentOptions;
  readonly log: AgentLogger;
  /** This worker's instance id (the log's object keys name it). */
  readonly instanceId: () => string | undefined;
  /** The object store, once registered (throws before). */
  readonly store: () => ObjectStore;
  /** Retries a step while the object store fails (the lifecycle's, ended when the agent leaves). */
  readonly retry: StoreStepRetry;
  /** Saves the task's record (its log position). */
  readonly persist: (t: LocalTask) => Promise<void>;
}

/**
 * The log uploads of a worker's tasks: while they run, so `fleetwise logs` follows them, and the rest when they stop
 * or exit; one at a time per task, each going on from where the last stopped.
 */
export class TaskLogUploads {
  constructor(private readonly deps: TaskLogUploadDeps) {}

  /**
   * Ship running tasks' logs, each at most every `logUploadSeconds`, so `fleetwise logs` follows a task as it runs.
   * In the background, one at a time per task and never awaited by the heartbeat; one that fails is not retried here
   * (the next due one is). Each ships at most RUNNING_LOG_SHIP_BYTES, so a task writing faster than the store takes
   * it cannot keep a stop's final upload waiting behind an endless one; the rest goes next time.
   */
  shipRunning(tasks: Iterable<LocalTask>): void {
    const every = (this.deps.options.logUploadSeconds ?? 5) * 1000;
    for (const t of tasks)
      if (
        t.phase === 'running' &&
        t.busy === undefined &&
        !t.shippingLog &&
        Date.now() - t.lastLogUploadMs >= every
      ) {
        t.shippingLog = true;
        this.queueLogUpload(t, () => this.storeLog(t, RUNNING_LOG_SHIP_BYTES))
          .catch((e: unknown) => this.deps.log.warn(`log upload of ${t.taskId}: ${(e as Error).message}`))
          .finally(() => {
            t.shippingLog = false;
          });
      }
  }

  /** The rest of the task's log, stored once the store takes it (a stop or an exit waits for this). */
  uploadRest(t: LocalTask): Promise<void> {
    return this.queueLogUpload(t, () => this.deps.retry(`log upload of ${t.taskId}`, () => this.storeLog(t)));
  }

  private async storeLog(t: LocalTask, budgetBytes?: number): Promise<void> {
    t.logShipper ??= new TaskLogShipper(
      this.deps.store(),
      this.deps.options.executor,
      t,
      this.deps.instanceId,
      this.deps.options.logSegmentBytes,
      t.logPosition,
    );
    await t.logShipper.ship(budgetBytes);
    t.lastLogUploadMs = Date.now();
    // Kept with the task's record, at most once a minute (a record a few seconds old still saves the re-read): a
    // restarted worker finds its place in a Docker log without reading it from the start, which the engine's log
    // rotation may have cut away.
    const position = t.logShipper.position;
    if (position !== undefined && (t.lastLogPositionPersistMs ?? 0) + LOG_POSITION_PERSIST_MS <= Date.now()) {
      t.logPosition = position;
      t.lastLogPositionPersistMs = Date.now();
      await this.deps.persist(t);
    }
  }

  /**
   * Log uploads of a task, one after the other: each goes on from where the one before stopped, and two at once
   * would both rewrite the open segment, the slower one with less.
   */
  private queueLogUpload(t: LocalTask, upload: () => Promise<void>): Promise<void> {
    const next = (t.logUploads ?? Promise.resolve()).then(upload);
    t.logUploads = next.then(
      () => undefined,
      () => undefined,
    );
    return next;
  }
}
