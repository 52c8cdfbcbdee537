import { SPOT_NOTICE_SECONDS } from '../core/spot.js';

/**
 * What the controller and the worker agree on about EC2's spot interruption notice, so both cap a checkpoint-stop
 * alike whichever of them saw the notice first.
 */

export { SPOT_NOTICE_SECONDS };

/**
 * Of the time a notice leaves, this much is kept for the worker's last heartbeat after its checkpoints: a
 * checkpoint-stop under a notice gets at most the time left less this (and at least a second).
 */
export const SPOT_NOTICE_MARGIN_SECONDS = 10;

/**
 * A checkpoint-stop's timeout under a notice whose action time is `actionAtMs` (epoch ms), at `nowMs`: the job's own
 * timeout, capped at the time left less the margin, at least 1 s. An unreadable time leaves the job's timeout.
 */
export function noticeCappedTimeoutSeconds(
  timeoutSeconds: number,
  actionAtMs: number,
  nowMs: number,
): number {
  if (!Number.isFinite(actionAtMs)) return timeoutSeconds;
  const leftSeconds = (actionAtMs - nowMs) / 1000 - SPOT_NOTICE_MARGIN_SECONDS;
  return Math.max(1, Math.min(timeoutSeconds, Math.floor(leftSeconds)));
}
