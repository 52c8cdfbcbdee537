/**
 * `--spot on` needs a spot market with pools: a catalog whose spot section offers none (as an older `catalog refresh`
 * wrote when it left every pool out) is no spot market. `bench bound` refuses it as it refuses a catalog without the
 * section; `simulate` runs on demand and its report says there were no spot prices.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BUNDLED_CATALOG_PATH } from '../../src/cloud/catalog-file.js';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import { reportSettings } from '../../src/cli/commands/simulate-report-settings.js';
import { buildProgram } from '../../src/cli/program.js';
import { ValidationError } from '../../src/core/validation.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-spot-on-without-pools-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The bundled catalog with its spot section as `spot` makes it (undefined: left out). */
function catalogFile(name: string, spot: (section: Record<string, unknown>) => unknown): string {
  const bundled = JSON.parse(readFileSync(BUNDLED_CATALOG_PATH, 'utf8')) as Record<string, unknown>;
  const { spot: section, ...rest } = bundled;
  const path = join(scratch, name);
  const replaced = spot(section as Record<string, unknown>);
  writeFileSync(path, JSON.stringify(replaced === undefined ? rest : { ...rest, spot: replaced }));
  return path;
}

const noPools = catalogFile('no-pools.json', (section) => ({ ...section, offerings: [] }));
const noSection = catalogFile('no-section.json', () => undefined);

async function cliRefusal(args: readonly string[]): Promise<ValidationError> {
  const program = await buildProgram(false, args[0]);
  try {
    await program.parseAsync(['node', 'fleetwise', ...args]);
  } catch (e) {
    if (e instanceof ValidationError) return e;
    throw e;
  }
  throw new Error(`expected ${args.join(' ')} to be refused`);
}

describe('--spot on with a catalog that has no spot pools', () => {
  it('is refused by bench bound, whether the section is empty or missing', async () => {
    for (const catalog of [noPools, noSection])
      expect(
        await cliRefusal([
          'bench',
          'bound',
          '--format',
          'eva',
          '--jobs',
          '3',
          '--spot',
          'on',
          '--catalog',
          catalog,
        ]),
        catalog,
      ).toMatchObject({
        source: 'fleetwise bench bound options',
        problems: [
          '--spot: on needs a catalog with spot pools (a spot section with offerings; the bundled one has one)',
        ],
      });
  });

  it("is reported by simulate as no spot prices, not as the section's snapshot", () => {
    const spotOf = (catalog: string) =>
      reportSettings(
        simulationPlan(
          parseSimulateArgs(
            [
              '--scheduler',
              'no-packing',
              '--format',
              'eva',
              '--jobs',
              '3',
              '--spot',
              'on',
              '--catalog',
              catalog,
            ],
            'test',
          ),
        ),
      ).spot;
    for (const catalog of [noPools, noSection])
      expect(spotOf(catalog), catalog).toMatch(/^on \(no spot prices in the catalog;/);
    const withPools = catalogFile('with-pools.json', (section) => section);
    expect(spotOf(withPools)).toMatch(/^on \(catalog spot snapshot \d{4}-\d{2}-\d{2};/);
  });
});
