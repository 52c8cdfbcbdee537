import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatProgress } from '../../src/cli/table.js';

/**
 * A job's progress as `fleetwise jobs` and `fleetwise job` show it: a whole percent rounded down, so a job that still
 * has iterations to run never reads 100%.
 */
describe('formatProgress', () => {
  it('rounds down: 896/900 and 899.5/900 are 99%, 900/900 is 100%', () => {
    expect(formatProgress({ completed: 896, total: 900 })).toBe('99%');
    expect(formatProgress({ completed: 899.5, total: 900 })).toBe('99%');
    expect(formatProgress({ completed: 883, total: 900 })).toBe('98%');
    expect(formatProgress({ completed: 900, total: 900 })).toBe('100%');
    expect(formatProgress({ completed: 901, total: 900 })).toBe('100%');
    expect(formatProgress({ completed: 1, total: 1000 })).toBe('0%');
    expect(formatProgress({ completed: 0, total: 900 })).toBe('0%');
  });

  it('keeps an exact percent exact despite float products (0.57 of 1 is 57%)', () => {
    expect(formatProgress({ completed: 0.57, total: 1 })).toBe('57%');
    expect(formatProgress({ completed: 57, total: 100 })).toBe('57%');
  });

  it('without a total: the count, or - before any', () => {
    expect(formatProgress({ completed: 12, total: null })).toBe('12 it');
    expect(formatProgress({ completed: 0, total: null })).toBe('-');
    expect(formatProgress({ completed: 3, total: 0 })).toBe('3 it');
  });

  it('is 100% exactly when every iteration is done, else the whole percent done rounded down', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.integer({ min: 0, max: 1_000_000 }),
        (total, done) => {
          const completed = Math.min(done, total);
          const shown = formatProgress({ completed, total });
          expect(shown === '100%').toBe(completed === total);
          // Whole iterations: the exact floor, by integer arithmetic.
          expect(shown).toBe(`${Math.floor((100 * completed) / total)}%`);
        },
      ),
    );
  });
});
