import { describe, expect, it } from 'vitest';
import {
  noticeActionAtMs,
  noticeCappedTimeoutSeconds,
  SPOT_NOTICE_MARGIN_SECONDS,
  SPOT_NOTICE_SECONDS,
} from '../../src/core/spot.js';

/**
 * A checkpoint-stop under a spot interruption notice waits at most the time the notice leaves less the margin kept for
 * the worker's last heartbeat, whether or not the notice's time can be read.
 */
describe('a checkpoint-stop capped by a spot interruption notice', () => {
  const seenAtMs = Date.UTC(2026, 10, 24, 13, 0, 0);

  it("is capped at the notice's time less the margin, never above the job's own, and at least a second", () => {
    const actionAtMs = seenAtMs + 90_000;
    expect(noticeCappedTimeoutSeconds(900, { actionAtMs, seenAtMs }, seenAtMs)).toBe(
      90 - SPOT_NOTICE_MARGIN_SECONDS,
    );
    expect(noticeCappedTimeoutSeconds(30, { actionAtMs, seenAtMs }, seenAtMs)).toBe(30);
    expect(noticeCappedTimeoutSeconds(900, { actionAtMs, seenAtMs }, actionAtMs)).toBe(1);
  });

  it('counts from when the notice was seen plus EC2 two minutes when its time cannot be read', () => {
    for (const actionAtMs of [undefined, Number.NaN]) {
      const notice = { actionAtMs, seenAtMs };
      expect(noticeActionAtMs(notice)).toBe(seenAtMs + SPOT_NOTICE_SECONDS * 1000);
      // A 900 s checkpoint would otherwise run far past the reclaim.
      expect(noticeCappedTimeoutSeconds(900, notice, seenAtMs)).toBe(
        SPOT_NOTICE_SECONDS - SPOT_NOTICE_MARGIN_SECONDS,
      );
      expect(noticeCappedTimeoutSeconds(900, notice, seenAtMs + 60_000)).toBe(
        SPOT_NOTICE_SECONDS - 60 - SPOT_NOTICE_MARGIN_SECONDS,
      );
      expect(noticeCappedTimeoutSeconds(900, notice, seenAtMs + 600_000)).toBe(1);
    }
  });
});
