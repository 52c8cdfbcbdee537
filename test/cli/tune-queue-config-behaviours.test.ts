import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { TuneJson, TuneReport, TuneRow } from '../../src/sim/report/tune-json.js';
import { ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * The config `fleetwise tune` prints with a controller behaviour turned off (`coStart: false`, …) given to `simulate
 * --queue-config`: taken, and applied, so the run is the one tune measured. Simulate runs the behaviours the file
 * leaves out off unless their flags say on, so those tune ran on (a controller config's defaults) are given as flags;
 * a controller config (`--config`) whose file leaves them out runs them on, as tune did. A small trace of multi-task
 * jobs under a $ cap that keeps jobs waiting, so each behaviour has something to act on.
 */
const TRACE = ['--format', 'synthetic', '--jobs', '20', '--multi-task', '0.5'];
const TUNE = ['tune', ...TRACE, '--samples', '1', '--cap-dollars-per-hour', '50', '--json'];

/** Each behaviour: tune's flag, the field the printed config names it by, and simulate's flag turning it on. */
const BEHAVIOURS = [
  { flag: '--co-start', field: 'coStart' },
  { flag: '--place-between-rounds', field: 'placeBetweenRounds' },
  { flag: '--bind', field: 'bindBetweenRounds' },
  { flag: '--make-before-break', field: 'makeBeforeBreak' },
] as const;
type Case = (typeof BEHAVIOURS)[number]['field'] | 'all';
/**
 * Every behaviour off, and placement between rounds alone off (the behaviour this trace's figures show: the others
 * change them only on larger traces; simulate-queue-config.test.ts checks that each of the file's fields applies).
 */
const CASES: readonly Case[] = ['all', 'placeBetweenRounds'];

/** The behaviours tune ran on in `c` (every one but those turned off), as simulate's flags. */
function onFlags(c: Case): string[] {
  if (c === 'all') return [];
  const off = BEHAVIOURS.find((b) => b.field === c);
  return BEHAVIOURS.filter((b) => b !== off)
    .filter((b) => !(b.flag === '--bind' && c === 'placeBetweenRounds'))
    .flatMap((b) => [b.flag, 'on']);
}

interface Figures {
  readonly meanJctHours: number | null;
  readonly predErrP99: number | null;
  readonly unfairness: number | null;
}
const figures = (r: Figures): Figures => ({
  meanJctHours: r.meanJctHours,
  predErrP99: r.predErrP99,
  unfairness: r.unfairness,
});

describe('simulate --queue-config with the behaviours tune printed (CLI subprocess)', () => {
  let dir = '';
  const tunes = new Map<Case, CliResult>();
  const simulated = new Map<Case, CliResult>();
  const asConfig = new Map<Case, CliResult>();
  let placementOn: CliResult | undefined;
  const yamlPath = (c: Case): string => join(dir, `${c}.yaml`);
  const reportOf = (c: Case): TuneReport =>
    JSON.parse(readFileSync(join(dir, c, 'tune.json'), 'utf8')) as TuneReport;

  beforeAll(async () => {
    ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
    dir = mkdtempSync(join(tmpdir(), 'fleetwise-tune-queue-config-'));
    const offFlags = (c: Case): string[] =>
      BEHAVIOURS.filter((b) => c === 'all' || b.field === c).flatMap((b) => [b.flag, 'off']);
    const tuned = await Promise.all(
      CASES.map((c) => runCli([...TUNE, ...offFlags(c), '--out', join(dir, c)])),
    );
    CASES.forEach((c, i) => tunes.set(c, tuned[i] as CliResult));
    for (const c of CASES)
      if (existsSync(join(dir, c, 'tune.json'))) writeFileSync(yamlPath(c), reportOf(c).controllerYaml);
    // A controller config leaving every behaviour to its defaults (on), as a controller started from tune's sections.
    const config = join(dir, 'controller.yaml');
    writeFileSync(config, 'cluster: c\nstateDir: s\n');
    const simulate = (args: readonly string[]) =>
      runCli(['simulate', ...TRACE, '--scheduler', 'eva', '--json', ...args]);
    const [flagged, configured, placedOn] = await Promise.all([
      Promise.all(CASES.map((c) => simulate(['--queue-config', yamlPath(c), ...onFlags(c)]))),
      Promise.all(CASES.map((c) => simulate(['--queue-config', yamlPath(c), '--config', config]))),
      // The file's placement off turned on again: on this trace placement changes the figures.
      simulate([
        '--queue-config',
        yamlPath('placeBetweenRounds'),
        '--config',
        config,
        '--place-between-rounds',
        'on',
      ]),
    ]);
    CASES.forEach((c, i) => simulated.set(c, flagged[i] as CliResult));
    CASES.forEach((c, i) => asConfig.set(c, configured[i] as CliResult));
    placementOn = placedOn;
  }, 600_000);

  afterAll(() => {
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  const recommended = (c: Case): Figures => {
    const r = tunes.get(c) as CliResult;
    expect(r.stderr, c).not.toMatch(/fleetwise:|Error/);
    expect(r.code, c).toBe(0);
    return figures((JSON.parse(r.stdout) as TuneJson).recommended as TuneRow);
  };
  const runOf = (r: CliResult | undefined, c: string): Figures => {
    expect(r?.stderr, c).not.toMatch(/fleetwise:|Error/);
    expect(r?.code, c).toBe(0);
    const run = (JSON.parse(r?.stdout ?? '') as { runs: Figures[] }).runs[0];
    expect(run, c).toBeDefined();
    return figures(run as Figures);
  };

  it('tune writes each behaviour it turned off', () => {
    for (const c of CASES) {
      recommended(c);
      const written = parse(reportOf(c).controllerYaml) as Record<string, unknown>;
      const off = BEHAVIOURS.filter((b) => c === 'all' || b.field === c).map((b) => b.field);
      expect(
        Object.keys(written).filter((k) => k !== 'queue' && k !== 'caps'),
        c,
      ).toEqual(off);
      for (const field of off) expect(written[field], `${c}: ${field}`).toBe(false);
    }
  });

  it("gives tune's figures from the printed config, with the behaviours tune ran on as flags", () => {
    for (const c of CASES) expect(runOf(simulated.get(c), c), c).toEqual(recommended(c));
  });

  it("gives tune's figures beside a controller config that leaves the behaviours to its defaults", () => {
    // The controller config's defaults give way to what the tuned file writes, as its other settings' do.
    for (const c of CASES) expect(runOf(asConfig.get(c), c), c).toEqual(recommended(c));
    // What the file turned off was run off: on again, the figures are others.
    expect(runOf(placementOn, 'placement on')).not.toEqual(recommended('placeBetweenRounds'));
  });
});
