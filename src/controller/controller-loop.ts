import type { BetweenRoundsPlacer } from './between-rounds-placement.js';
import type { Clock } from './clock.js';
import { InjectedCrash } from './faults.js';
import type { LoopMonitor } from './loop-health.js';
import type { ReportWriter } from './report-writer.js';
import type { RoundSchedule } from './round-schedule.js';
import type { RunLimits } from './run-limits.js';
import type { ControllerLogger } from './seams.js';
import type { ControllerSettings } from './settings.js';

export interface ControllerLoopDeps {
  readonly clock: Clock;
  /** Read at each pass: `pollSeconds`, the longest wait between passes. */
  readonly settings: Pick<ControllerSettings, 'pollSeconds'>;
  readonly schedule: RoundSchedule;
  readonly monitor: LoopMonitor;
  readonly log: ControllerLogger;
  readonly runLimits: RunLimits;
  readonly reports: ReportWriter;
  readonly placer: BetweenRoundsPlacer | undefined;
  readonly safeEvent: (kind: string, message: string) => void;
  /** The passes (controller.ts), each run through `serial`. */
  readonly runRound: (reason: string) => Promise<unknown>;
  readonly reconcile: () => Promise<unknown>;
}

/**
 * The controller's loop: when it runs a pass (a round when one is due, a reconciliation otherwise), how long it
 * sleeps between passes, and the one sequence every pass runs in. Everything the loop does happens in that sequence
 * (no two passes overlap, also when tests call them directly), while the ControllerService methods the API calls only
 * write the store synchronously and wake the loop. Each pass is timed (loop-health.ts), and `/healthz` reports a pass
 * that has run too long.
 */
export class ControllerLoop {
  /** The loop's sequence: every pass chains here so none overlap (also when tests call them directly). */
  private chain: Promise<unknown> = Promise.resolve();
  private isRunning = false;
  private loopDone: Promise<void> | undefined;
  private wake = new AbortController();

  constructor(private readonly deps: ControllerLoopDeps) {}

  get running(): boolean {
    return this.isRunning;
  }

  /** Run passes in the background, the first a round (unless one was asked for already, for its own reason). */
  begin(): void {
    this.isRunning = true;
    this.deps.schedule.requestedBecause ??= 'start';
    this.loopDone = this.loop();
  }

  /** Stop after the current pass, and cut the wait for the next short. */
  halt(): void {
    this.isRunning = false;
    this.wake.abort();
  }

  /** Resolves once the loop has ended and no pass is running. */
  async ended(): Promise<void> {
    await this.loopDone;
    await this.chain.catch(() => undefined);
  }

  /** Cut the wait for the next pass short (a round or a placement was asked for). */
  wakeUp(): void {
    this.wake.abort();
  }

  serial<T>(pass: string, fn: () => Promise<T>): Promise<T> {
    const tracked = (): Promise<T> => this.deps.monitor.track(pass, fn);
    const next = this.chain.then(tracked, tracked);
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async loop(): Promise<void> {
    const { clock, schedule, reports } = this.deps;
    while (this.isRunning) {
      let failed = false;
      try {
        if (schedule.due(clock.nowSeconds())) await this.deps.runRound(schedule.reasonAt(clock.nowSeconds()));
        else await this.deps.reconcile();
        reports.startDue();
      } catch (e) {
        if (e instanceof InjectedCrash) throw e;
        const message = e instanceof Error ? (e.stack ?? e.message) : String(e);
        this.deps.log.error('controller pass failed; continuing', { error: message });
        this.deps.safeEvent('controller.error', message);
        failed = true;
      }
      if (!this.isRunning) break;
      if (this.wake.signal.aborted) this.wake = new AbortController();
      const after = clock.nowSeconds();
      const nextRound = schedule.nextRoundSeconds();
      const nextLimit = this.nextRunLimitSeconds(failed);
      failed ||= nextLimit === undefined;
      // A pass that failed (the cloud or the store down) is not tried again at once: work still due would spin.
      const wait = Math.max(
        failed ? 1 : 0,
        Math.min(
          nextRound,
          after + this.deps.settings.pollSeconds,
          reports.nextDueSeconds,
          // At least a second on: a limit due now was enforced in this pass.
          Math.max(nextLimit ?? Number.POSITIVE_INFINITY, after + 1),
          // A placement asked for during the pass runs in the next one, as soon as it may.
          this.deps.placer?.dueAtSeconds ?? Number.POSITIVE_INFINITY,
        ) - after,
      );
      if (wait > 0) await clock.sleep(wait, this.wake.signal);
      // A pass that needed no I/O resolves in microtasks only: let timers and sockets (the API) run between passes.
      else await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /**
   * When the loop must wake for a run limit; undefined when the store could not say. It reads the store, so it fails
   * when the store is down, as the pass does: the loop then waits and tries again, and the lease's renewal, not the
   * loop, decides when this controller must stop (exit 75).
   */
  private nextRunLimitSeconds(passFailed: boolean): number | undefined {
    try {
      return this.deps.runLimits.nextDueSeconds();
    } catch (e) {
      // The pass that failed with the store logged it already.
      if (!passFailed)
        this.deps.log.error('reading the run limits failed; continuing', {
          error: e instanceof Error ? e.message : String(e),
        });
      return undefined;
    }
  }
}
