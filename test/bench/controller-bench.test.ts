import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  CONTROLLER_BENCH_DEFAULTS,
  CONTROLLER_BENCH_TARGETS,
  quantile,
  targetsMet,
  type ControllerBenchResult,
  type TargetName,
} from '../../src/bench/controller-bench.js';
import { formatControllerBench } from '../../src/cli/commands/bench-controller.js';
import { CLI, ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { processesUnder, processesUnderAfter } from '../helpers/processes-under.js';

/**
 * `fleetwise bench controller` at a tiny size, through the built CLI: a real controller process, workers simulated
 * over HTTP, every phase run. What is checked is the shape and the sense of the figures, never their speed
 * (benchmarks measure that; README "Benchmarks" has the full-size figures).
 */

const SIZE = {
  submissions: 12,
  waiting: 6,
  running: 3,
  workers: 4,
  finished: 5,
  rounds: 2,
};

describe('fleetwise bench controller (tiny)', () => {
  it('runs every phase against a real controller and prints one JSON object with sane figures', async () => {
    ensureBuiltCli();
    const out = await runCli([
      'bench',
      'controller',
      '--json',
      ...Object.entries(SIZE).flatMap(([k, v]) => [`--${k}`, String(v)]),
      '--heartbeat-seconds',
      '1',
    ]);
    expect(out.code, out.stderr).toBe(0);
    const lines = out.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const r = JSON.parse(lines[0] as string) as ControllerBenchResult;
    // Every figure the targets name, and their context.
    for (const name of Object.keys(CONTROLLER_BENCH_TARGETS) as (keyof typeof CONTROLLER_BENCH_TARGETS)[]) {
      expect(Number.isFinite(r[name]), name).toBe(true);
      expect(r[name], name).toBeGreaterThan(0);
      // Far below the sizes the targets are set at: none is judged.
      expect(r.met[name], name).toBeNull();
    }
    expect(r.targets).toEqual(CONTROLLER_BENCH_TARGETS);
    expect(r.submissions).toBe(SIZE.submissions);
    expect(r.submitP50Ms).toBeLessThanOrEqual(r.submitP99Ms);
    expect(r.heartbeatP50Ms).toBeLessThanOrEqual(r.heartbeatP99Ms);
    expect(r.roundMeanSeconds).toBeLessThanOrEqual(r.roundSeconds);
    expect(r.roundsMeasured).toBeGreaterThan(0);
    // The quota admits exactly `running` of the small jobs; the rest wait.
    expect(r.runningJobs).toBe(SIZE.running);
    expect(r.waitingJobs).toBe(SIZE.submissions - SIZE.running);
    expect(r.finishedJobs).toBeGreaterThanOrEqual(SIZE.finished);
    expect(r.workers).toBe(SIZE.workers);
    expect(r.heartbeats).toBeGreaterThan(0);
    expect(r.fleetErrors).toBe(0);
    expect(r.submitCpuMs).toBeGreaterThan(0);
    expect(r.heartbeatCpuMs).toBeGreaterThan(0);
    expect(r.cpus).toBeGreaterThan(0);
    expect(Object.keys(r.loadAverages).sort()).toEqual(['heartbeats', 'rounds', 'submit']);
    // Progress went to stderr, the table is for people.
    expect(out.stderr).toMatch(/^bench controller \[\d+\.\d s\]: submitting 12 jobs/m);
    const table = formatControllerBench(r);
    expect(table).toMatch(/^machine: \d+ cores, load average /m);
    for (const name of Object.keys(CONTROLLER_BENCH_TARGETS))
      expect(table).toMatch(new RegExp(`^${name}\\s.*\\sn/a\\s`, 'm'));
    expect(table).not.toMatch(/MISSED|\bmet\b/);
  }, 180_000);

  it('refuses a --cpu-prof it cannot write into, and names the flag of a bad size, before starting a controller', async () => {
    ensureBuiltCli();
    const tiny = [
      ...Object.entries(SIZE).flatMap(([k, v]) => [`--${k}`, String(v)]),
      '--heartbeat-seconds',
      '1',
    ];
    const cases: [string[], RegExp][] = [
      // node writes no profile where it cannot, and the bench would end as if it had.
      [['--cpu-prof', 'package.json'], /--cpu-prof\n\s+- package\.json is a file, not a directory/],
      [['--cpu-prof', '/proc/fw-profiles'], /--cpu-prof\n\s+- \/proc is on procfs/],
      [['--workers', '0'], /options\n\s+- --workers: must be ≥ 1/],
      [['--heartbeat-seconds', '0'], /options\n\s+- --heartbeat-seconds: must be > 0/],
      [['--concurrency', '1000'], /options\n\s+- --concurrency: must be ≤ 256/],
      [['--rounds', 'x'], /options\n\s+- --rounds: must be a number/],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(['bench', 'controller', ...tiny, ...args]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toMatch(/bench controller \[/);
    }
  }, 180_000);

  it('stopped by SIGTERM, it ends its controller and removes its state directories', async () => {
    ensureBuiltCli();
    const tmp = mkdtempSync(join(tmpdir(), 'fleetwise-bench-signal-'));
    try {
      // Large enough to be still submitting when the signal comes.
      const child = spawn(
        process.execPath,
        [CLI, 'bench', 'controller', '--json', '--submissions', '100000'],
        {
          env: { ...process.env, TMPDIR: tmp },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      const deadline = Date.now() + 60_000;
      while (!/submitting 100000 jobs/.test(stderr) && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 100));
      expect(stderr).toMatch(/submitting 100000 jobs/);
      // Its controller runs from a state directory under our TMPDIR.
      expect(processesUnder(tmp).length).toBeGreaterThan(0);
      expect(readdirSync(tmp).filter((f) => f.startsWith('fleetwise-bench-controller-'))).toHaveLength(1);
      child.kill('SIGTERM');
      expect(await exited).toBe(143);
      expect(stderr).toMatch(/stopped by SIGTERM/);
      expect(readdirSync(tmp)).toEqual([]);
      expect(await processesUnderAfter(tmp, 5_000)).toEqual([]);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }, 120_000);

  it('judges a target only at the sizes it is set at, and says which in the table', () => {
    const figures: Record<TargetName, number> = {
      submitsPerSecond: 250,
      submitP99Ms: 150,
      roundSeconds: 1,
      heartbeatsPerSecond: 5,
      heartbeatP99Ms: 20,
      memoryMiB: 100,
    };
    // At the defaults every target is judged.
    expect(targetsMet(figures, CONTROLLER_BENCH_DEFAULTS)).toEqual({
      submitsPerSecond: true,
      submitP99Ms: false,
      roundSeconds: true,
      heartbeatsPerSecond: false,
      heartbeatP99Ms: true,
      memoryMiB: true,
    });
    // Five workers cannot make 500 heartbeats/s; fewer finished jobs leave less in memory. Larger is judged.
    const met = targetsMet(figures, {
      ...CONTROLLER_BENCH_DEFAULTS,
      submissions: 5000,
      workers: 5,
      finished: 9_999,
    });
    expect(met).toEqual({
      submitsPerSecond: true,
      submitP99Ms: false,
      roundSeconds: true,
      heartbeatsPerSecond: null,
      heartbeatP99Ms: null,
      memoryMiB: null,
    });
    const result: ControllerBenchResult = {
      ...figures,
      submissions: 5000,
      submitP50Ms: 10,
      roundsDuringSubmissions: 3,
      roundMeanSeconds: 0.5,
      roundsMeasured: 5,
      waitingJobs: 2000,
      runningJobs: 500,
      finishedJobs: 9_999,
      workers: 5,
      heartbeats: 50,
      heartbeatP50Ms: 5,
      submitCpuMs: 1,
      heartbeatCpuMs: 1,
      cpus: 2,
      loadAverages: { submit: 1, rounds: 1, heartbeats: 1 },
      fleetErrors: 0,
      targets: CONTROLLER_BENCH_TARGETS,
      met,
    };
    const table = formatControllerBench(result);
    expect(table).toMatch(/^submitsPerSecond\s+250\s+≥ 200\s+met\s/m);
    expect(table).toMatch(/^submitP99Ms\s+150\.0\s+≤ 100\s+MISSED\s/m);
    expect(table).toMatch(/^heartbeatsPerSecond\s+5\s+≥ 500\s+n\/a\s/m);
    expect(table).toMatch(/^memoryMiB\s+100\s+≤ 500\s+n\/a\s/m);
    expect(table).toContain(
      "n/a: run at a smaller size than the target's (heartbeatsPerSecond, heartbeatP99Ms at --workers 1000; " +
        'memoryMiB at --finished 10000)\n',
    );
  });

  it('reads quantiles by nearest rank', () => {
    expect(quantile([], 0.99)).toBe(0);
    expect(quantile([5, 1, 3], 0.5)).toBe(3);
    expect(
      quantile(
        Array.from({ length: 100 }, (_, i) => i + 1),
        0.99,
      ),
    ).toBe(99);
    expect(quantile([7], 0.99)).toBe(7);
  });
});
