import { spawn } from 'node:child_process';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import type { ObjectStore } from '../storage/object-store.js';
import { readAll } from '../storage/streams.js';
import { checkpointKeys, parseBuildContextRef, taskLogKey } from '../protocol/object-keys.js';
import {
  desiredTaskSchema,
  type DesiredTask,
  type ReportedTaskState,
  type TaskReport,
} from '../protocol/worker-protocol.js';
import {
  checkpointAndStop,
  CheckpointWatcher,
  restoreLatestCheckpoint,
  type CheckpointManifest,
} from './checkpoints.js';
import { ControllerRequestError, type ControllerConnection } from './controller-client.js';
import type { Executor, TaskLaunch } from './executor.js';
import { ProgressTracker } from './progress.js';

/**
 * The worker agent: registers with the controller, then every few seconds
 * reports its tasks (state, progress, newest uploaded checkpoint) and reconciles with the answer, level-triggered:
 *
 *   run              start the task if this host does not have it (restoring its latest good checkpoint if asked);
 *                    a task found running (a restarted worker) is adopted, never started twice
 *   checkpoint-stop  signal → wait up to the job's timeout → kill if needed → upload what it left → report stopped
 *   stop             kill now (a cancel), report stopped
 *   (not listed)     a running task the controller no longer wants is checkpointed and stopped (work is kept);
 *                    a finished one is forgotten
 *
 * A task exiting 0 on its own has succeeded; any other exit failed (the reason carries the exit code and its last
 * output lines). Logs go to the object store (`logs/<job>/…`, one object per run) while the task runs and when it ends,
 * which is where `fleetwise logs` reads them. Long operations (restore, checkpoint-and-stop) run in the background so
 * heartbeats continue; the task is reported `checkpointing` meanwhile.
 */

export interface AgentLogger {
  info(message: string, data?: Record<string, unknown>): void;
  warn(message: string, data?: Record<string, unknown>): void;
}

export interface AgentOptions {
  readonly connection: ControllerConnection;
  readonly executor: Executor;
  /** Opens the object store the controller names at registration. */
  readonly openStore: (location: string) => ObjectStore;
  /** The cloud's id of this instance (EC2 i-…, local-…). */
  readonly cloudInstanceId: string;
  /** Agent state: per-task checkpoint directories, progress files, fetched build contexts. */
  readonly workDir: string;
  /** Override the controller's heartbeat period (tests). */
  readonly heartbeatSeconds?: number;
  readonly checkpointPollMs?: number;
  /** Upload a running task's log at most this often (default 5 s). */
  readonly logUploadSeconds?: number;
  /** Throughput window (default progress.ts's 300 s; shorter in local mode and tests). */
  readonly throughputWindowSeconds?: number;
  readonly logger?: AgentLogger;
}

/** What the agent remembers of a task across its own restarts (`<task dir>/agent.json`). */
const persistedSchema = z.object({
  jobId: z.string(),
  phase: z.enum(['starting', 'running', 'checkpointing', 'stopped', 'succeeded', 'failed']),
  startedAtMs: z.number(),
  stopRequested: z.boolean(),
  exitCode: z.number().optional(),
  reason: z.string().optional(),
  restoredFrom: z.string().optional(),
  checkpoint: z.object({ key: z.string(), atSeconds: z.number() }).optional(),
  signal: z.string().optional(),
  timeoutSeconds: z.number().optional(),
});
type Persisted = z.infer<typeof persistedSchema>;

interface LocalTask extends Persisted {
  readonly taskId: string;
  watcher?: CheckpointWatcher | undefined;
  progress?: ProgressTracker | undefined;
  completed?: number | undefined;
  perSecond?: number | undefined;
  busy?: Promise<void> | undefined;
  lastLogUploadMs: number;
  total?: number | undefined;
}

const silent: AgentLogger = { info() {}, warn() {} };

export class WorkerAgent {
  private readonly tasks = new Map<string, LocalTask>();
  private readonly log: AgentLogger;
  private store: ObjectStore | undefined;
  private controllerInstanceId: string | undefined;
  private heartbeatSeconds = 5;
  private adopted = false;

  constructor(private readonly options: AgentOptions) {
    this.log = options.logger ?? silent;
  }

  get instanceId(): string | undefined {
    return this.controllerInstanceId;
  }

  /** Register (retrying until the controller knows this instance), then heartbeat until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        if (this.store === undefined) await this.register();
        await this.tick();
      } catch (e) {
        if (e instanceof ControllerRequestError && (e.statusCode === 401 || e.statusCode === 410)) {
          if (e.statusCode === 410) this.log.warn(`the controller retired this instance: ${e.message}`);
          this.store = undefined; // register again (a new token), or keep trying if retired
        } else if (e instanceof z.ZodError)
          // A controller answer this worker cannot use (a newer/older protocol, a bad spec): refuse it whole, change
          // nothing, keep heartbeating (the next answer may be fine), and say which field is wrong.
          this.log.warn(
            `refused the controller's answer (nothing changed on this host): ${describeIssues(e)}`,
          );
        else this.log.warn(`heartbeat failed: ${(e as Error).message}`);
      }
      await sleep(this.store === undefined ? 1 : this.period(), signal);
    }
    for (const t of this.tasks.values()) await t.watcher?.stop();
  }

  private period(): number {
    return this.options.heartbeatSeconds ?? this.heartbeatSeconds;
  }

  async register(): Promise<void> {
    const answer = await this.options.connection.register({
      instanceId: this.options.cloudInstanceId,
      executor: this.options.executor.kind,
      hostname: hostname(),
    });
    this.controllerInstanceId = answer.instanceId;
    this.heartbeatSeconds = answer.heartbeatSeconds;
    this.store = this.options.openStore(answer.objectStore);
    this.log.info(`registered as ${answer.instanceId}`, { objectStore: answer.objectStore });
  }

  /** One heartbeat: observe, report, reconcile with the answer. */
  async tick(): Promise<void> {
    if (!this.adopted) {
      await this.adopt();
      this.adopted = true;
    }
    await this.observe();
    const reports = [...this.tasks.values()].map((t) => this.report(t));
    const answer = await this.options.connection.heartbeat({ tasks: reports });
    this.reconcile(answer.tasks);
    await this.uploadRunningLogs();
  }

  /** Wait for every background operation (tests). */
  async settle(): Promise<void> {
    await Promise.all([...this.tasks.values()].map((t) => t.busy));
  }

  // ---------------------------------------------------------------------------------------------------------------

  private taskDir(taskId: string): string {
    return join(this.options.workDir, 'tasks', taskId);
  }

  private async persist(t: LocalTask): Promise<void> {
    const data: Persisted = {
      jobId: t.jobId,
      phase: t.phase,
      startedAtMs: t.startedAtMs,
      stopRequested: t.stopRequested,
      ...(t.exitCode === undefined ? {} : { exitCode: t.exitCode }),
      ...(t.reason === undefined ? {} : { reason: t.reason }),
      ...(t.restoredFrom === undefined ? {} : { restoredFrom: t.restoredFrom }),
      ...(t.checkpoint === undefined ? {} : { checkpoint: t.checkpoint }),
      ...(t.signal === undefined ? {} : { signal: t.signal }),
      ...(t.timeoutSeconds === undefined ? {} : { timeoutSeconds: t.timeoutSeconds }),
    };
    const path = join(this.taskDir(t.taskId), 'agent.json');
    await mkdir(this.taskDir(t.taskId), { recursive: true });
    await writeFile(`${path}.tmp`, JSON.stringify(data));
    await rename(`${path}.tmp`, path);
  }

  /** After a restart: every task the executor still has is ours again (found by label / pid file). */
  private async adopt(): Promise<void> {
    for (const status of await this.options.executor.list()) {
      if (this.tasks.has(status.taskId)) continue;
      let saved: Persisted | undefined;
      try {
        const parsed = persistedSchema.safeParse(
          JSON.parse(await readFile(join(this.taskDir(status.taskId), 'agent.json'), 'utf8')),
        );
        if (parsed.success) saved = parsed.data;
      } catch {
        saved = undefined;
      }
      const t: LocalTask = {
        taskId: status.taskId,
        jobId: saved?.jobId ?? status.taskId.replace(/\.\d+$/, ''),
        phase: saved?.phase ?? 'running',
        startedAtMs: saved?.startedAtMs ?? status.startedAt?.getTime() ?? Date.now(),
        stopRequested: saved?.stopRequested ?? false,
        exitCode: saved?.exitCode,
        reason: saved?.reason,
        restoredFrom: saved?.restoredFrom,
        checkpoint: saved?.checkpoint,
        signal: saved?.signal,
        timeoutSeconds: saved?.timeoutSeconds,
        lastLogUploadMs: 0,
      };
      if (t.phase === 'starting' || t.phase === 'checkpointing') t.phase = 'running';
      this.tasks.set(t.taskId, t);
      if (t.phase === 'running' && status.state !== 'exited') await this.watch(t);
      this.log.info(`adopted task ${t.taskId} (${status.state})`);
    }
  }

  private async watch(t: LocalTask): Promise<void> {
    if (this.store === undefined) return;
    const dir = this.taskDir(t.taskId);
    t.progress = new ProgressTracker(
      join(dir, 'progress'),
      t.total,
      this.options.throughputWindowSeconds ?? 60,
    );
    t.watcher = new CheckpointWatcher({
      store: this.store,
      ref: { jobId: t.jobId, taskId: t.taskId },
      dir: join(dir, 'checkpoint'),
      ...(this.options.checkpointPollMs === undefined ? {} : { pollMs: this.options.checkpointPollMs }),
      onUpload: (result) => {
        t.checkpoint = checkpointOf(t, result.manifest);
        void this.persist(t);
      },
      onError: (e) => this.log.warn(`checkpoint upload of ${t.taskId} failed: ${e.message}`),
    });
    await t.watcher.start();
  }

  /** Exits, progress. */
  private async observe(): Promise<void> {
    const statuses = new Map((await this.options.executor.list()).map((s) => [s.taskId, s]));
    for (const t of this.tasks.values()) {
      if (t.progress !== undefined) {
        const summary = await t.progress.poll();
        t.completed = summary.completed;
        t.perSecond = summary.iterationsPerSecond;
      }
      if (t.busy !== undefined || t.phase !== 'running') continue;
      const status = statuses.get(t.taskId);
      if (status === undefined) {
        t.phase = 'failed';
        t.reason = 'the task disappeared from this host (container or process removed)';
        await this.persist(t);
      } else if (status.state === 'exited') this.background(t, () => this.finished(t, status.exitCode));
    }
  }

  private report(t: LocalTask): TaskReport {
    const state: ReportedTaskState = t.busy !== undefined && t.phase === 'running' ? 'running' : t.phase;
    return {
      taskId: t.taskId,
      state,
      ...(t.exitCode === undefined ? {} : { exitCode: t.exitCode }),
      ...(t.reason === undefined ? {} : { reason: t.reason.slice(0, 4000) }),
      ...(t.completed === undefined ? {} : { completedIterations: t.completed }),
      ...(t.perSecond === undefined || state !== 'running' ? {} : { throughputPerSecond: t.perSecond }),
      ...(t.checkpoint === undefined ? {} : { checkpoint: t.checkpoint }),
      ...(t.restoredFrom === undefined ? {} : { restoredFrom: t.restoredFrom }),
    };
  }

  private reconcile(answer: readonly DesiredTask[]): void {
    // A connection that does not validate (tests, embedders) cannot make the agent act on a malformed spec either.
    const desired: DesiredTask[] = [];
    for (const [i, raw] of answer.entries()) {
      const parsed = desiredTaskSchema.safeParse(raw);
      if (parsed.success) desired.push(parsed.data);
      else
        this.log.warn(
          `refused desired task ${i} from the controller: ${describeIssues(parsed.error, `tasks.${i}`)}`,
        );
    }
    const wanted = new Map(desired.map((d) => [d.taskId, d]));
    for (const d of desired) {
      const t = this.tasks.get(d.taskId);
      if (t?.busy !== undefined) continue;
      if (d.action === 'run') {
        if (t === undefined || t.phase === 'stopped') this.startTask(d);
      } else if (t !== undefined && (t.phase === 'running' || t.phase === 'starting'))
        this.background(t, () => this.stopTask(t, d.action === 'checkpoint-stop', d.checkpoint));
    }
    for (const t of this.tasks.values()) {
      if (wanted.has(t.taskId) || t.busy !== undefined) continue;
      if (t.phase === 'running')
        this.background(t, () =>
          this.stopTask(t, true, {
            signal: (t.signal ?? 'SIGTERM') as DesiredTask['checkpoint']['signal'],
            timeoutSeconds: t.timeoutSeconds ?? 60,
          }),
        );
      else this.background(t, () => this.forget(t));
    }
  }

  private background(t: LocalTask, op: () => Promise<void>): void {
    t.busy = op()
      .catch((e: unknown) => this.log.warn(`task ${t.taskId}: ${(e as Error).message}`))
      .finally(() => {
        t.busy = undefined;
      });
  }

  private startTask(d: DesiredTask): void {
    const previous = this.tasks.get(d.taskId);
    const t: LocalTask = {
      taskId: d.taskId,
      jobId: d.jobId,
      phase: 'starting',
      startedAtMs: Date.now(),
      stopRequested: false,
      signal: d.checkpoint.signal,
      timeoutSeconds: d.checkpoint.timeoutSeconds,
      checkpoint: previous?.checkpoint,
      lastLogUploadMs: 0,
      total: numberOr(d.launch.env.COUNT_TO),
    };
    this.tasks.set(d.taskId, t);
    this.background(t, async () => {
      try {
        await this.launch(t, d);
        t.phase = 'running';
      } catch (e) {
        t.phase = 'failed';
        t.reason = `could not start: ${(e as Error).message}`;
        this.log.warn(`task ${t.taskId} could not start: ${(e as Error).message}`);
      }
      await this.persist(t);
    });
  }

  private async launch(t: LocalTask, d: DesiredTask): Promise<void> {
    const store = this.requireStore();
    const executor = this.options.executor;
    const dir = this.taskDir(t.taskId);
    const checkpointDir = join(dir, 'checkpoint');
    const progressFile = join(dir, 'progress');
    if ((await executor.status(t.taskId)) !== undefined) await executor.remove(t.taskId);
    await mkdir(dir, { recursive: true });
    await writeFile(progressFile, '');
    await this.persist(t);
    let restoring = false;
    if (d.restore) {
      const restored = await restoreLatestCheckpoint(
        store,
        { jobId: t.jobId, taskId: t.taskId },
        checkpointDir,
      );
      for (const s of restored.skipped)
        this.log.warn(`task ${t.taskId}: skipped checkpoint ${s.seq}: ${s.reason}`);
      if (restored.manifest !== undefined) {
        restoring = true;
        t.restoredFrom = checkpointKeys(t, restored.manifest.seq).manifest;
        t.checkpoint = checkpointOf(t, restored.manifest);
        this.log.info(
          `task ${t.taskId}: restored checkpoint ${restored.manifest.seq} in ${restored.durationMs} ms`,
        );
      } else this.log.warn(`task ${t.taskId}: no good checkpoint to restore; starting from zero`);
    } else {
      await rm(checkpointDir, { recursive: true, force: true });
      await mkdir(checkpointDir, { recursive: true });
    }
    await this.watch(t);
    const launch: TaskLaunch = {
      taskId: t.taskId,
      jobId: t.jobId,
      ...(d.launch.image === undefined ? {} : { image: d.launch.image }),
      ...(d.launch.build === undefined ? {} : { build: await this.buildContext(d.launch.build) }),
      command: d.launch.command,
      env: d.launch.env,
      vcpus: d.launch.vcpus,
      memoryGiB: d.launch.memoryGiB,
      gpus: d.launch.gpus,
      shmSizeGiB: d.launch.shmSizeGiB,
      checkpointDir,
      progressFile,
      restoring,
    };
    await executor.start(launch);
    this.log.info(`started ${t.taskId}${restoring ? ' from a checkpoint' : ''}`);
  }

  /**
   * A build context uploaded by `fleetwise submit` (`…/contexts/<sha256>.tar[.gz]` in the object store) is fetched once
   * per host and unpacked under the work directory, keyed by its hash; a plain directory is used as it is.
   */
  private async buildContext(build: {
    readonly context: string;
    readonly dockerfile?: string | undefined;
  }): Promise<NonNullable<TaskLaunch['build']>> {
    const uploaded = parseBuildContextRef(build.context);
    if (uploaded === undefined) {
      const { hashBuildContext } = await import('./image-cache.js');
      return {
        contextDir: build.context,
        dockerfile: build.dockerfile,
        contentHash: await hashBuildContext(build.context),
      };
    }
    const { key, sha256: hash, encoding } = uploaded;
    const target = join(this.options.workDir, 'contexts', hash);
    try {
      await readFile(join(target, '.fleetwise-complete'));
    } catch {
      const temp = `${target}.${process.pid}.tmp`;
      await rm(temp, { recursive: true, force: true });
      await mkdir(temp, { recursive: true });
      const archive = await this.requireStore().getBuffer(key);
      await untar(archive, temp, encoding === 'gzip');
      await writeFile(join(temp, '.fleetwise-complete'), '');
      await rm(target, { recursive: true, force: true });
      await rename(temp, target);
    }
    return { contextDir: target, dockerfile: build.dockerfile, contentHash: hash };
  }

  private async stopTask(
    t: LocalTask,
    checkpoint: boolean,
    settings: { readonly signal: string; readonly timeoutSeconds: number },
  ): Promise<void> {
    t.stopRequested = true;
    t.phase = 'checkpointing';
    await this.persist(t);
    const executor = this.options.executor;
    if (checkpoint) {
      const result = await checkpointAndStop({
        executor,
        taskId: t.taskId,
        signal: settings.signal as NodeJS.Signals,
        timeoutSeconds: settings.timeoutSeconds,
        watcher: t.watcher,
      });
      if (result.lastManifest !== undefined) t.checkpoint = checkpointOf(t, result.lastManifest);
      this.log.info(
        `task ${t.taskId} checkpointed and stopped (${result.outcome} after ${result.elapsedMs} ms)` +
          (result.outcome === 'killed'
            ? `: no exit within ${settings.timeoutSeconds} s, killed; it resumes from its last uploaded checkpoint`
            : ''),
      );
    } else {
      await executor.kill(t.taskId);
      await t.watcher?.stop();
    }
    await this.uploadLog(t);
    t.phase = 'stopped';
    await this.persist(t);
  }

  /** The task exited without being asked: 0 is success, anything else a failure with its last output. */
  private async finished(t: LocalTask, exitCode: number | undefined): Promise<void> {
    if (t.watcher !== undefined) {
      await t.watcher.stop();
      await t.watcher.flush();
    }
    if (t.progress !== undefined) {
      const summary = await t.progress.poll();
      t.completed = summary.completed;
    }
    const text = await this.uploadLog(t);
    t.exitCode = exitCode;
    if (t.stopRequested) t.phase = 'stopped';
    else if (exitCode === 0) t.phase = 'succeeded';
    else {
      t.phase = 'failed';
      const tail = text.trimEnd().split('\n').slice(-5).join('\n');
      t.reason = `exit code ${exitCode ?? 'unknown'}${tail === '' ? '' : `; last output:\n${tail}`}`;
    }
    this.log.info(`task ${t.taskId} ${t.phase} (exit ${exitCode ?? '?'})`);
    await this.persist(t);
  }

  private async forget(t: LocalTask): Promise<void> {
    await t.watcher?.stop();
    await this.options.executor.remove(t.taskId).catch(() => undefined);
    await rm(this.taskDir(t.taskId), { recursive: true, force: true });
    this.tasks.delete(t.taskId);
  }

  private async uploadRunningLogs(): Promise<void> {
    const every = (this.options.logUploadSeconds ?? 5) * 1000;
    for (const t of this.tasks.values())
      if (t.phase === 'running' && t.busy === undefined && Date.now() - t.lastLogUploadMs >= every)
        await this.uploadLog(t).catch((e: unknown) =>
          this.log.warn(`log upload of ${t.taskId}: ${(e as Error).message}`),
        );
  }

  /** Upload the run's whole output (tasks are batch jobs; a few MiB at most is expected). Returns it. */
  private async uploadLog(t: LocalTask): Promise<string> {
    const store = this.requireStore();
    let text: string;
    try {
      text = (await readAll(await this.options.executor.logs(t.taskId))).toString('utf8');
    } catch {
      return '';
    }
    await store.put(
      taskLogKey(t.jobId, t.taskId, t.startedAtMs, this.controllerInstanceId ?? 'unknown'),
      Buffer.from(text),
    );
    t.lastLogUploadMs = Date.now();
    return text;
  }

  private requireStore(): ObjectStore {
    if (this.store === undefined) throw new Error('not registered yet');
    return this.store;
  }
}

function checkpointOf(
  ref: { jobId: string; taskId: string },
  manifest: CheckpointManifest,
): { key: string; atSeconds: number } {
  return {
    key: checkpointKeys(ref, manifest.seq).manifest,
    atSeconds: Date.parse(manifest.createdAt) / 1000,
  };
}

/** `tasks.0.action: Invalid option…; …` — the field path and zod's reason for each issue. */
function describeIssues(error: z.ZodError, prefix = ''): string {
  return error.issues
    .slice(0, 5)
    .map(
      (i) =>
        `${[prefix, ...i.path.map(String)].filter((p) => p !== '').join('.') || '(answer)'}: ${i.message}`,
    )
    .join('; ');
}

function numberOr(value: string | undefined): number | undefined {
  const n = Number(value);
  return value === undefined || !Number.isFinite(n) ? undefined : n;
}

function untar(archive: Buffer, dir: string, gzip: boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const tar = spawn('tar', [gzip ? '-xzf' : '-xf', '-', '-C', dir, '--no-same-owner'], {
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    let stderr = '';
    tar.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    tar.once('error', reject);
    tar.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`tar exited ${code}: ${stderr.trim()}`)),
    );
    tar.stdin.end(archive);
  });
}

function sleep(seconds: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, seconds * 1000);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
