/**
 * A `--price-overrides` file is refused as the wrong file when it overrides no price, empty price tables included;
 * its spot prices or spot discount without `--spot on` are refused as its other problems are, naming the file and the
 * field with its line.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readPriceOverridesFile } from '../../src/cli/commands/sim-flags.js';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import { buildProgram } from '../../src/cli/program.js';
import { ValidationError } from '../../src/core/validation.js';
import { refusal } from '../helpers/validation-refusal.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-price-overrides-file-refusals-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let files = 0;
function file(lines: readonly string[], ext = 'yaml'): string {
  const path = join(scratch, `f${(files += 1)}.${ext}`);
  writeFileSync(path, [...lines, ''].join('\n'));
  return path;
}

const plan = (...args: string[]) =>
  simulationPlan(
    parseSimulateArgs(['--scheduler', 'no-packing', '--format', 'eva', '--jobs', '3', ...args], 'test'),
  );

const noPrice =
  'overrides no price: give discountPercent, spotDiscountPercent, pricePerType or spotPricePerType (as in ' +
  'examples/prices/savings-plan.yaml)';
const simulateWhy = 'needs --spot on (without it the runs buy on demand only)';

describe('a --price-overrides file of empty price tables', () => {
  it('is refused as overriding no price, bare or as a config section, in YAML or JSON', () => {
    const cases: [string, string][] = [
      [file(['pricePerType: {}']), ''],
      [file(['{ "pricePerType": {}, "spotPricePerType": {} }'], 'json'), ''],
      [file(['cluster: c', 'stateDir: s', 'priceOverrides:', '  pricePerType: {}']), ': priceOverrides'],
    ];
    for (const [path, section] of cases)
      expect(
        refusal(() => readPriceOverridesFile(path)),
        path,
      ).toMatchObject({
        source: `${path}${section}`,
        problems: [noPrice],
      });
  });

  it('is taken once a table holds a price, or a discount is given (even 0)', () => {
    const priced = file(['pricePerType: {}', 'spotPricePerType:', '  c7i.large: 0.03']);
    expect(readPriceOverridesFile(priced).overrides.spotPricePerType).toEqual({ 'c7i.large': 0.03 });
    expect(readPriceOverridesFile(file(['discountPercent: 0'])).overrides).toEqual({ discountPercent: 0 });
  });
});

describe("a --price-overrides file's spot prices without --spot on", () => {
  it('are refused naming the file and the field with its line', () => {
    const spotPrices = file(['discountPercent: 10', 'spotPricePerType:', '  c7i.large: 0.03']);
    expect(refusal(() => plan('--price-overrides', spotPrices))).toMatchObject({
      source: spotPrices,
      problems: [`spotPricePerType (line 2): prices spot instances: ${simulateWhy}`],
    });
    const discount = file(['# an enterprise agreement', 'spotDiscountPercent: 50']);
    expect(refusal(() => plan('--price-overrides', discount, '--spot', 'off'))).toMatchObject({
      source: discount,
      problems: [`spotDiscountPercent (line 2): discounts spot instances: ${simulateWhy}`],
    });
  });

  it("name the config's field and line when the file is a controller config", () => {
    const config = file(['cluster: c', 'stateDir: s', 'priceOverrides:', '  spotDiscountPercent: 50']);
    expect(refusal(() => plan('--price-overrides', config))).toMatchObject({
      source: config,
      problems: [`priceOverrides.spotDiscountPercent (line 4): discounts spot instances: ${simulateWhy}`],
    });
  });

  it('are refused the same way by bench bound and tune', async () => {
    const spotPrices = file(['spotPricePerType:', '  c7i.large: 0.03']);
    const refusedBy = async (args: readonly string[]): Promise<ValidationError> => {
      const program = await buildProgram(false, args[0]);
      try {
        await program.parseAsync(['node', 'fleetwise', ...args, '--price-overrides', spotPrices]);
      } catch (e) {
        if (e instanceof ValidationError) return e;
        throw e;
      }
      throw new Error(`expected ${args.join(' ')} to be refused`);
    };
    expect(await refusedBy(['bench', 'bound', '--format', 'eva', '--jobs', '3'])).toMatchObject({
      source: spotPrices,
      problems: [
        'spotPricePerType (line 1): prices spot instances: needs --spot on (without it the bounds are on demand)',
      ],
    });
    expect(await refusedBy(['tune', '--format', 'eva', '--jobs', '3', '--cap-instances', '3'])).toMatchObject(
      {
        source: spotPrices,
        problems: [
          'spotPricePerType (line 1): prices spot instances: tune simulates on-demand capacity only',
        ],
      },
    );
  });
});
