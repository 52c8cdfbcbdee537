import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseSimulateArgs } from '../../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../../src/cli/commands/simulate-plan.js';
import { loadCatalogFile } from '../../../src/cloud/catalog-file.js';
import type { Configuration, Plan, Scheduler } from '../../../src/scheduler/types.js';
import { NoPackingScheduler } from '../../../src/scheduler/baselines/no-packing.js';
import { createScheduler } from '../../../src/scheduler/registry.js';
import { executeControllerRun } from '../../../src/sim/controller-runtime/execute.js';
import { runControllerSimulation } from '../../../src/sim/controller-runtime/run-controller.js';
import { queueConfigFor } from '../../../src/sim/queue-options.js';
import {
  executeRun,
  groundTruthFor,
  loadRequestTrace,
  type RunRequest,
} from '../../../src/sim/run-request.js';
import { runSimulation } from '../../../src/sim/run-simulation.js';
import { constantPairwise } from '../../../src/world/ground-truth.js';
import type { ClusterSnapshot } from '../../../src/core/model.js';
import { withControllerJobIds } from '../../../src/sim/traces/controller-job-ids.js';
import {
  currentConfiguration,
  EventLog,
  ScriptedScheduler,
  testCatalog,
  trace,
  traceJob,
} from '../sim-fixtures.js';

/**
 * What the two runtimes report alike beyond cost and JCT: a plan over a cap refused and counted (not a failure),
 * an arrival's early round, the value of time a run planned with. Hand-sized worlds (sim-fixtures: small.x $3.6/h,
 * big.x $10.8/h, an instance registered 60 s after launch, a task running 5 s after its start, progress 7 s later).
 * Then, on a cut of pai_200: a controller config's migrations cap alone, and jobs' no-move windows through their init.
 */
const catalog = testCatalog();
const groundTruth = constantPairwise(1);

describe('a plan over a cap', () => {
  /** The first plan buys big.x ($10.8/h, over the $5/h cap); every later one places what waits on a small.x. */
  const script = (snapshot: ClusterSnapshot, round: number): Configuration => {
    const waiting = snapshot.tasks.filter((t) => t.instanceId === undefined).map((t) => t.id);
    if (waiting.length === 0) return currentConfiguration(snapshot);
    const current = currentConfiguration(snapshot).instances;
    return {
      instances: [
        ...current,
        { id: `new-${round}`, typeName: round === 0 ? 'big.x' : 'small.x', isNew: true, taskIds: waiting },
      ],
    };
  };

  it('is refused and counted in both runtimes, the run going on to the same end', async () => {
    const handTrace = trace(traceJob('a', { arrivalSeconds: 0, iterations: 1000 }));
    const caps = { maxCostPerHour: 5 };
    const config = queueConfigFor('fifo', [1000]);
    const engine = runSimulation({
      trace: handTrace,
      scheduler: new ScriptedScheduler('scripted', script),
      catalog,
      groundTruth,
      queue: { caps, config, predict: false },
    });
    const refused: string[] = [];
    const controller = await runControllerSimulation({
      trace: handTrace,
      scheduler: new ScriptedScheduler('scripted', script),
      catalog,
      groundTruth,
      settings: { caps, queue: config },
      inspectStore: (store) =>
        refused.push(...store.listEvents({ kind: 'round.rejected' }).map((e) => e.message ?? '')),
    });
    // The round at 0 is refused; the one at 300 launches a small.x: running at 365, progressing at 372, done at 1372.
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatch(/plan breaks a cap: maxCostPerHour/);
    expect(controller.jobs[0]).toMatchObject({ startSeconds: 372, endSeconds: 1372 });
    expect(controller.jobs.map((j) => [j.startSeconds, j.endSeconds])).toEqual(
      engine.jobs.map((j) => [j.startSeconds, j.endSeconds]),
    );
    expect(controller.summary.totalCost).toBeCloseTo(engine.summary.totalCost, 9);
    expect(controller.summary.instancesLaunched).toBe(1);
  });
});

describe('early rounds in the controller runtime', () => {
  it('plan for the first arrival at once, as the engine plans one second after it', async () => {
    // `a` arrives at 100, off the 300 s grid: an early round places it, not the grid's first round at 300.
    const handTrace = trace(traceJob('a', { arrivalSeconds: 100, iterations: 1000 }));
    const options = () => ({
      trace: handTrace,
      scheduler: createScheduler('no-packing', { catalog, interferenceProfile: groundTruth }),
      catalog,
      groundTruth,
      earlyRounds: true,
    });
    const engine = runSimulation(options());
    const controller = await runControllerSimulation(options());
    // Planned at 100: up at 110, registered at 160, running at 165, progressing at 172.
    expect(controller.jobs[0]).toMatchObject({ startSeconds: 172, endSeconds: 1172 });
    // The engine plans one second after the event (README: --early-rounds in the controller runtime).
    expect(engine.jobs[0]).toMatchObject({ startSeconds: 173, endSeconds: 1173 });
  });
});

describe('the controller runtime report', () => {
  it("names Eva's value of time as the engine's does", async () => {
    const request: RunRequest = {
      scheduler: 'eva',
      trace: { format: 'eva', jobs: 3, jobIds: 'controller' },
      evaValueOfTime: 3,
    };
    const engine = executeRun(request);
    const controller = await executeControllerRun({ ...request, runtime: 'controller' });
    expect(engine.summary.valueOfTimePerJobHour).toBe(3);
    expect(controller.summary.valueOfTimePerJobHour).toBe(3);
    expect(controller.summary.totalCost).toBeCloseTo(engine.summary.totalCost, 6);
  });
});

describe('the rounds both runtimes count', () => {
  /** No-Packing's placements; its first plan recorded as a Full Reconfiguration, every later one as partial. */
  class FirstFullScheduler extends NoPackingScheduler {
    private plans = 0;

    override plan(snapshot: ClusterSnapshot): Plan {
      const plan = super.plan(snapshot);
      const chosen = this.plans++ === 0 ? 'full' : 'partial';
      return { ...plan, decision: { ...plan.decision, chosen } };
    }
  }

  it('are those planned while a job was unfinished, so fullReconfigFraction agrees', async () => {
    // `a` progresses 72–1072; its instance is dropped at 1200 (a round with no job), then nothing runs until `b`
    // arrives at 2000, planned at 2100, progressing 2172–3172. Rounds at 0, 300, 600, 900, 1200, 2100, 2400, 2700
    // and 3000; the one at 3300 only drains the fleet.
    const handTrace = trace(
      traceJob('a', { arrivalSeconds: 0, iterations: 1000 }),
      traceJob('b', { arrivalSeconds: 2000, iterations: 1000 }),
    );
    const options = () => ({
      trace: handTrace,
      scheduler: new FirstFullScheduler(catalog),
      catalog,
      groundTruth,
    });
    const engine = runSimulation(options());
    let recorded = 0;
    const controller = await runControllerSimulation({
      ...options(),
      inspectStore: (store) => (recorded = store.listRounds().length),
    });
    expect(controller.jobs.map((j) => [j.startSeconds, j.endSeconds])).toEqual([
      [72, 1072],
      [2172, 3172],
    ]);
    expect(engine.jobs.map((j) => [j.startSeconds, j.endSeconds])).toEqual([
      [72, 1072],
      [2172, 3172],
    ]);
    // One Full Reconfiguration: the fraction is one over the rounds counted.
    expect(1 / engine.summary.fullReconfigFraction).toBe(9);
    expect(1 / controller.summary.fullReconfigFraction).toBe(9);
    // The controller did plan the drain at 3300 (it has no other way to end its fleet); it is not counted.
    expect(recorded).toBe(10);
    expect(controller.summary.totalCost).toBeCloseTo(engine.summary.totalCost, 9);
  });
});

describe('a controller config with a migrations cap and no other', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fleetwise-runtime-parity-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('holds both runtimes to it: no job moves, and they run alike', async () => {
    const config = join(dir, 'no-moves.yaml');
    writeFileSync(
      config,
      `cluster: parity\nstateDir: ${join(dir, 'state')}\ncaps:\n  maxMigrationsPerRound: 0\n`,
    );
    const request = (flags: string): RunRequest =>
      simulationPlan(
        parseSimulateArgs(
          `--format eva --jobs 10 --scheduler eva --no-predict --job-ids controller ${flags}`
            .trim()
            .split(' '),
          'test',
        ),
      ).requests[0] as RunRequest;
    // Uncapped, Eva moves jobs on this cut.
    expect(executeRun(request('')).summary.migrationsPerJob).toBeGreaterThan(0);
    const engine = executeRun(request(`--config ${config}`));
    const controller = await executeControllerRun(request(`--config ${config} --runtime controller`));
    expect(engine.summary.migrationsPerJob).toBe(0);
    expect(controller.summary.migrationsPerJob).toBe(0);
    expect(controller.summary.totalCost).toBeCloseTo(engine.summary.totalCost, 6);
    expect(controller.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds])).toEqual(
      engine.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds]),
    );
  });
});

describe('no-move windows in both runtimes', () => {
  it('eva, first 10 pai_200 jobs each asking not to be moved for 600 s: held through their init alike, identical', async () => {
    const realCatalog = loadCatalogFile();
    const truth = groundTruthFor({});
    const cut = loadRequestTrace({ trace: { format: 'eva', jobs: 10 } }, realCatalog);
    const held = withControllerJobIds({ ...cut, jobs: cut.jobs.map((j) => ({ ...j, noMoveSeconds: 600 })) });
    const log = new EventLog();
    const options = () => ({
      trace: held,
      scheduler: createScheduler('eva', { catalog: realCatalog, interferenceProfile: truth }),
      catalog: realCatalog,
      groundTruth: truth,
    });
    // The engine's Eva, with the jobs each round's plan pinned.
    const eva = options().scheduler;
    const pinnedAt = new Map<number, string[]>();
    const recording: Scheduler = {
      name: eva.name,
      observe: (snapshot, observations) => eva.observe(snapshot, observations),
      plan: (snapshot) => {
        const plan = eva.plan(snapshot);
        pinnedAt.set(
          snapshot.nowSeconds,
          plan.decision.pinned.map((p) => p.jobId),
        );
        return plan;
      },
    };
    const engine = runSimulation({ ...options(), scheduler: recording, onEvent: log.record });
    const controller = await runControllerSimulation(options());
    // Every round while a job initializes (its tasks all launched, its progress not begun) pins it.
    const launchedAt = new Map<string, number>();
    const initializing: { job: string; from: number; to: number }[] = [];
    for (const e of log.entries) {
      if (e.kind === 'launched') launchedAt.set(e.jobId ?? '', e.timeSeconds);
      if (e.kind === 'job-active')
        initializing.push({
          job: e.jobId ?? '',
          from: launchedAt.get(e.jobId ?? '') ?? 0,
          to: e.timeSeconds,
        });
    }
    const heldRounds = initializing.flatMap(({ job, from, to }) =>
      [...pinnedAt].filter(([t]) => t > from && t < to).map(([t, pinned]) => [job, t, pinned.includes(job)]),
    );
    expect(heldRounds.length).toBeGreaterThan(0);
    expect(heldRounds.filter(([, , pinned]) => !pinned)).toEqual([]);
    expect(engine.summary.migrationsPerJob).toBeGreaterThan(0);
    expect(controller.summary.totalCost).toBeCloseTo(engine.summary.totalCost, 6);
    expect(controller.summary.migrationsPerJob).toBe(engine.summary.migrationsPerJob);
    expect(controller.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds])).toEqual(
      engine.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds]),
    );
  });
});
