import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadControllerConfig } from '../../src/controller/config-loading.js';
import type { TuneJson, TuneReport, TuneRow } from '../../src/sim/report/tune-json.js';
import { CLI, ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * `fleetwise tune` measures its candidates as a controller would run them: its recommended config, run as a
 * controller config by `simulate --config`, gives tune's own figures. A small trace with multi-task jobs under a $ cap
 * that keeps jobs waiting, so co-start and placement between rounds have something to act on.
 */
const TRACE = ['--format', 'synthetic', '--jobs', '20', '--multi-task', '0.5'];
const TUNE = ['tune', ...TRACE, '--samples', '2', '--cap-dollars-per-hour', '50'];

interface SimulatedRun {
  readonly meanJctHours: number;
  readonly predErrP99: number;
  readonly unfairness: number;
}

const figures = (r: SimulatedRun | TuneRow) => ({
  meanJctHours: r.meanJctHours,
  predErrP99: r.predErrP99,
  unfairness: r.unfairness,
});

describe('fleetwise tune runs what a controller config runs (CLI subprocess)', () => {
  let dir = '';
  let byDefault: CliResult;
  let placeOff: CliResult;
  let bindWithoutPlace: CliResult;
  let badValue: CliResult;
  let asConfig: CliResult;
  let placeOffAsConfig: CliResult;
  let asQueueConfig: CliResult;
  const reportOf = (name: string): TuneReport =>
    JSON.parse(readFileSync(join(dir, name, 'tune.json'), 'utf8')) as TuneReport;
  const yamlPath = (name: string): string => join(dir, `${name}.yaml`);

  beforeAll(async () => {
    ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
    expect(existsSync(CLI), `${CLI} is missing: run npm run build`).toBe(true);
    dir = mkdtempSync(join(tmpdir(), 'fleetwise-tune-behaviours-'));
    [byDefault, placeOff, bindWithoutPlace, badValue] = await Promise.all([
      runCli([...TUNE, '--json', '--out', join(dir, 'default')]),
      runCli([...TUNE, '--json', '--place-between-rounds', 'off', '--out', join(dir, 'place-off')]),
      runCli([...TUNE, '--place-between-rounds', 'off', '--bind', 'on']),
      runCli([...TUNE, '--co-start', 'yes']),
    ]);
    for (const name of ['default', 'place-off'])
      if (existsSync(join(dir, name, 'tune.json')))
        writeFileSync(yamlPath(name), reportOf(name).controllerYaml);
    const simulate = (flag: string, name: string) =>
      runCli(['simulate', ...TRACE, '--scheduler', 'eva', flag, yamlPath(name), '--json']);
    [asConfig, placeOffAsConfig, asQueueConfig] = await Promise.all([
      simulate('--config', 'default'),
      simulate('--config', 'place-off'),
      simulate('--queue-config', 'default'),
    ]);
  }, 180_000);

  afterAll(() => {
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  const runOf = (r: CliResult): SimulatedRun => {
    expect(r.stderr).not.toMatch(/fleetwise:|Error/);
    expect(r.code).toBe(0);
    const run = (JSON.parse(r.stdout) as { runs: SimulatedRun[] }).runs[0];
    expect(run).toBeDefined();
    return run as SimulatedRun;
  };

  it("the recommended config, simulated as a controller config, gives tune's figures exactly", () => {
    expect(byDefault.code).toBe(0);
    const tuned = JSON.parse(byDefault.stdout) as TuneJson;
    expect(figures(runOf(asConfig))).toEqual(figures(tuned.recommended));
    // Run with the controller's defaults, the printed config leaves them to the controller.
    expect(Object.keys(parse(reportOf('default').controllerYaml) as object)).toEqual(['queue', 'caps']);
    // It loads as a tuned queue config too.
    runOf(asQueueConfig);
    expect(reportOf('default').settings).toMatchObject({
      coStart: 'on (controller default)',
      placeBetweenRounds: 'on (controller default)',
      bind: 'on (controller default)',
      makeBeforeBreak: 'on (controller default)',
    });
  });

  it('a behaviour turned off is run off, written in the printed config, and reproduced from it', () => {
    expect(placeOff.stderr).not.toMatch(/fleetwise:|Error/);
    expect(placeOff.code).toBe(0);
    const tuned = JSON.parse(placeOff.stdout) as TuneJson;
    expect(figures(runOf(placeOffAsConfig))).toEqual(figures(tuned.recommended));
    // The flag changed the runs: some candidate's figures differ from the same candidate's with placement on.
    const on = JSON.parse(byDefault.stdout) as TuneJson;
    expect(
      tuned.evaluated.some(
        (r) =>
          JSON.stringify(figures(r)) !==
          JSON.stringify(figures(on.evaluated.find((x) => x.id === r.id) as TuneRow)),
      ),
    ).toBe(true);
    const yaml = reportOf('place-off').controllerYaml;
    expect(parse(yaml)).toMatchObject({ placeBetweenRounds: false });
    expect(Object.keys(parse(yaml) as object)).toEqual(['queue', 'caps', 'placeBetweenRounds']);
    expect(reportOf('place-off').settings).toMatchObject({
      placeBetweenRounds: 'off',
      coStart: 'on (controller default)',
    });
    // A controller started from it runs placement off and the rest as tune ran them.
    const path = join(dir, 'controller.yaml');
    writeFileSync(path, `provider: local\nregion: us-east-1\n${yaml}`);
    const config = loadControllerConfig({ flags: { config: path }, cwd: dir, env: {} });
    expect({
      coStart: config.coStart,
      placeBetweenRounds: config.placeBetweenRounds,
      makeBeforeBreak: config.makeBeforeBreak,
    }).toEqual({ coStart: true, placeBetweenRounds: false, makeBeforeBreak: true });
  });

  it('refuses --bind on without placement between rounds, and a value other than on or off, naming the flag', () => {
    expect(bindWithoutPlace.code).toBe(2);
    expect(bindWithoutPlace.stdout).toBe('');
    expect(bindWithoutPlace.stderr).toContain(
      'binds what is placed between rounds to instances still coming up: needs --place-between-rounds on',
    );
    expect(badValue.code).toBe(2);
    expect(badValue.stderr).toContain('--co-start:');
  });
});
