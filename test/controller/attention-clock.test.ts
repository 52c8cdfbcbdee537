import { describe, expect, it } from 'vitest';
import { AttentionClock } from '../../src/controller/attention-clock.js';

/** A hand-driven millisecond clock. */
function manualTime(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_000;
  return { now: () => t, advance: (ms) => (t += ms) };
}

describe('attention clock', () => {
  it('follows wall time while the loop samples every tick', () => {
    const time = manualTime();
    const clock = new AttentionClock(200, time.now);
    for (let i = 0; i < 50; i++) {
      time.advance(200);
      clock.sample();
    }
    expect(clock.seconds()).toBeCloseTo(10, 6);
  });

  it('counts a stall of the loop as at most two ticks, then follows wall time again', () => {
    const time = manualTime();
    const clock = new AttentionClock(200, time.now);
    time.advance(200);
    clock.sample();
    // The loop is held up for 30 s: no sample in between.
    time.advance(30_000);
    expect(clock.seconds()).toBeCloseTo(0.2 + 0.4, 6);
    clock.sample();
    time.advance(200);
    clock.sample();
    expect(clock.seconds()).toBeCloseTo(0.2 + 0.4 + 0.2, 6);
  });

  it('never goes backwards', () => {
    const time = manualTime();
    const clock = new AttentionClock(200, time.now);
    let last = clock.seconds();
    for (const step of [0, 50, 199, 1, 10_000, 0, 400, 3]) {
      time.advance(step);
      if (step % 2 === 0) clock.sample();
      const now = clock.seconds();
      expect(now).toBeGreaterThanOrEqual(last);
      last = now;
    }
  });
});
