import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { ObjectStore } from '../storage/object-store.js';
import { retryWhileStoreFails } from '../storage/retry.js';
import { parseCheckpointKey } from '../protocol/object-keys.js';
import type { DesiredTask, TaskReport } from '../protocol/worker-protocol.js';
import type { AgentLogger, AgentOptions } from './agent.js';
import { CheckpointWatcher, type StoreStepRetry } from './checkpoint-watcher.js';
import { checkpointAndStop, type StopDeadline } from './checkpoint-stop.js';
import { SIGKILL_EXIT_CODE, type TaskLaunch, type TaskRunStatus } from './executor.js';
import { ProgressTracker } from './progress.js';
import { hostFaultOf } from './host-fault.js';
import { TaskLogUploads } from './task-log-uploads.js';
import { exitOf, writeExitRecord, type TaskExitRecord } from './exit-record.js';
import { prepareTask } from './task-preparation.js';
import {
  gotFurther,
  outsideStopsSpent,
  reportedAll,
  SIGTERM_EXIT_CODE,
  stoppedFromOutside,
} from './outside-stops.js';
import {
  checkpointOf,
  persistTask,
  readPersistedTasks,
  taskFromRecord,
  type LocalTask,
} from './task-record.js';
import { taskReport } from './task-report.js';

/**
 * The executor did not answer a listing of its tasks (the Docker engine is down, hung or unreachable): nothing on
 * this host can be observed or changed until it does. The worker still heartbeats, with what it last knew.
 */
export class ExecutorUnavailableError extends Error {
  constructor(executorKind: string, cause: Error) {
    super(`the ${executorKind} executor did not answer: ${cause.message}`, { cause });
    this.name = 'ExecutorUnavailableError';
  }
}

/** The agent's registration as the task operations see it: both undefined until it registers (and after a 401). */
export interface Registration {
  readonly store: ObjectStore | undefined;
  readonly instanceId: string | undefined;
}

/**
 * The tasks on this host and what happens to them: adopted after an agent restart, started (restoring a checkpoint
 * if asked), watched for exits, progress and checkpoints, stopped (checkpointed or killed), forgotten. Long
 * operations run in the background (`busy`) so heartbeats continue meanwhile, and nothing the heartbeat awaits
 * touches the object store: running tasks' logs are shipped in the background too.
 *
 * Every step of a start or a stop that needs the object store (restore download, build context download, the
 * final checkpoint upload, the log upload) is tried again, with backoff, until the store takes it
 * (src/storage/retry.ts): an outage delays a move, it never leaves one half-done. Only the agent leaving (`leaving`)
 * ends the retries. A step that failed for another reason leaves the task in its phase, and the next heartbeat's
 * answer starts the step again (reconcile in agent.ts), so no phase is a dead end either.
 */
export class TaskLifecycle {
  private readonly tasks = new Map<string, LocalTask>();
  private readonly retry: StoreStepRetry;
  /** The checkpoint-stops waiting for their task to exit, by task: what a notice brings forward. */
  private readonly stopDeadlines = new Map<LocalTask, StopDeadline>();
  private readonly logs: TaskLogUploads;

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

  /**
   * Have the checkpoint-stop under way for the task kill it within `timeoutSeconds` from now if it has not exited by
   * then, when that is at least a second sooner than its own deadline (less is only the milliseconds between two
   * callers' clocks reading the same notice: the agent caps again on every heartbeat). True when the deadline moved;
   * false when it did not, or no checkpoint-stop of the task waits for its exit.
   */
  capStop(t: LocalTask, timeoutSeconds: number): boolean {
    const deadline = this.stopDeadlines.get(t);
    const atMs = Date.now() + timeoutSeconds * 1000;
    if (deadline === undefined || atMs > deadline.atMs - 1000) return false;
    deadline.atMs = atMs;
    return true;
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

  /**
   * After a restart: every task the executor still has is ours again (found by label / pid file), as its record here
   * describes it. A task recorded as running that the executor no longer has was removed while no worker ran: failed,
   * as when one disappears under a running worker, never started again as if nothing had happened.
   */
  async adopt(): Promise<void> {
    const executor = this.options.executor;
    const statuses = await this.listTasks();
    const records = await readPersistedTasks(join(this.options.workDir, 'tasks'));
    for (const status of statuses) {
      if (this.tasks.has(status.taskId)) continue;
      const saved = records.get(status.taskId);
      const t = saved === undefined ? this.rebuild(status) : taskFromRecord(status.taskId, saved);
      if (t.phase === 'starting' || t.phase === 'checkpointing') t.phase = 'running';
      if (saved === undefined && t.attempt === undefined) {
        // Neither its record nor the executor says which attempt it is: its exit would be recorded and reported as
        // attempt 1's, and a later attempt's `run` would start it a second time. Stopped instead (ended, if it still
        // runs: nothing here could report it), so the controller runs it again from its last checkpoint.
        if (status.state !== 'exited') await executor.kill(t.taskId);
        t.phase = 'stopped';
        t.reason =
          'the worker lost its record of the task and the executor kept no launch to rebuild it from; ' +
          'it resumes from its last checkpoint';
        this.log.warn(`task ${t.taskId}: ${t.reason}`);
        await this.persist(t);
      } else if (t.phase === 'running' && status.state === 'exited' && status.exitCode === undefined) {
        // No exit code: the task did not end, it was ended with the worker that ran it (a local instance's tasks die
        // with their worker, process.ts). Not the task's failure: it is stopped, and runs again from its last
        // checkpoint if it is still wanted here.
        t.phase = 'stopped';
        t.reason = 'ended with the worker that ran it; it resumes from its last checkpoint';
        await this.persist(t);
      } else if (t.phase === 'running' && status.state === 'starting') {
        // Created and never started (the worker died between the two): nothing of it ran. Stopped, so a `run` starts
        // it afresh (the start removes this container first), and a stop or an answer without it finds it ended.
        t.phase = 'stopped';
        await this.persist(t);
      } else if (saved === undefined) await this.persist(t);
      this.tasks.set(t.taskId, t);
      // The watcher starts by listing the store: in the background, so an outage cannot hold up the heartbeat. A
      // task that exited while no worker ran is watched too: what it wrote before exiting (the final checkpoint a
      // stop's signal asked for) is uploaded when its exit is handled (`finished`), before that exit is reported; an
      // exit 0 short of its declared iterations is taken there as a stop from outside, as it is while watched.
      if (t.phase === 'running') this.background(t, () => this.watch(t, 'unknown'));
      this.log.info(`adopted task ${t.taskId} (${status.state})`);
    }
    const listed = new Set(statuses.map((s) => s.taskId));
    for (const [taskId, saved] of records) {
      if (saved === undefined || listed.has(taskId) || this.tasks.has(taskId)) continue;
      // A record still `starting` is a start the worker died in before the executor had the task: nothing ran.
      if (saved.phase !== 'running' && saved.phase !== 'checkpointing') continue;
      const t = taskFromRecord(taskId, saved);
      this.tasks.set(taskId, t);
      await this.disappeared(
        t,
        'the task disappeared while the worker was down (container or process removed)',
      );
      this.log.warn(`task ${taskId}: ${t.reason ?? ''}`);
    }
  }

  /**
   * A task the executor has and this host has no readable record of: what the executor kept of its launch (attempt,
   * checkpoint signal, declared iterations) stands in for the record. Without it the attempt stays undefined.
   */
  private rebuild(status: TaskRunStatus): LocalTask {
    const launched = status.launched;
    return {
      taskId: status.taskId,
      jobId: launched?.jobId ?? status.taskId.replace(/\.\d+$/, ''),
      phase: 'running',
      startedAtMs: status.startedAt?.getTime() ?? Date.now(),
      stopRequested: false,
      signal: launched?.checkpointSignal,
      timeoutSeconds: launched?.checkpointTimeoutSeconds,
      attempt: launched?.attempt,
      total: launched?.totalIterations,
      lastLogUploadMs: 0,
    };
  }

  /** A running task is gone from this host: failed, unwatched, recorded. */
  private async disappeared(t: LocalTask, reason: string): Promise<void> {
    t.phase = 'failed';
    t.reason = reason;
    await this.stopWatching(t);
    await this.persist(t);
  }

  private async watch(t: LocalTask, baseline: 'restored' | 'unknown' = 'restored'): Promise<void> {
    const store = this.registration().store;
    if (store === undefined) return;
    const dir = this.taskDir(t.taskId);
    t.progress = new ProgressTracker(
      join(dir, 'progress'),
      t.total,
      this.options.throughputWindowSeconds ?? 60,
    );
    t.watcher = new CheckpointWatcher({
      store,
      ref: { jobId: t.jobId, taskId: t.taskId },
      dir: join(dir, 'checkpoint'),
      ...(this.options.checkpointPollMs === undefined ? {} : { pollMs: this.options.checkpointPollMs }),
      onUpload: (result) => {
        this.log.debug?.(
          `task ${t.taskId}: checkpoint ${result.manifest.seq} uploaded in ${result.durationMs} ms`,
        );
        t.checkpoint = checkpointOf(t, result.manifest);
        this.persist(t).catch((e: unknown) =>
          this.log.warn(`task ${t.taskId}: recording its checkpoint failed: ${(e as Error).message}`),
        );
      },
      onError: (e) => this.log.warn(`checkpoint upload of ${t.taskId} failed: ${e.message}`),
      retry: this.retry,
    });
    const watcher = t.watcher;
    await this.retry(`checkpoint listing of ${t.taskId}`, () => watcher.start(baseline));
  }

  /**
   * Exits, progress. What goes wrong observing one task is that task's: logged, and the others are observed and
   * reported all the same (the heartbeat awaits this, and a heartbeat that never goes out loses every task here).
   */
  async observe(): Promise<void> {
    const statuses = new Map((await this.listTasks()).map((s) => [s.taskId, s]));
    for (const t of this.tasks.values())
      await this.observeOne(t, statuses).catch((e: unknown) =>
        this.log.warn(`task ${t.taskId}: could not observe it: ${(e as Error).message}`),
      );
  }

  /** The executor's tasks; an executor that does not answer fails with ExecutorUnavailableError. */
  private async listTasks(): Promise<TaskRunStatus[]> {
    try {
      return await this.options.executor.list();
    } catch (e) {
      throw new ExecutorUnavailableError(this.options.executor.kind, e as Error);
    }
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

  private async observeOne(t: LocalTask, statuses: ReadonlyMap<string, TaskRunStatus>): Promise<void> {
    await this.pollProgress(t);
    if (t.busy !== undefined || t.phase !== 'running') return;
    // The listing may predate a start that ended since (starts run in the background, and the polls above await):
    // ask again before taking a running task for gone.
    const status = statuses.get(t.taskId) ?? (await this.options.executor.status(t.taskId));
    if (status === undefined)
      await this.disappeared(t, 'the task disappeared from this host (container or process removed)');
    else if (status.state === 'exited') this.background(t, () => this.finished(t, status.exitCode));
  }

  /**
   * Read the task's progress file (the task writes it, so it may hold anything): a file that cannot be read leaves
   * the last figures, never fails the caller.
   */
  private async pollProgress(t: LocalTask): Promise<void> {
    if (t.progress === undefined) return;
    try {
      const summary = await t.progress.poll();
      // Nothing written yet is no count: a task that never reports has not done 0 of its iterations (a gang's
      // coordinator), and its job's progress is its other tasks'.
      t.completed = summary.lastReportSeconds === undefined ? undefined : summary.completed;
      t.perSecond = summary.iterationsPerSecond;
    } catch (e) {
      this.log.warn(`task ${t.taskId}: could not read its progress file: ${(e as Error).message}`);
    }
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

  start(d: DesiredTask): void {
    const previous = this.tasks.get(d.taskId);
    // A new attempt here: the last one's watcher must not outlive it (stopWatching).
    const stale = previous?.watcher;
    if (previous !== undefined) previous.watcher = undefined;
    // The same attempt here again: the stops from outside it had here go on (outsideStopsSpent bounds them); a rerun
    // after a stop (from outside, or a move) also goes on from how far they got.
    const sameAttempt = previous !== undefined && (previous.attempt ?? 1) === (d.attempt ?? 1);
    const rerun = sameAttempt && previous.phase === 'stopped';
    const t: LocalTask = {
      taskId: d.taskId,
      jobId: d.jobId,
      phase: 'starting',
      startedAtMs: Date.now(),
      stopRequested: false,
      signal: d.checkpoint.signal,
      timeoutSeconds: d.checkpoint.timeoutSeconds,
      attempt: d.attempt,
      checkpoint: previous?.checkpoint,
      lastLogUploadMs: 0,
      total: d.totalIterations,
      // A rerun here after stops from outside: how far they got, and how many got no further (stoppedFromOutside).
      stoppedOutsideAt: rerun ? previous?.stoppedOutsideAt : undefined,
      outsideStops: rerun ? previous?.outsideStops : undefined,
      attemptOutsideStops: sameAttempt ? previous.attemptOutsideStops : undefined,
    };
    this.tasks.set(d.taskId, t);
    this.background(t, async () => {
      await stale?.stop();
      try {
        const prepared = await this.prepare(t, d);
        if (!('command' in prepared)) {
          const exited = prepared;
          // It ended before, where no controller heard of it: report that end, never run it a second time.
          t.phase = exited.state;
          t.exitCode = exited.exitCode;
          t.reason = exited.reason;
          t.completed = exited.completedIterations;
          this.log.info(
            `task ${t.taskId} already ${exited.state} (exit ${exited.exitCode ?? '?'}) on ${exited.instanceId ?? 'another instance'} at ${exited.exitedAt}: not run again`,
          );
        } else if (d.hold === true) {
          // Co-start: prepared, and held until the controller releases its job (every task ready).
          t.prepared = prepared;
          t.phase = 'ready';
          this.log.info(`task ${t.taskId} ready; waiting for its job's other tasks`);
        } else {
          await this.options.executor.start(prepared);
          t.phase = 'running';
          this.log.info(`started ${t.taskId}${prepared.restoring ? ' from a checkpoint' : ''}`);
        }
      } catch (e) {
        await this.startFailed(t, e);
      }
      await this.persist(t);
    });
  }

  /**
   * The task's start failed: it is failed, with why, and whether this host is to blame (host-fault.ts), so that the
   * controller places its job elsewhere without counting the failure against it.
   */
  private async startFailed(t: LocalTask, e: unknown): Promise<void> {
    const message = e instanceof Error ? e.message : String(e);
    t.phase = 'failed';
    t.reason = `could not start: ${message}`;
    t.hostFault = hostFaultOf(e);
    this.log.warn(
      `task ${t.taskId} could not start${t.hostFault === undefined ? '' : ` (this host's fault: ${t.hostFault})`}: ${message}`,
    );
    await this.stopWatching(t);
  }

  /**
   * A task that will not run here (its start failed, it disappeared) stops having its directory watched: a watcher left
   * behind would go on uploading, and beside the next attempt's own on this host both would number their checkpoints
   * from the same seq, writing different content under one key.
   */
  private async stopWatching(t: LocalTask): Promise<void> {
    await t.watcher?.stop();
    t.watcher = undefined;
  }

  /**
   * A held task's job was released (all its tasks are ready): start what was prepared. A start that fails leaves the
   * task failed, as any start.
   */
  release(t: LocalTask): void {
    const prepared = t.prepared;
    if (t.phase !== 'ready' || prepared === undefined) return;
    t.phase = 'starting';
    t.startedAtMs = Date.now();
    this.background(t, async () => {
      try {
        await this.options.executor.start(prepared);
        t.phase = 'running';
        t.prepared = undefined;
        this.log.info(`started ${t.taskId} (released)${prepared.restoring ? ' from a checkpoint' : ''}`);
      } catch (e) {
        await this.startFailed(t, e);
      }
      await this.persist(t);
    });
  }

  /** Everything a start needs before the task runs (task-preparation.ts). */
  private async prepare(t: LocalTask, d: DesiredTask): Promise<TaskExitRecord | TaskLaunch> {
    return prepareTask(
      {
        options: this.options,
        log: this.log,
        requireStore: () => this.requireStore(),
        retry: this.retry,
        dir: this.taskDir(t.taskId),
        persist: (task) => this.persist(task),
        watch: (task) => this.watch(task),
      },
      t,
      d,
    );
  }

  async stop(
    t: LocalTask,
    checkpoint: boolean,
    settings: { readonly signal: string; readonly timeoutSeconds: number },
  ): Promise<void> {
    t.stopRequested = true;
    t.phase = 'checkpointing';
    await this.persist(t);
    const executor = this.options.executor;
    if (checkpoint) {
      const from = Date.now();
      // Brought forward, never back, by a notice arriving while the task winds down (capStop).
      const deadline: StopDeadline = { atMs: from + settings.timeoutSeconds * 1000 };
      this.stopDeadlines.set(t, deadline);
      const result = await checkpointAndStop({
        executor,
        taskId: t.taskId,
        signal: settings.signal as NodeJS.Signals,
        timeoutSeconds: settings.timeoutSeconds,
        deadline,
        watcher: t.watcher,
      }).finally(() => this.stopDeadlines.delete(t));
      if (result.lastManifest !== undefined) t.checkpoint = checkpointOf(t, result.lastManifest);
      if (result.endedBeforeSignal || (result.exitCode === 0 && (await this.didItAll(t)))) {
        // It ended as the stop arrived (before the signal, or with its last step done): that end (recorded,
        // reported) is the task's, so nothing runs it again.
        this.log.info(`task ${t.taskId} had ended when it was asked to checkpoint and stop`);
        t.stopRequested = false;
        await this.finished(t, result.exitCode);
        return;
      }
      this.log.info(
        `task ${t.taskId} checkpointed and stopped (${result.outcome} after ${result.elapsedMs} ms)` +
          (result.outcome === 'killed'
            ? `: no exit within ${Math.round((deadline.atMs - from) / 1000)} s, killed; ` +
              (t.checkpoint === undefined
                ? 'it starts again from the beginning (no checkpoint uploaded)'
                : 'it resumes from its last uploaded checkpoint')
            : ''),
      );
      if (result.uploadError !== undefined) {
        // Reported with the stop, so the controller tells the job's owner what the move cost: the state the task
        // left is not in the store, and it resumes from its last uploaded checkpoint (the error may well recur):
        // this run's, or the one it restored when it uploaded none.
        const seq = t.checkpoint === undefined ? undefined : parseCheckpointKey(t, t.checkpoint.key)?.seq;
        const from =
          t.checkpoint === undefined
            ? 'its start'
            : seq === undefined
              ? 'its last uploaded checkpoint'
              : `checkpoint ${seq}`;
        t.reason = `its checkpoint at the stop could not be uploaded (${result.uploadError.message}); it resumes from ${from}`;
        this.log.warn(`task ${t.taskId}: ${t.reason}`);
      }
    } else {
      await executor.kill(t.taskId);
      await t.watcher?.stop();
    }
    // Unregistered (an agent giving up before its controller ever answered): nowhere to upload the log to.
    if (this.registration().store !== undefined) await this.logs.uploadRest(t);
    t.phase = 'stopped';
    await this.persist(t);
  }

  /**
   * Whether a SIGKILL ended the task (exit 137) and the executor says it was not the kernel reclaiming memory: someone
   * killed it (`docker stop` of a task that ignores SIGTERM, past its grace; `docker kill`). The process executor
   * cannot tell such a kill from the kernel's out-of-memory kill, so there it is never taken for one.
   */
  private async killedFromOutside(exitCode: number | undefined, taskId: string): Promise<boolean> {
    const executor = this.options.executor;
    if (exitCode !== SIGKILL_EXIT_CODE || executor.reportsOomKills !== true) return false;
    const status = await executor.status(taskId).catch(() => undefined);
    return status !== undefined && status.oomKilled !== true;
  }

  /** The task has reported every iteration its job declares (none declared: not known, so no). */
  private async didItAll(t: LocalTask): Promise<boolean> {
    if (t.total === undefined) return false;
    await this.pollProgress(t);
    return reportedAll(t);
  }

  /**
   * The task exited without being asked: 0 is success, anything else a failure with its last output; but an exit a
   * stop from outside the worker explains is a stop (stoppedFromOutside), whether it was watched or happened while no
   * worker ran. Also a task adopted after it exited during a stop (the worker that signalled it died meanwhile):
   * stopped, as the stop would have reported it, unless it exited 0 having done every iteration (the stop's rule).
   */
  private async finished(t: LocalTask, exitCode: number | undefined): Promise<void> {
    await this.pollProgress(t);
    if (!t.stopRequested) {
      const outside = stoppedFromOutside(
        t,
        exitCode,
        await this.killedFromOutside(exitCode, t.taskId),
        this.options.executor.kind,
      );
      if (outside !== undefined) await this.stoppedOutside(t, outside, exitCode);
    }
    if (t.stopRequested && exitCode === 0 && (await this.didItAll(t))) t.stopRequested = false;
    // Killed (that stop's timeout ran out, or a SIGTERM it did not handle): what is in its directory may be torn
    // mid-write, as after a stop's kill.
    const killed = t.stopRequested && (exitCode === SIGKILL_EXIT_CODE || exitCode === SIGTERM_EXIT_CODE);
    // The exit is stored first, its last output read here: the last checkpoints and the log take as long as the
    // store does, and a worker that dies meanwhile must not take the exit with it (exit-record.ts). Still reported
    // only once all three are stored.
    if (!t.stopRequested) {
      const { record, reason } = await exitOf(
        t,
        exitCode,
        this.options.executor,
        this.options.cloudInstanceId,
      );
      // Stored before it is reported: from then on a worker asked to run it again finds its end (exit-record.ts).
      const store = this.requireStore();
      await this.retry(`exit record of ${t.taskId}`, () => writeExitRecord(store, record));
      t.reason = reason;
    }
    if (t.watcher !== undefined) {
      await t.watcher.stop();
      if (killed) await t.watcher.flushMarkedOnly();
      else await t.watcher.flush();
    }
    await this.logs.uploadRest(t);
    t.exitCode = exitCode;
    if (t.stopRequested) t.phase = 'stopped';
    else t.phase = exitCode === 0 ? 'succeeded' : 'failed';
    this.log.info(`task ${t.taskId} ${t.phase} (exit ${exitCode ?? '?'})`);
    await this.persist(t);
  }

  /**
   * An exit taken for a stop from outside (`outside`, why): not the task's end, so no exit is recorded and it runs
   * again from its last checkpoint; unless such stops are spent for it (outsideStopsSpent), when its exit is taken at
   * its word.
   */
  private async stoppedOutside(t: LocalTask, outside: string, exitCode: number | undefined): Promise<void> {
    const further = await gotFurther(t, this.registration().store);
    const inAttempt = t.attemptOutsideStops ?? 0;
    const spent = outsideStopsSpent(t, further, inAttempt);
    if (spent !== undefined) {
      this.log.warn(`task ${t.taskId}: ${spent}: its exit (code ${exitCode ?? '?'}) is taken at its word`);
      return;
    }
    t.stopRequested = true;
    t.reason = outside;
    t.outsideStops = (further ? 0 : (t.outsideStops ?? 0)) + 1;
    t.stoppedOutsideAt = Math.max(t.completed ?? 0, t.stoppedOutsideAt ?? 0);
    t.attemptOutsideStops = inAttempt + 1;
    this.log.warn(`task ${t.taskId}: ${outside}`);
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
