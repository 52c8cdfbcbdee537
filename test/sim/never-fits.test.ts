import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/core/validation.js';
import { Admission } from '../../src/queue/admission.js';
import { FIFO_CONFIG, type WfqConfig } from '../../src/queue/wfq.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { createScheduler } from '../../src/scheduler/registry.js';
import { executeControllerRun } from '../../src/sim/controller-runtime/execute.js';
import {
  executeRun,
  groundTruthFor,
  loadRequestCatalog,
  loadRequestTrace,
  type RunRequest,
} from '../../src/sim/run-request.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import { Simulation } from '../../src/world/simulation.js';
import { testCatalog, trace, traceJob } from './sim-fixtures.js';

/** Caps some job can never be admitted under: refused before the run, not found out at its time limit. */
describe('caps a job can never be admitted under', () => {
  const request = (caps: NonNullable<RunRequest['queue']>['caps']): RunRequest => ({
    scheduler: 'eva',
    trace: { format: 'eva', jobs: 30 },
    queue: { kind: 'fifo', caps, predict: false },
  });
  const failure = (run: () => unknown): ValidationError => {
    try {
      run();
    } catch (e) {
      expect(e).toBeInstanceOf(ValidationError);
      return e as ValidationError;
    }
    throw new Error('expected a validation error');
  };

  it('refuses a $/hour cap below some job, naming the flag, the count and a few jobs with their $/h', () => {
    const e = failure(() => executeRun(request({ maxCostPerHour: 5 })));
    expect(e.source).toBe('--cap-dollars-per-hour 5');
    expect(e.problems).toHaveLength(1);
    expect(e.problems[0]).toMatch(
      /^\d+ of 30 jobs can never be admitted: alone, each needs more than the cap/,
    );
    expect(e.problems[0]).toMatch(/: \S+ \(\$\d+\.\d\d\/h\), \S+ \(\$\d+\.\d\d\/h\), \S+ \(\$\d+\.\d\d\/h\)/);
    // Caps every job fits under still run.
    const result = executeRun({ ...request({ maxCostPerHour: 200 }), trace: { format: 'eva', jobs: 3 } });
    expect(result.jobs.every((j) => j.jctSeconds !== null)).toBe(true);
  });

  it("refuses it under plan-cost admission when a task's cheapest instance alone is over the $ cap", () => {
    // Packed, a $12.24/h job counts $3.06/h against admission, but any plan holding it pays its instance whole.
    const e = failure(() =>
      executeRun({
        ...request({ maxCostPerHour: 4 }),
        queue: { kind: 'fifo', caps: { maxCostPerHour: 4 }, predict: false, admitBy: 'plan-cost' },
      }),
    );
    expect(e.source).toBe('--cap-dollars-per-hour 4');
    expect(e.problems[0]).toMatch(
      /jobs can never be admitted: .*packing shares an instance.*\(\$12\.24\/h\)/,
    );
    // A cap over every task's cheapest instance runs, though some jobs need more than it alone.
    const result = executeRun({
      ...request({ maxCostPerHour: 13 }),
      trace: { format: 'eva', jobs: 3 },
      queue: { kind: 'fifo', caps: { maxCostPerHour: 13 }, predict: false, admitBy: 'plan-cost' },
    });
    expect(result.jobs.every((j) => j.jctSeconds !== null)).toBe(true);
  });

  it('refuses a quota of no GPUs with a GPU job', () => {
    const e = failure(() => executeRun(request({ quotas: [{ group: 'p', maxGpus: 0 }] })));
    expect(e.source).toBe('--quota p:gpus=0');
    expect(e.problems[0]).toMatch(/jobs can never be admitted: .*\(1 GPU in group p\)/);
  });

  it('refuses it in the controller runtime too, before the controller starts', async () => {
    await expect(
      executeControllerRun({ ...request({ maxCostPerHour: 5 }), runtime: 'controller' }),
    ).rejects.toThrow(/^--cap-dollars-per-hour 5: \d+ of 30 jobs can never be admitted/);
  });

  it("refuses a class's maxShare some job can never fit under, naming the class, its maxShare and the jobs", async () => {
    // Every job is large (over 1 s), and class large may hold 0.01% of the $200/h cap: $0.02/h, less than any instance.
    const config: WfqConfig = {
      ...FIFO_CONFIG,
      classes: [
        { id: 'small', weight: 1, ordering: 'fifo', maxSizeSeconds: 1 },
        { id: 'large', weight: 1, ordering: 'fifo', maxShare: 0.0001 },
      ],
    };
    const capped: RunRequest = {
      ...request({ maxCostPerHour: 200 }),
      queue: { kind: 'fifo', caps: { maxCostPerHour: 200 }, predict: false, config },
    };
    const e = failure(() => executeRun(capped));
    expect(e.source).toBe('queue class large (maxShare 0.0001)');
    expect(e.problems).toHaveLength(1);
    expect(e.problems[0]).toMatch(
      /^30 of 30 jobs can never be admitted: alone, each needs more of the capped capacity than the class may hold \(0\.0%\): \S+ \(\d+\.\d%\), \S+ \(\d+\.\d%\), \S+ \(\d+\.\d%\), and 27 more; raise the class's maxShare/,
    );
    await expect(executeControllerRun({ ...capped, runtime: 'controller' })).rejects.toThrow(
      /^queue class large \(maxShare 0\.0001\): 30 of 30 jobs can never be admitted/,
    );
    // A ceiling every job fits under runs.
    const roomy = { ...config, classes: config.classes.map((c) => ({ ...c, maxShare: 1 })) };
    const result = executeRun({
      ...capped,
      trace: { format: 'eva', jobs: 3 },
      queue: { ...capped.queue, caps: { maxCostPerHour: 200 }, config: roomy } as RunRequest['queue'],
    });
    expect(result.jobs.every((j) => j.jctSeconds !== null)).toBe(true);
  });

  it("names never-fits jobs when the engine's time limit stops a run", () => {
    const r = request({ maxCostPerHour: 5 });
    const catalog = loadRequestCatalog(r);
    const trace = loadRequestTrace({ ...r, trace: { format: 'eva', jobs: 3 } }, catalog);
    const groundTruth = groundTruthFor(r);
    const sim = new Simulation({
      trace,
      catalog,
      groundTruth,
      scheduler: createScheduler('eva', { catalog, interferenceProfile: groundTruth }),
      admission: new Admission(catalog, { caps: { maxCostPerHour: 5 } }),
      maxSimulatedSeconds: 20_000,
    });
    expect(() => sim.run()).toThrow(
      /did not finish by 20000 s: .*among them jobs the caps can never admit \(never-fits\): --cap-dollars-per-hour 5: \d+ of \d+ jobs/,
    );
  });
});

describe("a run stopped at the engine's time limit with jobs waiting in the queue", () => {
  it('says the queue held them back, how many and why, rather than asking whether the scheduler places them', () => {
    // One instance at most: A (a long job) runs, B and C wait (their one class's share is the whole capacity).
    const catalog = testCatalog();
    const sim = new Simulation({
      trace: trace(
        traceJob('A', { iterations: 100_000 }),
        traceJob('B', { arrivalSeconds: 10 }),
        traceJob('C', { arrivalSeconds: 20 }),
      ),
      catalog,
      groundTruth: constantPairwise(1),
      scheduler: new EvaScheduler(catalog, {}),
      admission: new Admission(catalog, { caps: { maxInstances: 1 } }),
      maxSimulatedSeconds: 2_000,
    });
    expect(() => sim.run()).toThrow(
      /did not finish by 2000 s: 3 jobs unfinished \(e\.g\. A, B, C\); 2 of them still waited for admission at the last round \(class all: 2 waiting for their class's share\): the queue layer held them back, not the scheduler/,
    );
  });
});
