import { describe, expect, it } from 'vitest';
import { chooseFull, EventHistory, horizonSeconds } from '../../src/scheduler/decision-rule.js';

describe('horizon T = −1/(λ·ln(1−p)) (Eva §4.5)', () => {
  it('matches a hand computation: λ = 1/1000 s, p = 0.1 → 9491.2 s', () => {
    // ln(0.9) = −0.1053605; 1 / (0.001 × 0.1053605) = 9491.2
    expect(horizonSeconds(0.001, 0.1, 50_000)).toBeCloseTo(9491.2, 1);
  });

  it('bootstraps with the current time before any full reconfiguration, and is 0 when every event led to one', () => {
    expect(horizonSeconds(0.001, 0, 12_345)).toBe(12_345);
    expect(horizonSeconds(undefined, 0.5, 7)).toBe(7);
    expect(horizonSeconds(0.001, 1, 12_345)).toBe(0);
  });

  it('≈ 1/(λp) for small p', () => {
    expect(horizonSeconds(0.01, 0.001, 0) / (1 / (0.01 * 0.001))).toBeCloseTo(1, 2);
  });
});

describe('full-vs-partial choice, eq. 1', () => {
  const full = { savingPerSecond: 0.01, migrationCost: 50 };
  const partial = { savingPerSecond: 0.005, migrationCost: 10 };

  it('chooses full when the extra saving over T exceeds the extra migration cost', () => {
    // T = 9491.2: (0.01 − 0.005)·9491.2 = 47.46 > 50 − 10 = 40
    expect(chooseFull(full, partial, 9491.2)).toBe(true);
  });

  it('keeps partial when it does not: (0.005)·5000 = 25 < 40', () => {
    expect(chooseFull(full, partial, 5000)).toBe(false);
  });

  it('break-even (equal net values) keeps partial', () => {
    expect(chooseFull(full, partial, 8000)).toBe(false);
  });

  it('a payback margin k counts the extra migration cost k times', () => {
    // k = 2: 47.46 < 2 × 40 = 80 keeps partial; over T = 20,000 s, 0.005 × 20,000 = 100 > 80 chooses full.
    expect(chooseFull(full, partial, 9491.2, 2)).toBe(false);
    expect(chooseFull(full, partial, 20_000, 2)).toBe(true);
    // Break-even at k = 2 (T = 16,000 s: 80 = 80) keeps partial; k = 1 is eq. 1 itself.
    expect(chooseFull(full, partial, 16_000, 2)).toBe(false);
    expect(chooseFull(full, partial, 9491.2, 1)).toBe(chooseFull(full, partial, 9491.2));
  });
});

describe('event history', () => {
  it('estimates λ from sorted event times and p from full rounds', () => {
    const h = new EventHistory();
    expect(h.eventRatePerSecond).toBeUndefined();
    h.addEvents([3000, 1000]);
    h.addEvents([2000, 5000]);
    // 4 events over 4000 s → 3 intervals → λ = 3/4000
    expect(h.eventRatePerSecond).toBeCloseTo(0.00075, 12);
    h.recordFull();
    expect(h.fullFraction).toBe(0.25);
    const copy = EventHistory.fromJSON(h.toJSON());
    expect(copy.eventRatePerSecond).toBe(h.eventRatePerSecond);
    expect(copy.fullFraction).toBe(0.25);
  });
});
