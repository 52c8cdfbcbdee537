import {
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { SCHEDULER_STATE_KEY } from '../../src/controller/scheduler-state.js';
import type { JsonValue } from '../../src/controller/state-store.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { ColocationTable, type SerializedColocationTable } from '../../src/scheduler/colocation-table.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import type { FleetwiseTraceDocument } from '../../src/sim/traces/fleetwise-json.js';
import type { JobOutcome } from '../../src/world/run-result.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { exportedJobsOf, writeJobHistory, type JobHistory } from '../helpers/job-history.js';

/**
 * "Simulate my workload" as users run it (`node dist/cli/main.js` in a subprocess): a directory of job specs, and a
 * controller's own history exported with `fleetwise export-trace` and replayed in both runtimes.
 */

const tmp = mkdtempSync(join(tmpdir(), 'fleetwise-simulate-history-'));
const example = (name: string): string => join(PROJECT_ROOT, 'examples', 'jobs', name);

let stateDir = '';
let history: JobHistory;

beforeAll(() => {
  ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
  stateDir = join(tmp, 'state');
  mkdirSync(stateDir);
  let now = 0;
  const store = new SqliteStateStore(join(stateDir, 'state.db'), { nowSeconds: () => now });
  history = writeJobHistory(store, { set: (t) => void (now = t) });
  store.close();
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/**
 * A copy of the shared state in a new directory, with a co-location table saved as the controller saves it after a
 * round (Eva's whole learned state, the table in it).
 */
function learnedState(name: string): { readonly dir: string; readonly table: ColocationTable } {
  const dir = join(tmp, name);
  mkdirSync(dir);
  copyFileSync(join(stateDir, 'state.db'), join(dir, 'state.db'));
  const table = new ColocationTable(0.9);
  table.record('counter', ['counter'], 0.8);
  const saved = new EvaScheduler(loadCatalogFile(), { learnedColocation: table.toJSON() }).exportState();
  const store = new SqliteStateStore(join(dir, 'state.db'));
  store.setValue(SCHEDULER_STATE_KEY, saved as unknown as JsonValue);
  store.close();
  return { dir, table };
}

/** Per-job outcomes of each runtime's run, from report.json (`--out`). */
async function simulateJobs(
  traceArgs: readonly string[],
  runtime: 'engine' | 'controller',
): Promise<JobOutcome[]> {
  const out = join(tmp, `out-${runtime}-${Math.random().toString(36).slice(2)}`);
  const result = await runCli([
    'simulate',
    ...traceArgs,
    '--scheduler',
    'no-packing',
    '--runtime',
    runtime,
    '--json',
    '--out',
    out,
  ]);
  expect(result.code, result.stderr).toBe(0);
  const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as {
    details: Record<string, { jobs: JobOutcome[] }>;
  };
  return report.details['no-packing']?.jobs ?? [];
}

describe('fleetwise export-trace → simulate (CLI subprocess)', () => {
  it('exports what ran and replays it in the engine and the controller with the same jobs, arrivals and durations', async () => {
    const file = join(tmp, 'history.json');
    const exported = await runCli(['export-trace', '--state-dir', stateDir, '--out', file]);
    expect(exported.code, exported.stderr).toBe(0);
    expect(exported.stdout).toBe('');
    expect(exported.stderr).toMatch(/exported 3 job\(s\) \(2 measured, 1 declared\)/);
    for (const id of history.skipped) expect(exported.stderr).toContain(`${id}: `);

    const document = JSON.parse(readFileSync(file, 'utf8')) as FleetwiseTraceDocument;
    expect(document.format).toBe('fleetwise-trace/v1');
    expect(document.source).toBe(stateDir);
    expect(exportedJobsOf(document)).toEqual(history.exported);

    // Without --format: the JSON's format field says it is a fleetwise trace, not an Eva one.
    const [engine, controller] = await Promise.all([
      simulateJobs(['--trace', file], 'engine'),
      simulateJobs(['--trace', file, '--format', 'fleetwise'], 'controller'),
    ]);
    for (const jobs of [engine, controller]) {
      expect(jobs.map((j) => j.arrivalSeconds)).toEqual(history.exported.map((j) => j.arrivalSeconds));
      jobs.forEach((j, i) => {
        const expected = history.exported[i];
        // No-Packing runs each job alone: its JCT is its duration plus the launch and start delays.
        expect(j.jctSeconds).toBeGreaterThanOrEqual(expected?.durationSeconds ?? Infinity);
        expect(j.jctSeconds).toBeLessThan((expected?.durationSeconds ?? 0) + 900);
      });
    }
    expect(engine.map((j) => j.id)).toEqual(history.exported.map((j) => j.id));
    // The two runtimes agree job by job (No-Packing never moves a job).
    controller.forEach((j, i) => expect(j.jctSeconds).toBeCloseTo(engine[i]?.jctSeconds ?? 0, 0));
  }, 120_000);

  it('replays a pipeline in order in both runtimes: a step waits for the one it depends on, and a bad one is named', async () => {
    const step = (id: string, arrivalSeconds: number, dependsOn?: string[]) => ({
      id,
      name: id,
      arrivalSeconds,
      durationSeconds: 1800,
      ...(dependsOn === undefined ? {} : { dependsOn }),
      tasks: [{ name: 'main', workload: 'resnet18', demand: { any: [1, 4, 24] } }],
    });
    const file = join(tmp, 'pipeline.json');
    const pipeline = [step('prepare', 0), step('train', 60, ['prepare']), step('report', 120, ['train'])];
    writeFileSync(file, JSON.stringify({ format: 'fleetwise-trace/v1', jobs: pipeline }));
    const runs = await Promise.all([
      simulateJobs(['--trace', file], 'engine'),
      simulateJobs(['--trace', file], 'controller'),
    ]);
    for (const jobs of runs) {
      const [prepare, train, report] = jobs as [JobOutcome, JobOutcome, JobOutcome];
      expect(train.startSeconds as number).toBeGreaterThan(prepare.endSeconds as number);
      expect(report.startSeconds as number).toBeGreaterThan(train.endSeconds as number);
      // Its JCT counts from its arrival: the steps before it are in it.
      expect(report.jctSeconds as number).toBeGreaterThan(3 * 1800);
    }
    expect(runs[1]?.map((j) => j.endSeconds)).toEqual(runs[0]?.map((j) => j.endSeconds));

    writeFileSync(
      file,
      JSON.stringify({ format: 'fleetwise-trace/v1', jobs: [step('train', 0, ['prepare'])] }),
    );
    const bad = await runCli(['simulate', '--trace', file, '--scheduler', 'eva']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain(file);
    expect(bad.stderr).toContain('jobs.0.dependsOn.0: prepare is not a job listed before this one');
  }, 120_000);

  it('writes the trace to stdout without --out', async () => {
    const out = await runCli(['export-trace', '--state-dir', stateDir]);
    expect(out.code, out.stderr).toBe(0);
    expect((JSON.parse(out.stdout) as FleetwiseTraceDocument).jobs).toHaveLength(3);
  });

  it('writes the co-location table the controller learned with --colocation-table, which a replay starts from', async () => {
    const { dir: learnedDir, table } = learnedState('learned-state');
    const outputs = join(tmp, 'learned-out');
    mkdirSync(outputs);
    const trace = join(outputs, 'history.json');
    const tableFile = join(outputs, 'table.json');
    const again = join(outputs, 'again.json');
    const out = await runCli([
      'export-trace',
      '--state-dir',
      learnedDir,
      '--out',
      trace,
      '--colocation-table',
      tableFile,
    ]);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stderr).toContain(`and the co-location table the controller learned to ${tableFile}`);
    expect(JSON.parse(readFileSync(tableFile, 'utf8'))).toEqual(table.toJSON());
    const replay = await runCli([
      'simulate',
      '--trace',
      trace,
      '--scheduler',
      'eva',
      '--colocation-table',
      tableFile,
      '--save-colocation-table',
      again,
      '--json',
    ]);
    expect(replay.code, replay.stderr).toBe(0);
    // What the controller learned is still there after the replay.
    const kept = (JSON.parse(readFileSync(again, 'utf8')) as SerializedColocationTable).entries.find(
      (e) => e.target === 'counter' && e.others.join() === 'counter',
    );
    expect(kept?.count).toBeGreaterThanOrEqual(1);

    // A controller that saved no learned state: named, and nothing written.
    const none = join(tmp, 'none.json');
    const refused = await runCli([
      'export-trace',
      '--state-dir',
      stateDir,
      '--out',
      none,
      '--colocation-table',
      join(tmp, 'none-table.json'),
    ]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--colocation-table[\s\S]*holds no learned co-location/);
    expect(existsSync(none)).toBe(false);
  }, 120_000);

  it('refuses --out and --colocation-table naming one file, by another path or through a symlink', async () => {
    const { dir } = learnedState('one-file-state');
    const outputs = join(tmp, 'one-file-out');
    mkdirSync(outputs);
    const target = join(outputs, 'trace.json');
    writeFileSync(target, 'kept\n');
    symlinkSync(target, join(outputs, 'link.json'));
    const [same, linked] = await Promise.all([
      runCli(
        [
          'export-trace',
          '--state-dir',
          dir,
          '--out',
          'same.json',
          '--colocation-table',
          join(outputs, 'same.json'),
        ],
        process.env,
        { cwd: outputs },
      ),
      runCli([
        'export-trace',
        '--state-dir',
        dir,
        '--out',
        target,
        '--colocation-table',
        join(outputs, 'link.json'),
      ]),
    ]);
    expect(same.code).toBe(2);
    expect(same.stderr).toContain('invalid input: --out / --colocation-table');
    expect(same.stderr).toContain('are the same file');
    expect(existsSync(join(outputs, 'same.json'))).toBe(false);
    expect(linked.code).toBe(2);
    expect(linked.stderr).toContain('--out / --colocation-table');
    expect(readFileSync(target, 'utf8')).toBe('kept\n');

    // Two files: both written, as before.
    const apart = await runCli(
      ['export-trace', '--state-dir', dir, '--out', 'trace.json', '--colocation-table', 'table.json'],
      process.env,
      { cwd: outputs },
    );
    expect(apart.code, apart.stderr).toBe(0);
    expect((JSON.parse(readFileSync(target, 'utf8')) as FleetwiseTraceDocument).jobs).toHaveLength(3);
    expect(existsSync(join(outputs, 'table.json'))).toBe(true);
  });

  it('never writes over the state it reads, nor into any state directory, and still writes elsewhere', async () => {
    const { dir } = learnedState('guarded-state');
    const { dir: otherState } = learnedState('another-controller-state');
    const stateDb = join(dir, 'state.db');
    const before = readFileSync(stateDb);
    const outputs = join(tmp, 'guarded-out');
    mkdirSync(outputs);
    symlinkSync(stateDb, join(outputs, 'link.json'));
    linkSync(stateDb, join(outputs, 'hard-link.json'));
    // A SQLite file outside any state directory: a copy of the state kept aside, say.
    copyFileSync(stateDb, join(outputs, 'kept.db'));
    const readDatabase =
      /invalid input: --(out|colocation-table) \/ --state-dir\n {2}- .* is the controller's state database this export reads \(.*guarded-state\/state\.db\): it will not be overwritten/;
    const readDirectory =
      /invalid input: --(out|colocation-table) \/ --state-dir\n {2}- .* is in .*guarded-state, the controller's state directory this export reads: write it elsewhere/;
    const cases: [readonly string[], RegExp][] = [
      [['--out', stateDb], readDatabase],
      [['--colocation-table', stateDb], readDatabase],
      [['--out', join(outputs, 'link.json')], readDatabase],
      [['--colocation-table', join(outputs, 'hard-link.json')], readDatabase],
      [['--out', join(dir, 'state.db-wal')], readDirectory],
      [['--out', join(outputs, 'trace.json'), '--colocation-table', join(dir, 'table.json')], readDirectory],
      [
        ['--out', join(outputs, 'kept.db')],
        /invalid input: --out\n {2}- .*kept\.db is a SQLite database, which looks like a controller's state database: it will not be overwritten/,
      ],
      [
        ['--out', join(otherState, 'trace.json')],
        /invalid input: --out\n {2}- .* is in .*another-controller-state, a fleetwise controller's state directory \(it holds state\.db\): write it elsewhere/,
      ],
    ];
    const results = await Promise.all(
      cases.map(([args]) => runCli(['export-trace', '--state-dir', dir, ...args])),
    );
    results.forEach((r, i) => {
      const [args, message] = cases[i] as [readonly string[], RegExp];
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(message);
      expect(r.stdout).toBe('');
    });
    expect(readFileSync(stateDb).equals(before)).toBe(true);
    expect(readFileSync(join(outputs, 'kept.db')).equals(before)).toBe(true);
    for (const written of [
      join(outputs, 'trace.json'),
      join(dir, 'table.json'),
      join(otherState, 'trace.json'),
    ])
      expect(existsSync(written), written).toBe(false);

    // The state is whole, and a trace and table outside any state directory are written as before.
    const exported = await runCli([
      'export-trace',
      '--state-dir',
      dir,
      '--out',
      join(outputs, 'trace.json'),
      '--colocation-table',
      join(outputs, 'table.json'),
    ]);
    expect(exported.code, exported.stderr).toBe(0);
    expect(
      (JSON.parse(readFileSync(join(outputs, 'trace.json'), 'utf8')) as FleetwiseTraceDocument).jobs,
    ).toHaveLength(3);
    expect(existsSync(join(outputs, 'table.json'))).toBe(true);
  });

  it('refuses a state directory without a fleetwise database, naming the file', async () => {
    const empty = join(tmp, 'not-state');
    mkdirSync(empty);
    writeFileSync(join(empty, 'state.db'), 'not a database, just text\n'.repeat(20));
    const out = await runCli(['export-trace', '--state-dir', empty]);
    expect(out.code).toBe(2);
    expect(out.stderr).toContain(join(empty, 'state.db'));
    expect(out.stderr).toMatch(/not a fleetwise state database/);
    expect(out.stdout).toBe('');
  });

  it('refuses targets it could not write before it reads or runs anything, leaving nothing behind', async () => {
    const trace = join(tmp, 'half.json');
    const exported = await runCli([
      'export-trace',
      '--state-dir',
      stateDir,
      '--out',
      trace,
      '--colocation-table',
      join(tmp, 'no-such-dir', 'table.json'),
    ]);
    expect(exported.code).toBe(2);
    expect(exported.stderr).toMatch(/--colocation-table[\s\S]*no-such-dir is not a directory to write/);
    expect(existsSync(trace)).toBe(false);
    // A file where simulate's report directory would go: refused at once, not after the runs.
    const simulated = await runCli([
      'simulate',
      '--format',
      'eva',
      '--scheduler',
      'eva',
      '--out',
      trace + '.d',
    ]);
    expect(simulated.code).toBe(0); // a new directory is made
    writeFileSync(join(tmp, 'a-file'), 'x');
    const refused = await runCli([
      'simulate',
      '--format',
      'eva',
      '--scheduler',
      'eva',
      '--out',
      join(tmp, 'a-file'),
    ]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--out[\s\S]*a-file is a file, not a directory/);
    expect(refused.stdout).toBe('');
  }, 120_000);
});

describe('fleetwise simulate --trace DIR --format specs (CLI subprocess)', () => {
  it('simulates a directory of job specs with their arrivals in both runtimes', async () => {
    const dir = join(tmp, 'specs');
    mkdirSync(dir);
    copyFileSync(example('resnet.yaml'), join(dir, 'resnet.yaml'));
    copyFileSync(example('gpt2.yaml'), join(dir, 'gpt2.yaml'));
    writeFileSync(join(dir, 'arrivals.yaml'), 'resnet.yaml: 0\ngpt2.yaml: 30m\n');
    const [engine, controller] = await Promise.all([
      simulateJobs(['--trace', dir, '--format', 'specs'], 'engine'),
      simulateJobs(['--trace', dir], 'controller'),
    ]);
    for (const jobs of [engine, controller]) expect(jobs.map((j) => j.arrivalSeconds)).toEqual([0, 1800]);
    expect(engine.map((j) => j.id)).toEqual(['resnet.yaml', 'gpt2.yaml']);
    expect(engine[0]?.jctSeconds).toBeGreaterThanOrEqual(4408); // resnet.yaml's expectedDurationSeconds
  }, 120_000);

  it('without arrivals.yaml: the files in name order, --arrival-gap-seconds apart (specs only)', async () => {
    const dir = join(tmp, 'gapped');
    mkdirSync(dir);
    copyFileSync(example('resnet.yaml'), join(dir, 'b.yaml'));
    copyFileSync(example('gpt2.yaml'), join(dir, 'a.yaml'));
    const jobs = await simulateJobs(['--trace', dir, '--arrival-gap-seconds', '600'], 'engine');
    expect(jobs.map((j) => [j.id, j.arrivalSeconds])).toEqual([
      ['a.yaml', 0],
      ['b.yaml', 600],
    ]);
    const eva = await runCli([
      'simulate',
      '--format',
      'eva',
      '--arrival-gap-seconds',
      '5',
      '--scheduler',
      'eva',
    ]);
    expect(eva.code).not.toBe(0);
    expect(eva.stderr).toMatch(/--format specs/);
  }, 120_000);

  it('names the file and field of a spec without expectedDurationSeconds, and refuses an empty directory', async () => {
    const dir = join(tmp, 'undeclared');
    mkdirSync(dir);
    writeFileSync(
      join(dir, 'resnet.yaml'),
      readFileSync(example('resnet.yaml'), 'utf8').replace(/^expectedDurationSeconds:.*$/m, ''),
    );
    const out = await runCli(['simulate', '--trace', dir, '--scheduler', 'eva']);
    expect(out.code).toBe(2);
    expect(out.stderr).toContain(join(dir, 'resnet.yaml'));
    expect(out.stderr).toMatch(/expectedDurationSeconds: required to simulate the job/);

    const empty = join(tmp, 'empty-specs');
    mkdirSync(empty);
    const none = await runCli([
      'simulate',
      '--trace',
      empty,
      '--format',
      'specs',
      '--scheduler',
      'eva',
      '--json',
    ]);
    expect(none.code).toBe(2);
    expect(none.stdout).toBe('');
    expect(none.stderr).toMatch(/no job spec files/);

    writeFileSync(join(empty, 'a.yaml'), readFileSync(example('resnet.yaml'), 'utf8'));
    writeFileSync(join(empty, 'arrivals.yaml'), 'a.yaml: later\n');
    const badIndex = await runCli(['simulate', '--trace', empty, '--scheduler', 'eva']);
    expect(badIndex.code).toBe(2);
    expect(badIndex.stderr).toContain(join(empty, 'arrivals.yaml'));
    expect(badIndex.stderr).toMatch(/a\.yaml: expected seconds or a duration/);
  });
});
