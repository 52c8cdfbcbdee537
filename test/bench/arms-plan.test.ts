/**
 * What `bench arms` plans before any run (arms-plan.ts), with simulate's own planning of each run: each uncapped
 * reference planned once, and with `--cap-share` a reference at the prices each arm's runs take.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCatalog } from '../../src/bench/arm-catalogs.js';
import { parseArm } from '../../src/bench/arms-flags.js';
import { planArms, type ArmsInput, type PlanRun } from '../../src/bench/arms-plan.js';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { checkedSimulatePlan, planSimulateRun } from '../../src/cli/commands/bench-arms.js';
import type { RunRequest } from '../../src/sim/run-request.js';
import { writeScaledBundledCatalog } from '../helpers/catalogs.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-arms-plan-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const COMMON = ['--format', 'synthetic', '--jobs', '14', '--scheduler', 'eva', '--no-predict'];
const SAVINGS_PLAN = join(PROJECT_ROOT, 'examples', 'prices', 'savings-plan.yaml');
/** The savings plan's prices, as its file gives them. */
const SAVINGS = { discountPercent: 28, pricePerType: { 'p3.2xlarge': 1.99, 'c7i.large': 0.056 } };
const BUNDLED = runCatalog({});
const PRICED_KEY = `${BUNDLED} with price overrides {"discountPercent":28,"pricePerType":{"c7i.large":0.056,"p3.2xlarge":1.99}}`;

function input(arms: readonly string[], fields: Partial<ArmsInput> = {}): ArmsInput {
  return {
    seeds: [5, 6],
    common: COMMON,
    arms: arms.map(parseArm),
    builds: new Map(),
    capShare: 0.8,
    peaksFrom: undefined,
    ...fields,
  };
}

/** simulate's planning, with every call's flags kept. */
function countingPlanRun(): { planRun: PlanRun; calls: string[][] } {
  const calls: string[][] = [];
  return {
    calls,
    planRun: (args, source, label) => {
      calls.push([...args]);
      return planSimulateRun(args, source, label);
    },
  };
}

/** The request without what the prices change: the overrides and the run's label. */
function unpriced(request: RunRequest | undefined): object {
  const { priceOverrides: _prices, label: _label, ...rest } = request as RunRequest;
  return rest;
}

describe('bench arms plans', () => {
  it('each seed’s uncapped reference once, the first seed’s too', async () => {
    const { planRun, calls } = countingPlanRun();
    const plan = await planArms(input(['a=', 'b=--queue srpt']), planRun, checkedSimulatePlan);
    for (const seed of [5, 6]) {
      const reference = ['--seed', String(seed), ...COMMON];
      expect(calls.filter((args) => args.join(' ') === reference.join(' ')).length, `seed ${seed}`).toBe(1);
    }
    // Each arm checked on the first seed, and the references: nothing planned twice.
    expect(calls.length).toBe(4);
    expect(plan.referenceRuns.map((r) => r.label)).toEqual(['seed 5 uncapped', 'seed 6 uncapped']);
  });

  it('a reference at an arm’s own prices, for the caps of that arm', async () => {
    const plan = await planArms(
      input(['a=', `b=--price-overrides ${SAVINGS_PLAN}`]),
      planSimulateRun,
      checkedSimulatePlan,
    );
    expect(plan.catalogs).toEqual({ a: BUNDLED, b: BUNDLED });
    expect(plan.referenceOf).toEqual({ a: BUNDLED, b: PRICED_KEY });
    expect(plan.referenceKeys).toEqual([BUNDLED, PRICED_KEY]);
    const [plain5, plain6, priced5, priced6] = plan.referenceRuns;
    expect(plan.referenceRuns.map((r) => r.label)).toEqual([
      'seed 5 uncapped',
      'seed 6 uncapped',
      'seed 5 uncapped at b’s prices',
      'seed 6 uncapped at b’s prices',
    ]);
    expect(plain5?.priceOverrides).toBeUndefined();
    expect(priced5?.priceOverrides).toEqual(SAVINGS);
    expect(priced6?.priceOverrides).toEqual(SAVINGS);
    // The same run of the --common flags alone but for the prices.
    expect(unpriced(priced5)).toEqual(unpriced(plain5));
    expect(unpriced(priced6)).toEqual(unpriced(plain6));
    // As simulate plans those flags with the arm's prices.
    expect(priced5).toEqual(
      planSimulateRun(
        ['--seed', '5', ...COMMON, '--price-overrides', SAVINGS_PLAN],
        'x',
        'seed 5 uncapped at b’s prices',
      ),
    );
  });

  it('an arm at the --common flags’ prices shares their reference, whichever file gives them', async () => {
    // The savings plan's prices in another order, under a controller config's priceOverrides:.
    const config = join(scratch, 'savings.yaml');
    writeFileSync(
      config,
      [
        'cluster: c',
        'stateDir: s',
        'priceOverrides:',
        '  pricePerType:',
        '    c7i.large: 0.056',
        '    p3.2xlarge: 1.99',
        '  discountPercent: 28',
      ].join('\n'),
    );
    const common = [...COMMON, '--price-overrides', SAVINGS_PLAN];
    const plan = await planArms(
      input(['a=', `b=--config ${config}`, `c=--price-overrides ${config}`], { common }),
      planSimulateRun,
      checkedSimulatePlan,
    );
    expect(plan.referenceOf).toEqual({ a: BUNDLED, b: BUNDLED, c: BUNDLED });
    expect(plan.referenceRuns.map((r) => r.priceOverrides)).toEqual([SAVINGS, SAVINGS]);
  });

  it('a reference at an arm’s prices on the arm’s catalog', async () => {
    const doubled = join(scratch, 'doubled.json');
    writeScaledBundledCatalog(doubled, 2);
    const plan = await planArms(
      input(['a=', `b=--catalog ${doubled}`, `c=--catalog ${doubled} --price-overrides ${SAVINGS_PLAN}`]),
      planSimulateRun,
      checkedSimulatePlan,
    );
    const pricedDoubled = PRICED_KEY.replace(BUNDLED, doubled);
    expect(plan.referenceOf).toEqual({ a: BUNDLED, b: doubled, c: pricedDoubled });
    expect(plan.referenceKeys).toEqual([BUNDLED, doubled, pricedDoubled]);
    const priced = plan.referenceRuns.filter((r) => r.priceOverrides !== undefined);
    expect(priced.map((r) => [r.catalogPath, r.label])).toEqual([
      [doubled, 'seed 5 uncapped on doubled.json at c’s prices'],
      [doubled, 'seed 6 uncapped on doubled.json at c’s prices'],
    ]);
  });

  it('no reference without --cap-share', async () => {
    const { planRun, calls } = countingPlanRun();
    const plan = await planArms(
      input(['a=', `b=--price-overrides ${SAVINGS_PLAN}`], { capShare: null }),
      planRun,
      checkedSimulatePlan,
    );
    expect(plan.referenceRuns).toEqual([]);
    expect(plan.referenceOf).toEqual({});
    expect(calls.length).toBe(2);
  });
});

describe('bench arms with a flag that acts only under a $/hour cap in --common', () => {
  const ADMIT = ['--admit-by', 'plan-cost'];

  it('runs the uncapped reference without it, and the arms with it under their caps', async () => {
    for (const common of [
      [...COMMON, ...ADMIT],
      [...ADMIT, ...COMMON],
      [...COMMON, '--admit-by=plan-cost'],
    ]) {
      const { planRun, calls } = countingPlanRun();
      const plan = await planArms(input(['a=', 'b=--queue srpt'], { common }), planRun, checkedSimulatePlan);
      // Uncapped, the flag would change nothing (and simulate refuses it): the reference is the run without it.
      expect(plan.referenceRuns, common.join(' ')).toEqual(
        [5, 6].map((seed) =>
          planSimulateRun(['--seed', String(seed), ...COMMON], 'x', `seed ${seed} uncapped`),
        ),
      );
      // Each arm was checked with it, under the bench's cap.
      const armChecks = calls.filter((args) => args.includes('--cap-dollars-per-hour'));
      expect(armChecks.length).toBe(2);
      for (const args of armChecks) expect(args.join(' ')).toMatch(/--admit-by( |=)plan-cost/);
      const armRun = planRun(['--seed', '5', '--cap-dollars-per-hour', '1', ...common], 'x', 'a');
      expect(armRun.queue?.admitBy).toBe('plan-cost');
    }
  });

  it('without --cap-share, leaves it to the arms that give a cap, and refuses it where none does', async () => {
    const common = [...COMMON, ...ADMIT];
    const capped = await planArms(
      input(['a=--cap-dollars-per-hour 40', 'b=--cap-dollars-per-hour 40 --queue srpt'], {
        common,
        capShare: null,
      }),
      planSimulateRun,
      checkedSimulatePlan,
    );
    expect(capped.fixedCaps).toEqual({ a: 40, b: 40 });
    await expect(
      planArms(
        input(['a=--cap-dollars-per-hour 40', 'b=--queue srpt'], { common, capShare: null }),
        planSimulateRun,
        checkedSimulatePlan,
      ),
    ).rejects.toThrow(/^--admit-by: sizes waiting jobs against the \$\/hour cap/);
  });
});
