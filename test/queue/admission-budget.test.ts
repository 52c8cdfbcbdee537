import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { Catalog } from '../../src/core/catalog.js';
import type { ClusterSnapshot, SchedJob, SchedTask } from '../../src/core/model.js';
import type { Resources } from '../../src/core/resources.js';
import { Admission, type AdmitBy } from '../../src/queue/admission.js';
import { FIFO_CONFIG, type WfqConfig } from '../../src/queue/wfq.js';
import { queueViews } from '../../src/queue/admission-views.js';
import { makeType } from '../helpers/catalogs.js';
import { testCatalog } from '../sim/sim-fixtures.js';

/**
 * Sizing jobs against a $ cap by what the packed fleet costs. Each job is one task [1, 4, 8], whose standalone
 * reservation-price instance is a small.x ($3.6/h); `running` of them are packed on big.x instances (4 per
 * $10.8/h instance, i.e. $2.7/h each).
 */
function snapshot(running: number, waiting: number): ClusterSnapshot {
  const jobs: SchedJob[] = [];
  const tasks: SchedTask[] = [];
  const instances: { id: string; taskIds: string[] }[] = [];
  for (let i = 0; i < running + waiting; i += 1) {
    const id = `j${i}`;
    const placed = i < running;
    const instanceId = placed ? `i-${Math.floor(i / 4)}` : undefined;
    jobs.push({
      id,
      taskIds: [`${id}/t`],
      reconfigurable: true,
      arrivalSeconds: i,
      migrationDelaySeconds: 0,
      expectedRemainingSeconds: 100,
    });
    tasks.push({ id: `${id}/t`, jobId: id, key: id, demand: { any: [1, 4, 8] }, instanceId });
    if (instanceId !== undefined) {
      let inst = instances.find((x) => x.id === instanceId);
      if (inst === undefined) instances.push((inst = { id: instanceId, taskIds: [] }));
      inst.taskIds.push(`${id}/t`);
    }
  }
  return {
    nowSeconds: 1000,
    jobs,
    tasks,
    instances: instances.map((i) => ({ ...i, typeName: 'big.x', state: 'running' as const })),
  };
}

const admitted = (admitBy: AdmitBy, cap: number, running: number, waiting: number): number =>
  new Admission(testCatalog(), { caps: { maxCostPerHour: cap }, admitBy }).decide(
    snapshot(running, waiting),
    () => ({}),
  ).result.admitted.length;

describe('admission sized by the plan’s cost', () => {
  it('standalone sizing stops at the cap in small.x dollars; plan-cost sizing uses what packing saves', () => {
    // 4 running jobs on one big.x ($10.8/h; $14.4/h standalone), cap $18/h.
    expect(admitted('standalone', 18, 4, 4)).toBe(1); // 14.4 + 3.6 = 18
    expect(admitted('plan-cost', 18, 4, 4)).toBe(2); // 10.8 + 2 × 2.7 = 16.2; a third would be 18.9
  });

  it('with nothing running it sizes as standalone (no fleet to learn from)', () => {
    expect(admitted('plan-cost', 18, 0, 8)).toBe(admitted('standalone', 18, 0, 8));
  });

  it('admits as many waiting jobs as fit the cap at the fleet’s real cost per standalone dollar, no more', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 12 }),
        fc.integer({ min: 0, max: 12 }),
        fc.integer({ min: 4, max: 80 }),
        (running, waiting, cap) => {
          const n = admitted('plan-cost', cap, running, waiting);
          const fleet = 10.8 * Math.ceil(running / 4);
          const factor = running === 0 ? 1 : Math.max(0.25, Math.min(4, fleet / (3.6 * running)));
          const each = 3.6 * factor;
          // Jobs holding capacity count for the fleet's cost; those let in fit beside them, one more would not.
          if (n > 0) expect(fleet + n * each).toBeLessThanOrEqual(cap + 1e-6);
          if (n < waiting) expect(fleet + (n + 1) * each).toBeGreaterThan(cap - 1e-6);
        },
      ),
    );
  });
});

describe('what the queue views say of a job sized by the plan’s cost', () => {
  it('names what the caps have left against what the decision counted the job for', () => {
    // One running job alone on a big.x: the fleet costs 3× its standalone $3.6/h, so each job counts $10.8/h. Under a
    // $15/h cap the head waits for the caps ($10.8 + $10.8); at its standalone $3.6/h it would have seemed to fit,
    // and the view said it waited behind a head (itself).
    const admission = new Admission(testCatalog(), { caps: { maxCostPerHour: 15 }, admitBy: 'plan-cost' });
    const decision = admission.decide(snapshot(1, 2), () => ({}));
    expect(decision.result.admitted).toEqual([]);
    expect(decision.waiting.get('j1')?.footprint.instances[0]?.costPerHour).toBeCloseTo(10.8, 9);
    const view = queueViews(decision, admission).get('j1');
    expect(view).toMatchObject({ position: 1, reason: 'caps' });
    expect(view?.detail).toBe(
      'admitting it now would break maxCostPerHour (admitted jobs sized at $10.80/h of $15/h)',
    );
  });

  it('says an instance cap counts one instance per admitted task, not the instances running', () => {
    // Two jobs share one instance (four fit a big.x), yet the instance cap counts each as one: the view says so
    // rather than reporting two instances "in use" on a fleet of one.
    const admission = new Admission(testCatalog(), { caps: { maxInstances: 2 }, admitBy: 'standalone' });
    const decision = admission.decide(snapshot(2, 1), () => ({}));
    expect(decision.result.admitted).toEqual([]);
    expect(queueViews(decision, admission).get('j2')?.detail).toBe(
      'admitting it now would break maxInstances (admitted jobs sized at 2 of 2 instances, one counted per task)',
    );
  });
});

describe('a fleet that costs more than its jobs’ footprints (an idle instance not yet dropped)', () => {
  // R ($1/h standalone, on an s.x) runs beside an idle s.x: the fleet costs twice its footprint. W, at the head of the
  // FIFO queue, needs a $4/h w.x: with R, $5/h under the $6/h cap. V, behind it, needs a $0.25/h tiny.x.
  const catalog: Catalog = {
    provider: 'test',
    region: 'test',
    types: [
      makeType('tiny.x', [0, 1, 4], 0.25),
      makeType('s.x', [0, 4, 16], 1),
      makeType('w.x', [0, 16, 64], 4),
    ],
  };
  const job = (id: string, arrival: number, demand: Resources, instanceId?: string) => ({
    job: {
      id,
      taskIds: [`${id}.0`],
      reconfigurable: true,
      arrivalSeconds: arrival,
      migrationDelaySeconds: 0,
      expectedRemainingSeconds: 3600,
    } satisfies SchedJob,
    task: { id: `${id}.0`, jobId: id, key: id, demand: { any: demand }, instanceId } satisfies SchedTask,
  });
  const jobs = [job('R', 0, [0, 4, 8], 'i-1'), job('W', 10, [0, 16, 32]), job('V', 20, [0, 1, 2])];
  const world = (idle: boolean): ClusterSnapshot => ({
    nowSeconds: 1000,
    jobs: jobs.map((j) => j.job),
    tasks: jobs.map((j) => j.task),
    instances: [
      { id: 'i-1', typeName: 's.x', state: 'running', taskIds: ['R.0'] },
      ...(idle ? [{ id: 'i-2', typeName: 's.x', state: 'running' as const, taskIds: [] }] : []),
    ],
  });
  const admission = () => new Admission(catalog, { caps: { maxCostPerHour: 6 }, admitBy: 'plan-cost' });

  it('keeps a job that fits the cap at the head of its queue: waiting for the caps, not never-fits, nobody overtaking it', () => {
    const a = admission();
    const decision = a.decide(world(true), () => ({}));
    // Counted at twice its $4/h, W does not fit now ...
    expect(decision.waiting.get('W')?.footprint.instances[0]?.costPerHour).toBeCloseTo(8, 9);
    expect(decision.result.admitted).toEqual([]);
    // ... but it can: it keeps its place, and V (which would fit now) waits behind it.
    expect(decision.result.queued).toEqual([
      { jobId: 'W', classId: 'all', position: 0, reason: 'caps' },
      { jobId: 'V', classId: 'all', position: 1, reason: 'caps' },
    ]);
    expect(decision.queues.get('all')).toEqual(['W', 'V']);
    expect(queueViews(decision, a).get('W')?.reason).toBe('caps');
    // Once the idle instance is gone, both fit: W first.
    expect(admission().decide(world(false), () => ({})).result.admitted).toEqual(['W', 'V']);
  });

  it("says why a job never fits from its standalone footprint: its class's ceiling, not the cap the scaled one breaks", () => {
    // W alone is $4/h of the $6/h cap (66.7%), over its class's maxShare of 50%; counted at twice that while the
    // idle instance stands, $8/h would read as breaking the cap, which W alone does not.
    const config: WfqConfig = {
      classifyBy: 'team',
      classes: [{ id: 'capped', weight: 1, ordering: 'fifo', maxShare: 0.5 }],
      preemption: { ...FIFO_CONFIG.preemption, enabled: false },
    };
    const a = new Admission(catalog, { caps: { maxCostPerHour: 6 }, admitBy: 'plan-cost', config });
    const decision = a.decide(world(true), () => ({}));
    expect(decision.result.queued.find((q) => q.jobId === 'W')?.reason).toBe('never-fits');
    expect(queueViews(decision, a).get('W')?.detail).toBe(
      "it can never run in class capped: it needs 66.7% of the capped capacity, over the class's maxShare of 50.0%",
    );
  });

  it('still lists a job over the cap even at its standalone footprint as never-fits', () => {
    const big = job('B', 15, [0, 16, 32]);
    const decision = new Admission(catalog, { caps: { maxCostPerHour: 3 }, admitBy: 'plan-cost' }).decide(
      { ...world(true), jobs: [...jobs, big].map((j) => j.job), tasks: [...jobs, big].map((j) => j.task) },
      () => ({}),
    );
    expect(decision.result.queued.filter((q) => q.reason === 'never-fits').map((q) => q.jobId)).toEqual([
      'W',
      'B',
    ]);
  });
});
