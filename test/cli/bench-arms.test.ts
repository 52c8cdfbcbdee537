import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ArmsReport } from '../../src/bench/arms-report.js';
import { BUNDLED_CATALOG_PATH, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { parseArm, parseSeedList, shellWords } from '../../src/bench/arms-flags.js';
import { seedVariesRun } from '../../src/bench/arms-plan.js';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import type { RunRequest } from '../../src/sim/run-request.js';
import { CLI, ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { processesUnder } from '../helpers/processes-under.js';

/** `fleetwise bench arms` as users run it (the built CLI in a subprocess), checked against `simulate` itself. */
const COMMON = '--format synthetic --jobs 14 --multi-task 0.5 --scheduler eva --no-predict';
const SIMULATE = [
  'simulate',
  '--format',
  'synthetic',
  '--jobs',
  '14',
  '--multi-task',
  '0.5',
  '--scheduler',
  'eva',
  '--no-predict',
  '--json',
];

interface JsonRun {
  readonly totalCost: number;
  readonly peakCostPerHour: number;
  readonly meanJctHours: number;
}

async function simulateRun(args: readonly string[]): Promise<JsonRun> {
  const r = await runCli([...SIMULATE, ...args]);
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as { runs: JsonRun[] }).runs[0] as JsonRun;
}

beforeAll(() => {
  ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
});

describe('fleetwise bench arms', () => {
  it('runs each arm on each seed under a cap of the seed’s uncapped peak, and compares it with the first arm seed by seed', async () => {
    const args = ['bench', 'arms', '--seeds', '5-6', '--common', COMMON, '--cap-share', '0.7'];
    const arms = ['--arm', 'fifo=--queue fifo --co-start off', '--arm', 'srpt=--queue srpt --co-start on'];
    const r = await runCli([...args, ...arms, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as ArmsReport;
    expect(report.seeds).toEqual([5, 6]);
    expect(report.baseline).toBe('fifo');
    // Both arms run the bundled catalog, and so does the reference: one cap per seed for both.
    expect(report.catalogs).toEqual({ fifo: BUNDLED_CATALOG_PATH, srpt: BUNDLED_CATALOG_PATH });
    expect(report.referenceCatalog).toBe(BUNDLED_CATALOG_PATH);
    expect(report.capBySeedByArm).toEqual({ fifo: report.capBySeed, srpt: report.capBySeed });
    for (const [i, seed] of report.seeds.entries()) {
      // The cap is 70% of the peak of the common flags run alone on that seed, as simulate reports it.
      const uncapped = await simulateRun(['--seed', String(seed)]);
      expect(report.uncappedPeakBySeed[i]).toBe(uncapped.peakCostPerHour);
      const cap = 0.7 * uncapped.peakCostPerHour;
      expect(report.capBySeed[i]).toBe(cap);
      // Each arm's figures are simulate's under that cap.
      const capArgs = ['--seed', String(seed), '--cap-dollars-per-hour', String(cap)];
      const fifo = await simulateRun([...capArgs, '--queue', 'fifo', '--co-start', 'off']);
      const srpt = await simulateRun([...capArgs, '--queue', 'srpt', '--co-start', 'on']);
      expect(report.runs['fifo']?.[i]?.totalCost).toBe(fifo.totalCost);
      expect(report.runs['srpt']?.[i]?.totalCost).toBe(srpt.totalCost);
      expect(srpt.peakCostPerHour).toBeLessThanOrEqual(cap + 1e-9);
      const cost = report.comparisons['srpt']?.find((d) => d.metric === 'totalCost');
      expect(cost?.percentBySeed[i]).toBeCloseTo(
        (100 * (srpt.totalCost - fifo.totalCost)) / fifo.totalCost,
        9,
      );
      const jct = report.comparisons['srpt']?.find((d) => d.metric === 'meanJctHours');
      expect(jct?.percentBySeed[i]).toBeCloseTo(
        (100 * (srpt.meanJctHours - fifo.meanJctHours)) / fifo.meanJctHours,
        9,
      );
    }
    // Co-start named in one arm: its barrier-idle cost is compared (the baseline names co-start off, so it reports it too).
    expect(report.comparisons['srpt']?.map((d) => d.metric)).toContain('barrierIdleCost');
    // And where the money went: the slowdown and idle-room dollars, from each run's ledger.
    const idle = report.comparisons['srpt']?.find((d) => d.metric === 'costIdle');
    const idleOf = (arm: string, i: number) => report.runs[arm]?.[i]?.costIdle ?? Number.NaN;
    expect(idle?.percentBySeed[0]).toBeCloseTo(
      (100 * (idleOf('srpt', 0) - idleOf('fifo', 0))) / idleOf('fifo', 0),
      9,
    );
    expect(report.comparisons['srpt']?.map((d) => d.metric)).toContain('costSlowdown');
    // The tail every simulate run reports (p99 only with the queue layer, which both arms run here).
    const p95 = report.comparisons['srpt']?.find((d) => d.metric === 'p95JctHours');
    const p95Of = (arm: string, i: number) => report.runs[arm]?.[i]?.p95JctHours ?? Number.NaN;
    expect(p95?.differenceBySeed?.[1]).toBeCloseTo(p95Of('srpt', 1) - p95Of('fifo', 1), 9);
    expect(report.comparisons['srpt']?.map((d) => d.metric)).toContain('p99JctHours');

    // The tables: one per compared arm, with a summary line per metric and the peak against the cap.
    // A directory that does not exist yet is made once the runs are done.
    const parent = mkdtempSync(join(tmpdir(), 'fleetwise-arms-'));
    const out = join(parent, 'report', 'arms');
    const text = await runCli([...args, ...arms, '--out', out]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('srpt against fifo: --queue srpt --co-start on\nseed ');
    expect(text.stdout).toMatch(/^seed\s+cap \$\/h\s+cost fifo\s+cost srpt\s+Δ cost\s+Δ mean JCT/m);
    expect(text.stdout).toMatch(
      /^ {2}cost +mean [+-]\d+\.\d\d% \(SE \d+\.\d\d\), .* lower on \d of 2; 95% CI [+-]\d+\.\d\d% to [+-]\d+\.\d\d%, p [\d.<]+ \(t-test\) \/ [\d.]+ \(sign test\)$/m,
    );
    expect(text.stdout).toMatch(/^ {2}peak ÷ cap +\d+\.\d\d% to \d+\.\d\d%$/m);
    // The summary's figures start in one column, the label column as wide as its longest label.
    const summary = (text.stdout.split('srpt against fifo:')[1]?.split('\n\n')[1] ?? '').split('\n');
    const figuresAt = summary
      .filter((l) => !l.includes(': measured by') && l.trim() !== '')
      .map(
        (l) =>
          (l.startsWith('  peak ÷ cap ') ? /^ {2}peak ÷ cap +/ : /^ {2}.+? +(?=mean )/).exec(l)?.[0].length,
      );
    expect(figuresAt.length).toBeGreaterThan(3);
    expect(new Set(figuresAt).size, summary.join('\n')).toBe(1);
    // Progress goes to stderr, a line per run in a log.
    expect(text.stderr).toContain('bench arms: seed 6 srpt done; ');
    // --out: the same report as --json, and its page.
    const written = JSON.parse(readFileSync(join(out, 'arms.json'), 'utf8')) as ArmsReport;
    // Deterministic but for how long each run took.
    const timeless = (r: ArmsReport) => JSON.stringify(r, (k, v: unknown) => (k === 'wallSeconds' ? 0 : v));
    expect(timeless(written)).toBe(timeless(report));
    expect(readFileSync(join(out, 'arms.html'), 'utf8')).toContain('<h2>srpt against fifo</h2>');

    // --peaks-from that report: the same caps and runs, without the uncapped reference runs.
    const again = await runCli([...args, ...arms, '--peaks-from', join(out, 'arms.json'), '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).not.toContain('uncapped done');
    const reused = JSON.parse(again.stdout) as ArmsReport;
    expect(reused.peaksFrom).toBe(join(out, 'arms.json'));
    expect(timeless({ ...reused, peaksFrom: null })).toBe(timeless(report));
    rmSync(parent, { recursive: true, force: true });
  }, 120_000);

  it('runs an arm with another build, in a subprocess, seed by seed like the others', async () => {
    // "Another build": a directory whose dist/ is this one's, so its runs must match this build's exactly.
    const other = mkdtempSync(join(tmpdir(), 'fleetwise-other-build-'));
    symlinkSync(join(PROJECT_ROOT, 'dist'), join(other, 'dist'));
    try {
      const arms = [
        '--arm',
        'fifo=--queue fifo',
        '--arm',
        'before=--queue srpt',
        '--arm',
        'srpt=--queue srpt',
      ];
      const r = await runCli([
        'bench',
        'arms',
        '--seeds',
        '5-6',
        '--common',
        COMMON,
        ...arms,
        '--build',
        `before=${other}`,
        '--json',
      ]);
      expect(r.code, r.stderr).toBe(0);
      const report = JSON.parse(r.stdout) as ArmsReport;
      expect(report.builds).toEqual({ before: other });
      // The same figures as this build's srpt arm, but for how long each run took and its label.
      const figures = (runs: readonly object[] | undefined) =>
        (runs ?? []).map((run) =>
          Object.entries(run)
            .filter(([k]) => k !== 'wallSeconds' && k !== 'scheduler')
            .sort(([a], [b]) => a.localeCompare(b)),
        );
      expect(figures(report.runs['before'])).toEqual(figures(report.runs['srpt']));
      expect(report.runs['before']?.map((run) => run.scheduler)).toEqual(['seed 5 before', 'seed 6 before']);
      // In the seeds' order, not the order the runs finished in: each is simulate's run of that seed.
      for (const [i, seed] of report.seeds.entries()) {
        const srpt = await simulateRun(['--seed', String(seed), '--queue', 'srpt']);
        expect(report.runs['before']?.[i]?.totalCost).toBe(srpt.totalCost);
      }
      expect(report.runs['before']?.[0]?.totalCost).not.toBe(report.runs['before']?.[1]?.totalCost);
      // A flag the other build does not know fails its run, named, with that build's own message.
      const bad = await runCli([
        'bench',
        'arms',
        '--seeds',
        '5',
        '--common',
        COMMON,
        '--arm',
        'a=',
        '--arm',
        'b=--no-such-flag',
        '--build',
        `b=${other}`,
      ]);
      expect(bad.code).toBe(1);
      expect(bad.stderr).toMatch(/fleetwise: seed 5 b: exited with 2: .*unknown option '--no-such-flag'/);
      // Found before any of this build's runs, not after them all.
      expect(bad.stderr).not.toMatch(/seed 5 a done/);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  }, 120_000);

  it.each([
    ['SIGTERM', 143],
    ['SIGHUP', 129],
  ] as const)(
    "stopped by %s, it stops the other build's runs, waits for them and exits %i",
    async (signal, code) => {
      // The signal reaches bench arms alone (as from `timeout` or `kill`), not its process group. Two of the other
      // build's runs go at once: the first to end must not fail the bench before the second has stopped.
      const other = mkdtempSync(join(tmpdir(), 'fleetwise-other-build-'));
      symlinkSync(join(PROJECT_ROOT, 'dist'), join(other, 'dist'));
      // The other build's runs name its CLI; this process names the build's directory, but not its CLI.
      const cli = join(other, 'dist', 'cli', 'main.js');
      const child = spawn(
        process.execPath,
        [
          CLI,
          'bench',
          'arms',
          '--seeds',
          '5,6',
          '--parallel',
          '2',
          '--common',
          '--format alibaba --scheduler eva --no-predict',
          '--arm',
          'a=--jobs 5',
          '--arm',
          'b=--jobs 3000',
          '--build',
          `b=${other}`,
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      try {
        let stderr = '';
        child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
        const closed = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
        // This build's runs go first, in threads; then the other build's, subprocesses.
        const deadline = Date.now() + 60_000;
        while (processesUnder(cli).length < 2 && Date.now() < deadline)
          await new Promise((r) => setTimeout(r, 100));
        expect(processesUnder(cli).length, stderr).toBe(2);
        child.kill(signal);
        expect(await closed, stderr).toBe(code);
        expect(stderr).toMatch(new RegExp(`bench arms: stopped by ${signal}`));
        // No run's own failure was reported: the stop decided the exit.
        expect(stderr).not.toMatch(/fleetwise: /);
        expect(processesUnder(cli)).toEqual([]);
      } finally {
        child.kill('SIGKILL');
        for (const pid of processesUnder(cli)) process.kill(pid, 'SIGKILL');
        rmSync(other, { recursive: true, force: true });
      }
    },
    120_000,
  );

  it('runs on to its report when the reader of its progress has gone (`2>&1 | head -1`)', async () => {
    const child = spawn(
      process.execPath,
      [
        CLI,
        'bench',
        'arms',
        '--seeds',
        '5,6',
        '--json',
        '--common',
        '--format alibaba --jobs 5 --scheduler eva --no-predict',
        '--arm',
        'a=',
        '--arm',
        'b=--queue srpt',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    try {
      let stdout = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      const closed = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
      // Every progress line after the first meets a closed pipe (EPIPE).
      await new Promise<void>((resolve) => child.stderr.once('data', () => resolve()));
      child.stderr.destroy();
      expect(await closed).toBe(0);
      expect((JSON.parse(stdout) as ArmsReport).seeds).toEqual([5, 6]);
    } finally {
      child.kill('SIGKILL');
    }
  }, 120_000);

  it('names the run that failed', async () => {
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
    // Refused before it runs as bad input (exit 2), naming the cap as it was set, rather than found out at the run's
    // time limit; every arm's run, as no seed is left to compare.
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /fleetwise: invalid input: every seed lost a run: nothing to compare \(2 runs failed\)\n {2}- seed 5 fifo: --cap-share 0\.5 × seed 5's uncapped peak \$[\d.]+\/h = \$[\d.]+\/h: \d+ of \d+ jobs can never be admitted/,
    );
    expect(r.stdout).toBe('');
  }, 60_000);

  it('names the flag and why for bad input, before running anything', async () => {
    const base = ['bench', 'arms', '--common', COMMON];
    const cases: [string[], RegExp][] = [
      [['--seeds', '5', '--arm', 'a=--queue fifo'], /give at least two arms/],
      [['--seeds', '9-5', '--arm', 'a=', '--arm', 'b='], /--seeds: range 9-5 runs backwards/],
      [
        ['--seeds', '5', '--arm', 'a=--seed 3', '--arm', 'b='],
        /--arm a\n\s+- --seed: the bench sets it on every run/,
      ],
      [
        ['--seeds', '5', '--arm', 'a=--save-colocation-table t.json', '--arm', 'b='],
        /--arm a\n\s+- --save-colocation-table: each run would write it over the one before/,
      ],
      [['--seeds', '5', '--arm', 'a=', '--arm', 'a='], /two arms are named a/],
      [['--seeds', '5', '--arm', '=x', '--arm', 'b='], /expected name=flags/],
      [['--seeds', '5', '--arm', 'a=--queue lifo', '--arm', 'b='], /--queue: /],
      [
        ['--seeds', '5', '--arm', 'a=--no-such-flag', '--arm', 'b='],
        /--arm a\n\s+- unknown option '--no-such-flag'/,
      ],
      [['--seeds', '5', '--arm', 'a=--scheduler eva,no-packing', '--arm', 'b='], /asks for 2 runs/],
      [
        ['--seeds', '5', '--cap-share', '0.5', '--arm', 'a=--cap-dollars-per-hour 9', '--arm', 'b='],
        /--cap-dollars-per-hour: with --cap-share the cap is the share/,
      ],
      [['--seeds', '5', '--arm', 'a=--queue fifo | rm -rf x', '--arm', 'b='], /no shell operators/],
      [
        ['--seeds', '5', '--arm', 'a=', '--arm', 'b=', '--build', 'c=dist'],
        /--build\n\s+- "c=dist": expected arm=dir/,
      ],
      [
        ['--seeds', '5', '--arm', 'a=', '--arm', 'b=', '--build', 'b=test'],
        /--build b\n\s+- .*test\/dist\/cli\/main\.js does not exist: build that checkout first/,
      ],
      [
        ['--seeds', '5', '--arm', 'a=', '--arm', 'b=', '--peaks-from', 'package.json'],
        /--peaks-from\n\s+- needs --cap-share/,
      ],
      // A file where the output directory should be: refused before any run, not after all of them.
      [
        ['--seeds', '5', '--arm', 'a=', '--arm', 'b=', '--out', 'package.json/arms'],
        /--out\n\s+- \S*\/package\.json is a file: cannot make package\.json\/arms/,
      ],
    ];
    // --cap-share's reference run is the --common flags alone: an instance cap or quota there caps it too.
    cases.push(
      [
        [
          '--seeds',
          '5',
          '--cap-share',
          '0.5',
          '--common',
          `${COMMON} --cap-instances 5`,
          '--arm',
          'a=',
          '--arm',
          'b=',
        ],
        /--common\n\s+- --cap-instances: with --cap-share the uncapped reference run would be capped/,
      ],
      [
        [
          '--seeds',
          '5',
          '--cap-share',
          '0.5',
          '--common',
          `${COMMON} --quota p:gpus=16`,
          '--arm',
          'a=',
          '--arm',
          'b=',
        ],
        /--common\n\s+- --quota: with --cap-share the uncapped reference run would be capped/,
      ],
      // A fixed trace with nothing else seeded: every seed the same run, and the differences' spread 0.
      [
        ['--seeds', '1-3', '--common', '--format eva --jobs 5 --scheduler eva', '--arm', 'a=', '--arm', 'b='],
        /--common\n\s+- every seed of --seeds 1,2,3 would be the same run/,
      ],
    );
    for (const [args, message] of cases) {
      const r = await runCli([...base, ...args]);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(message);
      expect(r.stderr).not.toContain('bench arms: seed');
    }
    // A controller config with a $ cap in --common would cap the reference run each seed's cap is a share of.
    const capped = await runCli([
      'bench',
      'arms',
      '--common',
      `${COMMON} --config examples/config/fleetwise-capped.yaml`,
      '--seeds',
      '5',
      '--cap-share',
      '0.5',
      '--arm',
      'a=',
      '--arm',
      'b=',
    ]);
    expect(capped.code).toBe(2);
    expect(capped.stderr).toMatch(
      /--common\n\s+- --cap-share sets each seed's cap from an uncapped run, but --common caps it at \$40\/h/,
    );
    // So would its instance cap.
    const dir = mkdtempSync(join(tmpdir(), 'fw-arms-config-'));
    try {
      const config = join(dir, 'instances.yaml');
      writeFileSync(
        config,
        readFileSync(join(PROJECT_ROOT, 'examples/config/fleetwise-capped.yaml'), 'utf8').replace(
          /^\s*maxCostPerHour: .*\n/m,
          '',
        ),
      );
      const instances = await runCli([
        'bench',
        'arms',
        '--common',
        `${COMMON} --config ${config}`,
        '--seeds',
        '5',
        '--cap-share',
        '0.5',
        '--arm',
        'a=',
        '--arm',
        'b=',
      ]);
      expect(instances.code).toBe(2);
      expect(instances.stderr).toMatch(/--common\n\s+- --cap-share .* but --common caps it at 12 instances/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

/** The built CLI, killed if it has not ended within `ms` (a command that loops for ever must fail the test, not hang it). */
function runCliWithin(args: readonly string[], ms: number): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: PROJECT_ROOT,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), ms);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe('bench arms --out', () => {
  it('refuses a directory on a kernel filesystem before any run', async () => {
    const base = ['bench', 'arms', '--seeds', '5', '--common', COMMON, '--arm', 'a=', '--arm', 'b='];
    const cases: [string, RegExp][] = [
      // Making a directory under /proc never returns.
      [
        '/proc/fw-arms-out',
        /--out\n\s+- \/proc is on procfs, a kernel filesystem that holds no files: cannot make/,
      ],
      // /sys takes no files: the reports would be lost after every run.
      ['/sys/kernel', /--out\n\s+- \/sys\/kernel is on sysfs, a kernel filesystem that holds no files/],
    ];
    for (const [out, message] of cases) {
      const r = await runCliWithin([...base, '--out', out], 20_000);
      expect(r.code, `${out}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toContain('bench arms: seed');
    }
  }, 60_000);
});

describe('bench arms input', () => {
  it('reads seed lists and ranges in the order given', () => {
    expect(parseSeedList('4-7')).toEqual([4, 5, 6, 7]);
    expect(parseSeedList('9, 1-2,5')).toEqual([9, 1, 2, 5]);
    expect(() => parseSeedList('3,3')).toThrow(/seed 3 is named twice/);
    expect(() => parseSeedList('x')).toThrow(/"x" is not a seed or a range/);
    expect(() => parseSeedList('0-500')).toThrow(/at most 200 seeds/);
    // Up to the simulator's largest seed, each read as typed.
    expect(parseSeedList('4294967295')).toEqual([4294967295]);
    expect(() => parseSeedList('4294967296')).toThrow(/seed 4294967296 is above 4294967295/);
    expect(() => parseSeedList('99999999999999999999')).toThrow(
      /seed 99999999999999999999 is above 4294967295/,
    );
    expect(() => parseSeedList('1,4294967290-004294967296')).toThrow(/seed 4294967296 is above/);
  });

  it('splits an arm as a shell would, expanding nothing', () => {
    expect(parseArm('b=--queue srpt --config "my dir/f.yaml"')).toEqual({
      name: 'b',
      args: ['--queue', 'srpt', '--config', 'my dir/f.yaml'],
    });
    expect(shellWords('--trace $HOME/t.json', 'x')).toEqual(['--trace', '$HOME/t.json']);
    expect(parseArm('off=')).toEqual({ name: 'off', args: [] });
  });

  it('tells a run the seed changes from one it does not', () => {
    const request = (flags: string): RunRequest =>
      simulationPlan(parseSimulateArgs(flags.split(' '), 'test')).requests[0] as RunRequest;
    expect(seedVariesRun(request('--format synthetic --jobs 5 --scheduler eva'))).toBe(true);
    expect(seedVariesRun(request('--format alibaba --jobs 5 --scheduler eva'))).toBe(true);
    expect(seedVariesRun(request('--format eva --jobs 5 --scheduler eva'))).toBe(false);
    // The bundled Eva trace is fixed, but the spot market's reclaims are drawn from the seed.
    expect(seedVariesRun(request('--format eva --jobs 5 --scheduler eva --spot on'))).toBe(true);
    // A fixed trace whose jobs declare a network (the bundled memcached load test does) draws its noise from the seed.
    expect(seedVariesRun(request('--trace examples/jobs --format specs --scheduler eva'))).toBe(true);
  });
});
