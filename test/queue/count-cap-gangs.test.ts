import { describe, expect, it } from 'vitest';
import type { NetworkDeclaration } from '../../src/core/network.js';
import { ValidationError } from '../../src/core/validation.js';
import { countCapHosts } from '../../src/queue/count-cap-hosts.js';
import { FIFO_CONFIG } from '../../src/queue/wfq.js';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { PriceBook } from '../../src/scheduler/reservation-price.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import { checkEveryJobAdmissible } from '../../src/world/never-fits.js';
import type { TraceJob } from '../../src/world/trace.js';
import { GPU_ONE, jobSpec, rig } from '../controller/controller-fixtures.js';
import { testCatalog, trace, traceJob, traceTask } from '../sim/sim-fixtures.js';

/**
 * A multi-task job with more tasks than the instance-count cap, under a scheduler that packs new instances to keep under
 * it (Eva's count-cap merge): admission sizes it as that packing holds it, so it runs instead of waiting for ever.
 */

// Tasks of [1, 4, 8]: one per small.x ($3.6/h), four on a big.x ($10.8/h).
const catalog = testCatalog();
const gang = (id: string, tasks: number, extra: Partial<TraceJob> = {}): TraceJob => ({
  ...traceJob(id, { tasks: Array.from({ length: tasks }, (_, i) => traceTask(`node${i}`)) }),
  ...extra,
});
const memcached: NetworkDeclaration = { sensitivity: 'memcached', pattern: 'star', gibPerHour: 36 };

describe('countCapHosts', () => {
  const book = new PriceBook(catalog);
  const demands = (n: number) =>
    Array.from({ length: n }, () => ({ any: [1, 4, 8] as [number, number, number] }));

  it('merges the cheapest hosts pairwise, least added $/hour first, until the count fits', () => {
    // 2 small.x → 1 big.x adds 10.8 − 7.2 = 3.6; small.x + big.x never fits a 5th GPU on one type.
    expect(countCapHosts(demands(2), book, 1)?.map((t) => t.name)).toEqual(['big.x']);
    expect(countCapHosts(demands(3), book, 2)?.map((t) => t.name)).toEqual(['big.x', 'small.x']);
    expect(countCapHosts(demands(4), book, 1)?.map((t) => t.name)).toEqual(['big.x']);
    // Nothing to merge: already within the count.
    expect(countCapHosts(demands(2), book, 2)?.map((t) => t.name)).toEqual(['small.x', 'small.x']);
  });

  it('stops where no pair fits one type: the count is then still over', () => {
    // Five GPUs: two big.x at best (4 + 1), over a cap of 1.
    expect(countCapHosts(demands(5), book, 1)?.map((t) => t.name)).toEqual(['big.x', 'small.x']);
  });

  it('has no answer for a task no type hosts', () => {
    expect(countCapHosts([{ any: [8, 4, 8] }], book, 1)).toBeUndefined();
  });
});

describe('a gang over the instance count', () => {
  const caps = { maxInstances: 1 };

  it('is admissible where the scheduler packs it, not where it places a task per instance', () => {
    const t = trace(gang('G', 2));
    expect(() =>
      checkEveryJobAdmissible(t, catalog, caps, 'standalone', FIFO_CONFIG, false, true),
    ).not.toThrow();
    expect(() => checkEveryJobAdmissible(t, catalog, caps, 'standalone', FIFO_CONFIG, false, false)).toThrow(
      ValidationError,
    );
    // Five tasks fit on no one instance: never, even packed.
    expect(() =>
      checkEveryJobAdmissible(trace(gang('F', 5)), catalog, caps, 'standalone', FIFO_CONFIG, false, true),
    ).toThrow(/--cap-instances 1/);
  });

  it('is sized one instance per task when it is network-aware (its instances are placed, never merged)', () => {
    const t = trace(gang('N', 2, { network: memcached }));
    expect(() => checkEveryJobAdmissible(t, catalog, caps, 'standalone', FIFO_CONFIG, false, true)).toThrow(
      /--cap-instances 1/,
    );
  });

  it('runs under Eva on the one instance that holds it, and the job behind it after', () => {
    const result = runSimulation({
      trace: trace(gang('G', 2), traceJob('S', { arrivalSeconds: 60 })),
      catalog,
      groundTruth: constantPairwise(1),
      scheduler: new EvaScheduler(catalog, { caps }),
      queue: { caps, config: FIFO_CONFIG },
      maxSimulatedSeconds: 50_000,
    });
    expect(result.jobs.map((j) => [j.id, j.successful])).toEqual([
      ['G', true],
      ['S', true],
    ]);
    expect(result.summary.peakCostPerHour).toBe(10.8);
  });

  it('waits under a scheduler that places a task per instance: its admission keeps the per-task size', () => {
    expect(
      () =>
        runSimulation({
          trace: trace(gang('G', 2)),
          catalog,
          groundTruth: constantPairwise(1),
          scheduler: new NoPackingScheduler(catalog),
          queue: { caps, config: FIFO_CONFIG },
          maxSimulatedSeconds: 5_000,
        }).jobs,
    ).toThrow(/never-fits/);
  });

  it('is admitted under a larger count where the packing reaches it, and the plan keeps to the count', () => {
    // Three tasks under a cap of 2: sized big.x + small.x (3 per-task instances alone break it).
    const two = { maxInstances: 2 };
    const result = runSimulation({
      trace: trace(gang('G', 3), gang('H', 3, { arrivalSeconds: 30 })),
      catalog,
      groundTruth: constantPairwise(1),
      scheduler: new EvaScheduler(catalog, { caps: two }),
      queue: { caps: two, config: FIFO_CONFIG },
      maxSimulatedSeconds: 50_000,
    });
    expect(result.jobs.map((j) => j.successful)).toEqual([true, true]);
    expect(Math.max(...result.series.runningInstances)).toBe(2);
  });
});

describe("the controller's admission of a gang over the instance count", () => {
  it('launches the one instance that holds both tasks and starts them there', async () => {
    const { controller, cloud } = rig({ caps: { maxInstances: 1 } });
    expect(controller.admission.settings.packsGangs).toBe(true);
    controller.submit(jobSpec('gang', GPU_ONE, { replicas: 2 }), 'research');
    const outcome = await controller.runRound('test');
    expect(outcome.actions.map((a) => a.kind)).toEqual(['launch-instance', 'start-task', 'start-task']);
    expect(cloud.live()).toHaveLength(1);
  });
});
