import { describe, expect, it } from 'vitest';
import { formatDollars } from '../../src/cli/table.js';

describe('formatDollars', () => {
  it('prints cents, and four decimals under a cent', () => {
    expect(formatDollars(12.345)).toBe('$12.35');
    expect(formatDollars(0)).toBe('$0.00');
    expect(formatDollars(0.0042)).toBe('$0.0042');
    expect(formatDollars(-0.0042)).toBe('$-0.0042');
  });

  it('prints a float remainder that rounds to nothing as $0.00, as it prints zero', () => {
    for (const remainder of [1e-12, -1e-12, 4.9e-5, -4.9e-5, 2.7755575615628914e-17])
      expect(formatDollars(remainder), String(remainder)).toBe('$0.00');
  });
});
