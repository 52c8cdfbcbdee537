import { describe, expect, it } from 'vitest';
import { formatDuration, WorkEstimate } from '../../src/cli/work-estimate.js';

describe("tune's time estimate", () => {
  it('estimates the time left from the share done, counting candidates still running', () => {
    const e = new WorkEstimate(4, 0);
    expect(e.remainingSeconds(10_000)).toBeUndefined();
    expect(e.describe(10_000, 'candidates')).toBe(
      '0/4 candidates done (0%), 10s elapsed, estimating the time left',
    );
    e.finish(0);
    e.progress(1, 0.5);
    e.progress(1, 0.25); // progress never goes back
    // 1.5 of 4 done in 60 s: 2.5 left at 40 s each.
    expect(e.fractionDone).toBeCloseTo(0.375);
    expect(e.remainingSeconds(60_000)).toBeCloseTo(100);
    expect(e.describe(60_000, 'candidates')).toBe(
      '1/4 candidates done (37%), 1m00s elapsed, about 1m40s left',
    );
  });

  it('formats durations in the two largest whole units', () => {
    expect(formatDuration(0.4)).toBe('0s');
    expect(formatDuration(45)).toBe('45s');
    expect(formatDuration(185)).toBe('3m05s');
    expect(formatDuration(7620)).toBe('2h07m');
  });
});
