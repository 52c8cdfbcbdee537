import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { COST_FIELDS } from '../../src/sim/report/normalize.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';

/**
 * `fleetwise simulate --runtime controller` and `--config` as users run them (`node dist/cli/main.js …` in a
 * subprocess). Run alone, this builds dist/ once when what the CLI loads is stale.
 */
/** Eva on the bundled pai_200 trace: the flags under test follow. */
const EVA_ON_PAI = ['simulate', '--format', 'eva', '--scheduler', 'eva'];
/** Eva on the first `jobs` pai_200 jobs under examples/config/fleetwise-capped.yaml ($40/h), JSON out. */
const withCappedConfig = (jobs: number): string[] => [
  ...EVA_ON_PAI,
  '--config',
  'examples/config/fleetwise-capped.yaml',
  '--jobs',
  String(jobs),
  '--no-predict',
  '--json',
];

interface JsonRun {
  readonly scheduler: string;
  readonly jobs: number;
  readonly totalCost: number;
  readonly meanJctHours: number;
  readonly peakCostPerHour: number;
  readonly startSkewSecondsMean?: number;
  readonly barrierIdleCost?: number;
  readonly waitToPlaceSecondsMean?: number;
}

function runs(stdout: string): JsonRun[] {
  return (JSON.parse(stdout) as { runs: JsonRun[] }).runs;
}

beforeAll(() => ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']));

describe('fleetwise simulate --runtime', () => {
  it('runs the controller on a small trace and prints the same JSON runs as the engine', async () => {
    const args = ['simulate', '--format', 'eva', '--jobs', '8', '--scheduler', 'eva,no-packing', '--json'];
    const [controller, engine] = await Promise.all([
      runCli([...args, '--runtime', 'controller']),
      runCli([...args, '--runtime', 'engine']),
    ]);
    expect(controller.code, controller.stderr).toBe(0);
    expect(engine.code, engine.stderr).toBe(0);
    const c = runs(controller.stdout);
    const e = runs(engine.stdout);
    expect(c.map((r) => r.scheduler)).toEqual(['eva', 'no-packing']);
    expect(c.map((r) => Object.keys(r).sort())).toEqual(e.map((r) => Object.keys(r).sort()));
    for (const r of c) {
      expect(r.jobs).toBe(8);
      expect(r.totalCost).toBeGreaterThan(0);
      expect(r.meanJctHours).toBeGreaterThan(0);
    }
    // No-Packing never moves a job: both runtimes agree to the cent.
    expect(c[1]?.totalCost).toBeCloseTo(e[1]?.totalCost ?? 0, 6);
    // And on where the money went, part by part: both runtimes keep the same ledger.
    const parts = (r: JsonRun | undefined) =>
      COST_FIELDS.map((f) => (r as Record<string, number> | undefined)?.[f]);
    expect(parts(c[1])).toEqual(parts(e[1]).map((v) => expect.closeTo(v ?? -1, 6)));
  });

  it("--config applies the controller config's caps: the fleet never costs more than its $/h cap", async () => {
    const args = withCappedConfig(30);
    const [controller, engine] = await Promise.all([
      runCli([...args, '--runtime', 'controller']),
      runCli([...args, '--runtime', 'engine']),
    ]);
    for (const out of [controller, engine]) {
      expect(out.code, out.stderr).toBe(0);
      const [run] = runs(out.stdout);
      expect(run?.jobs).toBe(30);
      expect(run?.peakCostPerHour).toBeGreaterThan(0);
      expect(run?.peakCostPerHour).toBeLessThanOrEqual(40 + 1e-9); // caps.maxCostPerHour in the file
    }
  });

  it("--config's placement between rounds and co-start run in the engine too, and flags override them", async () => {
    const args = withCappedConfig(60);
    const out = join(mkdtempSync(join(tmpdir(), 'fleetwise-config-report-')), 'report');
    const [fromConfig, off] = await Promise.all([
      runCli([...args, '--out', out]),
      runCli([...args, '--place-between-rounds', 'off', '--bind', 'off', '--co-start', 'off']),
    ]);
    for (const out of [fromConfig, off]) expect(out.code, out.stderr).toBe(0);
    // The config turns them on (its defaults, as a controller runs it); the capped run places jobs between rounds.
    const placed = (out: { stdout: string }): number =>
      (runs(out.stdout)[0] as { placedBetweenRounds?: number }).placedBetweenRounds ?? 0;
    expect(placed(fromConfig)).toBeGreaterThan(0);
    expect(placed(off)).toBe(0);
    // The report says what ran, the config's choices and tunables included.
    const { settings } = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as {
      settings: Record<string, unknown>;
    };
    expect(settings).toMatchObject({
      runtime: 'engine',
      controllerConfig: 'examples/config/fleetwise-capped.yaml',
      placeBetweenRounds: 'on (examples/config/fleetwise-capped.yaml, by default)',
      coStart: 'on (examples/config/fleetwise-capped.yaml, by default)',
      evaPaybackMargin: 8,
    });
    rmSync(dirname(out), { recursive: true, force: true });
  });

  it('a bad --runtime value is a clear error naming the flag', async () => {
    const out = await runCli([...EVA_ON_PAI, '--runtime', 'kubernetes']);
    expect(out.code).not.toBe(0);
    expect(out.stderr).toMatch(/--runtime/);
    expect(out.stderr).toMatch(/engine/);
    expect(out.stdout).toBe('');
  });

  it('--co-start runs the barrier in the controller runtime too: its start skew and barrier-idle cost fall', async () => {
    const args = [
      'simulate',
      ...['--format', 'alibaba', '--jobs', '40', '--seed', '5', '--multi-task', '0.5'],
      ...['--scheduler', 'eva', '--no-predict', '--json', '--runtime', 'controller'],
    ];
    const [off, on] = await Promise.all([
      runCli([...args, '--co-start', 'off']),
      runCli([...args, '--co-start', 'on']),
    ]);
    for (const out of [off, on]) expect(out.code, out.stderr).toBe(0);
    const [o] = runs(off.stdout);
    const [c] = runs(on.stdout);
    expect(o?.startSkewSecondsMean).toBeGreaterThan(0);
    expect(c?.startSkewSecondsMean).toBeLessThan(0.2 * (o?.startSkewSecondsMean ?? 0));
    expect(c?.barrierIdleCost).toBeLessThan(0.2 * (o?.barrierIdleCost ?? 0));
    expect(c?.waitToPlaceSecondsMean).toBeGreaterThan(0);
  });

  it('--make-before-break keeps moving jobs working through their new instances boot, alike in both runtimes', async () => {
    const args = [
      'simulate',
      ...['--format', 'alibaba', '--jobs', '40', '--seed', '5', '--multi-task', '0.5'],
      ...['--scheduler', 'eva', '--no-predict', '--json'],
    ];
    const outs = await Promise.all(
      ['engine', 'controller'].flatMap((runtime) =>
        ['off', 'on'].map((m) => runCli([...args, '--runtime', runtime, '--make-before-break', m])),
      ),
    );
    for (const out of outs) expect(out.code, out.stderr).toBe(0);
    const [engineOff, engineOn, controllerOff, controllerOn] = outs.map((o) => runs(o.stdout)[0] as JsonRun);
    // The moves into new instances no longer idle through the boot: jobs end sooner.
    expect(engineOn?.meanJctHours).toBeLessThan(engineOff?.meanJctHours ?? 0);
    // One round, one gate: the two runtimes carry it out alike.
    expect(controllerOn?.meanJctHours).toBeCloseTo(engineOn?.meanJctHours ?? 0, 6);
    expect(controllerOn?.totalCost).toBeCloseTo(engineOn?.totalCost ?? 0, 4);
    expect(controllerOff?.meanJctHours).toBeCloseTo(engineOff?.meanJctHours ?? 0, 6);
  });

  it('--job-ids controller names the jobs as the controller does: both runtimes then agree on eva to the cent', async () => {
    const args = [...EVA_ON_PAI, '--jobs', '40', '--json'];
    const [own, engine, controller] = await Promise.all([
      runCli(args),
      runCli([...args, '--job-ids', 'controller']),
      runCli([...args, '--job-ids', 'controller', '--runtime', 'controller']),
    ]);
    for (const out of [own, engine, controller]) expect(out.code, out.stderr).toBe(0);
    const [o, e, c] = [own, engine, controller].map((out) => runs(out.stdout)[0]);
    expect(c?.totalCost).toBeCloseTo(e?.totalCost ?? 0, 6);
    expect(c?.meanJctHours).toBeCloseTo(e?.meanJctHours ?? 0, 9);
    // The flag reached the run: under the trace's own names Eva breaks a tie the other way on this cut.
    expect(Math.abs((o?.totalCost ?? 0) - (e?.totalCost ?? 0))).toBeGreaterThan(1);
    const bad = await runCli([...EVA_ON_PAI, '--job-ids', 'store']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/--job-ids: must be trace or controller/);
    expect(bad.stdout).toBe('');
  });

  it('a bad --make-before-break value is a clear error naming the flag', async () => {
    const out = await runCli([...EVA_ON_PAI, '--make-before-break', 'sometimes']);
    expect(out.code).not.toBe(0);
    expect(out.stderr).toMatch(/make-before-break|makeBeforeBreak/);
    expect(out.stdout).toBe('');
  });
});
