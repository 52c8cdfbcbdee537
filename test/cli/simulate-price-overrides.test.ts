/**
 * `simulate --price-overrides FILE` (and a controller config's `priceOverrides:` under `--config`): the runs of both
 * runtimes plan and bill at the overridden prices, and a bad file is refused naming the file and the field.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import type { Catalog } from '../../src/core/catalog.js';
import { executeControllerRun } from '../../src/sim/controller-runtime/execute.js';
import { executeRun, type RunRequest } from '../../src/sim/run-request.js';
import { refusal } from '../helpers/validation-refusal.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-price-overrides-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(scratch, name);
  writeFileSync(path, text);
  return path;
}

const EXAMPLE = join(PROJECT_ROOT, 'examples', 'prices', 'savings-plan.yaml');
const plan = (...args: string[]) =>
  simulationPlan(
    parseSimulateArgs(['--scheduler', 'no-packing', '--format', 'eva', '--jobs', '3', ...args], 'test'),
  );
const priceIn = (c: Catalog, name: string) => c.types.find((t) => t.name === name)?.costPerHour;

describe('simulate --price-overrides', () => {
  it('prices the catalog and every run request with the file (the example Savings Plan)', () => {
    const { catalog, requests } = plan('--price-overrides', EXAMPLE);
    expect(priceIn(catalog, 'p3.2xlarge')).toBe(1.99);
    expect(priceIn(catalog, 'r7i.large')).toBeCloseTo(0.1323 * 0.72, 12);
    expect(requests.map((r) => r.priceOverrides)).toEqual([
      { discountPercent: 28, pricePerType: { 'p3.2xlarge': 1.99, 'c7i.large': 0.056 } },
    ]);
  });

  it('refuses a file naming a type the catalog lacks or an unknown field, naming the file', () => {
    const unknownType = file('unknown.yaml', 'pricePerType:\n  p4d.24xlarge: 20\n');
    expect(refusal(() => plan('--price-overrides', unknownType))).toMatchObject({
      source: unknownType,
      problems: ['pricePerType.p4d.24xlarge (line 2): not an instance type of the catalog'],
    });
    const typo = file('typo.json', '{"discount": 10}');
    expect(refusal(() => plan('--price-overrides', typo))).toMatchObject({
      source: typo,
      problems: ['discount (line 1): unknown field, did you mean discountPercent?'],
    });
  });

  it('refuses spot prices without --spot on, where they would price nothing', () => {
    const spot = file('spot.yaml', 'spotPricePerType:\n  c7i.large: 0.03\n');
    expect(refusal(() => plan('--price-overrides', spot))).toMatchObject({
      source: spot,
      problems: [expect.stringMatching(/^spotPricePerType \(line 1\): .*needs --spot on/)],
    });
    expect(plan('--price-overrides', spot, '--spot', 'on').catalog.spot?.offerings).toContainEqual(
      expect.objectContaining({ typeName: 'c7i.large', pricePerHour: 0.03 }),
    );
  });

  it('refuses a spot discount without --spot on, where it would discount nothing', () => {
    const discount = file('spot-discount.yaml', 'spotDiscountPercent: 50\n');
    expect(refusal(() => plan('--price-overrides', discount))).toMatchObject({
      source: discount,
      problems: [
        'spotDiscountPercent (line 1): discounts spot instances: needs --spot on (without it the runs buy on ' +
          'demand only)',
      ],
    });
    expect(refusal(() => plan('--price-overrides', discount, '--spot', 'off')).source).toBe(discount);
    // With spot on it halves every spot price of the catalog.
    const list = plan('--spot', 'on').catalog.spot?.offerings ?? [];
    const halved = plan('--price-overrides', discount, '--spot', 'on').catalog.spot?.offerings ?? [];
    expect(halved.length).toBeGreaterThan(0);
    expect(halved.map((o) => o.pricePerHour)).toEqual(list.map((o) => o.pricePerHour / 2));
  });

  it('refuses a file that overrides no price, naming it and the fields it should hold', () => {
    const fields =
      'give discountPercent, spotDiscountPercent, pricePerType or spotPricePerType (as in ' +
      'examples/prices/savings-plan.yaml)';
    for (const [name, text] of [
      ['empty.yaml', ''],
      ['comments.yaml', '# Savings Plan rates to come\n'],
    ] as const) {
      const path = file(name, text);
      expect(
        refusal(() => plan('--price-overrides', path)),
        name,
      ).toMatchObject({
        source: path,
        problems: [`is empty: ${fields}`],
      });
    }
    const braces = file('braces.json', '{}');
    expect(refusal(() => plan('--price-overrides', braces))).toMatchObject({
      source: braces,
      problems: [`overrides no price: ${fields}`],
    });
    const config = file('empty-section.yaml', 'cluster: c\nstateDir: s\npriceOverrides:\n');
    expect(refusal(() => plan('--price-overrides', config))).toMatchObject({
      source: `${config}: priceOverrides`,
      problems: [`is empty: ${fields}`],
    });
  });

  it("refuses a controller config's spot prices without --spot on too, naming the config's field", () => {
    const config = file(
      'spot-config.yaml',
      ['cluster: c', 'stateDir: s', 'priceOverrides:', '  spotPricePerType:', '    c7i.large: 0.03'].join(
        '\n',
      ),
    );
    expect(refusal(() => plan('--config', config))).toMatchObject({
      source: config,
      problems: [expect.stringMatching(/^priceOverrides\.spotPricePerType: .*needs --spot on/)],
    });
    expect(plan('--config', config, '--spot', 'on').catalog.spot?.offerings).toContainEqual(
      expect.objectContaining({ typeName: 'c7i.large', pricePerHour: 0.03 }),
    );
    // The flag's file wins: the config's spot prices price nothing then, and are not held against the run.
    expect(priceIn(plan('--config', config, '--price-overrides', EXAMPLE).catalog, 'p3.2xlarge')).toBe(1.99);
  });

  it("refuses a controller config's spot discount without --spot on too, naming the config's field", () => {
    const config = file(
      'spot-discount-config.yaml',
      ['cluster: c', 'stateDir: s', 'priceOverrides:', '  spotDiscountPercent: 50'].join('\n'),
    );
    expect(refusal(() => plan('--config', config))).toMatchObject({
      source: config,
      problems: [
        'priceOverrides.spotDiscountPercent: discounts spot instances: needs --spot on (without it the runs buy on ' +
          'demand only)',
      ],
    });
    // With spot on it halves every spot price of the catalog.
    const list = plan('--spot', 'on').catalog.spot?.offerings ?? [];
    const halved = plan('--config', config, '--spot', 'on').catalog.spot?.offerings ?? [];
    expect(halved.length).toBeGreaterThan(0);
    expect(halved.map((o) => o.pricePerHour)).toEqual(list.map((o) => o.pricePerHour / 2));
  });

  it("takes a controller config's priceOverrides under --config, the flag over them", () => {
    const config = file(
      'fleetwise.yaml',
      ['cluster: c', 'stateDir: s', 'priceOverrides:', '  discountPercent: 50'].join('\n'),
    );
    const fromConfig = plan('--config', config);
    expect(priceIn(fromConfig.catalog, 'p3.2xlarge')).toBe(1.53);
    expect(fromConfig.requests[0]?.priceOverrides).toEqual({ discountPercent: 50 });
    const flagged = plan('--config', config, '--price-overrides', EXAMPLE);
    expect(priceIn(flagged.catalog, 'p3.2xlarge')).toBe(1.99);
    expect(flagged.requests[0]?.priceOverrides?.discountPercent).toBe(28);
  });

  it('bills the runs of both runtimes at the overridden prices', async () => {
    const request: RunRequest = {
      scheduler: 'no-packing',
      trace: { format: 'eva', jobs: 4, jobIds: 'controller' },
    };
    const halved: RunRequest = { ...request, priceOverrides: { discountPercent: 50 } };
    // No-Packing's choices do not change when every price halves: the same fleet, at half the bill.
    const engine = executeRun(request).summary.totalCost;
    expect(engine).toBeGreaterThan(0);
    expect(executeRun(halved).summary.totalCost).toBeCloseTo(engine / 2, 6);
    const controller = (await executeControllerRun({ ...request, runtime: 'controller' })).summary.totalCost;
    expect(controller).toBeGreaterThan(0);
    expect((await executeControllerRun({ ...halved, runtime: 'controller' })).summary.totalCost).toBeCloseTo(
      controller / 2,
      6,
    );
  });
});
