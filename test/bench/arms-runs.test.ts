import { describe, expect, it } from 'vitest';
import { parseArm } from '../../src/bench/arms-flags.js';
import { planArms, type ArmsInput } from '../../src/bench/arms-plan.js';
import { armsRunCount, runArms } from '../../src/bench/arms-runs.js';
import type { ArmFigures } from '../../src/bench/paired-arms.js';
import { checkedSimulatePlan, planSimulateRun } from '../../src/cli/commands/bench-arms.js';
import type { Settled } from '../../src/sim/run-pool.js';
import type { RunRequest } from '../../src/sim/run-request.js';

/** `runArms` with the runs' outcomes made up: what a failed run costs its seed, and nothing more. */
const COMMON = ['--format', 'synthetic', '--jobs', '14', '--scheduler', 'eva', '--no-predict'];

function input(fields: Partial<ArmsInput> = {}): ArmsInput {
  return {
    seeds: [5, 6, 7],
    common: COMMON,
    arms: ['a=', 'b=--queue srpt'].map(parseArm),
    builds: new Map(),
    capShare: 0.5,
    peaksFrom: undefined,
    ...fields,
  };
}

describe('bench arms runs', () => {
  it('a failed reference loses its seed alone: its arms not run, the others capped and compared', async () => {
    const arms = input();
    const plan = await planArms(arms, planSimulateRun, checkedSimulatePlan);
    const made: { label: string; index: number; request: RunRequest }[] = [];
    const skipped: { label: string; index: number }[] = [];
    const outcome = await runArms(arms, plan, planSimulateRun, {
      run: (batch, indices) =>
        Promise.resolve(
          batch.map((request, j): Settled<ArmFigures> => {
            made.push({ label: request.label ?? '', index: indices[j] as number, request });
            if (request.label === 'seed 6 uncapped')
              return { ok: false, error: new Error('seed 6 uncapped: did not finish') };
            // Each seed's peak is 10 × its seed; an arm's cost tells its seed and arm apart.
            const seed = request.trace.seed ?? 0;
            return {
              ok: true,
              value: {
                peakCostPerHour: 10 * seed,
                totalCost: 100 * seed + (request.queue?.kind === 'srpt' ? 1 : 0),
              },
            };
          }),
        ),
      runOther: () => Promise.reject(new Error('no other build')),
      skip: (index, label) => skipped.push({ label, index }),
    });
    const { report, failures } = outcome;
    expect(failures.map((f) => [f.seed, f.run, f.error.message])).toEqual([
      [6, 'seed 6 uncapped', 'seed 6 uncapped: did not finish'],
    ]);
    expect(report.seeds).toEqual([5, 7]);
    expect(report.leftOut).toEqual([
      { seed: 6, failed: [{ run: 'seed 6 uncapped', error: 'did not finish' }] },
    ]);
    // Every run has its one place in the progress, made or not.
    expect(skipped.map((s) => s.label)).toEqual(['seed 6 a', 'seed 6 b']);
    expect([...made.map((m) => m.index), ...skipped.map((s) => s.index)].sort((x, y) => x - y)).toEqual(
      Array.from({ length: armsRunCount(arms, plan) }, (_, i) => i),
    );
    // The seeds kept are compared, every per-seed figure theirs alone.
    expect(report.uncappedPeakBySeed).toEqual([50, 70]);
    expect(report.capBySeed).toEqual([25, 35]);
    expect(report.capBySeedByArm).toEqual({ a: [25, 35], b: [25, 35] });
    expect(report.runs['b']?.map((r) => r.totalCost)).toEqual([501, 701]);
    expect(report.comparisons['b']?.find((d) => d.metric === 'totalCost')?.seeds).toBe(2);
    // An arm's cap is named as the share of its seed's peak, in whatever message is about it.
    const seed7 = made.find((m) => m.label === 'seed 7 b')?.request.queue?.caps;
    expect(seed7?.maxCostPerHour).toBe(35);
    expect(seed7?.sources?.maxCostPerHour).toBe(
      "--cap-share 0.5 × seed 7's uncapped peak $70.00/h = $35.00/h",
    );
  });

  it('without --cap-share, each arm is shown under the $/h cap its own flags set', async () => {
    const arms = input({
      seeds: [5],
      capShare: null,
      arms: ['a=', 'b=--cap-dollars-per-hour 80'].map(parseArm),
      common: [...COMMON, '--cap-dollars-per-hour', '60'],
    });
    const plan = await planArms(arms, planSimulateRun, checkedSimulatePlan);
    expect(plan.fixedCaps).toEqual({ a: 60, b: 80 });
    const { report } = await runArms(arms, plan, planSimulateRun, {
      run: (batch) => Promise.resolve(batch.map(() => ({ ok: true, value: { totalCost: 1 } }))),
      runOther: () => Promise.reject(new Error('no other build')),
      skip: () => undefined,
    });
    expect(report.capBySeedByArm).toEqual({ a: [60], b: [80] });
    // Not one cap for every arm: none for the seed.
    expect(report.capBySeed).toEqual([null]);
    expect(report.leftOut).toEqual([]);
  });
});
