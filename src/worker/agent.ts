import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { ObjectStore } from '../storage/object-store.js';
import { sleepUnlessAborted } from '../storage/retry.js';
import type { InterruptionNotice } from '../protocol/worker-protocol.js';
import {
  ControllerRequestError,
  type HeartbeatAnswer,
  type RefusedDesiredTask,
} from './controller-client.js';
import { DEFAULT_GIVE_UP_AFTER_SECONDS, type AgentLogger, type AgentOptions } from './agent-options.js';
import { InstanceRegistrar } from './instance-registration.js';
import { NoticeResponse } from './notice-response.js';
import { TaskLifecycle } from './task-lifecycle.js';
import { ExecutorUnavailableError } from './task-observation.js';
import { describeIssues, reconcileTasks } from './task-reconciliation.js';
import { retiredState, stopRetiredTasks } from './retirement.js';
import { forgetWorkerExit, recordWorkerExit } from './worker-exit-file.js';

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
 * An answer this worker cannot use (a newer or older controller: an action it does not know, a malformed spec) is
 * refused, the controller having answered all the same: it is no reason to give up on it. A desired task it cannot
 * use is refused alone and the rest carried out, unless it names a task on this host (or no task it can read), which
 * the rest carried out would take for one the controller no longer wants: then nothing changes here. Refusals are
 * logged once, then at most every 30 s while they repeat.
 *
 * A task exiting 0 on its own has succeeded; any other exit failed (the reason carries the exit code and its last
 * output lines). Logs go to the object store (`logs/<job>/…`, each run as segments holding what is new) while the task runs and when it ends,
 * which is where `fleetwise logs` reads them. Long operations (restore, checkpoint-and-stop, log uploads) run in the
 * background, so the heartbeat never waits for the object store: a hung store cannot make a healthy worker look
 * dead. A stop is reported `checkpointing` until its uploads are in the store, however long an outage lasts.
 *
 * This module is the controller's side of it: the heartbeat loop, giving up and retiring. Registration is
 * instance-registration.ts, the answer's reconciliation task-reconciliation.ts, the notices notice-response.ts, and
 * task-lifecycle.ts does what the answer asks of each task; agent-options.ts is what the agent is given.
 */

/**
 * Why run() returned. retired: the controller has replaced this instance (its tasks were killed, not checkpointed);
 * `fleetwise worker` exits with a code of its own then, so a supervisor can tell it from a failure.
 */
export type AgentExit = 'stopped' | 'gave-up' | 'retired';

/** A failing heartbeat is logged once, then at most this often (with how long until the agent gives up). */
const FAILURE_LOG_EVERY_MS = 30_000;

const silent: AgentLogger = { info() {}, warn() {} };

export class WorkerAgent {
  private readonly log: AgentLogger;
  private readonly tasks: TaskLifecycle;
  private readonly registrar: InstanceRegistrar;
  private readonly notices: NoticeResponse;
  private store: ObjectStore | undefined;
  private controllerInstanceId: string | undefined;
  private heartbeatSeconds = 5;
  private adopted = false;
  private lastContactMs = Date.now();
  private lastFailureLogMs: number | undefined;
  /** The controller answered the last failed request (it refused it) rather than not answering at all. */
  private lastFailureAnswered = false;
  /** The refusal of the controller's answers under way: what was logged, since when, and when it was last logged. */
  private refusing: { text: string; sinceMs: number; loggedMs: number } | undefined;
  /** This process's run, in every heartbeat with its number (`heartbeatSeq`): the controller's order of them. */
  private readonly bootId = randomUUID();
  private heartbeatSeq = 0;
  /** Aborted when run() is told to stop: steps waiting for the object store stop retrying. */
  private readonly leaving = new AbortController();
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
    this.registrar = new InstanceRegistrar(options, this.log);
    this.notices = new NoticeResponse({
      watch: options.interruptionNotices,
      log: this.log,
      tasks: this.tasks,
      wake: () => this.nap.abort(),
    });
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
    forgetWorkerExit(this.options.workDir, this.log);
    if (signal.aborted) this.leaving.abort();
    else signal.addEventListener('abort', () => this.leaving.abort(), { once: true });
    let exit: AgentExit = 'stopped';
    let retiredBy = '';
    const watching = this.notices.watch(this.leaving.signal);
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
          // An answer this worker cannot use outside a heartbeat's (tick() takes those): change nothing, keep trying
          // (the next answer may be fine), and say which field is wrong.
          this.refusal(
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
    if (exit !== 'stopped') recordWorkerExit(this.options.workDir, exit, this.log);
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

  /** Where the controller is now: a local worker follows its controller to a new address (controller-client.ts). */
  private where(): string {
    const url = this.options.connection.address?.() ?? this.options.controllerUrl;
    return url === undefined ? '' : ` at ${url}`;
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
    const { answer, again } = await this.registrar.register();
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

  /**
   * One heartbeat: observe, report, reconcile with the answer. It awaits only this host (the executor, local files)
   * and the controller; what needs the object store is started in the background.
   */
  async tick(): Promise<void> {
    const executorDown = await this.observeHost();
    if (executorDown === undefined && this.notices.evacuating()) this.notices.evacuate();
    // Before adoption the tasks are known only by their records here: reported as recorded, never as none (the
    // controller would take every task it placed here for gone).
    const reports = this.adopted ? this.tasks.reports() : await this.tasks.recordedReports();
    const probe = this.options.latencyProbe;
    const network = probe?.heartbeatReport();
    let answer: HeartbeatAnswer;
    try {
      answer = await this.options.connection.heartbeat({
        ...this.nextOrder(),
        tasks: reports,
        ...(network === undefined ? {} : { network: { ...network, rtts: network.rtts ?? [] } }),
        ...(this.notices.current === undefined ? {} : { interruption: this.notices.current }),
      });
    } catch (e) {
      if (!(e instanceof z.ZodError)) throw e;
      // The controller answered, with nothing this worker can use (a newer or older protocol): it is there, so this
      // heartbeat counts as contact, and nothing changes here (the next answer may be fine).
      this.refusal(`refused the controller's answer (nothing changed on this host): ${describeIssues(e)}`);
      return;
    }
    probe?.setPeers(answer.peers ?? []);
    const refused = answer.refused ?? [];
    // Were the rest carried out, a refused task on this host would be taken for one the controller no longer wants,
    // and stopped; a refused task without a readable id may be any of them.
    const heldBy = refused.find((r) => r.taskId === undefined || this.tasks.get(r.taskId) !== undefined);
    if (refused.length === 0) this.refusalsEnded();
    else this.refusal(describeRefusedTasks(refused, heldBy));
    // Every start, stop and log read needs the executor: nothing changes here until it answers again (a start now
    // would fail the task for this host's fault, a stop would leave it half-done).
    if (executorDown !== undefined) return;
    if (heldBy === undefined)
      reconcileTasks(
        { tasks: this.tasks, log: this.log, evacuating: () => this.notices.evacuating() },
        answer.tasks,
      );
    this.tasks.shipRunningLogs();
  }

  /** A refusal of the controller's answer, logged at once, then, while the same one repeats, at most every 30 s. */
  private refusal(text: string): void {
    const now = Date.now();
    const r = this.refusing;
    if (r?.text !== text) {
      this.refusing = { text, sinceMs: now, loggedMs: now };
      this.log.warn(text);
      return;
    }
    if (now - r.loggedMs < FAILURE_LOG_EVERY_MS) return;
    r.loggedMs = now;
    this.log.warn(`${text} (for ${Math.round((now - r.sinceMs) / 1000)} s)`);
  }

  /** An answer taken whole: a refusal logged before has ended. */
  private refusalsEnded(): void {
    if (this.refusing === undefined) return;
    this.refusing = undefined;
    this.log.info(`the controller's answers are taken again`);
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
    return this.notices.current;
  }

  /** Wait for every background operation (tests). */
  async settle(): Promise<void> {
    await this.tasks.settle();
  }
}

/** What was refused of an answer and why; `heldBy`: the refused task that kept the rest from being carried out. */
function describeRefusedTasks(
  refused: readonly RefusedDesiredTask[],
  heldBy: RefusedDesiredTask | undefined,
): string {
  const issues = refused
    .slice(0, 5)
    .map((r) => describeIssues(r.error, `tasks.${r.index}`))
    .join('; ');
  const more = refused.length > 5 ? `; and ${refused.length - 5} more task(s)` : '';
  const which = refused.map((r) => r.taskId ?? `tasks.${r.index}`).join(', ');
  const done =
    heldBy === undefined
      ? `${which} left alone, the others carried out`
      : `nothing changed on this host: ${
          heldBy.taskId === undefined
            ? `tasks.${heldBy.index} names no task id this worker can read`
            : `${heldBy.taskId} is on this host`
        }`;
  return `refused the controller's answer for ${refused.length} task(s) (${done}): ${issues}${more}`;
}

function describeStopped(taskIds: readonly string[]): string {
  return taskIds.length === 0
    ? 'no task was running'
    : `checkpointed and stopped ${taskIds.length} task(s) (${taskIds.join(', ')})`;
}
