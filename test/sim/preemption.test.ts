import { describe, expect, it } from 'vitest';
import type { WfqConfig } from '../../src/queue/wfq.js';
import { DEFAULT_PREEMPTION } from '../../src/queue/wfq.js';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import type { JobOutcome, RunResult } from '../../src/world/run-result.js';
import { testCatalog, trace, traceJob, traceTask } from './sim-fixtures.js';

/**
 * WFQ preemption in the simulator (PCS §3): a class short of its guaranteed share for `minShortRounds`
 * rounds stops the most recently admitted jobs of a class over its fair share, at a checkpoint, back to the queue.
 */
const catalog = testCatalog();

function config(enabled: boolean): WfqConfig {
  return {
    classifyBy: 'size',
    classes: [
      { id: 'small', weight: 0.95, maxSizeSeconds: 1000, ordering: 'fifo' },
      { id: 'large', weight: 0.05, ordering: 'fifo' },
    ],
    preemption: { ...DEFAULT_PREEMPTION, enabled },
  };
}

function run(enabled: boolean): RunResult {
  // The large job (2 tasks, 20,000 s each) fills both instances the cap allows; a small one arrives at 1,000 s.
  const t = trace(
    traceJob('large', { iterations: 20_000, tasks: [traceTask('node0'), traceTask('node1')] }),
    traceJob('small', { arrivalSeconds: 1000, iterations: 500 }),
  );
  return runSimulation({
    trace: t,
    catalog,
    groundTruth: () => 1,
    scheduler: new NoPackingScheduler(catalog),
    queue: { caps: { maxInstances: 2 }, config: config(enabled), predict: true },
  });
}

const outcome = (r: RunResult, id: string): JobOutcome => r.jobs.find((j) => j.id === id) as JobOutcome;

describe('WFQ preemption in the simulator', () => {
  it('the small class reclaims its share: the large job is checkpointed back to the queue and resumes later', () => {
    const r = run(true);
    expect(r.queue?.preemptions).toBe(1);
    const small = outcome(r, 'small');
    const large = outcome(r, 'large');
    expect(large.migrations).toBe(1); // a preemption costs like a migration
    // Hysteresis: short at the rounds at 1,200 and 1,500 s → stopped at 1,500 s, not at the first round.
    expect(small.startSeconds).toBeGreaterThan(1500);
    expect(small.endSeconds).toBeLessThan(1500 + 1000);
    // No work lost (checkpoint on stop): the large job finishes its 20,000 s after the small one is done.
    expect(large.endSeconds).toBeGreaterThan(20_000 + 500);
    expect(r.jobs.every((j) => j.endSeconds !== null)).toBe(true);
  });

  it('without preemption the small job waits for the large one', () => {
    const r = run(false);
    expect(r.queue?.preemptions).toBe(0);
    expect(outcome(r, 'small').startSeconds).toBeGreaterThan(outcome(r, 'large').endSeconds ?? Infinity);
    expect(outcome(r, 'large').migrations).toBe(0);
  });
});
