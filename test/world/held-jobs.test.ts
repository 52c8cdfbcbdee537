import { describe, expect, it } from 'vitest';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import { runForward } from '../../src/world/run-forward.js';
import type { TraceJob } from '../../src/world/trace.js';
import type { SimWorld, WorldJob } from '../../src/world/world.js';
import { EventLog, testCatalog, trace, traceJob } from '../sim/sim-fixtures.js';

/**
 * Held jobs are released by the finish of the dependency they were last waiting for (src/world/job-dependencies.ts):
 * an array that waits for all of another (the README's "an array of 1,000 may wait for all of another") reads each
 * held job's dependency list a bounded number of times in a run, not once per job that finishes, whether the jobs
 * arrive held in a trace or a prediction's world imports them held.
 */
const catalog = testCatalog();
const SIZE = 300;

/** How many times the run read each job's `dependsOn`. */
class DependencyReads {
  private readonly reads = new Map<string, number>();

  /** `job` waiting for `ids`, each read of its list counted. */
  waiting(job: TraceJob, ids: readonly string[]): TraceJob {
    return Object.defineProperty({ ...job }, 'dependsOn', {
      enumerable: true,
      get: () => {
        this.reads.set(job.id, (this.reads.get(job.id) ?? 0) + 1);
        return ids;
      },
    });
  }

  /** The most reads of any one job's list. */
  get most(): number {
    return Math.max(0, ...this.reads.values());
  }
}

/** Two arrays of SIZE: `a-i` with no dependencies, then `b-i` each waiting for every `a-`. */
function arrays(reads: DependencyReads): { first: TraceJob[]; second: TraceJob[] } {
  const first = Array.from({ length: SIZE }, (_, i) => traceJob(`a-${i}`, { iterations: 100 + i }));
  const ids = first.map((j) => j.id);
  const second = Array.from({ length: SIZE }, (_, i) =>
    reads.waiting(traceJob(`b-${i}`, { iterations: 50 }), ids),
  );
  return { first, second };
}

describe(`an array of ${SIZE} waiting for all of another`, () => {
  it('in a run: each held job is released when the last of the other array ends, its list read a few times', () => {
    const reads = new DependencyReads();
    const { first, second } = arrays(reads);
    const log = new EventLog();
    const result = runSimulation({
      trace: trace(...first, ...second),
      scheduler: new NoPackingScheduler(catalog),
      catalog,
      groundTruth: constantPairwise(1),
      onEvent: log.record,
    });
    const lastEnd = Math.max(...first.map((j) => log.time('completion', { jobId: j.id })));
    const released = log.all('released');
    // Released together at that finish, in arrival order, and every job ended.
    expect(released.map((e) => e.jobId)).toEqual(second.map((j) => j.id));
    expect(released.every((e) => e.timeSeconds === lastEnd)).toBe(true);
    expect(result.jobs.every((j) => j.endSeconds !== null)).toBe(true);
    // Once per finish would be SIZE reads and more.
    expect(reads.most).toBeLessThanOrEqual(5);
  });

  it('in a prediction: held jobs imported from a world are released as the run goes, their lists read a few times', () => {
    const reads = new DependencyReads();
    const { first, second } = arrays(reads);
    const worldJob = (spec: TraceJob, status: 'queued' | 'held'): WorldJob => ({
      spec,
      status,
      active: false,
      completedIterations: 0,
      startSeconds: null,
      migrations: 0,
      tasks: spec.tasks.map((t) => ({ name: t.name, state: 'queued' })),
    });
    const world: SimWorld = {
      nowSeconds: 0,
      jobs: [...first.map((j) => worldJob(j, 'queued')), ...second.map((j) => worldJob(j, 'held'))],
      instances: [],
      events: [{ kind: 'round', timeSeconds: 0 }],
      instanceCounter: 0,
    };
    const times = runForward({ world, scheduler: new NoPackingScheduler(catalog), catalog });
    const lastEnd = Math.max(...first.map((j) => times.get(j.id)?.endSeconds ?? Infinity));
    expect(lastEnd).toBeLessThan(Infinity);
    for (const j of second) expect(times.get(j.id)?.startSeconds).toBeGreaterThan(lastEnd);
    expect(reads.most).toBeLessThanOrEqual(5);
  });
});
