import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { SCHEDULER_STATE_KEY } from '../../src/controller/scheduler-state.js';
import type { JsonValue } from '../../src/controller/state-store.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { TuneJson } from '../../src/sim/report/tune-json.js';
import { REPORT_FILES } from '../../src/sim/report/write.js';
import type { ArmsReport } from '../../src/bench/arms-report.js';
import { ARMS_FILES } from '../../src/cli/commands/bench-arms.js';
import { ColocationTable } from '../../src/scheduler/colocation-table.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import type { FleetwiseTraceDocument } from '../../src/sim/traces/fleetwise-json.js';
import { CLI, ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';
import { example, writeJobHistory } from '../helpers/job-history.js';
import { fillDisk, SmallDisks } from '../helpers/small-disks.js';

/**
 * The files `export-trace`, `simulate --save-colocation-table`, `simulate --out`, `tune --out` and `bench arms --out`
 * write, on a disk that fails, as users run them (the built CLI in a subprocess): a small tmpfs filled up stands for a
 * full disk, an immutable file (chattr +i) for one that cannot be replaced. A failed write leaves every file as it
 * was, nothing beside it, names the flag and the path, and exits 1: the disk failed, not the input. A command that
 * prints its result prints it still. Tests run as root, which mount and chattr need.
 */

const tmp = mkdtempSync(join(tmpdir(), 'fw-output-write-failures-'));
const disks = new SmallDisks();
let stateDir = '';

/** A new directory on a tmpfs of `size`, unmounted after the file's tests. */
const smallDisk = (name: string, size = '8k'): string => disks.make(tmp, name, size);

function roomyDir(name: string): string {
  const dir = join(tmp, name);
  mkdirSync(dir);
  return dir;
}

const ENOSPC = 'ENOSPC: no space left on device';

beforeAll(() => {
  ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
  // A controller's history with a trace and a learned table of several KiB each: more than a page of the small
  // disks, so a write that truncated the old file first would leave a cut-short one behind.
  stateDir = roomyDir('state');
  let now = 0;
  const store = new SqliteStateStore(join(stateDir, 'state.db'), { nowSeconds: () => now });
  writeJobHistory(store, { set: (t) => void (now = t) });
  for (let i = 0; i < 30; i += 1) store.submitJob(example('resnet-ddp.yaml'));
  const table = new ColocationTable(0.9);
  for (let i = 0; i < 80; i += 1) table.record(`workload-${i}`, [`workload-${i + 1}`], 0.8);
  const saved = new EvaScheduler(loadCatalogFile(), { learnedColocation: table.toJSON() }).exportState();
  store.setValue(SCHEDULER_STATE_KEY, saved as unknown as JsonValue);
  store.close();
}, 300_000);
afterAll(() => {
  disks.unmountAll();
  rmSync(tmp, { recursive: true, force: true });
});

const exportTrace = (...args: string[]): Promise<CliResult> =>
  runCli(['export-trace', '--state-dir', stateDir, ...args]);

describe('export-trace on a failing disk (CLI subprocess)', () => {
  it('--out on a full disk: the old trace kept, no temporary file, an I/O error naming --out and the file', async () => {
    const disk = smallDisk('trace-full');
    const trace = join(disk, 'history.json');
    writeFileSync(trace, 'old trace\n');
    fillDisk(disk);
    const r = await exportTrace('--out', trace);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`fleetwise: --out: cannot write ${trace}: ${ENOSPC}; nothing was written\n`);
    expect(readFileSync(trace, 'utf8')).toBe('old trace\n');
    expect(readdirSync(disk).sort()).toEqual(['filler', 'history.json']);
  });

  it('--colocation-table on a full disk: neither file written, exit 1 naming --colocation-table', async () => {
    const outputs = roomyDir('table-full-trace');
    const trace = join(outputs, 'history.json');
    writeFileSync(trace, 'old trace\n');
    const disk = smallDisk('table-full');
    const table = join(disk, 'table.json');
    writeFileSync(table, 'old table\n');
    fillDisk(disk);
    const r = await exportTrace('--out', trace, '--colocation-table', table);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `fleetwise: --colocation-table: cannot write ${table}: ${ENOSPC}; none of the files was written\n`,
    );
    expect(readFileSync(trace, 'utf8')).toBe('old trace\n');
    expect(readFileSync(table, 'utf8')).toBe('old table\n');
    expect(readdirSync(outputs)).toEqual(['history.json']);
    expect(readdirSync(disk).sort()).toEqual(['filler', 'table.json']);
  });

  it('a table that cannot be replaced puts the trace already renamed back as it was', async () => {
    const outputs = roomyDir('locked-table');
    const trace = join(outputs, 'history.json');
    writeFileSync(trace, 'old trace\n');
    const table = join(outputs, 'table.json');
    writeFileSync(table, 'old table\n');
    execFileSync('chattr', ['+i', table]);
    let r: CliResult;
    try {
      r = await exportTrace('--out', trace, '--colocation-table', table);
    } finally {
      execFileSync('chattr', ['-i', table]);
    }
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `fleetwise: --colocation-table: cannot write ${table}: EPERM: operation not permitted; none of the files was written\n`,
    );
    expect(readFileSync(trace, 'utf8')).toBe('old trace\n');
    expect(readFileSync(table, 'utf8')).toBe('old table\n');
    expect(readdirSync(outputs).sort()).toEqual(['history.json', 'table.json']);
  });

  it('writes the trace to a device as before: --out /dev/stdout on a pipe, the table beside it', async () => {
    const outputs = roomyDir('to-stdout');
    const table = join(outputs, 'table.json');
    // Through a shell's pipe: Node's own child stdout is a socket, which /dev/stdout cannot be opened on.
    const r = await new Promise<CliResult>((resolve) => {
      execFile(
        'bash',
        [
          '-c',
          'set -o pipefail; "$0" "$1" export-trace --state-dir "$2" --out /dev/stdout --colocation-table "$3" | cat',
          process.execPath,
          CLI,
          stateDir,
          table,
        ],
        { maxBuffer: 16 * 1024 * 1024 },
        (error, stdout, stderr) => {
          resolve({ code: error === null ? 0 : Number(error.code), stdout, stderr });
        },
      );
    });
    expect(r.code, r.stderr).toBe(0);
    expect((JSON.parse(r.stdout) as FleetwiseTraceDocument).jobs).toHaveLength(33);
    expect((JSON.parse(readFileSync(table, 'utf8')) as { entries: unknown[] }).entries).toHaveLength(80);
    expect(readdirSync(outputs)).toEqual(['table.json']);
  });
});

describe('simulate --save-colocation-table on a full disk (CLI subprocess)', () => {
  it('keeps the old table, leaves no temporary file, and exits 1 naming the flag and the file', async () => {
    const disk = smallDisk('saved-table-full');
    const table = join(disk, 'learned.json');
    writeFileSync(table, 'old table\n');
    fillDisk(disk);
    // 15 jobs of the Eva trace: Eva learns a table of several KiB, more than the page the old file frees.
    const r = await runCli([
      'simulate',
      '--format',
      'eva',
      '--jobs',
      '15',
      '--scheduler',
      'eva',
      '--save-colocation-table',
      table,
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `fleetwise: --save-colocation-table: cannot write ${table}: ${ENOSPC}; nothing was written\n`,
    );
    expect(r.stderr).not.toContain('invalid input');
    expect(readFileSync(table, 'utf8')).toBe('old table\n');
    expect(readdirSync(disk).sort()).toEqual(['filler', 'learned.json']);
    // The run is not lost: its table is printed before the failure ends the command.
    expect(r.stdout).toMatch(/: 15 jobs\n\n.*\beva\b/s);
  }, 120_000);
});

describe('simulate --out on a full disk (CLI subprocess)', () => {
  const SIMULATE = [
    'simulate',
    '--format',
    'synthetic',
    '--jobs',
    '14',
    '--scheduler',
    'eva',
    '--no-predict',
  ];
  const NAMES = Object.values(REPORT_FILES);

  it('still prints the result, keeps the old report and the table saved with it, and exits 1 naming --out', async () => {
    // Four pages: the three old files and the filler's one.
    const [textDisk, jsonDisk] = [smallDisk('report-text-full', '16k'), smallDisk('report-json-full', '16k')];
    for (const disk of [textDisk, jsonDisk]) {
      for (const name of NAMES) writeFileSync(join(disk, name), `old ${name}\n`);
      fillDisk(disk);
    }
    // The co-location table the same command saves, where there is room: written with the report, or not at all.
    const tables = roomyDir('report-full-table');
    const table = join(tables, 'learned.json');
    writeFileSync(table, 'old table\n');
    const [text, json] = await Promise.all([
      runCli([...SIMULATE, '--save-colocation-table', table, '--out', textDisk]),
      runCli([...SIMULATE, '--json', '--out', jsonDisk]),
    ]);
    const failure = (disk: string): string =>
      `--out: cannot write ${join(disk, REPORT_FILES.json)}: ${ENOSPC}; none of the files was written`;
    expect(text.stderr).toContain(`fleetwise: ${failure(textDisk)}\n`);
    expect(JSON.parse(json.stderr.trimEnd().split('\n').at(-1) ?? '')).toEqual({ error: failure(jsonDisk) });
    for (const [r, disk] of [
      [text, textDisk],
      [json, jsonDisk],
    ] as const) {
      expect(r.code).toBe(1);
      expect(r.stderr).not.toContain('report written');
      for (const name of NAMES) expect(readFileSync(join(disk, name), 'utf8')).toBe(`old ${name}\n`);
      expect(readdirSync(disk).sort()).toEqual(['filler', ...NAMES].sort());
    }
    expect(readFileSync(table, 'utf8')).toBe('old table\n');
    expect(readdirSync(tables)).toEqual(['learned.json']);
    // The runs are not lost: the summary table, or the one JSON object.
    expect(text.stdout).toMatch(/: 14 jobs\n\n.*\beva\b/s);
    expect(
      (JSON.parse(json.stdout) as { runs: { scheduler: string }[] }).runs.map((r) => r.scheduler),
    ).toEqual(['eva']);
  }, 120_000);
});

describe('tune --out on a full disk (CLI subprocess)', () => {
  const TUNE = ['tune', '--format', 'synthetic', '--jobs', '14', '--samples', '1', '--cap-instances', '3'];

  it('still prints the result, keeps the old report, and exits 1 naming --out and the file', async () => {
    const [textDisk, jsonDisk] = [smallDisk('tune-text-full', '16k'), smallDisk('tune-json-full', '16k')];
    for (const disk of [textDisk, jsonDisk]) {
      writeFileSync(join(disk, 'tune.json'), 'old json\n');
      writeFileSync(join(disk, 'tune.html'), 'old html\n');
      fillDisk(disk);
    }
    const [text, json] = await Promise.all([
      runCli([...TUNE, '--out', textDisk]),
      runCli([...TUNE, '--json', '--out', jsonDisk]),
    ]);
    const failure = (disk: string): string =>
      `--out: cannot write ${join(disk, 'tune.json')}: ${ENOSPC}; none of the files was written`;
    expect(text.stderr).toContain(`fleetwise: ${failure(textDisk)}\n`);
    // With --json, the error is the one JSON object on stderr's last line.
    expect(JSON.parse(json.stderr.trimEnd().split('\n').at(-1) ?? '')).toEqual({ error: failure(jsonDisk) });
    for (const [r, disk] of [
      [text, textDisk],
      [json, jsonDisk],
    ] as const) {
      expect(r.code).toBe(1);
      expect(readFileSync(join(disk, 'tune.json'), 'utf8')).toBe('old json\n');
      expect(readFileSync(join(disk, 'tune.html'), 'utf8')).toBe('old html\n');
      expect(readdirSync(disk).sort()).toEqual(['filler', 'tune.html', 'tune.json']);
    }
    // The search is not lost: the front and the controller config, or the one JSON object.
    expect(text.stdout).toMatch(/14 jobs; eva under 3 instances; 1 config simulated, 1 on the Pareto front/);
    const yaml = parse(text.stdout.slice(text.stdout.indexOf('# controller config:'))) as object;
    expect(Object.keys(yaml)).toEqual(['queue', 'caps']);
    expect((JSON.parse(json.stdout) as TuneJson).evaluated).toHaveLength(1);
  }, 120_000);
});

describe('bench arms --out on a full disk (CLI subprocess)', () => {
  const ARMS = [
    ...[
      'bench',
      'arms',
      '--seeds',
      '5',
      '--common',
      '--format alibaba --jobs 5 --scheduler eva --no-predict',
    ],
    ...['--arm', 'a=', '--arm', 'b=--queue srpt'],
  ];
  const NAMES = Object.values(ARMS_FILES);

  it('still prints the comparison, keeps the old report, and exits 1 naming --out and the file', async () => {
    const [textDisk, jsonDisk] = [smallDisk('arms-text-full'), smallDisk('arms-json-full')];
    for (const disk of [textDisk, jsonDisk]) {
      for (const name of NAMES) writeFileSync(join(disk, name), `old ${name}\n`);
      fillDisk(disk);
    }
    const [text, json] = await Promise.all([
      runCli([...ARMS, '--out', textDisk]),
      runCli([...ARMS, '--json', '--out', jsonDisk]),
    ]);
    const failure = (disk: string): string =>
      `--out: cannot write ${join(disk, ARMS_FILES.json)}: ${ENOSPC}; none of the files was written`;
    expect(text.stderr).toContain(`fleetwise: ${failure(textDisk)}\n`);
    expect(JSON.parse(json.stderr.trimEnd().split('\n').at(-1) ?? '')).toEqual({ error: failure(jsonDisk) });
    for (const [r, disk] of [
      [text, textDisk],
      [json, jsonDisk],
    ] as const) {
      expect(r.code).toBe(1);
      expect(r.stderr).not.toContain('report written');
      for (const name of NAMES) expect(readFileSync(join(disk, name), 'utf8')).toBe(`old ${name}\n`);
      expect(readdirSync(disk).sort()).toEqual(['filler', ...NAMES].sort());
    }
    // The comparison is not lost: its table, or the one JSON object.
    expect(text.stdout).toMatch(/^b against a: /);
    expect((JSON.parse(json.stdout) as ArmsReport).seeds).toEqual([5]);
  }, 120_000);
});
