import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { QueueCaps } from '../../src/queue/caps.js';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import { queueConfigFor, QUEUE_KINDS } from '../../src/sim/queue-options.js';
import { schedulerCaps } from '../../src/round/plan-caps.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { createScheduler } from '../../src/scheduler/registry.js';
import { instanceType, testCatalog, trace, traceJob, traceTask } from './sim-fixtures.js';

const flat = (): number => 1;

const jobArb = fc.record({
  arrivalSeconds: fc.integer({ min: 0, max: 3000 }),
  iterations: fc.integer({ min: 100, max: 5000 }),
  tasks: fc.integer({ min: 1, max: 2 }),
});

describe('a quota one instance of a type would break', () => {
  it('keeps Eva off that type: the jobs run on the types that fit, instead of every plan being refused', () => {
    // A mid.x (3 GPUs, $9/h) is cheaper per GPU than small.x (1 GPU, $3.6/h), but its 28 vCPUs break a 24-vCPU quota on
    // their group alone: Eva packed three jobs onto one, and the round refused that plan every time.
    const catalog = testCatalog([instanceType('mid.x', [3, 28, 96], 9)]);
    const caps: QueueCaps = { quotas: [{ group: 'standard', maxVcpus: 24 }] };
    const jobs = Array.from({ length: 4 }, (_, i) => traceJob(`j${i}`, { iterations: 2000 }));
    const r = runSimulation({
      trace: trace(...jobs),
      catalog,
      groundTruth: flat,
      scheduler: createScheduler('eva', { catalog, interferenceProfile: flat, caps: schedulerCaps(caps) }),
      queue: {
        caps,
        config: queueConfigFor(
          'fifo',
          jobs.map((j) => j.durationSeconds),
        ),
        predict: false,
      },
    });
    expect(r.jobs.every((j) => j.endSeconds !== null)).toBe(true);
    expect(Math.max(...r.series.capacityVcpus)).toBeLessThanOrEqual(24);
  });
});

describe('caps under the queue layer (property)', () => {
  it('the billed $/h, instance count and vCPU quota never exceed the caps, every job finishes and is predicted', () => {
    const catalog = testCatalog();
    fc.assert(
      fc.property(
        fc.array(jobArb, { minLength: 1, maxLength: 6 }),
        // Every job fits alone: at most 2 small.x ($7.2/h).
        fc.oneof(
          fc.double({ min: 7.2, max: 20, noNaN: true }).map((c): QueueCaps => ({ maxCostPerHour: c })),
          fc.integer({ min: 2, max: 4 }).map((n): QueueCaps => ({ maxInstances: n })),
          // AWS-style quota on the family group of small.x/big.x (`standard`): at least 2 small.x (16 vCPUs).
          fc
            .integer({ min: 16, max: 40 })
            .map((v): QueueCaps => ({ quotas: [{ group: 'standard', maxVcpus: v }] })),
        ),
        fc.boolean(),
        fc.constantFrom(...QUEUE_KINDS),
        fc.constantFrom('no-packing', 'eva'),
        (specs, caps, predict, kind, name) => {
          const jobs = specs.map((s, i) =>
            traceJob(`j${i}`, {
              arrivalSeconds: s.arrivalSeconds,
              iterations: s.iterations,
              tasks: Array.from({ length: s.tasks }, (_, t) => traceTask(`node${t}`)),
            }),
          );
          const scheduler =
            name === 'eva'
              ? createScheduler('eva', { catalog, interferenceProfile: flat, caps: schedulerCaps(caps) })
              : new NoPackingScheduler(catalog);
          const sizes = jobs.map((j) => j.durationSeconds * j.tasks.length);
          const r = runSimulation({
            trace: trace(...jobs),
            catalog,
            groundTruth: flat,
            scheduler,
            queue: { caps, config: queueConfigFor(kind, sizes), predict },
          });
          if (caps.maxCostPerHour !== undefined)
            expect(Math.max(...r.series.costPerHour)).toBeLessThanOrEqual(caps.maxCostPerHour + 1e-9);
          if (caps.maxInstances !== undefined)
            expect(Math.max(...r.series.runningInstances)).toBeLessThanOrEqual(caps.maxInstances);
          const vcpuQuota = caps.quotas?.[0]?.maxVcpus;
          if (vcpuQuota !== undefined)
            expect(Math.max(...r.series.capacityVcpus)).toBeLessThanOrEqual(vcpuQuota);
          if (predict) expect(r.jobs.every((j) => j.predictedEndSeconds !== null)).toBe(true);
          expect(r.jobs.every((j) => j.endSeconds !== null)).toBe(true);
        },
      ),
      { numRuns: 100, seed: 6 },
    );
  });
});
