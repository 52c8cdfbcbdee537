import { sleepUnlessAborted } from '../storage/retry.js';
import type { InterruptionEventSource } from '../cloud/interruption-events.js';
import type { ControllerLogger } from './seams.js';
import type { InterruptionReport } from './spot-interruptions.js';

/** EC2 acts two minutes after its spot interruption warning. */
const SPOT_NOTICE_SECONDS = 120;

export interface InterruptionListenerDeps {
  readonly source: InterruptionEventSource;
  /** The controller's reaction (Controller.interruptionFromQueue): false when the instance is not the cluster's. */
  readonly handle: (cloudInstanceId: string, report: Omit<InterruptionReport, 'source'>) => boolean;
  readonly log: ControllerLogger;
  /** After a failed receive, wait this long before the next (default 5 s). */
  readonly retrySeconds?: number;
}

/**
 * Reads the interruption queue (`--interruption-queue`) for as long as the controller runs, beside its loop and never
 * inside it: a receive long-polls, and the reaction (a drain and an early round) is the same as for a notice a worker
 * reports, so the queue is a second, independent path for the same warning (a worker that is busy, or whose metadata
 * service read failed, is still covered). Every message is acknowledged once handled: an interruption acted on, an
 * event that is not an interruption, one for an instance that is not this cluster's (the queue is the cluster's own),
 * and a malformed one, which is logged with the field at fault.
 */
export class InterruptionListener {
  private readonly stopping = new AbortController();
  private running: Promise<void> | undefined;

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
    const messages = await this.deps.source.receive(signal);
    let acted = 0;
    for (const m of messages) {
      if (m.problem !== undefined) {
        this.deps.log.warn(`interruption queue: message ${m.messageId} ignored: ${m.problem}`);
        continue;
      }
      if (m.event === undefined) continue;
      const event = m.event;
      const eventMs = Date.parse(event.time);
      const time =
        event.kind === 'spot-interruption' && Number.isFinite(eventMs)
          ? new Date(eventMs + SPOT_NOTICE_SECONDS * 1000).toISOString()
          : event.time;
      if (this.deps.handle(event.cloudInstanceId, { kind: event.kind, time })) acted += 1;
    }
    if (messages.length > 0) await this.deps.source.acknowledge(messages.map((m) => m.receipt));
    return acted;
  }

  private async loop(): Promise<void> {
    const signal = this.stopping.signal;
    let lastError: string | undefined;
    while (!signal.aborted) {
      try {
        await this.pollOnce(signal);
        lastError = undefined;
      } catch (e) {
        if (signal.aborted) break;
        const message = (e as Error).message;
        if (message !== lastError) this.deps.log.warn(`interruption queue: ${message}`);
        lastError = message;
        await sleepUnlessAborted((this.deps.retrySeconds ?? 5) * 1000, signal);
      }
    }
  }
}
