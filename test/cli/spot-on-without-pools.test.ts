/**
 * `--spot on` needs a spot market with pools: a catalog whose spot section offers none (as an older `catalog refresh`
 * wrote when it left every pool out) is no spot market. `bench bound` and `simulate` refuse it as they refuse a
 * catalog without the section: the runs would buy on demand and print on-demand figures under spot names.
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
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';

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

/** The report's spot setting of a simulate run on `catalog` with --spot on. */
function spotSetting(catalog: string) {
  const args = [
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
  ];
  return reportSettings(simulationPlan(parseSimulateArgs(args, 'test'))).spot;
}

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

  it('is refused by simulate (the built CLI), whether the section is empty or missing', async () => {
    ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
    const simulate = (catalog: string, ...more: string[]) =>
      runCli([
        'simulate',
        '--format',
        'eva',
        '--jobs',
        '3',
        '--spot',
        'on',
        '--catalog',
        catalog,
        '--scheduler',
        'skypilot-spot,no-packing',
        ...more,
      ]);
    for (const catalog of [noPools, noSection]) {
      const refused = await simulate(catalog);
      expect(refused.code, catalog).toBe(2);
      expect(refused.stdout, catalog).toBe('');
      expect(refused.stderr, catalog).toContain(
        '--spot: on needs a catalog with spot pools (a spot section with offerings; the bundled one has one)',
      );
    }
    // The same catalog with its pools runs, and its report names the snapshot it bought from.
    const withPools = catalogFile('with-pools.json', (section) => section);
    const ran = await simulate(withPools, '--json', '--parallel', '1');
    expect(ran.code, ran.stderr).toBe(0);
    const runs = (JSON.parse(ran.stdout) as { runs: { scheduler: string; spotShare?: number }[] }).runs;
    expect(runs.find((r) => r.scheduler === 'skypilot-spot')?.spotShare).toBeGreaterThan(0);
    expect(spotSetting(withPools)).toMatch(/^on \(catalog spot snapshot \d{4}-\d{2}-\d{2};/);
  }, 120_000);
});
