import { randomUUID } from 'node:crypto';
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { newWorkerToken } from '../protocol/launch-secret.js';
import { WORKER_EXIT_FILE, type WorkerExit } from '../protocol/worker-exit.js';
import type { ObjectStore } from '../storage/object-store.js';
import { sleepUnlessAborted } from '../storage/retry.js';
import {
  desiredTaskSchema,
  type DesiredTask,
  type InterruptionNotice,
  type NetworkReport,
  type ProbePeer,
  type RegisterRequest,
  type RegisterResponse,
} from '../protocol/worker-protocol.js';
import { ControllerRequestError, type ControllerConnection } from './controller-client.js';
import type { LaunchCredentialSource } from './launch-credential.js';
import type { SavedCredential } from './saved-credential.js';
import type { Executor } from './executor.js';
import { DEFAULT_NOTICE_POLL_SECONDS, type InterruptionNoticeSource } from './interruption-notices.js';
import { SPOT_NOTICE_MARGIN_SECONDS } from '../core/spot.js';
import { ExecutorUnavailableError, TaskLifecycle } from './task-lifecycle.js';
import { retiredState, stopRetiredTasks } from './retirement.js';

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
 * A controller that answers that it has retired this instance (HTTP 410: terminating or terminated, retirement.ts)
 * has resumed its tasks elsewhere from their last checkpoints: the agent stops uploading, kills every task without a
 * checkpoint, records why it exits, and returns 'retired'.
 *
 * Each heartbeat carries this process's boot id and its number in the process (1, 2, …), so that the controller can
 * tell a heartbeat delivered late (its request timed out here, and reached the controller after the next one) from a
 * new one, and ignore what it reports.
 *
 * A spot interruption notice (interruption-notices.ts: EC2 reclaims the instance about two minutes later) makes the agent
 * checkpoint and stop every task at once, uploading the checkpoints, heartbeat at once to tell the controller (which
 * moves the tasks elsewhere), and start nothing more on this host; a rebalance recommendation is only reported.
 *
 * A task exiting 0 on its own has succeeded; any other exit failed (the reason carries the exit code and its last
 * output lines). Logs go to the object store (`logs/<job>/…`, each run as segments holding what is new) while the task runs and when it ends,
 * which is where `fleetwise logs` reads them. Long operations (restore, checkpoint-and-stop, log uploads) run in the
 * background, so the heartbeat never waits for the object store: a hung store cannot make a healthy worker look
 * dead. A stop is reported `checkpointing` until its uploads are in the store, however long an outage lasts.
 *
 * This module is the controller's side of it (registration, heartbeats, the answer); task-lifecycle.ts does what the
 * answer asks of each task.
 */

export interface AgentLogger {
  /** Every heartbeat, checkpoint upload and failure (FLEETWISE_LOG_LEVEL=debug): for a worker the controller says went silent. */
  debug?(message: string, data?: Record<string, unknown>): void;
  info(message: string, data?: Record<string, unknown>): void;
  warn(message: string, data?: Record<string, unknown>): void;
}

/**
 * How the agent registers its instance (ARCHITECTURE.md "Worker identity"): with the per-instance token it saved at an
 * earlier registration when it has one (a restarted worker), else with the launch credential, good once per instance.
 */
export interface AgentCredentials {
  /** The launch credential; absent, only a saved per-instance token can register. */
  readonly launch?: LaunchCredentialSource | undefined;
  /** Where the per-instance token is kept across restarts of the worker. */
  readonly saved?: SavedCredential | undefined;
}

export interface AgentOptions {
  readonly connection: ControllerConnection;
  readonly credentials: AgentCredentials;
  readonly executor: Executor;
  /** Opens the object store the controller names at registration. */
  readonly openStore: (location: string) => ObjectStore | Promise<ObjectStore>;
  /** The cloud's id of this instance (EC2 i-…, local-…). */
  readonly cloudInstanceId: string;
  /** Agent state: per-task checkpoint directories, progress files, fetched build contexts. */
  readonly workDir: string;
  /** Override the controller's heartbeat period (tests). */
  readonly heartbeatSeconds?: number;
  readonly checkpointPollMs?: number;
  /** Upload a running task's log at most this often (default 5 s). */
  readonly logUploadSeconds?: number;
  /** The size a log segment is sealed at (default task-log.ts's LOG_SEGMENT_BYTES; smaller in tests). */
  readonly logSegmentBytes?: number;
  /** Throughput window (default progress.ts's 300 s; shorter in local mode and tests). */
  readonly throughputWindowSeconds?: number;
  /**
   * Give up after this many seconds without a working controller (no successful registration or heartbeat):
   * checkpoint and stop every task, then return from run(). Without it a worker whose controller is gone (a local
   * controller stopped with its workers kept, an instance the controller forgot) would retry forever while its tasks
   * run unsupervised. Default 300; 0 never gives up.
   */
  readonly giveUpAfterSeconds?: number;
  /** On a stop (run's signal), checkpoint and stop the tasks instead of leaving them for a restarted agent to adopt. */
  readonly stopTasksOnExit?: boolean;
  /** Where the controller is, for log lines. */
  readonly controllerUrl?: string;
  /** Round trips to the instances of this worker's jobs (latency-probe.ts), reported with each heartbeat. */
  readonly latencyProbe?: {
    heartbeatReport(): NetworkReport;
    setPeers(peers: readonly ProbePeer[]): void;
  };
  /** EC2's spot interruption notices and rebalance recommendations (absent: not on spot, or not on EC2). */
  readonly interruptionNotices?: {
    readonly source: InterruptionNoticeSource;
    /** Poll this often (default 5 s, as AWS advises). */
    readonly pollSeconds?: number;
  };
  readonly logger?: AgentLogger;
}

/**
 * Why run() returned. retired: the controller has replaced this instance (its tasks were killed, not checkpointed);
 * `fleetwise worker` exits with a code of its own then, so a supervisor can tell it from a failure.
 */
export type AgentExit = 'stopped' | 'gave-up' | 'retired';

export const DEFAULT_GIVE_UP_AFTER_SECONDS = 300;

/** A failing heartbeat is logged once, then at most this often (with how long until the agent gives up). */
const FAILURE_LOG_EVERY_MS = 30_000;

const silent: AgentLogger = { info() {}, warn() {} };

export class WorkerAgent {
  private readonly log: AgentLogger;
  private readonly tasks: TaskLifecycle;
  private store: ObjectStore | undefined;
  private controllerInstanceId: string | undefined;
  private heartbeatSeconds = 5;
  /** This process has sent a launch registration (its retries send it again, with the same token). */
  private proposed = false;
  /** The proposed token when there is no work directory to save it in. */
  private unsavedProposal: string | undefined;
  private adopted = false;
  private lastContactMs = Date.now();
  private lastFailureLogMs: number | undefined;
  /** The controller answered the last failed request (it refused it) rather than not answering at all. */
  private lastFailureAnswered = false;
  /** This process's run, in every heartbeat with its number (`heartbeatSeq`): the controller's order of them. */
  private readonly bootId = randomUUID();
  private heartbeatSeq = 0;
  /** Aborted when run() is told to stop: steps waiting for the object store stop retrying. */
  private readonly leaving = new AbortController();
  /** The strongest interruption notice seen (reported in every heartbeat from then on). */
  private notice: InterruptionNotice | undefined;
  /** Aborted to cut the wait before the next heartbeat short (a notice to report). */
  private nap = new AbortController();
  /** Since when the executor has not answered (undefined: it answers), and when that was last logged. */
  private executorDownSinceMs: number | undefined;
  private executorLogMs: number | undefined;

  constructor(private readonly options: AgentOptions) {
    this.log = options.logger ?? silent;
    this.tasks = new TaskLifecycle(
      options,
      this.log,
      () => ({ store: this.store, instanceId: this.controllerInstanceId }),
      this.leaving.signal,
    );
  }

  get instanceId(): string | undefined {
    return this.controllerInstanceId;
  }

  /**
   * Register (retrying until the controller knows this instance), then heartbeat until `signal` aborts, the
   * controller has been gone for `giveUpAfterSeconds`, or it answers that it has retired this instance. On giving up,
   * and on a stop with `stopTasksOnExit`, every task is checkpointed and stopped first; on a retirement every task is
   * killed without a checkpoint. Giving up and a retirement are then recorded in WORKER_EXIT_FILE, with when.
   */
  async run(signal: AbortSignal): Promise<AgentExit> {
    const giveUpMs = (this.options.giveUpAfterSeconds ?? DEFAULT_GIVE_UP_AFTER_SECONDS) * 1000;
    this.lastContactMs = Date.now();
    // An earlier worker's exit on this directory is not this one's: it would end the instance while this one runs.
    this.forgetExit();
    if (signal.aborted) this.leaving.abort();
    else signal.addEventListener('abort', () => this.leaving.abort(), { once: true });
    let exit: AgentExit = 'stopped';
    let retiredBy = '';
    const watching = this.watchNotices(this.leaving.signal);
    while (!signal.aborted) {
      const registered = this.store !== undefined;
      try {
        if (!registered) await this.register();
        const began = Date.now();
        await this.tick();
        this.log.debug?.('heartbeat answered', { ms: Date.now() - began });
        this.contact();
      } catch (e) {
        this.log.debug?.(`${registered ? 'heartbeat' : 'registration'} failed: ${(e as Error).message}`);
        if (retiredState(e) !== undefined) {
          retiredBy = (e as Error).message;
          exit = 'retired';
          break;
        }
        if (
          registered &&
          e instanceof ControllerRequestError &&
          (e.statusCode === 401 || e.statusCode === 410)
        ) {
          if (e.statusCode === 410)
            this.log.warn(
              `the controller answered 410 naming no retirement (${e.message}); registering again`,
            );
          this.store = undefined; // register again (a refused registration is a failure)
        } else if (e instanceof z.ZodError)
          // A controller answer this worker cannot use (a newer/older protocol, a bad spec): refuse it whole, change
          // nothing, keep heartbeating (the next answer may be fine), and say which field is wrong.
          this.log.warn(
            `refused the controller's answer (nothing changed on this host): ${describeIssues(e)}`,
          );
        else this.failed(e as Error, giveUpMs);
      }
      if (giveUpMs > 0 && Date.now() - this.lastContactMs >= giveUpMs) {
        exit = 'gave-up';
        break;
      }
      const nap = this.nap.signal;
      if (!nap.aborted)
        await sleepUnlessAborted(
          (this.store === undefined ? 1 : this.period()) * 1000,
          AbortSignal.any([signal, nap]),
        );
      if (nap.aborted) this.nap = new AbortController();
    }
    this.leaving.abort();
    if (exit === 'retired') await this.retire(retiredBy);
    await watching;
    if (exit === 'gave-up') {
      const stopped = await this.tasks.checkpointAll();
      const forSeconds = `for ${Math.round((Date.now() - this.lastContactMs) / 1000)} s`;
      const why = this.lastFailureAnswered
        ? `the controller${this.where()} has refused this worker ${forSeconds}`
        : `no answer from the controller${this.where()} ${forSeconds}`;
      this.log.warn(`giving up: ${why}; ${describeStopped(stopped)}; exiting`);
    } else if (exit === 'stopped' && this.options.stopTasksOnExit === true) {
      const stopped = await this.tasks.checkpointAll();
      // One last report, so a controller still listening records the final checkpoints; its answer is not acted on.
      if (this.store !== undefined)
        await this.options.connection
          .heartbeat({ tasks: this.tasks.reports(), ...this.nextOrder() })
          .catch(() => undefined);
      this.log.info(`stopping: ${describeStopped(stopped)}`);
    }
    await this.tasks.stopWatchers();
    if (exit !== 'stopped') this.recordExit(exit);
    return exit;
  }

  /**
   * The controller has retired this instance (retirement.ts): nothing more goes to the object store (no registration
   * to upload with, the store retries ended by the caller), and every task is killed without a checkpoint, those a
   * restarted worker has not adopted yet included.
   */
  private async retire(answer: string): Promise<void> {
    this.store = undefined;
    this.log.warn(
      `the controller${this.where()} retired this instance (${answer}): its tasks resume elsewhere from their last ` +
        'checkpoints; stopping them here without a checkpoint',
    );
    // Not adopted yet: no task is known here, so none has a watcher; those adopted now get none (no store).
    if (!this.adopted)
      try {
        await this.tasks.adopt();
        this.adopted = true;
      } catch (e) {
        this.log.warn(`could not list the tasks left on this host: ${(e as Error).message}`);
      }
    const killed = await stopRetiredTasks(this.tasks, this.options.executor, this.log);
    this.log.warn(
      `retired: ${killed.length === 0 ? 'no task was running' : `killed ${killed.length} task(s) (${killed.join(', ')}) without a checkpoint`}; exiting`,
    );
  }

  /** The boot id and number of the next heartbeat. */
  private nextOrder(): { bootId: string; seq: number } {
    this.heartbeatSeq += 1;
    return { bootId: this.bootId, seq: this.heartbeatSeq };
  }

  private exitFile(): string {
    return join(this.options.workDir, WORKER_EXIT_FILE);
  }

  private forgetExit(): void {
    try {
      rmSync(this.exitFile(), { force: true });
    } catch (e) {
      this.log.warn(`could not remove the exit record ${this.exitFile()}: ${(e as Error).message}`);
    }
  }

  private recordExit(reason: WorkerExit['reason']): void {
    try {
      // Whole or not at all (temporary file, then rename): the local provider never reads half a record.
      const exit: WorkerExit = { exitedAtMs: Date.now(), reason };
      const temp = `${this.exitFile()}.${process.pid}.tmp`;
      writeFileSync(temp, `${JSON.stringify(exit)}\n`, { mode: 0o600 });
      renameSync(temp, this.exitFile());
    } catch (e) {
      this.log.warn(
        `could not record this exit in ${this.exitFile()} (${(e as Error).message}): a local instance is billed ` +
          'until its controller notices the worker is gone',
      );
    }
  }

  private where(): string {
    return this.options.controllerUrl === undefined ? '' : ` at ${this.options.controllerUrl}`;
  }

  private contact(): void {
    this.lastContactMs = Date.now();
    if (this.lastFailureLogMs !== undefined) this.log.info(`the controller${this.where()} answers again`);
    this.lastFailureLogMs = undefined;
    this.lastFailureAnswered = false;
  }

  /**
   * The first failure in a row is logged at once, the next ones every 30 s with the time left before giving up. A
   * controller that answers with a refusal is not said to be silent.
   */
  private failed(e: Error, giveUpMs: number): void {
    const now = Date.now();
    this.lastFailureAnswered = e instanceof ControllerRequestError && e.statusCode !== undefined;
    if (this.lastFailureLogMs !== undefined && now - this.lastFailureLogMs < FAILURE_LOG_EVERY_MS) return;
    const silent = Math.round((now - this.lastContactMs) / 1000);
    const left =
      giveUpMs > 0 ? Math.max(0, Math.round((giveUpMs - (now - this.lastContactMs)) / 1000)) : undefined;
    const answered = this.lastFailureAnswered;
    this.log.warn(
      `${this.store === undefined ? 'registration' : 'heartbeat'} failed: ${e.message}` +
        (this.lastFailureLogMs === undefined
          ? ''
          : answered
            ? ` (refused for ${silent} s)`
            : ` (no answer for ${silent} s)`) +
        (left === undefined
          ? ''
          : `; giving up in ${left} s unless the controller ${answered ? 'accepts this worker' : 'answers'}`),
    );
    this.lastFailureLogMs = now;
  }

  private period(): number {
    return this.options.heartbeatSeconds ?? this.heartbeatSeconds;
  }

  async register(): Promise<void> {
    const request = {
      instanceId: this.options.cloudInstanceId,
      executor: this.options.executor.kind,
      hostname: hostname(),
    } satisfies RegisterRequest;
    const { credentials, connection } = this.options;
    // A saved token may be a registration completed before this process started: offered as such first. Once this
    // process has proposed one, its retries repeat the launch registration, which the controller answers again.
    let answer = this.proposed ? undefined : await this.reregister(request);
    const again = answer !== undefined;
    if (answer === undefined) {
      if (credentials.launch === undefined)
        throw new Error(
          'nothing to register with: no saved per-instance token (or the controller no longer knows it) and no launch ' +
            'credential (FLEETWISE_LAUNCH_SECRET in local mode, the worker token on EC2)',
        );
      const launch = await credentials.launch();
      // The token is chosen (and saved) before the request: an answer lost on the way is asked for again with it.
      const proposedToken = credentials.saved?.proposal() ?? (this.unsavedProposal ??= newWorkerToken());
      this.proposed = true;
      answer = await connection.register(launch.bearer, {
        ...request,
        identity: launch.identity,
        proposedToken,
      });
      // Saved before anything else: the launch credential will not register this instance again.
      try {
        credentials.saved?.save(answer.workerToken, answer.instanceId);
      } catch (e) {
        // Registered all the same; only a restart of this worker could not reclaim the instance.
        this.log.warn(
          `could not save the per-instance token (${(e as Error).message}): a restarted worker will not be able to ` +
            'register this instance again',
        );
      }
    }
    this.controllerInstanceId = answer.instanceId;
    this.heartbeatSeconds = answer.heartbeatSeconds;
    this.store = await this.options.openStore(answer.objectStore);
    this.log.info(
      again
        ? `re-registered as ${answer.instanceId} with the saved per-instance token`
        : `registered as ${answer.instanceId}`,
      { objectStore: answer.objectStore },
    );
  }

  /** Register with the saved per-instance token; undefined when there is none or the controller does not know it. */
  private async reregister(request: RegisterRequest): Promise<RegisterResponse | undefined> {
    const saved = this.options.credentials.saved;
    const token = saved?.load();
    if (saved === undefined || token === undefined) return undefined;
    try {
      return await this.options.connection.register(token, {
        ...request,
        identity: { kind: 'instance-token' },
      });
    } catch (e) {
      // 401/403: a registration whose answer never came (the token is this worker's unanswered proposal), or a
      // controller whose state lost it (restored from an older backup); the launch credential proposes the same token.
      // Anything else (unreachable, 410) is the caller's to handle like any failure.
      if (!(e instanceof ControllerRequestError) || (e.statusCode !== 401 && e.statusCode !== 403)) throw e;
      this.log.warn(
        `the controller does not know the saved per-instance token (${e.message}); registering with the launch credential`,
      );
      return undefined;
    }
  }

  /**
   * One heartbeat: observe, report, reconcile with the answer. It awaits only this host (the executor, local files)
   * and the controller; what needs the object store is started in the background.
   */
  async tick(): Promise<void> {
    const executorDown = await this.observeHost();
    if (executorDown === undefined && this.evacuating()) this.evacuate();
    // Before adoption the tasks are known only by their records here: reported as recorded, never as none (the
    // controller would take every task it placed here for gone).
    const reports = this.adopted ? this.tasks.reports() : await this.tasks.recordedReports();
    const probe = this.options.latencyProbe;
    const network = probe?.heartbeatReport();
    const answer = await this.options.connection.heartbeat({
      ...this.nextOrder(),
      tasks: reports,
      ...(network === undefined ? {} : { network: { ...network, rtts: network.rtts ?? [] } }),
      ...(this.notice === undefined ? {} : { interruption: this.notice }),
    });
    probe?.setPeers(answer.peers ?? []);
    // Every start, stop and log read needs the executor: nothing changes here until it answers again (a start now
    // would fail the task for this host's fault, a stop would leave it half-done).
    if (executorDown !== undefined) return;
    this.reconcile(answer.tasks);
    this.tasks.shipRunningLogs();
  }

  /**
   * Adopt (once) and observe the tasks. An executor that does not answer is logged as this host's fault, once and
   * then at most every 30 s, and returned: the heartbeat goes out all the same with the last known states, or the
   * controller would take a healthy worker for a dead one and replace its instance again and again.
   */
  private async observeHost(): Promise<ExecutorUnavailableError | undefined> {
    try {
      if (!this.adopted) {
        await this.tasks.adopt();
        this.adopted = true;
      }
      await this.tasks.observe();
    } catch (e) {
      if (!(e instanceof ExecutorUnavailableError)) throw e;
      const now = Date.now();
      if (this.executorDownSinceMs === undefined) this.executorDownSinceMs = now;
      if (this.executorLogMs === undefined || now - this.executorLogMs >= FAILURE_LOG_EVERY_MS) {
        const forSeconds = Math.round((now - this.executorDownSinceMs) / 1000);
        this.log.warn(
          `${e.message}${forSeconds > 0 ? ` (for ${forSeconds} s)` : ''}: heartbeating the tasks' last known states; ` +
            'nothing on this host starts or stops until it answers',
        );
        this.executorLogMs = now;
      }
      return e;
    }
    if (this.executorDownSinceMs !== undefined) {
      this.log.info(
        `the ${this.options.executor.kind} executor answers again after ${Math.round((Date.now() - this.executorDownSinceMs) / 1000)} s`,
      );
      this.executorDownSinceMs = undefined;
      this.executorLogMs = undefined;
    }
    return undefined;
  }

  /** The notice this agent acts on, if any (tests, logs). */
  get interruption(): InterruptionNotice | undefined {
    return this.notice;
  }

  private evacuating(): boolean {
    return this.notice?.kind === 'spot-interruption';
  }

  /**
   * Poll the metadata service until the agent leaves. A new notice is acted on at once: a spot interruption
   * checkpoints and stops the tasks, and either kind cuts the wait before the next heartbeat short.
   */
  private async watchNotices(leaving: AbortSignal): Promise<void> {
    const watch = this.options.interruptionNotices;
    if (watch === undefined) return;
    let lastError: string | undefined;
    while (!leaving.aborted) {
      try {
        const notice = await watch.source.poll();
        lastError = undefined;
        if (notice !== undefined && this.stronger(notice)) {
          this.notice = notice;
          this.log.warn(
            notice.kind === 'spot-interruption'
              ? `spot interruption notice: EC2 will ${notice.action ?? 'terminate'} this instance at ${notice.time}; checkpointing and stopping every task now`
              : `rebalance recommendation (${notice.time}): this spot instance is at elevated risk of interruption`,
          );
          if (this.evacuating()) this.evacuate();
          this.nap.abort();
        }
      } catch (e) {
        // Logged once per distinct failure: a metadata service that is down must not flood the log.
        const message = (e as Error).message;
        if (message !== lastError) this.log.warn(`interruption notices: ${message}`);
        lastError = message;
      }
      await sleepUnlessAborted((watch.pollSeconds ?? DEFAULT_NOTICE_POLL_SECONDS) * 1000, leaving);
    }
  }

  /** A notice changes what the agent does when it is the first, or an interruption after a recommendation. */
  private stronger(notice: InterruptionNotice): boolean {
    if (this.notice === undefined) return true;
    return this.notice.kind === 'rebalance-recommendation' && notice.kind === 'spot-interruption';
  }

  /** Checkpoint and stop what runs, within the time EC2 leaves; heartbeat again as soon as the uploads are done. */
  private evacuate(): void {
    const atMs = this.notice === undefined ? Number.NaN : Date.parse(this.notice.time);
    // The margin kept for the last heartbeat (as the controller caps it); an unreadable time leaves the jobs' own.
    const leftSeconds = Number.isFinite(atMs)
      ? (atMs - Date.now()) / 1000 - SPOT_NOTICE_MARGIN_SECONDS
      : Number.POSITIVE_INFINITY;
    const { started, capped, done } = this.tasks.evacuate(leftSeconds);
    if (started.length === 0 && capped.length === 0) return;
    if (started.length > 0) this.log.info(`checkpointing ${started.join(', ')} before the interruption`);
    if (capped.length > 0)
      this.log.info(
        `checkpoint-stop of ${capped.join(', ')} under way: killed in at most ${Math.max(1, Math.floor(leftSeconds))} s, before the interruption`,
      );
    void done.then(() => this.nap.abort());
  }

  /** Wait for every background operation (tests). */
  async settle(): Promise<void> {
    await this.tasks.settle();
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
    const tasks = this.tasks;
    for (const d of desired) {
      const t = tasks.get(d.taskId);
      if (t?.busy !== undefined) {
        // A checkpoint-stop under way keeps the deadline it began with, unless this one is sooner: the controller caps
        // the timeout at what a notice leaves, and a notice that reached only the controller (the interruption queue)
        // must cut short a stop begun before it (a move with the job's 900 s) as much as one begun after.
        if (d.action === 'checkpoint-stop') tasks.capStop(t, d.checkpoint.timeoutSeconds);
        continue;
      }
      if (d.action === 'run') {
        // The instance is going away: nothing starts here (the controller moves the tasks once it hears).
        if (this.evacuating()) continue;
        // A task that exited in an earlier attempt of its job runs again (from its checkpoint) in the next one. A task
        // held ready in another attempt (co-start: its job was retried, and placed here again before this worker heard
        // an answer without it) is prepared again for this one: the controller counts only this attempt's ready
        // tasks, and a release must never start the other attempt's launch.
        const newAttempt =
          t !== undefined &&
          (((t.phase === 'failed' || t.phase === 'succeeded') && (d.attempt ?? 1) > (t.attempt ?? 1)) ||
            (t.phase === 'ready' && (d.attempt ?? 1) !== (t.attempt ?? 1)));
        if (t === undefined || t.phase === 'stopped' || newAttempt) tasks.start(d);
        // Co-start: its job was released (the hold is gone), so what was prepared runs now.
        else if (t.phase === 'ready' && d.hold !== true) tasks.release(t);
      } else if (t?.phase === 'ready')
        // Prepared and never started: nothing to checkpoint or stop.
        tasks.background(t, () => tasks.forget(t));
      else if (t !== undefined && isStoppable(t.phase))
        // A stop that ended without finishing (its task is still `checkpointing`) is started again: no dead end.
        tasks.background(t, () => tasks.stop(t, d.action === 'checkpoint-stop', d.checkpoint));
    }
    for (const t of tasks.all()) {
      if (wanted.has(t.taskId) || t.busy !== undefined) continue;
      if (t.phase === 'running' || t.phase === 'checkpointing')
        tasks.background(t, () =>
          tasks.stop(t, true, {
            signal: (t.signal ?? 'SIGTERM') as DesiredTask['checkpoint']['signal'],
            timeoutSeconds: t.timeoutSeconds ?? 60,
          }),
        );
      else tasks.background(t, () => tasks.forget(t));
    }
  }
}

/** Phases a stop applies to: under way, or a stop that did not finish. */
function isStoppable(phase: string): boolean {
  return phase === 'running' || phase === 'starting' || phase === 'checkpointing';
}

function describeStopped(taskIds: readonly string[]): string {
  return taskIds.length === 0
    ? 'no task was running'
    : `checkpointed and stopped ${taskIds.length} task(s) (${taskIds.join(', ')})`;
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
