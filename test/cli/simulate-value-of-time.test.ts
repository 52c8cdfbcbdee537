import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import type { RunSummary } from '../../src/world/run-result.js';

/** `fleetwise simulate --value-of-time a,b,c` as users run it (the built CLI in a subprocess). */
const TINY = ['simulate', '--format', 'synthetic', '--jobs', '10', '--seed', '4', '--parallel', '1'];

let dir = '';
beforeAll(() => {
  ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
  dir = mkdtempSync(join(tmpdir(), 'fleetwise-vot-'));
});
afterAll(() => {
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

describe('fleetwise simulate --value-of-time', () => {
  it('auto (the default) learns it from --target-slowdown', async () => {
    const out = join(dir, 'auto');
    const run = await runCli([...TINY, '--scheduler', 'eva', '--target-slowdown', '0.05', '--out', out]);
    expect(run.code, run.stderr).toBe(0);
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as {
      settings: { valueOfTimePerJobHour: string; targetSlowdown: number };
    };
    expect(report.settings).toMatchObject({ valueOfTimePerJobHour: 'auto', targetSlowdown: 0.05 });
  }, 120_000);

  it('a list runs eva once per value and each baseline once, and draws them in the frontier chart', async () => {
    const out = join(dir, 'sweep');
    const run = await runCli([
      ...TINY,
      '--scheduler',
      'eva,no-packing,owl',
      '--value-of-time',
      '0,2,8,auto',
      '--json',
      '--out',
      out,
    ]);
    expect(run.code, run.stderr).toBe(0);
    const runs = (JSON.parse(run.stdout) as { runs: RunSummary[] }).runs;
    expect(runs.map((r) => r.scheduler)).toEqual([
      'eva@vot=0',
      'eva@vot=2',
      'eva@vot=8',
      'eva@vot=auto',
      'no-packing',
      'owl',
    ]);
    expect(runs.map((r) => r.valueOfTimePerJobHour)).toEqual([0, 2, 8, 'auto', undefined, undefined]);
    const html = readFileSync(join(out, 'report.html'), 'utf8');
    expect(html).toContain('id="chart-frontier"');
    expect(html).toContain('$8/h');
    // The learned value of time is a point of its own, not a value on the swept line.
    expect(html).toContain('eva (auto value of time)');
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as {
      settings: { valueOfTimePerJobHour: string };
    };
    expect(report.settings.valueOfTimePerJobHour).toBe('0, 2, 8, auto');
  }, 180_000);

  it('one value runs eva once under its own name', async () => {
    const run = await runCli([...TINY, '--scheduler', 'eva', '--value-of-time', '3', '--json']);
    expect(run.code, run.stderr).toBe(0);
    const runs = (JSON.parse(run.stdout) as { runs: RunSummary[] }).runs;
    expect(runs.map((r) => [r.scheduler, r.valueOfTimePerJobHour])).toEqual([['eva', 3]]);
  }, 120_000);

  it('names the flag and the reason for a bad value', async () => {
    const negative = await runCli([...TINY, '--scheduler', 'eva', '--value-of-time', '1,-1']);
    expect(negative.code).not.toBe(0);
    expect(negative.stderr).toContain('must be ≥ 0 ($ per job-hour)');
    expect(negative.stderr).toContain('--value-of-time');
    const word = await runCli([...TINY, '--scheduler', 'eva', '--value-of-time', '2,abc']);
    expect(word.code).toBe(2);
    expect(word.stderr).toContain(
      '--value-of-time item 2: "abc" is neither a number ($ per job-hour) nor auto',
    );
    const empty = await runCli([...TINY, '--scheduler', 'eva', '--value-of-time', '1,,2']);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('--value-of-time item 2: "" is neither a number');
    const twice = await runCli([...TINY, '--scheduler', 'eva', '--value-of-time', '2,2']);
    expect(twice.code).not.toBe(0);
    expect(twice.stderr).toContain('values must differ');
    const target = await runCli([...TINY, '--scheduler', 'eva', '--target-slowdown', '1.5']);
    expect(target.code).not.toBe(0);
    expect(target.stderr).toMatch(/--target-slowdown.*must be < 1/s);
    const fixed = await runCli([
      ...TINY,
      '--scheduler',
      'eva',
      '--value-of-time',
      '2',
      '--target-slowdown',
      '0.1',
    ]);
    expect(fixed.code).not.toBe(0);
    expect(fixed.stderr).toContain('add auto to --value-of-time');
  }, 120_000);
});
