import { sleepUnlessAborted } from '../storage/retry.js';
import type { InterruptionEvent, InterruptionEventSource } from '../cloud/interruption-events.js';
import { SPOT_NOTICE_SECONDS } from '../core/spot.js';
import type { ControllerLogger } from './seams.js';
import type { InterruptionReport } from './spot-interruptions.js';

export interface InterruptionListenerDeps {
  readonly source: InterruptionEventSource;
  /**
   * The controller's reaction (Controller.interruptionFromQueue): false when nothing changed (already acted on, or
   * not an instance of the cluster, which the controller logs). A throw (the store briefly unavailable) leaves that
   * message on the queue for redelivery.
   */
  readonly handle: (cloudInstanceId: string, report: Omit<InterruptionReport, 'source'>) => boolean;
  readonly log: ControllerLogger;
  /** After a failed receive, wait this long before the next, doubling while receives keep failing (default 5 s). */
  readonly retrySeconds?: number;
  /** The longest wait between failed receives (default 60 s). */
  readonly maxRetrySeconds?: number;
  /** How the loop waits between failed receives (tests). */
  readonly sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

/**
 * Reads the interruption queue (`--interruption-queue`) for as long as the controller runs, beside its loop and never
 * inside it: a receive long-polls, and the reaction (a drain and an early round) is the same as for a notice a worker
 * reports, so the queue is a second, independent path for the same warning (a worker that is busy, or whose metadata
 * service read failed, is still covered). Each message is handled on its own, so one bad message never holds back
 * the others of its batch: it is acknowledged once handled (an interruption acted on, an event that is not an
 * interruption, one for an instance that is not this cluster's, as the queue is the cluster's own) or found unusable
 * (malformed, logged with the field at fault); only one whose handling failed is left to be delivered again.
 */
export class InterruptionListener {
  private readonly stopping = new AbortController();
  private running: Promise<void> | undefined;
  /** The kinds of other events dropped so far: each is logged once, as a rule sending them may send many. */
  private readonly ignoredKinds = new Set<string>();

  constructor(private readonly deps: InterruptionListenerDeps) {}

  start(): void {
    this.running ??= this.loop();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    await this.running;
  }

  /** One receive and its acknowledgement; returns the interruptions acted on (tests drive this directly). */
  async pollOnce(signal?: AbortSignal): Promise<number> {
    const { log } = this.deps;
    const messages = await this.deps.source.receive(signal);
    let acted = 0;
    const done: string[] = [];
    const idOf = new Map<string, string>();
    for (const m of messages) {
      idOf.set(m.receipt, m.messageId);
      if (m.problem !== undefined) {
        log.warn(`interruption queue: message ${m.messageId} ignored: ${m.problem}`);
        done.push(m.receipt);
        continue;
      }
      if (m.event === undefined) {
        // A queue fed by a broader rule than fleetwise reads (Karpenter's sends state changes and health events too):
        // said once per kind, so that a rule sending nothing fleetwise reads is seen in the log.
        const kind = m.ignored ?? 'an event with no detail-type';
        if (!this.ignoredKinds.has(kind)) {
          this.ignoredKinds.add(kind);
          log.info(
            `interruption queue: deleting ${kind} events (message ${m.messageId} the first): not an interruption ` +
              'warning or rebalance recommendation',
          );
        }
        done.push(m.receipt);
        continue;
      }
      let report: Omit<InterruptionReport, 'source'>;
      try {
        report = reportOf(m.event);
      } catch (e) {
        // Unusable whatever is retried (the source's parse should have refused it): dropped like a malformed one.
        log.warn(`interruption queue: message ${m.messageId} ignored: time: ${(e as Error).message}`);
        done.push(m.receipt);
        continue;
      }
      try {
        if (this.deps.handle(m.event.cloudInstanceId, report)) acted += 1;
        done.push(m.receipt);
      } catch (e) {
        // Not acknowledged: the queue delivers it again after its visibility timeout, and the reaction repeats
        // harmlessly (it is level-triggered: spot-interruptions.ts).
        log.warn(
          `interruption queue: message ${m.messageId} (${m.event.kind} for ${m.event.cloudInstanceId}) left for ` +
            `redelivery: handling it failed: ${(e as Error).message}`,
        );
      }
    }
    if (done.length === 0) return acted;
    try {
      const failed = await this.deps.source.acknowledge(done);
      for (const f of failed)
        log.warn(
          `interruption queue: message ${idOf.get(f.receipt) ?? '?'} not deleted (${f.reason}); it comes back ` +
            'and is handled again, which changes nothing',
        );
    } catch (e) {
      // Handled all the same: redelivered, they change nothing. A queue that stays unreachable fails the receives.
      if (signal?.aborted !== true)
        log.warn(`interruption queue: ${(e as Error).message}; ${done.length} handled message(s) come back`);
    }
    return acted;
  }

  private async loop(): Promise<void> {
    const signal = this.stopping.signal;
    const base = Math.max(0, (this.deps.retrySeconds ?? 5) * 1000);
    const max = Math.max(base, (this.deps.maxRetrySeconds ?? 60) * 1000);
    const sleep = this.deps.sleep ?? sleepUnlessAborted;
    let lastError: string | undefined;
    let delayMs = base;
    while (!signal.aborted) {
      try {
        await this.pollOnce(signal);
        if (lastError !== undefined) this.deps.log.info('interruption queue: receiving again');
        lastError = undefined;
        delayMs = base;
      } catch (e) {
        if (signal.aborted) break;
        const message = (e as Error).message;
        // An outage repeats one error at every attempt: logged when it starts or changes, not at each retry.
        if (message !== lastError) this.deps.log.warn(`interruption queue: ${message}`);
        lastError = message;
        await sleep(delayMs, signal);
        // Exponential while the errors last: a queue that is gone (deleted, permissions revoked) costs one request
        // a minute, not one every few seconds.
        delayMs = Math.min(max, delayMs * 2);
      }
    }
  }
}

/** What the controller is told of an event: for a spot interruption, when EC2 acts (two minutes after it warns). */
function reportOf(event: InterruptionEvent): Omit<InterruptionReport, 'source'> {
  if (event.kind !== 'spot-interruption') return { kind: event.kind, time: event.time };
  const eventMs = Date.parse(event.time);
  if (!Number.isFinite(eventMs)) throw new Error(`${JSON.stringify(event.time)} is not a date`);
  // toISOString throws RangeError for a date past what a Date holds.
  return { kind: event.kind, time: new Date(eventMs + SPOT_NOTICE_SECONDS * 1000).toISOString() };
}
