import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ArmsReport } from '../../src/bench/arms-report.js';
import { CLI, ensureBuiltCli, runCli } from '../helpers/built-cli.js';

/**
 * `fleetwise bench arms` when some of its runs fail (another build broken on one seed, a cap no job fits under on one
 * seed): the other seeds are still compared, the report names what was left out and why, and the exit says so. Also
 * the caps it shows and refuses, and the seeds it takes.
 */
const COMMON = '--format synthetic --jobs 14 --multi-task 0.5 --scheduler eva --no-predict';

let scratch: string;
/** "Another build" that fails its seed 6 run, as a broken build would, and runs the real CLI on every other seed. */
let failingBuild: string;

beforeAll(() => {
  ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
  scratch = mkdtempSync(join(tmpdir(), 'fleetwise-arms-left-out-'));
  failingBuild = join(scratch, 'failing-build');
  mkdirSync(join(failingBuild, 'dist', 'cli'), { recursive: true });
  writeFileSync(join(failingBuild, 'package.json'), '{"type":"module"}\n');
  writeFileSync(
    join(failingBuild, 'dist', 'cli', 'main.js'),
    [
      "import { spawnSync } from 'node:child_process';",
      'const args = process.argv.slice(2);',
      "if (args[args.indexOf('--seed') + 1] === '6') {",
      "  process.stderr.write('Error: this build breaks on seed 6\\nat its second line\\n');",
      '  process.exit(1);',
      '}',
      `const r = spawnSync(process.execPath, [${JSON.stringify(CLI)}, ...args], { stdio: 'inherit' });`,
      'process.exit(r.status ?? 1);',
      '',
    ].join('\n'),
  );
});

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

async function simulatePeak(seed: number): Promise<number> {
  const r = await runCli(['simulate', ...COMMON.split(' '), '--seed', String(seed), '--json']);
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as { runs: { peakCostPerHour: number }[] }).runs[0]?.peakCostPerHour as number;
}

describe('bench arms with a failed run', () => {
  it('compares the other seeds, names the seed left out and the run that failed, and exits 1', async () => {
    const out = join(scratch, 'report');
    const args = [
      'bench',
      'arms',
      '--seeds',
      '5-6',
      '--common',
      COMMON,
      '--arm',
      'a=--queue fifo',
      '--arm',
      'b=--queue srpt',
      '--build',
      `a=${failingBuild}`,
    ];
    const text = await runCli([...args, '--out', out]);
    expect(text.code, text.stderr).toBe(1);
    // The report on stdout, the seed left out and why first.
    expect(text.stdout).toMatch(
      /^seed 6 left out: a run failed; the arms are compared on seed 5\n {2}seed 6 a: exited with 1: Error: this build breaks on seed 6\n {4}at its second line\n\nb against a: --queue srpt\n/,
    );
    expect(text.stdout).toMatch(/^ +5 +\$/m);
    expect(text.stdout).not.toMatch(/^ +6 +\$/m);
    // The exit's message names it too.
    expect(text.stderr).toMatch(
      /fleetwise: seed 6 left out: a run failed; the arms are compared on seed 5\nseed 6 a: exited with 1: Error: this build breaks on seed 6\n/,
    );
    // Seed 6's run of this build was not made: its seed was lost already.
    expect(text.stderr).toContain('bench arms: seed 6 a (failed) done');
    expect(text.stderr).toContain('bench arms: seed 6 b (not run) done');
    expect(text.stderr).toContain('bench arms: seed 5 b done');
    // The files were written, with what was left out.
    const written = JSON.parse(readFileSync(join(out, 'arms.json'), 'utf8')) as ArmsReport;
    expect(written.seeds).toEqual([5]);
    expect(written.leftOut).toEqual([
      {
        seed: 6,
        failed: [
          { run: 'seed 6 a', error: 'exited with 1: Error: this build breaks on seed 6\nat its second line' },
        ],
      },
    ]);
    expect(written.runs['a']?.map((r) => r.scheduler)).toEqual(['seed 5 a']);
    expect(written.runs['b']).toHaveLength(1);
    expect(written.comparisons['b']?.find((d) => d.metric === 'totalCost')?.seeds).toBe(1);
    const html = readFileSync(join(out, 'arms.html'), 'utf8');
    expect(html).toContain('<h2>Seeds left out</h2>');
    expect(html).toContain('seed 6 a: exited with 1: Error: this build breaks on seed 6');
    expect(html).toContain('<h2>b against a</h2>');

    // --json: the same report on stdout, the failure as a JSON error on stderr.
    const json = await runCli([...args, '--json']);
    expect(json.code, json.stderr).toBe(1);
    const report = JSON.parse(json.stdout) as ArmsReport;
    const timeless = (r: ArmsReport) => JSON.stringify(r, (k, v: unknown) => (k === 'wallSeconds' ? 0 : v));
    expect(timeless(report)).toBe(timeless(written));
    const error = JSON.parse(json.stderr.trim().split('\n').at(-1) ?? '') as {
      error: string;
      details: string[];
    };
    expect(error).toEqual({
      error: 'seed 6 left out: a run failed; the arms are compared on seed 5',
      details: ['seed 6 a: exited with 1: Error: this build breaks on seed 6\nat its second line'],
    });
  }, 120_000);

  it("leaves out a seed whose cap no job fits under, named by the share and the seed's peak", async () => {
    // 0.7 of seed 4's uncapped peak is below what one of its jobs needs alone; seeds 5 and 6 have room.
    const r = await runCli([
      'bench',
      'arms',
      '--seeds',
      '4-6',
      '--common',
      COMMON,
      '--cap-share',
      '0.7',
      '--arm',
      'fifo=--queue fifo',
      '--arm',
      'srpt=--queue srpt',
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(1);
    const report = JSON.parse(r.stdout) as ArmsReport;
    expect(report.seeds).toEqual([5, 6]);
    expect(report.capBySeed).toHaveLength(2);
    expect(report.runs['srpt']).toHaveLength(2);
    const peak = await simulatePeak(4);
    const cap = `$${(0.7 * peak).toFixed(2)}/h`;
    const source = `--cap-share 0.7 × seed 4's uncapped peak $${peak.toFixed(2)}/h = ${cap}`;
    expect(report.leftOut?.map((l) => l.seed)).toEqual([4]);
    expect(report.leftOut?.[0]?.failed.map((f) => f.run)).toEqual(['seed 4 fifo', 'seed 4 srpt']);
    for (const failed of report.leftOut?.[0]?.failed ?? [])
      expect(failed.error.startsWith(`${source}: 1 of 14 jobs can never be admitted`), failed.error).toBe(
        true,
      );
    // No flag the user did not type.
    expect(r.stderr).not.toContain('--cap-dollars-per-hour');
    expect(r.stderr).toContain('bench arms: seed 4 fifo (failed) done');
  }, 120_000);

  it('every seed lost: nothing to compare, every failure named, as bad input', async () => {
    // Half the uncapped peak is below what one of seed 5's jobs needs alone: it can never be admitted.
    const r = await runCli([
      'bench',
      'arms',
      '--seeds',
      '5',
      '--common',
      COMMON,
      '--cap-share',
      '0.5',
      '--arm',
      'fifo=--queue fifo',
      '--arm',
      'srpt=--queue srpt',
    ]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    const peak = await simulatePeak(5);
    const source = `--cap-share 0.5 × seed 5's uncapped peak $${peak.toFixed(2)}/h = $${(0.5 * peak).toFixed(2)}/h`;
    expect(r.stderr).toContain(
      'fleetwise: invalid input: every seed lost a run: nothing to compare (2 runs failed)\n' +
        `  - seed 5 fifo: ${source}: 1 of 14 jobs can never be admitted`,
    );
    expect(r.stderr).toContain(`  - seed 5 srpt: ${source}: 1 of 14 jobs can never be admitted`);
  }, 60_000);
});

describe('bench arms caps', () => {
  it('shows a fixed cap of the --common flags: a cap column, peak ÷ cap, the caps in JSON', async () => {
    const out = join(scratch, 'fixed-cap');
    const r = await runCli([
      'bench',
      'arms',
      '--seeds',
      '5-6',
      '--common',
      `${COMMON} --cap-dollars-per-hour 60`,
      '--arm',
      'fifo=--queue fifo',
      '--arm',
      'srpt=--queue srpt',
      '--out',
      out,
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^seed\s+cap \$\/h\s+cost fifo\s+cost srpt\s+Δ cost/m);
    expect(r.stdout).toMatch(/^ +5 +\$60\.00 +\$/m);
    expect(r.stdout).toMatch(/^ {2}peak ÷ cap +\d+\.\d\d% to \d+\.\d\d%$/m);
    const report = JSON.parse(readFileSync(join(out, 'arms.json'), 'utf8')) as ArmsReport;
    expect(report.capShare).toBeNull();
    expect(report.capBySeed).toEqual([60, 60]);
    expect(report.capBySeedByArm).toEqual({ fifo: [60, 60], srpt: [60, 60] });
    for (const run of report.runs['srpt'] ?? []) expect(run.peakCostPerHour).toBeLessThanOrEqual(60);
    expect(readFileSync(join(out, 'arms.html'), 'utf8')).toContain(
      'The run&#39;s $/h cap, as the arm&#39;s flags (--common&#39;s with them) set it.',
    );
  }, 120_000);

  it('refuses with --cap-share an arm whose own file caps $/h, naming file and cap, before any run', async () => {
    const config = join(scratch, 'capped.yaml');
    writeFileSync(config, 'caps:\n  maxCostPerHour: 15\n');
    const queueConfig = join(scratch, 'tuned.yaml');
    writeFileSync(
      queueConfig,
      'queue:\n  classes:\n    - id: all\n      weight: 1\n      ordering: fifo\ncaps:\n  maxCostPerHour: 50\n',
    );
    const cases: [string, RegExp][] = [
      [
        `--config ${config}`,
        /capped\.yaml: caps\.maxCostPerHour \(15\): with --cap-share the bench caps each run/,
      ],
      [`--queue-config ${queueConfig}`, /tuned\.yaml: caps\.maxCostPerHour \(50\): with --cap-share/],
    ];
    for (const [flags, message] of cases) {
      const r = await runCli([
        'bench',
        'arms',
        '--seeds',
        '5',
        '--common',
        COMMON,
        '--cap-share',
        '0.7',
        '--arm',
        'a=',
        '--arm',
        `b=${flags}`,
      ]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/fleetwise: invalid input: --arm b\n/);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toContain('bench arms: seed');
    }
  }, 60_000);

  it('refuses a seed past the simulator’s seed range as a --seeds mistake', async () => {
    for (const seeds of ['4294967296', '99999999999999999999', '4294967290-4294967296']) {
      const r = await runCli([
        'bench',
        'arms',
        '--seeds',
        seeds,
        '--common',
        COMMON,
        '--arm',
        'a=',
        '--arm',
        'b=',
      ]);
      expect(r.code, seeds).toBe(2);
      expect(r.stderr).toMatch(/--seeds: seed (4294967296|99999999999999999999) is above 4294967295/);
    }
  }, 60_000);
});
