import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot, SchedJob, SchedTask } from '../../src/core/model.js';
import { Admission, UNKNOWN_DURATION_SECONDS, type AdmissionJobInfo } from '../../src/queue/admission.js';
import { describeQueue, queueViews } from '../../src/queue/admission-views.js';
import { orderingKey } from '../../src/queue/ordering.js';
import { stagesDone, toDistribution } from '../../src/queue/success.js';
import { FIFO_CONFIG, type WfqConfig } from '../../src/queue/wfq.js';
import { table3Catalog } from '../helpers/catalogs.js';

// Table 3's d.x ($0.40/h, 4 vCPUs) is the reservation-price instance of a [0, 4, 12] task.
const catalog = table3Catalog();
const CPU = { any: [0, 4, 12] as const };

interface JobShape {
  readonly id: string;
  readonly tasks?: number;
  readonly placedOn?: string;
  readonly reconfigurable?: boolean;
  readonly remaining?: number;
  readonly arrival?: number;
  readonly runningSince?: number;
  readonly noMove?: number;
}

function snapshot(now: number, shapes: readonly JobShape[]): ClusterSnapshot {
  const jobs: SchedJob[] = [];
  const tasks: SchedTask[] = [];
  const instances = new Map<string, string[]>();
  for (const s of shapes) {
    const ids = Array.from({ length: s.tasks ?? 1 }, (_, i) => `${s.id}.${i}`);
    jobs.push({
      id: s.id,
      taskIds: ids,
      reconfigurable: s.reconfigurable ?? true,
      arrivalSeconds: s.arrival ?? 0,
      migrationDelaySeconds: 0,
      runningSinceSeconds: s.runningSince,
      noMoveSeconds: s.noMove,
      ...(s.remaining === undefined ? {} : { expectedRemainingSeconds: s.remaining }),
    });
    for (const id of ids) {
      tasks.push({ id, jobId: s.id, key: s.id, demand: { any: [...CPU.any] }, instanceId: s.placedOn });
      if (s.placedOn !== undefined) instances.set(s.placedOn, [...(instances.get(s.placedOn) ?? []), id]);
    }
  }
  return {
    nowSeconds: now,
    jobs,
    tasks,
    instances: [...instances].map(([id, taskIds]) => ({ id, typeName: 'd.x', state: 'running', taskIds })),
  };
}

const none = (): AdmissionJobInfo => ({});

describe('the one admission: what the queue knows of a job', () => {
  it('counts the stages a job has passed from its attained service (the last one is the end, not a stage)', () => {
    const dist = toDistribution({
      kind: 'stages',
      stageSeconds: [1000, 4000],
      continueProbabilities: [0.25],
    });
    expect([0, 999, 1000, 4999, 5000, 9999].map((a) => stagesDone(dist, a))).toEqual([0, 0, 1, 1, 1, 1]);
  });

  it('re-ranks a waiting job under success-rank by the stages it passed', () => {
    const dist = toDistribution({
      kind: 'stages',
      stageSeconds: [1000, 4000],
      continueProbabilities: [0.25],
    });
    const admission = new Admission(catalog, { caps: { maxInstances: 0 } });
    const fresh = admission.decide(snapshot(0, [{ id: 'a', remaining: 5000 }]), () => ({
      success: { distribution: dist, stagesDone: 0 },
    }));
    const survived = admission.decide(snapshot(0, [{ id: 'a', remaining: 3800 }]), () => ({
      success: { distribution: dist, stagesDone: 1 },
    }));
    // (0.75·1000 + 0.25·5000)/0.25 = 8000 before; after surviving stage 1 only the 4000 s stage is left, sure.
    expect(orderingKey('success-rank', fresh.waiting.get('a') as never, 0)).toBeCloseTo(8000, 9);
    expect(orderingKey('success-rank', survived.waiting.get('a') as never, 0)).toBeCloseTo(4000, 9);
  });

  it('sizes jobs by declared duration × tasks (fixed at first sight), a day per task when nothing is known', () => {
    const admission = new Admission(catalog, { caps: { maxInstances: 0 } });
    const d = admission.decide(snapshot(0, [{ id: 'a', tasks: 3, remaining: 300 }, { id: 'b' }]), (id) =>
      id === 'a' ? { perTaskSeconds: 600, team: 'research' } : {},
    );
    expect(d.waiting.get('a')).toMatchObject({
      sizeSeconds: 1800,
      remainingWorkSeconds: 900,
      team: 'research',
    });
    expect(d.waiting.get('b')).toMatchObject({
      sizeSeconds: UNKNOWN_DURATION_SECONDS,
      remainingWorkSeconds: UNKNOWN_DURATION_SECONDS,
    });
    // Without a declared size the expected remaining time at first sight is the size, and it stays.
    const sim = new Admission(catalog, { caps: { maxInstances: 0 } });
    sim.decide(snapshot(0, [{ id: 'c', remaining: 500 }]), none);
    expect(sim.decide(snapshot(100, [{ id: 'c', remaining: 400 }]), none).waiting.get('c')?.sizeSeconds).toBe(
      500,
    );
  });

  it('admits whole gangs under the caps and keeps jobs holding capacity whatever the caps', () => {
    const admission = new Admission(catalog, { caps: { maxInstances: 3 } });
    const d = admission.decide(
      snapshot(0, [
        { id: 'run', placedOn: 'i-1' },
        { id: 'gang', tasks: 2, arrival: 1 },
        { id: 'big', tasks: 3, arrival: 2 },
      ]),
      none,
    );
    expect(d.snapshot.jobs.map((j) => j.id)).toEqual(['run', 'gang']);
    expect(d.queues.get('all')).toEqual(['big']);
    const views = queueViews(d, admission);
    expect(views.get('big')).toMatchObject({ status: 'waiting', position: 1, reason: 'caps' });
    expect(views.get('run')).toMatchObject({ status: 'admitted', detail: 'holds capacity' });
  });

  it('lists a job no instance type can host as never-fits, without blocking its class', () => {
    const admission = new Admission(catalog, { caps: { maxInstances: 5 } });
    const s = snapshot(0, [{ id: 'huge' }, { id: 'ok', arrival: 1 }]);
    const huge = {
      ...s,
      tasks: s.tasks.map((t) =>
        t.jobId === 'huge' ? { ...t, demand: { any: [64, 4, 1] as [number, number, number] } } : t,
      ),
    };
    const d = admission.decide(huge, none);
    expect(d.unhostable).toEqual([{ jobId: 'huge', classId: 'all' }]);
    expect(d.snapshot.jobs.map((j) => j.id)).toEqual(['ok']);
  });

  it('a fork carries the queue state and is independent of the original', () => {
    const admission = new Admission(catalog, { caps: { maxInstances: 1 } });
    admission.decide(snapshot(0, [{ id: 'a', placedOn: 'i-1' }]), none);
    const copy = admission.fork();
    admission.forget('a');
    // The copy still knows when `a` was admitted (0), the original re-learns it now (50).
    const view = (a: Admission) => a.decide(snapshot(50, [{ id: 'a', placedOn: 'i-1' }]), none).running[0];
    expect(view(copy)?.admittedSeconds).toBe(0);
    expect(view(admission)?.admittedSeconds).toBe(50);
  });
});

describe('the one admission: preemption victims', () => {
  // Two size classes with equal weights; `long` grabbed the whole capped capacity, `short` arrives and is starved.
  const config: WfqConfig = {
    classifyBy: 'size',
    classes: [
      { id: 'short', weight: 1, maxSizeSeconds: 1000, ordering: 'fifo' },
      { id: 'long', weight: 1, ordering: 'fifo' },
    ],
    preemption: { enabled: true, marginShare: 0.05, minShortRounds: 1 },
  };
  const caps = { maxInstances: 2 };
  const world = (now: number, extra: Partial<JobShape> = {}) =>
    snapshot(now, [
      { id: 'L1', placedOn: 'i-1', remaining: 90_000, runningSince: 0, ...extra },
      { id: 'L2', placedOn: 'i-2', remaining: 90_000, runningSince: 10, ...extra },
      { id: 'S1', remaining: 500, arrival: 20 },
      { id: 'S2', remaining: 500, arrival: 21 },
    ]);

  it('stops the most recently admitted job of the class over its share, one preemption per class in flight', () => {
    const admission = new Admission(catalog, { caps, config });
    const first = admission.decide(world(100), none);
    const victims = admission.victims(first);
    expect(victims.map((v) => v.jobId)).toEqual(['L2']);
    expect(victims[0]).toMatchObject({ classId: 'long', forClassId: 'short' });
    admission.markPreempting(victims);
    // L2 is still checkpointing (it holds capacity): `short` waits for it instead of stopping L1 too.
    const second = admission.decide(world(400), none);
    expect(admission.victims(second)).toEqual([]);
  });

  it('dates a job no round admitted (placed between rounds, or found so after a restart) from when its run began', () => {
    // L1 began its current run at 50 (L2 at 10): the most recent, so the one stopped, although neither was admitted
    // by a round of this admission and L1 first started before L2 (a run it has since left).
    const began = new Map([
      ['L1', 50],
      ['L2', 10],
    ]);
    const admission = new Admission(catalog, { caps, config });
    const d = admission.decide(world(100), (id) => ({ runBeganSeconds: () => began.get(id) }));
    expect(d.running.map((j) => [j.id, j.admittedSeconds])).toEqual([
      ['L1', 50],
      ['L2', 10],
    ]);
    expect(admission.victims(d).map((v) => v.jobId)).toEqual(['L1']);
    // Without a time (a job that never left the queue as far as the runtime knows): admitted now.
    const fresh = new Admission(catalog, { caps, config });
    expect(fresh.decide(world(100), none).running.map((j) => j.admittedSeconds)).toEqual([100, 100]);
  });

  it('never stops a job inside its no-move window', () => {
    const admission = new Admission(catalog, { caps, config });
    const d = admission.decide(world(100, { noMove: 3600 }), none);
    expect(admission.victims(d)).toEqual([]);
  });

  it('plans around a job inside its no-move window instead of stopping only part of a plan', () => {
    // S1 needs one instance: L2 (the newest) may not move yet, so the plan stops L1, which frees as much.
    const admission = new Admission(catalog, { caps, config });
    const d = admission.decide(
      snapshot(100, [
        { id: 'L1', placedOn: 'i-1', remaining: 90_000, runningSince: 0 },
        { id: 'L2', placedOn: 'i-2', remaining: 90_000, runningSince: 90, noMove: 3600 },
        { id: 'S1', remaining: 500, arrival: 20 },
      ]),
      none,
    );
    expect(d.result.preemptions.map((p) => p.jobId)).toEqual(['L1']);
    expect(admission.victims(d).map((v) => v.jobId)).toEqual(['L1']);
  });
});

describe('describeQueue', () => {
  it('describes the queue configuration and caps in one line', () => {
    expect(describeQueue(FIFO_CONFIG, {})).toBe(
      '1 class(es) by size: all (weight 1, fifo); preemption on (margin 0.05 of the capacity, after 2 short round(s)); caps: none (every job is admitted)',
    );
    expect(
      describeQueue(
        {
          classifyBy: 'team',
          classes: [
            { id: 'cv', weight: 2, teams: ['vision'], ordering: 'srpt' },
            { id: 'rest', weight: 1, ordering: 'fifo' },
          ],
          preemption: { enabled: false, marginShare: 0, minShortRounds: 1 },
        },
        { maxCostPerHour: 20, quotas: [{ group: 'p', maxGpus: 8 }] },
      ),
    ).toBe(
      '2 class(es) by team: cv (vision) (weight 2, srpt), rest (other teams) (weight 1, fifo); preemption off; caps: $20/h, quota p 8 GPUs',
    );
  });
});

describe('what admission would let in now (placement between rounds)', () => {
  // Two instances at most, 'r' runs on one: a round lets one more single-task job in; onto paid room, which adds no
  // instance, both. 'big' (3 tasks, 3 instances alone) never fits.
  const shapes: readonly JobShape[] = [
    { id: 'r', placedOn: 'i-1', arrival: 0 },
    { id: 'long', remaining: 36_000, arrival: 10 },
    { id: 'short', remaining: 600, arrival: 20 },
    { id: 'big', tasks: 3, remaining: 60, arrival: 0 },
  ];

  it("lets in the waiting jobs in the round's order, never one that never fits, with no check of the caps", () => {
    const admissible = (ordering: 'srpt' | 'fifo') =>
      new Admission(catalog, {
        caps: { maxInstances: 2 },
        config: { ...FIFO_CONFIG, classes: [{ id: 'all', weight: 1, ordering }] },
      }).admissibleNow(snapshot(100, shapes), none);
    expect(admissible('srpt')).toEqual(['short', 'long']);
    expect(admissible('fifo')).toEqual(['long', 'short']);
  });

  it("keeps a class at its ceiling: a job over its class's maxShare is not let in, though the caps have room", () => {
    const config: WfqConfig = {
      classifyBy: 'team',
      classes: [
        { id: 'capped', weight: 1, teams: ['a'], ordering: 'fifo', maxShare: 0.5 },
        { id: 'rest', weight: 1, ordering: 'fifo' },
      ],
      preemption: { ...FIFO_CONFIG.preemption, enabled: false },
    };
    const teams = (id: string): AdmissionJobInfo => ({ team: id === 'rest-job' ? 'b' : 'a' });
    const admission = new Admission(catalog, { caps: { maxInstances: 4 }, config });
    // 'r' (team a) holds 1 of 4 instances; 'x' would bring team a to 2 (its ceiling), 'y' to 3 (over it).
    expect(admission.decide(snapshot(100, [{ id: 'r', placedOn: 'i-1' }]), teams).result.admitted).toEqual(
      [],
    );
    const now = snapshot(100, [
      { id: 'r', placedOn: 'i-1' },
      { id: 'x', arrival: 10 },
      { id: 'y', arrival: 20 },
      { id: 'rest-job', arrival: 30 },
    ]);
    expect(admission.admissibleNow(now, teams)).toEqual(['x', 'rest-job']);
  });

  it('decides on a copy: what the rounds remember is left as it was', () => {
    const admission = new Admission(catalog, { caps: { maxInstances: 2 } });
    admission.decide(snapshot(0, shapes.slice(0, 2)), none);
    const before = JSON.stringify(admission.exportState());
    expect(admission.admissibleNow(snapshot(100, shapes), none)).toEqual(['long', 'short']);
    expect(JSON.stringify(admission.exportState())).toBe(before);
  });
});

describe('an admission rebuilt elsewhere (a prediction in a worker thread)', () => {
  it('keeps every setting, how jobs are sized against a $ cap included', () => {
    const admission = new Admission(catalog, {
      caps: { maxCostPerHour: 2 },
      config: { ...FIFO_CONFIG, classes: [{ id: 'all', weight: 1, ordering: 'srpt' }] },
      admitBy: 'plan-cost',
    });
    admission.decide(snapshot(0, [{ id: 'a', placedOn: 'i-1' }, { id: 'b' }]), none);
    const rebuilt = Admission.restore(catalog, admission.settings, admission.exportState());
    expect(rebuilt.settings).toEqual(admission.settings);
    expect(rebuilt.admitBy).toBe('plan-cost');
  });
});
