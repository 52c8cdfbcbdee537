import { beforeAll, describe, expect, it } from 'vitest';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';

/**
 * The spot baselines (karpenter-spot, skypilot-spot) model buying spot capacity: run without the spot market they would
 * buy on demand and print on-demand figures under a spot name, so `simulate` refuses them without `--spot on` and
 * `tune`, which simulates on-demand capacity only, refuses them outright (exit 2, naming --scheduler).
 */

const SMALL = ['--format', 'synthetic', '--jobs', '4'];

beforeAll(() => ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']), 180_000);

describe('spot baselines without the spot market', () => {
  it('simulate refuses them without --spot on, naming each, and plans them with it', async () => {
    const [bare, off] = await Promise.all([
      runCli(['simulate', ...SMALL, '--scheduler', 'eva,karpenter-spot']),
      runCli([
        'simulate',
        ...SMALL,
        '--scheduler',
        'skypilot-spot,karpenter-spot',
        '--spot',
        'off',
        '--json',
      ]),
    ]);
    expect(bare.code).toBe(2);
    expect(bare.stdout).toBe('');
    expect(bare.stderr).toContain(
      'invalid input: --scheduler\n  - karpenter-spot buys spot capacity: needs --spot on (without it its run ' +
        'would buy on demand and print on-demand figures under a spot name)',
    );
    expect(off.code).toBe(2);
    expect(off.stdout).toBe('');
    const error = off.stderr.split('\n').find((line) => line.startsWith('{')) ?? '{}';
    expect(JSON.parse(error) as unknown).toEqual({
      error: 'invalid input: --scheduler',
      details: [expect.stringMatching(/^skypilot-spot, karpenter-spot buy spot capacity: need --spot on /)],
    });

    const { requests } = simulationPlan(
      parseSimulateArgs(
        [...SMALL, '--scheduler', 'eva,karpenter-spot,skypilot-spot', '--spot', 'on'],
        'test',
      ),
    );
    expect(requests.map((r) => [r.scheduler, r.spot !== undefined])).toEqual([
      ['eva', true],
      ['karpenter-spot', true],
      ['skypilot-spot', true],
    ]);
  });

  it('tune refuses them: it has no spot market to give them', async () => {
    const r = await runCli([
      'tune',
      ...SMALL,
      '--cap-instances',
      '2',
      '--samples',
      '1',
      '--scheduler',
      'skypilot-spot',
    ]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(
      'invalid input: --scheduler\n  - skypilot-spot buys spot capacity, and tune simulates on-demand capacity ' +
        'only (it has no --spot): its figures would be on-demand ones under a spot name',
    );
    expect(r.stderr).not.toMatch(/candidates done/);
  });
});
