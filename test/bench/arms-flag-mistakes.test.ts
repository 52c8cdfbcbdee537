/**
 * `bench arms` with a mistake in the simulate flags of --common or an arm: simulate's own error, named by the flags
 * that hold it, whatever the bench adds to every run (its `--seed`, a cap, `--json` for another build's).
 */
import { describe, expect, it } from 'vitest';
import { parseArm } from '../../src/bench/arms-flags.js';
import { planArms, type ArmsInput } from '../../src/bench/arms-plan.js';
import { runArms } from '../../src/bench/arms-runs.js';
import type { BuildRun } from '../../src/bench/build-runs.js';
import type { ArmFigures } from '../../src/bench/paired-arms.js';
import { checkedSimulatePlan, planSimulateRun } from '../../src/cli/commands/bench-arms.js';
import { ValidationError } from '../../src/core/validation.js';

const COMMON = ['--format', 'synthetic', '--jobs', '14', '--scheduler', 'eva', '--no-predict'];
const MISSING_QUEUE = "option '--queue <kind>' argument missing";

function input(arms: readonly string[], fields: Partial<ArmsInput> = {}): ArmsInput {
  return {
    seeds: [5, 6],
    common: COMMON,
    arms: arms.map(parseArm),
    builds: new Map(),
    capShare: null,
    peaksFrom: undefined,
    ...fields,
  };
}

/** The ValidationError planning `what` refuses with, as source and problems. */
async function refusal(what: ArmsInput): Promise<{ source: string; problems: readonly string[] }> {
  try {
    await planArms(what, planSimulateRun, checkedSimulatePlan);
  } catch (e) {
    if (e instanceof ValidationError) return { source: e.source, problems: e.problems };
    throw e;
  }
  throw new Error('planned without a refusal');
}

describe('bench arms, a flag without its value', () => {
  it('at the end of an arm is that arm’s, with simulate’s own message', async () => {
    for (const capShare of [null, 0.8])
      expect(await refusal(input(['a=', 'b=--queue'], { capShare })), `--cap-share ${capShare}`).toEqual({
        source: '--arm b',
        problems: [MISSING_QUEUE],
      });
  });

  it('at the end of --common is --common’s, not the first arm’s it would take for its value', async () => {
    const common = [...COMMON, '--queue'];
    for (const capShare of [null, 0.8])
      expect(
        await refusal(input(['a=', 'b=--queue srpt'], { common, capShare })),
        `--cap-share ${capShare}`,
      ).toEqual({ source: '--common', problems: [MISSING_QUEUE] });
    // Another mistake of --common's own: a flag simulate does not know.
    expect(
      await refusal(input(['a=', 'b=--queue srpt'], { common: [...COMMON, '--queues', 'srpt'] })),
    ).toEqual({
      source: '--common',
      problems: ["unknown option '--queues'\n(Did you mean --queue?)"],
    });
  });

  it('a value simulate refuses is named by where it was given too', async () => {
    const arm = await refusal(input(['a=', 'b=--queue sprt']));
    expect(arm.source).toBe('--arm b');
    expect(arm.problems).toEqual([expect.stringMatching(/^--queue: /)]);
    const common = await refusal(input(['a=', 'b=--queue srpt'], { common: [...COMMON, '--queue', 'sprt'] }));
    expect(common.source).toBe('--common');
    expect(common.problems).toEqual([expect.stringMatching(/^--queue: /)]);
  });

  it('--common may leave a required flag to the arms', async () => {
    const common = COMMON.filter((arg) => arg !== '--scheduler' && arg !== 'eva');
    const plan = await planArms(
      input(['a=--scheduler eva', 'b=--scheduler eva --queue srpt'], { common }),
      planSimulateRun,
      checkedSimulatePlan,
    );
    expect(Object.keys(plan.catalogs)).toEqual(['a', 'b']);
    // An arm that leaves it out too is refused, and named.
    expect(await refusal(input(['a=--scheduler eva', 'b=--queue srpt'], { common }))).toEqual({
      source: '--arm b',
      problems: ["required option '--scheduler <names>' not specified"],
    });
  });

  it('in another build’s arm reaches that build last, for its own simulate to name', async () => {
    const arms = input(['a=', 'b=--queue'], {
      seeds: [5],
      builds: new Map([['b', { dir: '/other', cli: '/other/dist/cli/main.js' }]]),
    });
    // This build cannot judge another build's flags: the plan leaves them to it.
    const plan = await planArms(arms, planSimulateRun, checkedSimulatePlan);
    const sent: BuildRun[] = [];
    const figures: ArmFigures = { totalCost: 1, meanJctHours: 1, peakCostPerHour: 1 };
    await runArms(arms, plan, planSimulateRun, {
      run: (batch) => Promise.resolve(batch.map(() => ({ ok: true, value: figures }))),
      runOther: (batch) => {
        sent.push(...batch);
        return Promise.resolve(batch.map(() => ({ ok: true, value: figures })));
      },
      skip: () => undefined,
    });
    expect(sent.map((r) => r.args)).toEqual([['--json', '--seed', '5', ...COMMON, '--queue']]);
  });
});
