import { noticeActionAtMs, SPOT_NOTICE_MARGIN_SECONDS } from '../core/spot.js';
import { noticeTimeMs } from '../protocol/notice-time.js';
import type { InterruptionNotice } from '../protocol/worker-protocol.js';
import { sleepUnlessAborted } from '../storage/retry.js';
import type { AgentLogger, AgentOptions } from './agent-options.js';
import { DEFAULT_NOTICE_POLL_SECONDS } from './interruption-notices.js';
import type { TaskLifecycle } from './task-lifecycle.js';

/**
 * The agent's answer to EC2's interruption notices (interruption-notices.ts polls them): it keeps the strongest seen,
 * which every heartbeat reports, and on a spot interruption checkpoints and stops every task within the time left.
 */

export interface NoticeResponseDeps {
  readonly watch: AgentOptions['interruptionNotices'];
  readonly log: AgentLogger;
  readonly tasks: TaskLifecycle;
  /** Cuts the agent's wait before its next heartbeat short (a notice to report, uploads done). */
  readonly wake: () => void;
}

export class NoticeResponse {
  /** The strongest interruption notice seen (reported in every heartbeat from then on). */
  private notice: InterruptionNotice | undefined;
  /** When this agent first saw that notice (epoch ms): the reclaim is counted from it when the notice's time is none. */
  private noticeSeenAtMs = Number.NaN;

  constructor(private readonly deps: NoticeResponseDeps) {}

  /** The notice the agent acts on, if any. */
  get current(): InterruptionNotice | undefined {
    return this.notice;
  }

  evacuating(): boolean {
    return this.notice?.kind === 'spot-interruption';
  }

  /**
   * Poll the metadata service until the agent leaves. A new notice is acted on at once: a spot interruption
   * checkpoints and stops the tasks, and either kind cuts the wait before the next heartbeat short.
   */
  async watch(leaving: AbortSignal): Promise<void> {
    const watch = this.deps.watch;
    if (watch === undefined) return;
    let lastError: string | undefined;
    while (!leaving.aborted) {
      try {
        const notice = await watch.source.poll();
        lastError = undefined;
        if (notice !== undefined && this.stronger(notice)) {
          this.notice = notice;
          this.noticeSeenAtMs = Date.now();
          this.deps.log.warn(
            notice.kind === 'spot-interruption'
              ? `spot interruption notice: EC2 will ${notice.action ?? 'terminate'} this instance at ${notice.time}; checkpointing and stopping every task now`
              : `rebalance recommendation (${notice.time}): this spot instance is at elevated risk of interruption`,
          );
          if (this.evacuating()) this.evacuate();
          this.deps.wake();
        }
      } catch (e) {
        // Logged once per distinct failure: a metadata service that is down must not flood the log.
        const message = (e as Error).message;
        if (message !== lastError) this.deps.log.warn(`interruption notices: ${message}`);
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
  evacuate(): void {
    if (this.notice === undefined) return;
    // As the controller caps it: the time left less the margin kept for the last heartbeat. A time that is none (the
    // metadata service's reply is checked, another source's may not be) counts EC2's two minutes from the sighting.
    const atMs = noticeActionAtMs({
      actionAtMs: noticeTimeMs(this.notice.time),
      seenAtMs: this.noticeSeenAtMs,
    });
    const leftSeconds = (atMs - Date.now()) / 1000 - SPOT_NOTICE_MARGIN_SECONDS;
    const { started, capped, done } = this.deps.tasks.evacuate(leftSeconds);
    if (started.length === 0 && capped.length === 0) return;
    const log = this.deps.log;
    if (started.length > 0) log.info(`checkpointing ${started.join(', ')} before the interruption`);
    if (capped.length > 0)
      log.info(
        `checkpoint-stop of ${capped.join(', ')} under way: killed in at most ${Math.max(1, Math.floor(leftSeconds))} s, before the interruption`,
      );
    void done.then(() => this.deps.wake());
  }
}
