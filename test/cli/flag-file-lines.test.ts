/**
 * `--price-overrides FILE` and `--latency-config FILE` problems read as a controller config's do: each names the file,
 * the field with its line in the file and, for an unknown key, the field it most likely meant. Every command taking
 * the flags says so: simulate, bench arms (an arm's flags), tune and bench bound. So do `--colocation-table` files.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { planSimulateRun } from '../../src/cli/commands/bench-arms.js';
import { readColocationTableFile } from '../../src/cli/commands/colocation-table-file.js';
import { readLatencyConfigFile } from '../../src/cli/commands/sim-flags.js';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import { buildProgram } from '../../src/cli/program.js';
import { ValidationError } from '../../src/core/validation.js';
import { refusal } from '../helpers/validation-refusal.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-flag-file-lines-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let files = 0;
/** A file of `lines` (line 1 is the first). */
function file(lines: readonly string[], ext = 'yaml'): string {
  const path = join(scratch, `f${(files += 1)}.${ext}`);
  writeFileSync(path, [...lines, ''].join('\n'));
  return path;
}

const plan = (...args: string[]) =>
  simulationPlan(
    parseSimulateArgs(['--scheduler', 'no-packing', '--format', 'eva', '--jobs', '3', ...args], 'test'),
  );

/** The refusal of `simulate --price-overrides` with the file of `lines`, which must name the file. */
function pricesRefused(lines: readonly string[], ...more: string[]): readonly string[] {
  const path = file(lines);
  const e = refusal(() => plan('--price-overrides', path, ...more));
  expect(e.source).toBe(path);
  return e.problems;
}

/** The refusal of `simulate --latency-config` with the file of `lines`, which must name the file. */
function latencyRefused(lines: readonly string[], ext = 'yaml'): readonly string[] {
  const path = file(lines, ext);
  const e = refusal(() => plan('--latency-config', path));
  expect(e.source).toBe(path);
  return e.problems;
}

describe('a --price-overrides file', () => {
  it('names a misspelled field with its line and the field it likely meant, beside a bad value', () => {
    expect(
      pricesRefused([
        '# Savings Plan',
        'discountPercnt: 28', // line 2
        'pricePerType:',
        '  c7i.large: -1', // line 4
      ]),
    ).toEqual([
      'pricePerType.c7i.large (line 4): must be at least $0.0001/h (a price of 0 is no price)',
      'discountPercnt (line 2): unknown field, did you mean discountPercent?',
    ]);
  });

  it('reads JSON with its lines too', () => {
    const path = file(['{', '  "discountPercent": 150', '}'], 'json');
    expect(refusal(() => plan('--price-overrides', path)).problems).toEqual([
      'discountPercent (line 2): must be under 100 (a 100% discount would make instances free)',
    ]);
  });

  it("names a controller config's priceOverrides: fields by their path and line in that file", () => {
    expect(
      pricesRefused([
        'cluster: prod',
        'stateDir: /var/lib/fleetwise',
        'priceOverrides:',
        '  discountPercent: 20',
        '  pricePerTyp:', // line 5
        '    c7i.large: 0.05',
      ]),
    ).toEqual(['priceOverrides.pricePerTyp (line 5): unknown field, did you mean pricePerType?']);
  });

  it('names a type the catalog lacks with its line, bare or in a priceOverrides: section', () => {
    expect(pricesRefused(['discountPercent: 10', 'pricePerType:', '  p4d.24xlarge: 20'])).toEqual([
      'pricePerType.p4d.24xlarge (line 3): not an instance type of the catalog',
    ]);
    expect(
      pricesRefused(
        ['cluster: c', 'priceOverrides:', '  spotPricePerType:', '    x9.large: 0.1'],
        '--spot',
        'on',
      ),
    ).toEqual(['priceOverrides.spotPricePerType.x9.large (line 4): not an instance type of the catalog']);
  });

  it('names a misspelled priceOverrides: as such, and a controller setting in a file without prices', () => {
    const problems = pricesRefused(['cluster: c', 'priceOverides:', '  discountPercent: 20']);
    expect(problems).toEqual([
      expect.stringMatching(/^cluster \(line 1\): a controller config's setting: /),
      'priceOverides (line 2): unknown field, did you mean priceOverrides?',
    ]);
  });

  it('is named the same way by an arm of bench arms', () => {
    const path = file(['discountPercnt: 28']);
    expect(
      refusal(() => planSimulateRun(['--scheduler', 'eva', '--price-overrides', path], 'arm b', 'b')),
    ).toMatchObject({
      source: path,
      problems: ['discountPercnt (line 1): unknown field, did you mean discountPercent?'],
    });
  });

  it('is named the same way by tune and bench bound', async () => {
    const typo = file(['discountPercnt: 28']);
    const unknownType = file(['pricePerType:', '  x9.large: 1']);
    const commands = [
      ['tune', '--format', 'eva', '--jobs', '3', '--cap-instances', '3'],
      ['bench', 'bound', '--format', 'eva', '--jobs', '3'],
    ];
    for (const args of commands) {
      expect(await cliRefusal([...args, '--price-overrides', typo]), args[0]).toMatchObject({
        source: typo,
        problems: ['discountPercnt (line 1): unknown field, did you mean discountPercent?'],
      });
      expect(await cliRefusal([...args, '--price-overrides', unknownType]), args[0]).toMatchObject({
        source: unknownType,
        problems: ['pricePerType.x9.large (line 2): not an instance type of the catalog'],
      });
    }
  });
});

/** The ValidationError the program's command line `args` is refused with (before it runs anything). */
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

describe('a --latency-config file', () => {
  it('names a misspelled field with its line and the field it likely meant, at any depth', () => {
    expect(
      latencyRefused([
        'zones: 3',
        'domainRttMicroseconds:',
        '  crosszone: 900', // line 3
        'episode:', // line 4
        '  perInstancePerDay: 2',
      ]),
    ).toEqual([
      'domainRttMicroseconds.crosszone (line 3): unknown field, did you mean cross-zone?',
      'episode (line 4): unknown field, did you mean episodes?',
    ]);
  });

  it('names a bad value with its line, in YAML or JSON, and reads a good one as written', () => {
    expect(latencyRefused(['noise:', '  intervalSeconds: 60', 'episodes:', '  factor: [3, 2]'])).toEqual([
      'episodes.factor (line 4): low must not exceed high',
    ]);
    expect(latencyRefused(['{', '  "zones": 3,', '  "measurementWindowSeconds": 0', '}'], 'json')).toEqual([
      'measurementWindowSeconds (line 3): must be > 0 s',
    ]);
    expect(readLatencyConfigFile(file(['zones: 2', 'episodes: { perInstancePerDay: 1 }']))).toEqual({
      zones: 2,
      episodes: { perInstancePerDay: 1 },
    });
    // A file of comments only restates the defaults.
    expect(readLatencyConfigFile(file(['# the default network']))).toEqual({});
  });

  it('names a key given twice with the line of the repeat', () => {
    expect(latencyRefused(['zones: 3', 'zones: 2'])).toEqual([
      'not valid YAML: the key "zones" is given more than once, again at line 2, column 1',
    ]);
  });

  it('is named the same way by an arm of bench arms', () => {
    const path = file(['zones: 3', 'noize: {}']);
    expect(
      refusal(() => planSimulateRun(['--scheduler', 'eva', '--latency-config', path], 'arm b', 'b')),
    ).toMatchObject({ source: path, problems: ['noize (line 2): unknown field, did you mean noise?'] });
  });
});

describe('a --colocation-table file', () => {
  it('names a bad entry, a misspelled field (with the one it likely meant) and a repeated entry with their lines', () => {
    const entry = (target: string, mean: number): string[] => [
      '  {',
      `   "target": "${target}",`,
      '   "others": ["b"],',
      `   "mean": ${mean},`,
      '   "count": 3',
      '  },',
    ];
    const path = file(
      [
        '{',
        ' "defaultRate": 0.95,',
        ' "entries": [',
        ...entry('a', 0.9), // lines 4-9
        ...entry('c', -0.5), // lines 10-15: mean on line 13
        '  {"target": "a", "others": ["b"], "mean": 0.8, "count": 2},', // line 16
        '  {"target": "d", "others": ["b"], "meen": 0.8, "count": 2}', // line 17
        ' ]',
        '}',
      ],
      'json',
    );
    const e = refusal(() => readColocationTableFile(path));
    expect(e.source).toBe(path);
    expect(e.problems).toEqual([
      'entries.1.mean (line 13): must be > 0',
      'entries.3.mean (line 17): Invalid input: expected number, received undefined',
      'entries.3.meen (line 17): unknown field, did you mean mean?',
    ]);
    // Entries well formed, one of them twice.
    const twice = file([
      'defaultRate: 0.95',
      'entries:',
      '  - { target: a, others: [b], mean: 0.9, count: 3 }',
      '  - { target: c, others: [b], mean: 0.7, count: 1 }',
      '  - { target: a, others: [b], mean: 0.8, count: 2 }', // line 5
    ]);
    expect(refusal(() => readColocationTableFile(twice)).problems).toEqual([
      'entries.2 (line 5): a beside b again (entries.0 has it)',
    ]);
  });
});
