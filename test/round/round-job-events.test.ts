import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot, SchedJob, SchedTask } from '../../src/core/model.js';
import { Admission } from '../../src/queue/admission.js';
import { runRound } from '../../src/round/round.js';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import type { Plan, PlanContext, Scheduler, ThroughputObservation } from '../../src/scheduler/types.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import { Simulation } from '../../src/world/simulation.js';
import { catalog as controllerCatalog, CPU_SMALL, jobSpec, rig } from '../controller/controller-fixtures.js';
import { table3Catalog } from '../helpers/catalogs.js';
import { testCatalog, trace, traceJob } from '../sim/sim-fixtures.js';

/**
 * Eva's event rate λ counts job arrivals and completions (§4.5). A job out of the round's plan without finishing (a
 * preemption victim, a job admission holds back, one the runtime leaves out of its snapshot) has not ended: the round
 * and both runtimes tell the plan which jobs are still live (PlanContext.liveJobIds).
 */

/** Records what each plan was shown and told, and plans as `inner` does. */
class Recording implements Scheduler {
  readonly seen: { jobs: string[]; live: readonly string[] | undefined }[] = [];
  constructor(private readonly inner: Scheduler) {}
  get name(): string {
    return this.inner.name;
  }
  observe(snapshot: ClusterSnapshot, observations: readonly ThroughputObservation[]): void {
    this.inner.observe(snapshot, observations);
  }
  plan(snapshot: ClusterSnapshot, context?: PlanContext): Plan {
    this.seen.push({ jobs: snapshot.jobs.map((j) => j.id), live: context?.liveJobIds });
    return this.inner.plan(snapshot, context);
  }
}

describe('the round: a preempted job is out of the plan, not ended', () => {
  const catalog = table3Catalog();
  const job = (id: string, arrivalSeconds: number, running: boolean): SchedJob => ({
    id,
    taskIds: [`${id}.0`],
    reconfigurable: true,
    arrivalSeconds,
    migrationDelaySeconds: 60,
    expectedRemainingSeconds: 36_000,
    ...(running ? { runningSinceSeconds: 0 } : {}),
  });
  const task = (jobId: string, instanceId: string | undefined): SchedTask => ({
    id: `${jobId}.0`,
    jobId,
    key: jobId,
    demand: { any: [0, 4, 12] },
    instanceId,
  });
  /** The runtime's view: a running on i-1; b beside it, or back in the queue; or b gone (finished). */
  const world = (nowSeconds: number, b: 'running' | 'queued' | 'finished'): ClusterSnapshot => ({
    nowSeconds,
    jobs: b === 'finished' ? [job('a', 0, true)] : [job('a', 0, true), job('b', 100, b === 'running')],
    tasks: [task('a', 'i-1'), ...(b === 'finished' ? [] : [task('b', b === 'running' ? 'i-1' : undefined)])],
    instances: [
      { id: 'i-1', typeName: 'c.x', state: 'running', taskIds: b === 'running' ? ['a.0', 'b.0'] : ['a.0'] },
    ],
  });
  /** Admission that preempts b while `preempt` says so, as a class under its share would have it. */
  class PreemptingB extends Admission {
    preempt = false;
    override victims() {
      return this.preempt ? [{ jobId: 'b', classId: 'all', forClassId: 'other', reason: 'test' }] : [];
    }
  }

  it('counts b once when it arrives and once when it finishes, however often it is preempted in between', () => {
    const eva = new EvaScheduler(catalog);
    const admission = new PreemptingB(catalog, { caps: {} });
    const counted = () => eva.exportState().history;
    const at = (nowSeconds: number, b: 'running' | 'queued' | 'finished', preempt: boolean) => {
      admission.preempt = preempt;
      runRound({
        snapshot: world(nowSeconds, b),
        jobInfo: () => ({}),
        admission,
        scheduler: eva,
        observations: [],
        catalog,
        carriedOut: true,
      });
    };
    at(300, 'running', false);
    at(600, 'running', true); // preempted: out of this round's plan
    at(900, 'queued', false); // back in the queue, planned again
    at(1200, 'running', true);
    at(1500, 'queued', false);
    expect(counted()).toMatchObject({ count: 2, firstSeconds: 0, lastSeconds: 100 });
    at(1800, 'finished', false);
    expect(counted()).toMatchObject({ count: 3, firstSeconds: 0, lastSeconds: 1800 });
  });
});

describe('the simulator tells the plan every live job', () => {
  it('a held job is live before the snapshot shows it; a finished one is not', () => {
    const scheduler = new Recording(new NoPackingScheduler(testCatalog()));
    new Simulation({
      trace: trace(traceJob('A', { iterations: 2000 }), {
        ...traceJob('B', { iterations: 100 }),
        dependsOn: ['A'],
      }),
      scheduler,
      catalog: testCatalog(),
      groundTruth: constantPairwise(1),
    }).run();
    const held = scheduler.seen.find((s) => s.jobs.includes('A') && !s.jobs.includes('B'));
    expect(held?.live).toEqual(['A', 'B']);
    const after = scheduler.seen.find((s) => s.jobs.includes('B') && !s.jobs.includes('A'));
    expect(after?.live).toEqual(['B']);
  });
});

describe('the controller tells the plan every live job', () => {
  it('a held job is live before the snapshot shows it; a cancelled one is not, and Eva counts its end', async () => {
    const eva = new EvaScheduler(controllerCatalog);
    const scheduler = new Recording(eva);
    const r = rig({}, { scheduler });
    const first = r.controller.submit(jobSpec('first', CPU_SMALL), 'research');
    const second = r.controller.submit(
      { ...jobSpec('second', CPU_SMALL), dependsOn: [first.id] },
      'research',
    );
    await r.controller.runRound();
    expect(scheduler.seen.at(-1)?.jobs).toEqual([first.id]);
    expect(new Set(scheduler.seen.at(-1)?.live)).toEqual(new Set([first.id, second.id]));
    const arrival = first.submittedAtSeconds;
    expect(eva.exportState().history).toMatchObject({
      count: 1,
      firstSeconds: arrival,
      lastSeconds: arrival,
    });
    r.controller.cancel(second.id);
    r.clock.advance(10);
    await r.controller.runRound();
    expect(scheduler.seen.at(-1)?.live).toEqual([first.id]);
    // second was never planned: neither its arrival nor its end is Eva's event.
    expect(eva.exportState().history).toMatchObject({
      count: 1,
      firstSeconds: arrival,
      lastSeconds: arrival,
    });
    r.controller.cancel(first.id);
    r.clock.advance(10);
    const end = r.clock.nowSeconds();
    await r.controller.runRound();
    expect(scheduler.seen.at(-1)?.live).toEqual([]);
    expect(eva.exportState().history).toMatchObject({ count: 2, firstSeconds: arrival, lastSeconds: end });
  });
});
