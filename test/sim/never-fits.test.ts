import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/core/validation.js';
import { Admission } from '../../src/queue/admission.js';
import { createScheduler } from '../../src/scheduler/registry.js';
import { executeControllerRun } from '../../src/sim/controller-runtime/execute.js';
import {
  executeRun,
  groundTruthFor,
  loadRequestCatalog,
  loadRequestTrace,
  type RunRequest,
} from '../../src/sim/run-request.js';
import { Simulation } from '../../src/world/simulation.js';

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
