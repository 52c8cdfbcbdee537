/**
 * `simulate --config FILE` (and `bench arms`, which plans through it) runs the controller config's `catalog:`, read
 * from the config file's directory as the controller reads it: `--catalog` wins over it, and a tuned queue config
 * naming another catalog is refused naming both files.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ArmsReport } from '../../src/bench/arms-report.js';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import { BUNDLED_CATALOG_PATH } from '../../src/cloud/catalog-file.js';
import type { Catalog } from '../../src/core/catalog.js';
import type { RunRequest } from '../../src/sim/run-request.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { writeScaledBundledCatalog } from '../helpers/catalogs.js';
import { refusal } from '../helpers/validation-refusal.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-config-catalog-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The bundled catalog at twice its prices (on demand and spot): every choice the same, every dollar doubled. */
const site = join(scratch, 'site');
mkdirSync(join(site, 'catalogs'), { recursive: true });
const DOUBLED = join(site, 'catalogs', 'doubled.json');
writeScaledBundledCatalog(DOUBLED, 2);

function file(path: string, text: string): string {
  writeFileSync(path, text);
  return path;
}

/** The same controller config with and without its own catalog (relative to the file, as users write it). */
const WITH_CATALOG = file(
  join(site, 'fleetwise.yaml'),
  'cluster: c\nstateDir: state\ncatalog: catalogs/doubled.json\n',
);
const WITHOUT_CATALOG = file(join(site, 'plain.yaml'), 'cluster: c\nstateDir: state\n');

const TRACE = ['--format', 'eva', '--jobs', '3', '--scheduler', 'no-packing'];
const plan = (...args: string[]) => simulationPlan(parseSimulateArgs([...TRACE, ...args], 'test'));
const priceIn = (c: Catalog, name: string) => c.types.find((t) => t.name === name)?.costPerHour;
const bundledP3 = priceIn(plan().catalog, 'p3.2xlarge') as number;

/** A tuned queue config (as `fleetwise tune` prints it) naming `catalog`. */
function tunedOn(name: string, catalog: string): string {
  return file(
    join(scratch, name),
    `queue:\n  classes:\n    - { id: all, weight: 1 }\ncatalog: ${JSON.stringify(catalog)}\n`,
  );
}

describe("simulate --config: the config's catalog", () => {
  it('plans both runtimes with the catalog the config names, read from its directory', () => {
    for (const runtime of ['engine', 'controller']) {
      const p = plan('--config', WITH_CATALOG, '--runtime', runtime);
      expect((p.requests[0] as RunRequest).catalogPath, runtime).toBe(DOUBLED);
      expect(priceIn(p.catalog, 'p3.2xlarge'), runtime).toBe(2 * bundledP3);
    }
    // A config without one runs the bundled catalog.
    expect((plan('--config', WITHOUT_CATALOG).requests[0] as RunRequest).catalogPath).toBeUndefined();
  });

  it('lets --catalog win over it', () => {
    const p = plan('--config', WITH_CATALOG, '--catalog', BUNDLED_CATALOG_PATH);
    expect((p.requests[0] as RunRequest).catalogPath).toBe(BUNDLED_CATALOG_PATH);
    expect(priceIn(p.catalog, 'p3.2xlarge')).toBe(bundledP3);
  });

  it('refuses a tuned queue config tuned on another catalog, naming both files, unless --catalog chooses', () => {
    const tuned = tunedOn('tuned-bundled.yaml', BUNDLED_CATALOG_PATH);
    expect(refusal(() => plan('--config', WITH_CATALOG, '--queue-config', tuned))).toMatchObject({
      source: `${WITH_CATALOG}: catalog`,
      problems: [
        `${DOUBLED}, but ${tuned} was tuned on ${BUNDLED_CATALOG_PATH}: give --catalog FILE to choose one, or ` +
          'make the two files name the same catalog',
      ],
    });
    const chosen = plan('--config', WITH_CATALOG, '--queue-config', tuned, '--catalog', DOUBLED);
    expect((chosen.requests[0] as RunRequest).catalogPath).toBe(DOUBLED);
    // Both naming the same catalog agree; a queue config's catalog alone still applies under a config without one.
    const same = plan('--config', WITH_CATALOG, '--queue-config', tunedOn('tuned-same.yaml', DOUBLED));
    expect((same.requests[0] as RunRequest).catalogPath).toBe(DOUBLED);
    const queueOnly = plan('--config', WITHOUT_CATALOG, '--queue-config', tuned);
    expect((queueOnly.requests[0] as RunRequest).catalogPath).toBe(BUNDLED_CATALOG_PATH);
  });
});

interface JsonRun {
  readonly totalCost: number;
}

describe('the built CLI under a config naming its catalog', () => {
  beforeAll(() => {
    ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
  });

  it("simulate bills the run at the config's catalog's prices, started from another directory", async () => {
    const cost = async (config: string): Promise<number> => {
      const r = await runCli(['simulate', ...TRACE, '--config', config, '--json'], process.env, {
        cwd: scratch,
      });
      expect(r.code, r.stderr).toBe(0);
      return ((JSON.parse(r.stdout) as { runs: JsonRun[] }).runs[0] as JsonRun).totalCost;
    };
    const bundled = await cost(WITHOUT_CATALOG);
    expect(bundled).toBeGreaterThan(0);
    expect((await cost(WITH_CATALOG)) / bundled).toBeCloseTo(2, 9);
  });

  it("bench arms runs an arm's config with its catalog", async () => {
    const r = await runCli(
      [
        'bench',
        'arms',
        '--seeds',
        '1',
        '--common',
        TRACE.join(' '),
        '--arm',
        `bundled=--config ${WITHOUT_CATALOG}`,
        '--arm',
        `doubled=--config ${WITH_CATALOG}`,
        '--json',
      ],
      process.env,
      { cwd: scratch },
    );
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as ArmsReport;
    const bundled = report.runs['bundled']?.[0]?.totalCost ?? 0;
    expect(bundled).toBeGreaterThan(0);
    expect((report.runs['doubled']?.[0]?.totalCost ?? 0) / bundled).toBeCloseTo(2, 9);
  });
});
