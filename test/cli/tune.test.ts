import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { BUNDLED_CATALOG_PATH, loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { loadControllerConfig } from '../../src/controller/config-loading.js';
import { admitByOf, capsOf } from '../../src/controller/settings.js';
import { dominates } from '../../src/queue/tune.js';
import { parseWfqConfig } from '../../src/queue/wfq.js';
import type { TuneJson, TuneReport, TuneRow } from '../../src/sim/report/tune-json.js';
import { CLI, ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * `fleetwise tune` as users run it: the built CLI in a subprocess (worker threads load dist/sim/run-worker.js).
 * One small search (20 synthetic jobs, 3 candidates, a binding 3-instance cap) feeds most checks.
 */
const TINY = ['tune', '--format', 'synthetic', '--jobs', '20', '--samples', '3', '--cap-instances', '3'];

const cli = (args: readonly string[]): Promise<CliResult> => runCli(args);

const objectives = (r: TuneRow) => ({
  meanJctHours: r.meanJctHours,
  predErrP99: r.predErrP99,
  unfairness: r.unfairness,
});

describe('fleetwise tune (CLI subprocess)', () => {
  let outDir = '';
  let run: CliResult;
  let parsed: TuneJson;
  let text: CliResult;
  let noCap: CliResult;
  let badFlags: CliResult;
  let emptyItem: CliResult;
  let overridden: CliResult;
  let badOverrides: CliResult;
  let spotOverrides: CliResult;
  let tinyCap: CliResult;
  let byDefault: CliResult;
  let byStandalone: CliResult;
  let defaultDir = '';
  let standaloneDir = '';
  let tunedUnder: CliResult;
  let admitByUncapped: CliResult;
  const savingsPlan = join(PROJECT_ROOT, 'examples', 'prices', 'savings-plan.yaml');

  // All subprocesses at once: the small ones are mostly CLI start-up, which overlaps the search's simulations.
  beforeAll(async () => {
    ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
    expect(existsSync(CLI), `${CLI} is missing: run npm run build`).toBe(true);
    outDir = mkdtempSync(join(tmpdir(), 'fleetwise-tune-'));
    const badPrices = join(outDir, 'bad-prices.yaml');
    writeFileSync(badPrices, 'pricePerType:\n  x9.large: 1\n');
    const spotPrices = join(outDir, 'spot-prices.yaml');
    writeFileSync(spotPrices, 'spotPricePerType:\n  c7i.large: 0.03\n');
    defaultDir = join(outDir, 'default');
    standaloneDir = join(outDir, 'standalone');
    // A catalog given relative to where tune runs, which is not where the printed config will be read.
    mkdirSync(join(outDir, 'catalogs'));
    copyFileSync(BUNDLED_CATALOG_PATH, join(outDir, 'catalogs', 'mine.json'));
    // One candidate under a $ cap that binds: how jobs are sized against it changes who waits.
    const dollars = ['tune', '--format', 'synthetic', '--jobs', '20', '--samples', '1'];
    const underDollars = [...dollars, '--cap-dollars-per-hour', '20', '--json'];
    [
      run,
      text,
      noCap,
      badFlags,
      emptyItem,
      overridden,
      badOverrides,
      spotOverrides,
      tinyCap,
      byDefault,
      byStandalone,
      tunedUnder,
      admitByUncapped,
    ] = await Promise.all([
      cli([...TINY, '--json', '--out', outDir]),
      cli([
        'tune',
        '--format',
        'synthetic',
        '--jobs',
        '8',
        '--samples',
        '1',
        '--classes',
        '2',
        '--cap-instances',
        '2',
      ]),
      cli(['tune', '--format', 'synthetic', '--jobs', '5', '--json']),
      cli([
        ...TINY,
        '--samples',
        '0',
        '--classes',
        '1,9',
        '--prefer',
        'best',
        '--scheduler',
        'nope',
        '--orderings',
        'lifo',
        '--admit-by',
        'packed',
      ]),
      cli([...TINY, '--classes', '1,,2']),
      cli([
        ...TINY,
        '--samples',
        '1',
        '--price-overrides',
        join(PROJECT_ROOT, 'examples', 'prices', 'savings-plan.yaml'),
        '--json',
      ]),
      cli([...TINY, '--price-overrides', badPrices]),
      cli([...TINY, '--price-overrides', spotPrices]),
      cli([
        'tune',
        '--format',
        'synthetic',
        '--jobs',
        '20',
        '--samples',
        '3',
        '--cap-dollars-per-hour',
        '0.01',
      ]),
      cli([...underDollars, '--out', defaultDir]),
      cli([...underDollars, '--admit-by', 'standalone', '--out', standaloneDir]),
      runCli(
        [
          ...dollars,
          '--scheduler',
          'no-packing',
          '--round-seconds',
          '60',
          '--price-overrides',
          savingsPlan,
          '--catalog',
          join('catalogs', 'mine.json'),
          '--cap-dollars-per-hour',
          '20',
        ],
        process.env,
        { cwd: outDir },
      ),
      cli([...TINY, '--admit-by', 'standalone']),
    ]);
    parsed = JSON.parse(run.stdout) as TuneJson;
  }, 120_000);

  afterAll(() => {
    if (outDir !== '') rmSync(outDir, { recursive: true, force: true });
  });

  it('--json prints exactly one JSON object {front, recommended, evaluated}', () => {
    expect(run.stderr).not.toMatch(/Error|fleetwise:/);
    expect(run.code).toBe(0);
    expect(run.stdout.trimEnd().split('\n')).toHaveLength(1);
    expect(Object.keys(parsed)).toEqual(['front', 'recommended', 'evaluated']);
    expect(parsed.evaluated.map((r) => r.id)).toEqual(['c0', 'c1', 'c2']);
    // Progress went to stderr: one line per candidate when stderr is not a terminal, with elapsed and left.
    const lines = run.stderr.match(/^tune: c\d+ done; .*$/gm) ?? [];
    expect(lines).toHaveLength(3);
    for (const line of lines)
      expect(line).toMatch(
        /\d\/3 candidates done \(\d+%\), \d+(m\d\ds|s) elapsed, (about \S+ left|estimating)/,
      );
    expect(lines.at(-1)).toMatch(/3\/3 candidates done \(100%\), .* about 0s left$/);
  });

  it('simulates every candidate with predictions under the cap', () => {
    for (const r of parsed.evaluated) {
      expect(r.error).toBeNull();
      expect(r.meanJctHours).toBeGreaterThan(0);
      expect(r.predErrP99).toEqual(expect.any(Number));
      expect(r.unfairness).toEqual(expect.any(Number));
      expect(() => parseWfqConfig(r.config)).not.toThrow();
    }
    // The first candidate is one FIFO class: its mean JCT differs from the two-class default's under a binding cap.
    expect(parsed.evaluated[0]?.classes).toBe(1);
    expect(parsed.evaluated[1]?.classes).toBe(2);
    expect(parsed.evaluated[0]?.meanJctHours).not.toBe(parsed.evaluated[1]?.meanJctHours);
  });

  it('the front is non-empty, non-dominated, and covers every dominated point', () => {
    expect(parsed.front.length).toBeGreaterThan(0);
    expect(parsed.front).toEqual(parsed.evaluated.filter((r) => r.onFront));
    for (const f of parsed.front)
      for (const q of parsed.evaluated) expect(dominates(objectives(q), objectives(f))).toBe(false);
    for (const r of parsed.evaluated.filter((x) => !x.onFront))
      expect(parsed.front.some((f) => dominates(objectives(f), objectives(r)))).toBe(true);
    expect(parsed.front.map((r) => r.id)).toContain(parsed.recommended.id);
    expect(parsed.recommended.preference).toBe('balanced');
  });

  it('--out writes tune.json (with the controller snippet) and a self-contained tune.html', () => {
    const report = JSON.parse(readFileSync(join(outDir, 'tune.json'), 'utf8')) as TuneReport;
    expect(report.evaluated).toEqual(parsed.evaluated);
    expect(report.settings).toMatchObject({ jobs: 20, capInstances: 3, samples: 3, scheduler: 'eva' });
    const doc = parse(report.controllerYaml) as { queue: unknown };
    expect(parseWfqConfig(doc.queue)).toEqual(parsed.recommended.config);
    const html = readFileSync(join(outDir, 'tune.html'), 'utf8');
    expect(html.match(/<svg /g)).toHaveLength(2);
    const markup = html.replace(/(<script\b[^>]*>)[\s\S]*?(<\/script>)/g, '$1$2');
    expect(markup).not.toMatch(/https?:\/\/(?!www\.w3\.org)|\ssrc=|<link/);
    expect(html.match(/<tbody>[\s\S]*<\/tbody>/)?.[0].match(/<tr/g)).toHaveLength(3);
  });

  it('without --json prints the front and the recommended config as a controller `queue:` section', () => {
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/8 jobs; eva under 2 instances; 1 config simulated, 1 on the Pareto front/);
    const yaml = text.stdout.slice(text.stdout.indexOf('# controller config:'));
    const doc = parse(yaml) as { queue: unknown };
    const config = parseWfqConfig(doc.queue);
    expect(config.classes.map((c) => c.weight)).toEqual([0.85, 0.15]);
    // Beside it, the caps it was tuned under and how they sized jobs, where the controller reads them.
    expect((parse(yaml) as { caps: unknown }).caps).toEqual({ maxInstances: 2, admitBy: 'plan-cost' });
    // Run with the defaults, it leaves the controller's own defaults in place.
    expect(Object.keys(parse(yaml) as object)).toEqual(['queue', 'caps']);
  });

  it('prints the scheduler, period, catalog and prices it ran with where a controller config takes them', () => {
    expect(tunedUnder.stderr).not.toMatch(/Error|fleetwise:/);
    expect(tunedUnder.code).toBe(0);
    const yaml = tunedUnder.stdout.slice(tunedUnder.stdout.indexOf('# controller config:'));
    // Read as the controller reads it, from another directory than tune ran in.
    const configDir = join(outDir, 'elsewhere');
    mkdirSync(configDir);
    const path = join(configDir, 'fleetwise.yaml');
    writeFileSync(path, `provider: local\nregion: us-east-1\n${yaml}`);
    const config = loadControllerConfig({
      flags: { config: path },
      cwd: PROJECT_ROOT,
      env: {},
      catalog: loadCatalogFile(),
    });
    expect(config.scheduler.name).toBe('no-packing');
    expect(config.roundSeconds).toBe(60);
    expect(config.catalog).toBe(join(outDir, 'catalogs', 'mine.json'));
    expect(config.priceOverrides).toEqual({
      discountPercent: 28,
      pricePerType: { 'p3.2xlarge': 1.99, 'c7i.large': 0.056 },
    });
    expect(capsOf(config.caps)).toEqual({ maxCostPerHour: 20 });
    const recommended = (parse(yaml) as { queue: unknown }).queue;
    expect(config.queue).toEqual(parseWfqConfig(recommended));
  });

  it("sizes jobs against a $ cap as --admit-by says, by default as the controller's own default", () => {
    for (const r of [byDefault, byStandalone]) {
      expect(r.stderr).not.toMatch(/Error|fleetwise:/);
      expect(r.code).toBe(0);
    }
    const reportOf = (dir: string): TuneReport =>
      JSON.parse(readFileSync(join(dir, 'tune.json'), 'utf8')) as TuneReport;
    const byDefaultReport = reportOf(defaultDir);
    const standaloneReport = reportOf(standaloneDir);
    expect(byDefaultReport.settings['admitBy']).toBe('plan-cost');
    expect(standaloneReport.settings['admitBy']).toBe('standalone');
    // The runs were sized so: the same candidate, other jobs waiting.
    const jct = (stdout: string) => (JSON.parse(stdout) as TuneJson).evaluated[0]?.meanJctHours;
    expect(jct(byDefault.stdout)).toEqual(expect.any(Number));
    expect(jct(byStandalone.stdout)).not.toBe(jct(byDefault.stdout));

    // The printed config gives a controller those caps and that sizing; without admitBy, the controller's default
    // is what tune simulated by default.
    const configFrom = (yaml: string, name: string) => {
      const path = join(outDir, name);
      writeFileSync(path, `provider: local\nregion: us-east-1\n${yaml}`);
      return loadControllerConfig({ flags: { config: path }, cwd: outDir, env: {} });
    };
    const standaloneConfig = configFrom(standaloneReport.controllerYaml, 'standalone.yaml');
    expect(admitByOf(standaloneConfig)).toBe('standalone');
    expect(capsOf(standaloneConfig.caps)).toEqual({ maxCostPerHour: 20 });
    const unsaid = byDefaultReport.controllerYaml.replace(/^ {2}admitBy: .*\n/m, '');
    expect(unsaid).not.toContain('admitBy');
    expect(admitByOf(configFrom(unsaid, 'unsaid.yaml'))).toBe(byDefaultReport.settings['admitBy']);
  });

  it('searches at the prices --price-overrides gives, and refuses overrides the catalog cannot take', () => {
    expect(overridden.code).toBe(0);
    // The same first candidate, at 28% off every price (and reserved prices lower still): at most 72% of the cost.
    const anchorCost = (json: TuneJson): number | undefined =>
      json.evaluated.find((r) => r.id === 'c0')?.totalCost ?? undefined;
    const listed = anchorCost(parsed);
    const discounted = anchorCost(JSON.parse(overridden.stdout) as TuneJson);
    expect(listed).toBeGreaterThan(0);
    expect(discounted).toBeLessThanOrEqual((listed ?? 0) * 0.72 + 1e-9);
    expect(badOverrides.code).toBe(2);
    expect(badOverrides.stderr).toContain(
      'pricePerType.x9.large (line 2): not an instance type of the catalog',
    );
    // Spot prices, which tune's on-demand runs would never use, are refused as the flag's, not blamed on the catalog.
    expect(spotOverrides.code).toBe(2);
    expect(spotOverrides.stderr).toMatch(
      /invalid input: \S*spot-prices\.yaml\n {2}- spotPricePerType \(line 1\): prices spot instances: tune simulates on-demand capacity only/,
    );
  });

  it('requires a cap, naming both flags', () => {
    expect(noCap.code).toBe(2);
    expect(noCap.stdout).toBe('');
    expect(noCap.stderr).toContain('--cap-dollars-per-hour / --cap-instances: give at least one cap');
  });

  it('refuses --admit-by without a $/hour cap, which it would size no job against, as simulate does', () => {
    expect(admitByUncapped.code).toBe(2);
    expect(admitByUncapped.stdout).toBe('');
    expect(admitByUncapped.stderr).toContain(
      'invalid input: --admit-by\n  - sizes waiting jobs against the $/hour cap: needs --cap-dollars-per-hour',
    );
    expect(admitByUncapped.stderr).not.toMatch(/candidates done|failed to simulate/);
  });

  it('refuses caps no job fits under alone before searching, as simulate does', () => {
    expect(tinyCap.code).toBe(2);
    expect(tinyCap.stdout).toBe('');
    expect(tinyCap.stderr).toContain(
      'invalid input: --cap-dollars-per-hour 0.01\n  - 20 of 20 jobs can never be admitted: alone, each needs more ' +
        'than the cap',
    );
    expect(tinyCap.stderr).toContain('raise the cap or leave those jobs out of the trace');
    // Refused before any candidate was simulated.
    expect(tinyCap.stderr).not.toMatch(/candidates done|failed to simulate/);
  });

  it('names the flag and the reason for bad option values', () => {
    expect(badFlags.code).toBe(2);
    expect(badFlags.stdout).toBe('');
    expect(badFlags.stderr).toContain('--samples: must be ≥ 1');
    expect(badFlags.stderr).toContain('--classes item 2: must be ≤ 5');
    expect(badFlags.stderr).toContain('--prefer: must be one of balanced, jct, pred, fair');
    expect(badFlags.stderr).toContain('--scheduler: must be one of eva,');
    expect(badFlags.stderr).toContain('--orderings item 1: must be one of fifo, srpt');
    expect(badFlags.stderr).toContain('--admit-by: must be one of standalone, plan-cost');

    // A typo in a list is refused, not dropped (it would search other class counts than asked for).
    expect(emptyItem.code).toBe(2);
    expect(emptyItem.stderr).toContain('--classes: an empty item: two commas in a row, or one at an end');
  });
});
