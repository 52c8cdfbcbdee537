import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { ObjectStore } from '../storage/object-store.js';
import { retryWhileStoreFails } from '../storage/retry.js';
import type { DesiredTask, TaskReport } from '../protocol/worker-protocol.js';
import type { AgentLogger, AgentOptions } from './agent-options.js';
import type { StoreStepRetry } from './checkpoint-watcher.js';
import type { TaskLaunch } from './executor.js';
import { TaskLogUploads } from './task-log-uploads.js';
import { persistTask, readPersistedTasks, taskFromRecord, type LocalTask } from './task-record.js';
import { taskReport } from './task-report.js';
import type { Registration, TaskContext } from './task-context.js';
import { adoptTasks } from './task-adoption.js';
import { observeTasks } from './task-observation.js';
import { releaseTask, startTask } from './task-start.js';
import { TaskStops, type StopSettings } from './task-stop.js';

/**
 * The tasks on this host and what happens to them: adopted after an agent restart (task-adoption.ts), started
 * (restoring a checkpoint if asked; task-start.ts), watched for exits, progress and checkpoints (task-watching.ts,
 * task-observation.ts, task-exit.ts), stopped (checkpointed or killed; task-stop.ts), forgotten. Long operations run
 * in the background (`busy`) so heartbeats continue meanwhile, and nothing the heartbeat awaits touches the object
 * store: running tasks' logs are shipped in the background too.
 *
 * Every step of a start or a stop that needs the object store (restore download, build context download, the
 * final checkpoint upload, the log upload) is tried again, with backoff, until the store takes it
 * (src/storage/retry.ts): an outage delays a move, it never leaves one half-done. Only the agent leaving (`leaving`)
 * ends the retries. A step that failed for another reason leaves the task in its phase, and the next heartbeat's
 * answer starts the step again (task-reconciliation.ts), so no phase is a dead end either.
 */
export class TaskLifecycle {
  private readonly tasks = new Map<string, LocalTask>();
  private readonly retry: StoreStepRetry;
  private readonly logs: TaskLogUploads;
  /** What the steps of a task's life (task-*.ts) share of this lifecycle. */
  private readonly context: TaskContext;
  private readonly stops: TaskStops;

  constructor(
    private readonly options: AgentOptions,
    private readonly log: AgentLogger,
    private readonly registration: () => Registration,
    leaving: AbortSignal,
  ) {
    this.retry = (what, step) =>
      retryWhileStoreFails(step, {
        signal: leaving,
        onRetry: (e, failures, delayMs) =>
          this.log.warn(
            `${what}: the object store failed (${failures} time${failures === 1 ? '' : 's'} in a row), ` +
              `trying again in ${(delayMs / 1000).toFixed(1)} s: ${e.message}`,
          ),
      });
    this.logs = new TaskLogUploads({
      options,
      log,
      instanceId: () => registration().instanceId,
      store: () => this.requireStore(),
      retry: this.retry,
      persist: (t) => this.persist(t),
    });
    this.context = {
      options,
      log,
      tasks: this.tasks,
      retry: this.retry,
      logs: this.logs,
      registration,
      requireStore: () => this.requireStore(),
      taskDir: (taskId) => this.taskDir(taskId),
      persist: (t) => this.persist(t),
      background: (t, op) => this.background(t, op),
    };
    this.stops = new TaskStops(this.context);
  }

  get(taskId: string): LocalTask | undefined {
    return this.tasks.get(taskId);
  }

  all(): IterableIterator<LocalTask> {
    return this.tasks.values();
  }

  /** Stop every checkpoint watcher (the agent is shutting down; the tasks live on). */
  async stopWatchers(): Promise<void> {
    for (const t of this.tasks.values()) await t.watcher?.stop();
  }

  /**
   * The agent is leaving (its controller is gone, or it was asked to stop its tasks): once every background operation
   * has ended, checkpoint and stop each running task with its job's signal and timeout. Returns their ids.
   */
  async checkpointAll(): Promise<string[]> {
    await this.settle();
    const running = [...this.tasks.values()].filter((t) => t.phase === 'running');
    await Promise.all(
      running.map((t) =>
        this.stop(t, true, { signal: t.signal ?? 'SIGTERM', timeoutSeconds: t.timeoutSeconds ?? 60 }).catch(
          (e: unknown) => this.log.warn(`task ${t.taskId}: ${(e as Error).message}`),
        ),
      ),
    );
    return running.map((t) => t.taskId);
  }

  /**
   * The instance is about to be reclaimed (a spot interruption notice, about two minutes ahead): checkpoint and stop
   * at once every running task nothing else is doing, uploading its last checkpoint. A task busy with a start is taken
   * by a later call (the agent calls this on every heartbeat while the notice stands). `maxTimeoutSeconds` caps each
   * job's checkpoint timeout (the time left before EC2 acts), that of a checkpoint-stop already under way (a move, a
   * drain) too: begun before the notice with the job's 300 or 900 s, it would otherwise run past the reclaim.
   * `started`: the stops begun here; `capped`: those under way whose kill this brought forward. `done` resolves when
   * both have ended.
   */
  evacuate(maxTimeoutSeconds = Number.POSITIVE_INFINITY): {
    readonly started: string[];
    readonly capped: string[];
    readonly done: Promise<void>;
  } {
    const timeoutSeconds = (t: LocalTask): number =>
      Math.max(1, Math.min(t.timeoutSeconds ?? 60, maxTimeoutSeconds));
    const started: LocalTask[] = [];
    const capped: LocalTask[] = [];
    for (const t of this.tasks.values())
      if (t.phase === 'running' && t.busy === undefined) {
        started.push(t);
        this.background(t, () =>
          this.stop(t, true, { signal: t.signal ?? 'SIGTERM', timeoutSeconds: timeoutSeconds(t) }),
        );
      } else if (this.capStop(t, Math.max(1, maxTimeoutSeconds))) capped.push(t);
    return {
      started: started.map((t) => t.taskId),
      capped: capped.map((t) => t.taskId),
      done: Promise.all([...started, ...capped].map((t) => t.busy)).then(() => undefined),
    };
  }

  /** Bring the kill of the task's checkpoint-stop under way forward (TaskStops.capStop). */
  capStop(t: LocalTask, timeoutSeconds: number): boolean {
    return this.stops.capStop(t, timeoutSeconds);
  }

  /** Kill the task whose checkpoint-stop is under way now, not waiting for its checkpoint (TaskStops.cutShort). */
  cutStopShort(t: LocalTask): boolean {
    return this.stops.cutShort(t);
  }

  /** Wait for every background operation, log shipping included (tests, and before the agent leaves). */
  async settle(): Promise<void> {
    await Promise.all([...this.tasks.values()].flatMap((t) => [t.busy, t.logUploads]));
  }

  private taskDir(taskId: string): string {
    return join(this.options.workDir, 'tasks', taskId);
  }

  /**
   * Write the task's record after any write already under way for it: the checkpoint watcher persists on each upload
   * while a stop persists its own steps, and two writes at once raced on the one temporary file (the second rename
   * failed, and the stop with it, leaving the task checkpointing for good).
   */
  private persist(t: LocalTask): Promise<void> {
    const write = (t.persisting ?? Promise.resolve())
      .catch(() => undefined)
      .then(() => persistTask(this.taskDir(t.taskId), t));
    t.persisting = write;
    return write;
  }

  /** Take back the tasks the executor still has after a restart (task-adoption.ts). */
  adopt(): Promise<void> {
    return adoptTasks(this.context);
  }

  /** Exits and progress of every task (task-observation.ts). */
  observe(): Promise<void> {
    return observeTasks(this.context);
  }

  /**
   * The tasks as this host's records last described them, for a heartbeat sent before adoption could ask the executor
   * (it did not answer): what the controller last heard stands until the executor answers again.
   */
  async recordedReports(): Promise<TaskReport[]> {
    const records = await readPersistedTasks(join(this.options.workDir, 'tasks'));
    const out: TaskReport[] = [];
    for (const [taskId, saved] of records)
      if (saved !== undefined) out.push(taskReport(taskFromRecord(taskId, saved), saved.attemptOutsideStops));
    return out;
  }

  reports(): TaskReport[] {
    return [...this.tasks.values()].map((t) => taskReport(t, t.attemptOutsideStops));
  }

  background(t: LocalTask, op: () => Promise<void>): void {
    t.busy = op()
      .catch((e: unknown) => this.log.warn(`task ${t.taskId}: ${(e as Error).message}`))
      .finally(() => {
        t.busy = undefined;
      });
  }

  /** Start the task in the background (task-start.ts). */
  start(d: DesiredTask): void {
    startTask(this.context, d);
  }

  /** Start a held task whose job was released (task-start.ts). */
  release(t: LocalTask): void {
    releaseTask(this.context, t);
  }

  /** Checkpoint-stop or kill the task (task-stop.ts). */
  stop(t: LocalTask, checkpoint: boolean, settings: StopSettings): Promise<void> {
    return this.stops.stop(t, checkpoint, settings);
  }

  async forget(t: LocalTask): Promise<void> {
    await t.watcher?.stop();
    await this.options.executor.remove(t.taskId).catch(() => undefined);
    await rm(this.taskDir(t.taskId), { recursive: true, force: true });
    this.tasks.delete(t.taskId);
    // Its image may be needed no more (in the background); those of tasks held prepared are, until they start.
    this.options.executor.releaseImages?.(() => this.heldLaunches(), this.log);
  }

  /** The launches prepared and not started yet (co-start holds, and releases still starting). */
  private *heldLaunches(): Iterable<TaskLaunch> {
    for (const t of this.tasks.values()) if (t.prepared !== undefined) yield t.prepared;
  }

  /** Ship running tasks' logs (TaskLogUploads.shipRunning). */
  shipRunningLogs(): void {
    this.logs.shipRunning(this.tasks.values());
  }

  private requireStore(): ObjectStore {
    const store = this.registration().store;
    if (store === undefined) throw new Error('not registered yet');
    return store;
  }
}
