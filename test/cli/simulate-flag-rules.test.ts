import { describe, expect, it } from 'vitest';
import { checkDependentFlags, type DependentFlags } from '../../src/cli/commands/simulate-flag-rules.js';
import { ValidationError } from '../../src/core/validation.js';

/** A simulate flag that would do nothing without another is refused, naming it and what it needs. */

const base: DependentFlags = { runtime: 'engine', schedulers: ['eva'], valuesOfTime: ['auto'] };

function refusal(flags: Partial<DependentFlags>): string {
  try {
    checkDependentFlags({ ...base, ...flags });
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return (e as Error).message;
  }
  return 'accepted';
}

describe('simulate flags that need another', () => {
  it('refuses each without what it needs', () => {
    expect(refusal({ spotBursts: 3 })).toMatch(/^--spot-bursts: needs --spot on/);
    expect(refusal({ spotRebalance: 0.5 })).toMatch(/^--spot-rebalance: needs --spot on/);
    expect(refusal({ spotFalseRebalances: 2 })).toMatch(/^--spot-false-rebalances: needs --spot on/);
    expect(refusal({ targetSlowdown: 0.01, valuesOfTime: [8] })).toMatch(/^--target-slowdown: .*add auto/);
    expect(refusal({ bind: 'on' })).toMatch(/^--bind: .*needs --place-between-rounds on/);
    expect(refusal({ bind: 'on', placeBetweenRounds: 'off' })).toMatch(/^--bind: /);
    expect(refusal({ pollSeconds: 5 })).toMatch(/^--poll-seconds: .*needs --runtime controller/);
  });

  it('refuses the spot baselines without --spot on, naming each (they would print on-demand figures)', () => {
    expect(refusal({ schedulers: ['eva', 'karpenter-spot'] })).toBe(
      '--scheduler: karpenter-spot buys spot capacity: needs --spot on (without it its run would buy on demand and ' +
        'print on-demand figures under a spot name)',
    );
    expect(refusal({ schedulers: ['skypilot-spot', 'no-packing', 'karpenter-spot'], spot: 'off' })).toMatch(
      /^--scheduler: skypilot-spot, karpenter-spot buy spot capacity: need --spot on \(without it their runs /,
    );
    expect(refusal({ schedulers: ['eva', 'karpenter-spot', 'skypilot-spot'], spot: 'on' })).toBe('accepted');
    expect(refusal({ schedulers: ['karpenter', 'no-packing'] })).toBe('accepted');
  });

  it('accepts each with it, and an explicit off', () => {
    expect(refusal({ spot: 'on', spotBursts: 3, spotRebalance: 0.5, spotFalseRebalances: 2 })).toBe(
      'accepted',
    );
    expect(refusal({ targetSlowdown: 0.01 })).toBe('accepted');
    expect(refusal({ bind: 'on', placeBetweenRounds: 'on' })).toBe('accepted');
    expect(refusal({ bind: 'off' })).toBe('accepted'); // the arms of a comparison name every part, on or off
    expect(refusal({ pollSeconds: 5, runtime: 'controller' })).toBe('accepted');
  });
});
