import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../../src/cloud/catalog-file.js';
import { runSimulation } from '../../../src/sim/run-simulation.js';
import {
  executeRun,
  groundTruthFor,
  loadRequestTrace,
  type RunRequest,
} from '../../../src/sim/run-request.js';
import { executeControllerRun } from '../../../src/sim/controller-runtime/execute.js';
import { withControllerJobIds } from '../../../src/sim/traces/controller-job-ids.js';
import { createScheduler, type SchedulerName } from '../../../src/scheduler/registry.js';
import { runControllerSimulation } from '../../../src/sim/controller-runtime/run-controller.js';
import { queueConfigFor } from '../../../src/sim/queue-options.js';
import type { Trace, TraceJob } from '../../../src/world/trace.js';

/**
 * The controller runtime measures what the engine measures, on cuts of pai_200 with the measured contention matrix.
 * No-Packing never moves a job, so only the timing model is compared: it must agree to the cent and the second.
 * Eva's plans break ties by comparing task and instance ids as text, and the controller names jobs `job-N` where the
 * trace names them `N−1`, so a trace under its own names is planned differently now and then; named as the controller
 * names them (`withControllerJobIds`, `simulate --job-ids controller`), the two runtimes plan alike, job by job.
 */
const catalog = loadCatalogFile();
const groundTruth = groundTruthFor({});

async function both(name: SchedulerName, jobs: number) {
  const trace = loadRequestTrace({ trace: { format: 'eva', jobs } }, catalog);
  const engine = runSimulation({
    trace,
    scheduler: createScheduler(name, { catalog, interferenceProfile: groundTruth }),
    catalog,
    groundTruth,
  });
  const controller = await runControllerSimulation({
    trace,
    scheduler: createScheduler(name, { catalog, interferenceProfile: groundTruth }),
    catalog,
    groundTruth,
  });
  return { engine: engine.summary, controller: controller.summary };
}

/** `trace` in both runtimes; their cost and mean JCT must agree to the cent and the second. */
async function runBoth(trace: Trace, name: SchedulerName) {
  const options = () => ({
    trace,
    scheduler: createScheduler(name, { catalog, interferenceProfile: groundTruth }),
    catalog,
    groundTruth,
  });
  const engine = runSimulation(options());
  const controller = await runControllerSimulation(options());
  expect(controller.summary.totalCost).toBeCloseTo(engine.summary.totalCost, 6);
  expect(controller.summary.meanJctHours).toBeCloseTo(engine.summary.meanJctHours, 9);
  return { engine, controller, options };
}

describe('controller runtime ≡ engine on pai_200 cuts', () => {
  it('no-packing, first 40 jobs: identical cost, JCT and fleet', async () => {
    const { engine, controller } = await both('no-packing', 40);
    expect(controller.totalCost).toBeCloseTo(engine.totalCost, 6);
    expect(controller.meanJctHours).toBeCloseTo(engine.meanJctHours, 9);
    expect(controller.peakCostPerHour).toBeCloseTo(engine.peakCostPerHour, 9);
    expect(controller.instancesLaunched).toBe(engine.instancesLaunched);
  });

  it('eva, first 40 jobs named as the controller names them: identical, job by job', async () => {
    const cut = loadRequestTrace({ trace: { format: 'eva', jobs: 40 } }, catalog);
    const { engine, controller, options } = await runBoth(withControllerJobIds(cut), 'eva');
    expect(controller.summary.migrationsPerJob).toBe(engine.summary.migrationsPerJob);
    expect(controller.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds])).toEqual(
      engine.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds]),
    );
    // The names matter on this cut: under the trace's own (`0`…`39`, where `10` sorts before `9`) Eva breaks some tie
    // the other way, so a test of the runtimes under different names could not ask for equality.
    const ownNames = runSimulation({ ...options(), trace: cut });
    expect(Math.abs(ownNames.summary.totalCost - engine.summary.totalCost)).toBeGreaterThan(1);
  });
});

describe('controller runtime ≡ engine under a $/h cap', () => {
  it('no-packing, first 80 pai_200 jobs at $60/h (fifo): identical, a launch held for the cap going out when room frees', async () => {
    // The cap binds: launches wait for instances to go. The engine launches the moment one has gone; the controller's
    // loop is woken by the simulated cloud's termination as by a worker's report, so it launches then too.
    const trace = loadRequestTrace({ trace: { format: 'eva', jobs: 80 } }, catalog);
    const caps = { maxCostPerHour: 60 };
    const config = queueConfigFor(
      'fifo',
      trace.jobs.map((j) => j.durationSeconds * j.tasks.length),
    );
    const scheduler = () => createScheduler('no-packing', { catalog, interferenceProfile: groundTruth });
    const engine = runSimulation({
      trace,
      scheduler: scheduler(),
      catalog,
      groundTruth,
      queue: { caps, config, predict: false },
    });
    const controller = await runControllerSimulation({
      trace,
      scheduler: scheduler(),
      catalog,
      groundTruth,
      settings: { caps, queue: config },
    });
    expect(engine.summary.peakCostPerHour).toBeGreaterThan(0.95 * caps.maxCostPerHour);
    expect(controller.summary.peakCostPerHour).toBeLessThanOrEqual(caps.maxCostPerHour);
    expect(controller.summary.totalCost).toBeCloseTo(engine.summary.totalCost, 6);
    expect(controller.jobs.map((j) => [j.startSeconds, j.endSeconds])).toEqual(
      engine.jobs.map((j) => [j.startSeconds, j.endSeconds]),
    );
  });

  it('eva with the multi-task package (srpt, plan-cost admission, placement between rounds with binding), 60 Alibaba jobs, jobs named alike: identical', async () => {
    // 60% of this cut's uncapped peak ($309.20/h): the cap holds jobs back, and a job is placed between rounds.
    const request: RunRequest = {
      scheduler: 'eva',
      trace: {
        format: 'alibaba',
        jobs: 60,
        seed: 7,
        multiTaskShare: 0.5,
        arrivalRateScale: 2,
        jobIds: 'controller',
      },
      queue: { kind: 'srpt', caps: { maxCostPerHour: 185.52 }, predict: false, admitBy: 'plan-cost' },
      starts: { coStart: false, placeBetweenRounds: true, bind: true },
    };
    const engine = executeRun(request);
    const controller = await executeControllerRun({ ...request, runtime: 'controller' });
    expect(engine.starts?.placedBetweenRounds).toBeGreaterThan(0);
    expect(engine.summary.peakCostPerHour).toBeGreaterThan(0.95 * 185.52);
    expect(controller.summary.peakCostPerHour).toBeLessThanOrEqual(185.52);
    expect(controller.summary.totalCost).toBeCloseTo(engine.summary.totalCost, 6);
    expect(controller.starts).toEqual(engine.starts);
    expect(controller.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds])).toEqual(
      engine.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds]),
    );
  });
});

describe('controller runtime ≡ engine with job dependencies', () => {
  it('no-packing, first 40 pai_200 jobs, every third one waiting for the job two before it: identical', async () => {
    const cut = loadRequestTrace({ trace: { format: 'eva', jobs: 40 } }, catalog);
    // Each held job joins the queue when its dependency ends, in the controller as in the engine.
    const trace = {
      ...cut,
      jobs: cut.jobs.map((j, i) =>
        i % 3 === 2 ? { ...j, dependsOn: [(cut.jobs[i - 2] as TraceJob).id] } : j,
      ),
    };
    const { engine, controller, options } = await runBoth(trace, 'no-packing');
    expect(controller.summary.instancesLaunched).toBe(engine.summary.instancesLaunched);
    expect(controller.jobs.map((j) => [j.startSeconds, j.endSeconds])).toEqual(
      engine.jobs.map((j) => [j.startSeconds, j.endSeconds]),
    );
    // The dependencies held jobs back: the same cut without them ends sooner on average.
    const free = runSimulation({ ...options(), trace: cut });
    expect(engine.summary.meanJctHours).toBeGreaterThan(free.summary.meanJctHours);
  });

  it('no-packing, any dependency graph over 12 pai_200 jobs (property): the same start and end for every job', async () => {
    const cut = loadRequestTrace({ trace: { format: 'eva', jobs: 12 } }, catalog);
    const graphs = fc
      .array(fc.array(fc.nat(), { maxLength: 2 }), { minLength: 12, maxLength: 12 })
      .map((picks) =>
        cut.jobs.map((j, i) => {
          const dependsOn =
            i === 0 ? [] : [...new Set(picks[i]?.map((p) => (cut.jobs[p % i] as TraceJob).id))];
          return dependsOn.length === 0 ? j : { ...j, dependsOn };
        }),
      );
    await fc.assert(
      fc.asyncProperty(graphs, async (jobs) => {
        const options = () => ({
          trace: { ...cut, jobs },
          scheduler: createScheduler('no-packing', { catalog, interferenceProfile: groundTruth }),
          catalog,
          groundTruth,
        });
        const engine = runSimulation(options());
        const controller = await runControllerSimulation(options());
        expect(controller.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds])).toEqual(
          engine.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds]),
        );
      }),
      { numRuns: 12, seed: 3 },
    );
  }, 120_000);
});
