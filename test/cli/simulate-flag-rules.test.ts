import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkDependentFlags, type DependentFlags } from '../../src/cli/commands/simulate-flag-rules.js';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import { ValidationError } from '../../src/core/validation.js';

/** A simulate flag that would do nothing without another is refused, naming it and what it needs. */

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-simulate-flag-rules-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

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

  it('refuses --checkpoint-minutes without --spot on, and --admit-by without a $/hour cap', () => {
    // Only a spot reclaim sends a job back to its latest periodic checkpoint; only a $ cap sizes waiting jobs.
    expect(refusal({ checkpointMinutes: 1 })).toBe(
      '--checkpoint-minutes: needs --spot on (a checkpoint-stop saves all progress: only a spot reclaim loses ' +
        'what the last checkpoint did not save)',
    );
    expect(refusal({ checkpointMinutes: 0, spot: 'off' })).toMatch(/^--checkpoint-minutes: needs --spot on/);
    expect(refusal({ checkpointMinutes: 0, spot: 'on' })).toBe('accepted');
    expect(refusal({ admitBy: 'plan-cost' })).toBe(
      '--admit-by: sizes waiting jobs against the $/hour cap: needs --cap-dollars-per-hour (or ' +
        'caps.maxCostPerHour in --config or --queue-config)',
    );
    expect(refusal({ admitBy: 'standalone', dollarCapped: false })).toMatch(/^--admit-by: /);
    expect(refusal({ admitBy: 'plan-cost', dollarCapped: true })).toBe('accepted');
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

describe('--admit-by on the command line', () => {
  const plan = (...args: string[]) =>
    simulationPlan(
      parseSimulateArgs(['--format', 'eva', '--jobs', '2', '--scheduler', 'no-packing', ...args], 'test'),
    );
  const refused = (args: string[]): string => {
    try {
      plan(...args);
    } catch (e) {
      expect(e).toBeInstanceOf(ValidationError);
      return (e as Error).message;
    }
    return 'accepted';
  };

  it('is refused without any $/hour cap, an instance cap being none', () => {
    expect(refused(['--admit-by', 'plan-cost'])).toMatch(
      /^--admit-by: sizes waiting jobs against the \$\/hour cap/,
    );
    expect(refused(['--admit-by', 'plan-cost', '--cap-instances', '3'])).toMatch(/^--admit-by: /);
    expect(refused(['--checkpoint-minutes', '5'])).toMatch(/^--checkpoint-minutes: needs --spot on/);
    expect(plan('--checkpoint-minutes', '5', '--spot', 'on').requests[0]?.checkpointMinutes).toBe(5);
  });

  it('sizes jobs under a $/hour cap from the flag, a controller config or a tuned queue config', () => {
    expect(plan('--admit-by', 'plan-cost', '--cap-dollars-per-hour', '50').queue?.admitBy).toBe('plan-cost');
    const config = join(scratch, 'config.yaml');
    writeFileSync(config, 'cluster: x\nstateDir: st\ncaps:\n  maxCostPerHour: 50\n');
    expect(plan('--admit-by', 'standalone', '--config', config).queue?.admitBy).toBe('standalone');
    const tuned = join(scratch, 'tuned.yaml');
    writeFileSync(tuned, 'queue:\n  classes:\n    - { id: all, weight: 1 }\ncaps:\n  maxCostPerHour: 50\n');
    expect(plan('--admit-by', 'plan-cost', '--queue-config', tuned).queue?.admitBy).toBe('plan-cost');
  });
});

describe("Eva's flags without an Eva run", () => {
  const baselines = ['no-packing', 'karpenter'];

  it('refuses each, naming it and the schedulers that would ignore it', () => {
    const eva = (flags: Partial<DependentFlags>): string => refusal({ schedulers: baselines, ...flags });
    expect(eva({ valueOfTime: [0, 4, 'auto'] })).toBe(
      '--value-of-time: only Eva takes it, and no run here is Eva (no-packing, karpenter): add an eva scheduler',
    );
    expect(eva({ evaPaybackMargin: 3 })).toMatch(
      /^--eva-payback-margin: only Eva takes it.*add an eva scheduler$/,
    );
    expect(eva({ evaDefaultRate: 0.9 })).toMatch(/^--eva-default-rate: only Eva takes it/);
    expect(eva({ evaPrices: 'standalone' })).toMatch(/^--eva-prices: only Eva takes it/);
    expect(eva({ evaPackingEfficiency: 0.5 })).toMatch(/^--eva-packing-efficiency: only Eva takes it/);
    // Refused for want of Eva before the want of auto: adding auto would not make it do anything.
    expect(eva({ targetSlowdown: 0.01, valuesOfTime: [8] })).toMatch(/^--target-slowdown: only Eva takes it/);
    // The default value of time (no --value-of-time) is no flag given.
    expect(eva({ valuesOfTime: ['auto'] })).toBe('accepted');
  });

  it('accepts them beside Eva or one of its ablations', () => {
    const all: Partial<DependentFlags> = {
      valueOfTime: [0, 4, 'auto'],
      valuesOfTime: [0, 4, 'auto'],
      targetSlowdown: 0.01,
      evaDefaultRate: 0.9,
      evaPrices: 'standalone',
      evaPackingEfficiency: 0.5,
      evaPaybackMargin: 3,
    };
    expect(refusal({ ...all, schedulers: ['no-packing', 'eva'] })).toBe('accepted');
    expect(refusal({ ...all, schedulers: ['karpenter', 'eva-rp'] })).toBe('accepted');
  });

  it('refuses the command line a sweep without Eva was given as', () => {
    const plan = (...args: string[]) =>
      simulationPlan(parseSimulateArgs(['--format', 'eva', '--jobs', '2', ...args], 'test'));
    const refused = (args: string[]): string => {
      try {
        plan(...args);
      } catch (e) {
        expect(e).toBeInstanceOf(ValidationError);
        return (e as Error).message;
      }
      return 'accepted';
    };
    const sweep = ['--scheduler', 'no-packing,karpenter', '--value-of-time', '0,4,auto'];
    expect(refused([...sweep, '--eva-payback-margin', '3'])).toMatch(/^--value-of-time: only Eva takes it/);
    expect(refused(['--scheduler', 'karpenter', '--eva-payback-margin', '3'])).toMatch(
      /^--eva-payback-margin: only Eva takes it/,
    );
    expect(refused(['--scheduler', 'karpenter', '--target-slowdown', '0.05'])).toMatch(
      /^--target-slowdown: only Eva takes it/,
    );
    expect(plan('--scheduler', 'no-packing,eva', '--value-of-time', '0,4,auto').requests).toHaveLength(4);
  });
});
