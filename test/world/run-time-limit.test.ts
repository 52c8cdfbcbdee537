import { describe, expect, it } from 'vitest';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import { runControllerSimulation } from '../../src/sim/controller-runtime/run-controller.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { withControllerJobIds } from '../../src/sim/traces/controller-job-ids.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import { runForward } from '../../src/world/run-forward.js';
import type { TraceJob } from '../../src/world/trace.js';
import type { SimWorld } from '../../src/world/world.js';
import { testCatalog, trace, traceJob } from '../sim/sim-fixtures.js';

/**
 * A run gives up 30 days and ten times its longest job after its last arrival. A job runs for its iterations, not for
 * its duration: one whose iterations run longer than its duration says (a generated job of one long iteration, whose
 * iterations Eva's recipe rounds down to at least one) still finishes within the limit, in every runtime.
 */
const catalog = testCatalog();
const RUNNING_SECONDS = 32 * 86_400;

/** One iteration of 32 days, said to last a second: past 30 days + 10 × its duration. */
const longJob: TraceJob = {
  ...traceJob('J', { iterations: 1, fullThroughput: 1 / RUNNING_SECONDS }),
  durationSeconds: 1,
};

const options = () => ({
  trace: withControllerJobIds(trace(longJob)),
  scheduler: new NoPackingScheduler(catalog),
  catalog,
  groundTruth: constantPairwise(1),
  // Hourly rounds: the controller runtime reaches 32 days in few of them.
  roundSeconds: 3600,
});

describe('the time limit of a run whose job runs longer than its duration', () => {
  it('lets the engine finish it', () => {
    const [job] = runSimulation(options()).jobs;
    expect(job?.endSeconds).toBeGreaterThanOrEqual(RUNNING_SECONDS);
  });

  it('lets the controller runtime finish it', async () => {
    const [job] = (await runControllerSimulation(options())).jobs;
    expect(job?.endSeconds).toBeGreaterThanOrEqual(RUNNING_SECONDS);
  });

  it('lets a prediction see it end', () => {
    const world: SimWorld = {
      nowSeconds: 0,
      jobs: [
        {
          spec: longJob,
          status: 'queued',
          active: false,
          completedIterations: 0,
          startSeconds: null,
          migrations: 0,
          tasks: longJob.tasks.map((t) => ({ name: t.name, state: 'queued' })),
        },
      ],
      instances: [],
      events: [{ kind: 'round', timeSeconds: 0 }],
      instanceCounter: 0,
    };
    const times = runForward({ world, scheduler: new NoPackingScheduler(catalog), catalog });
    expect(times.get('J')?.endSeconds).toBeGreaterThanOrEqual(RUNNING_SECONDS);
  });
});
