/**
 * `simulate --seed` where it changes nothing (a trace read from a file as it is, with no spot market and no simulated
 * network drawn from it) is refused, naming the flag and why; where the seed does draw something it is taken.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { parseArm } from '../../src/bench/arms-flags.js';
import { planArms } from '../../src/bench/arms-plan.js';
import { checkedSimulatePlan, planSimulateRun } from '../../src/cli/commands/bench-arms.js';
import { checkSeedTaken } from '../../src/cli/commands/simulate-flag-rules.js';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import { executeRun, type RunRequest } from '../../src/sim/run-request.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { refusal } from '../helpers/validation-refusal.js';

const EVA = ['--format', 'eva', '--jobs', '12', '--scheduler', 'eva', '--no-predict'];

const planOf = (args: readonly string[]) => simulationPlan(parseSimulateArgs([...args], 'test'));

/** simulate's check of the seed, for these flags. */
function seedCheck(args: readonly string[]): () => void {
  const plan = planOf(args);
  return () => checkSeedTaken(plan.o.seed, plan.requests[0] as RunRequest, plan.trace);
}

/** The figures of the flags' run on `seed`. */
function figures(args: readonly string[], seed: number) {
  const { summary } = executeRun(planOf([...args, '--seed', String(seed)]).requests[0] as RunRequest);
  return {
    totalCost: summary.totalCost,
    meanJctHours: summary.meanJctHours,
    migrationsPerJob: summary.migrationsPerJob,
  };
}

describe('simulate --seed', () => {
  it('changes nothing of a file trace run without spot or a network, and changes a spot run of it', () => {
    // The premise of the refusal, measured: two seeds of the Eva trace run alike, unless spot reclaims are drawn.
    expect(figures(EVA, 2)).toEqual(figures(EVA, 9));
    const spot = [...EVA, '--spot', 'on', '--spot-bursts', '300'];
    expect(figures(spot, 2)).not.toEqual(figures(spot, 9));
  });

  it('is refused there, naming the flag, the trace and what the seed does draw', () => {
    const e = refusal(seedCheck([...EVA, '--seed', '3']));
    expect(e.message).toBe(
      '--seed: changes nothing here: eva traces are read from their file as they are (alibaba, synthetic and ' +
        'success traces are drawn from the seed), and nothing else of these runs is seeded (the spot market of ' +
        '--spot on and the network of --latency-config, --latency-sensitive or jobs declaring one are): leave it out',
    );
    // An explicit 0, the default, changes nothing either.
    expect(refusal(seedCheck([...EVA, '--seed', '0'])).source).toBe('--seed');
  });

  it('is taken where it draws something: a generated or converted trace, spot, the network', () => {
    for (const args of [
      ['--format', 'synthetic', '--jobs', '5', '--scheduler', 'eva'],
      ['--format', 'alibaba', '--jobs', '5', '--scheduler', 'eva'],
      [...EVA, '--spot', 'on'],
      [...EVA, '--latency-config', 'examples/latency/congestion.yaml'],
      // The bundled job specs declare a network (the memcached load test): its noise is drawn from the seed.
      ['--trace', 'examples/jobs', '--format', 'specs', '--scheduler', 'eva'],
    ])
      expect(seedCheck([...args, '--seed', '3']), args.join(' ')).not.toThrow();
    // And a run without it has nothing to refuse.
    expect(seedCheck(EVA)).not.toThrow();
  });

  it('is not refused in bench arms, which gives every run its seed (a single seed on a file trace)', async () => {
    const plan = await planArms(
      {
        seeds: [5],
        common: EVA,
        arms: ['a=', 'b=--eva-payback-margin 2'].map(parseArm),
        builds: new Map(),
        capShare: null,
        peaksFrom: undefined,
      },
      planSimulateRun,
      checkedSimulatePlan,
    );
    expect(Object.keys(plan.catalogs)).toEqual(['a', 'b']);
  });

  describe('the command (CLI subprocess)', () => {
    beforeAll(() => ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']), 180_000);

    it('is refused before any run, with exit 2', async () => {
      const flags = ['simulate', '--format', 'eva', '--jobs', '3', '--scheduler', 'no-packing'];
      const [refused, taken] = await Promise.all([
        runCli([...flags, '--seed', '4']),
        runCli([...flags, '--json']),
      ]);
      expect(refused.code).toBe(2);
      expect(refused.stdout).toBe('');
      expect(refused.stderr).toBe(
        'fleetwise: invalid input: --seed\n  - changes nothing here: eva traces are read from their file as they ' +
          'are (alibaba, synthetic and success traces are drawn from the seed), and nothing else of these runs is ' +
          'seeded (the spot market of --spot on and the network of --latency-config, --latency-sensitive or jobs ' +
          'declaring one are): leave it out\n',
      );
      expect(taken.stderr).not.toMatch(/fleetwise:/);
      expect(taken.code).toBe(0);
    });
  });
});
