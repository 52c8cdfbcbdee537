import { describe, expect, it } from 'vitest';
import { RoundSchedule } from '../../src/controller/round-schedule.js';

/**
 * The end of a capacity-error window brings a round (the jobs the round kept waiting for capacity may be launched
 * again), once: a round after it answers it, and a window that ended before the last round brings none.
 */
describe('a round when capacity the cloud refused may be back', () => {
  it('runs at the first window end after the last round, then not again for it', () => {
    let ends: number[] = [];
    const schedule = new RoundSchedule({ roundSeconds: 300 }, () => ends);
    schedule.started(1000);
    expect(schedule.nextRoundSeconds()).toBe(1300);
    ends = [900, 1180, 1250];
    expect(schedule.nextRoundSeconds()).toBe(1180);
    expect(schedule.due(1179)).toBe(false);
    expect(schedule.due(1180)).toBe(true);
    expect(schedule.reasonAt(1180)).toBe('capacity may be back');
    schedule.started(1180);
    // The next end, then the period from the last round.
    expect(schedule.nextRoundSeconds()).toBe(1250);
    schedule.started(1250);
    expect(schedule.due(1300)).toBe(false);
    expect(schedule.nextRoundSeconds()).toBe(1550);
    expect(schedule.reasonAt(1550)).toBe('period');
  });

  it('keeps the gap after a round: a window ending a second after one waits for it', () => {
    const schedule = new RoundSchedule({ roundSeconds: 300, minRoundGapSeconds: 5 }, () => [1001]);
    schedule.started(1000);
    expect(schedule.due(1001)).toBe(false);
    expect(schedule.nextRoundSeconds()).toBe(1005);
    expect(schedule.due(1005)).toBe(true);
  });
});
