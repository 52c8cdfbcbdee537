import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  capHoldsJobsBack,
  placeBetweenRounds,
  type PaidInstance,
  type WaitingJob,
} from '../../src/round/between-rounds.js';

const inst = (id: string, freeCpus: number, readyAtSeconds = 0): PaidInstance => ({
  id,
  family: 'c7i',
  capacity: [0, 8, 32],
  free: [0, freeCpus, freeCpus * 4],
  readyAtSeconds,
  costPerHour: 1.6,
});
const job = (id: string, tasks: number, cpus = 2): WaitingJob => ({
  id,
  tasks: Array.from({ length: tasks }, (_, k) => ({
    id: `${id}/t${k}`,
    demand: { any: [0, cpus, cpus * 4] },
  })),
  taskSeconds: 3600,
});
const base = {
  nowSeconds: 100,
  launchDelaySeconds: () => 209,
  launchCostPerHour: () => 1.6,
  capHoldsJobsBack: true,
};

describe('placement between rounds', () => {
  it('places whole jobs on paid room in queue order; a job passed over keeps the room it could use', () => {
    const instances = [inst('i-1', 4), inst('i-2', 2)];
    // The job ahead does not fit now, and could run on both instances: their room waits for it (the next round).
    expect(
      placeBetweenRounds({
        ...base,
        jobs: [job('big', 3, 4), job('a', 2), job('b', 1)],
        instances,
        bind: false,
      }),
    ).toEqual([]);
    // A job ahead that only a GPU family can host leaves this CPU room to the jobs behind it.
    const gpuOnly: WaitingJob = {
      id: 'big',
      tasks: [{ id: 'big/t0', demand: { p3: [1, 4, 16] } }],
      taskSeconds: 3600,
    };
    const placed = placeBetweenRounds({
      ...base,
      jobs: [gpuOnly, job('a', 2), job('b', 1)],
      instances,
      bind: false,
    });
    expect(placed.map((p) => p.jobId)).toEqual(['a', 'b']);
    expect(placed[0]?.placements.map((p) => p.instanceId)).toEqual(['i-1', 'i-1']);
    expect(placed[1]?.placements.map((p) => p.instanceId)).toEqual(['i-2']);
    expect(placed.every((p) => p.jobStartSeconds === 100)).toBe(true);
  });

  it('binds to an instance coming up only with bind on, and only if it is ready before a launch would be', () => {
    const instances = [inst('i-1', 2), inst('booting', 8, 250)];
    const jobs = [job('a', 2)];
    expect(placeBetweenRounds({ ...base, jobs, instances, bind: false })).toEqual([]);
    const bound = placeBetweenRounds({ ...base, jobs, instances, bind: true });
    expect(bound[0]?.jobStartSeconds).toBe(250);
    expect(bound[0]?.bindChoice?.choice).toBe('bind');
    expect(bound[0]?.bindChoice?.launchJobStartSeconds).toBe(309);
    // Ready at 400 s, after a launch made now (309 s): left to the round, which may launch.
    const late = [inst('i-1', 2), inst('booting', 8, 400)];
    expect(placeBetweenRounds({ ...base, jobs, instances: late, bind: true })).toEqual([]);
  });

  it('places a task only where its share of the $/hour is within its reservation price, the cheapest share first', () => {
    // A 2-vCPU task alone costs $0.40/h; on the 8-vCPU $1.6/h instance its share is 2/8 × 1.6 = $0.40/h (fits the
    // price), on a $16/h GPU-priced type of the same shape it would be $4/h: never there, however free it is.
    const priced = (rp: number): WaitingJob => ({
      ...job('a', 1),
      tasks: [{ id: 'a/t0', demand: { any: [0, 2, 8] }, reservationPricePerHour: rp }],
    });
    const costly: PaidInstance = { ...inst('costly', 8), costPerHour: 16 };
    expect(placeBetweenRounds({ ...base, jobs: [priced(0.4)], instances: [costly], bind: false })).toEqual(
      [],
    );
    const cheap = placeBetweenRounds({
      ...base,
      jobs: [priced(0.4)],
      instances: [costly, inst('cheap', 8)],
      bind: false,
    });
    expect(cheap[0]?.placements.map((p) => p.instanceId)).toEqual(['cheap']);
    // Without a price, every paid slot is eligible and the cheaper share still wins among equally early slots.
    const any = placeBetweenRounds({
      ...base,
      jobs: [job('b', 1)],
      instances: [costly, inst('cheap', 8)],
      bind: false,
    });
    expect(any[0]?.placements.map((p) => p.instanceId)).toEqual(['cheap']);
  });

  it('with learned co-location rates, a task joins tasks only where its work there, less what it slows them, pays its share', () => {
    // A $1/h instance holds a task (key a, $0.60/h alone) with room for a 4-vCPU task (key b, $0.50/h alone) whose
    // share is 4/8 × $1 = $0.50/h. With no interference (rates 1) b is worth its $0.50/h there: placed. With a and b
    // slowing each other to 0.9, b is worth 0.5 × 0.9 − 0.6 × (1 − 0.9) = $0.39/h < $0.50/h: left to the round.
    const holding: PaidInstance = {
      ...inst('i-1', 4),
      costPerHour: 1,
      tasks: [{ key: 'a', reservationPricePerHour: 0.6 }],
    };
    const b: WaitingJob = {
      ...job('b', 1),
      tasks: [{ id: 'b/t0', demand: { any: [0, 4, 16] }, reservationPricePerHour: 0.5, key: 'b' }],
    };
    const place = (rate: number) =>
      placeBetweenRounds({
        ...base,
        jobs: [b],
        instances: [holding],
        bind: false,
        expectedRate: (_key, others) => (others.length === 0 ? 1 : rate),
      });
    expect(place(1).map((p) => p.jobId)).toEqual(['b']);
    expect(place(0.9)).toEqual([]);
    // An empty paid instance has nobody to slow: the reservation-price rule alone.
    const empty: PaidInstance = { ...holding, tasks: [] };
    expect(
      placeBetweenRounds({ ...base, jobs: [b], instances: [empty], bind: false, expectedRate: () => 0.9 }),
    ).toHaveLength(1);
  });

  it("values a job's later task next to its siblings already placed on the instance", () => {
    // A c7i.4xlarge ($0.714/h) holds x; each k task ([0, 3, 4], $0.1785/h alone) would take a $0.1339/h share. k tasks
    // slow each other to 0.9, any other pair to 0.95. The first k beside x is worth 0.1785 × 0.95 − 0.1785 × 0.05 =
    // $0.1607/h: placed. A second beside x and its sibling is worth 0.1785 × 0.855 − 0.1785 × (0.95 − 0.9025)
    // − 0.1785 × (0.95 − 0.855) = $0.1272/h, below its share: the job waits for the round.
    const rate = (key: string, others: readonly string[]) =>
      others.reduce((r, o) => r * (key === 'k' && o === 'k' ? 0.9 : 0.95), 1);
    const k = (tasks: number): WaitingJob => ({
      id: 'k',
      tasks: Array.from({ length: tasks }, (_, i) => ({
        id: `k/t${i}`,
        demand: { any: [0, 3, 4] },
        reservationPricePerHour: 0.1785,
        key: 'k',
      })),
      taskSeconds: 3600,
    });
    const holding: PaidInstance = {
      id: 'i-1',
      family: 'c7i',
      capacity: [0, 16, 32],
      free: [0, 13, 28],
      readyAtSeconds: 0,
      costPerHour: 0.714,
      tasks: [{ key: 'x', reservationPricePerHour: 0.1785 }],
    };
    const place = (tasks: number) =>
      placeBetweenRounds({
        ...base,
        jobs: [k(tasks)],
        instances: [holding],
        bind: false,
        expectedRate: rate,
      });
    expect(place(1).map((p) => p.placements.map((q) => q.instanceId))).toEqual([['i-1']]);
    expect(place(2)).toEqual([]);
    // Without interference both tasks are worth their reservation price there: the job is placed whole.
    const placed = placeBetweenRounds({
      ...base,
      jobs: [k(2)],
      instances: [holding],
      bind: false,
      expectedRate: () => 1,
    });
    expect(placed.map((p) => p.placements.map((q) => q.instanceId))).toEqual([['i-1', 'i-1']]);
  });

  it('places nothing unless the last admission left a job waiting (else the next round packs them all)', () => {
    const jobs = [job('a', 2)];
    const instances = [inst('i-1', 8)];
    expect(placeBetweenRounds({ ...base, jobs, instances, bind: false, capHoldsJobsBack: false })).toEqual(
      [],
    );
    expect(placeBetweenRounds({ ...base, jobs, instances, bind: false })).toHaveLength(1);
    // A job no instance type can host waits whatever the caps: no sign that they bind.
    expect(capHoldsJobsBack([{ reason: 'never-fits' }])).toBe(false);
    expect(capHoldsJobsBack([{ reason: 'never-fits' }, { reason: 'caps' }])).toBe(true);
    expect(capHoldsJobsBack([{ reason: 'class-share' }])).toBe(true);
    expect(capHoldsJobsBack([])).toBe(false);
  });

  it('never puts more on an instance than its free room, and places each task once', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 8 }), { minLength: 1, maxLength: 6 }),
        fc.array(fc.record({ tasks: fc.integer({ min: 1, max: 4 }), cpus: fc.integer({ min: 1, max: 4 }) }), {
          maxLength: 8,
        }),
        fc.boolean(),
        (frees, shapes, bind) => {
          const instances = frees.map((f, i) => inst(`i-${i}`, f, i % 2 === 0 ? 0 : 150));
          const jobs = shapes.map((s, i) => job(`j${i}`, s.tasks, s.cpus));
          const placed = placeBetweenRounds({ ...base, jobs, instances, bind });
          const used = new Map<string, number>();
          const seen = new Set<string>();
          for (const p of placed) {
            const j = jobs.find((x) => x.id === p.jobId) as WaitingJob;
            expect(p.placements).toHaveLength(j.tasks.length);
            for (const pl of p.placements) {
              expect(seen.has(pl.taskId)).toBe(false);
              seen.add(pl.taskId);
              const cpus = shapes[Number(p.jobId.slice(1))]?.cpus ?? 0;
              used.set(pl.instanceId, (used.get(pl.instanceId) ?? 0) + cpus);
              if (!bind) expect(instances.find((i) => i.id === pl.instanceId)?.readyAtSeconds).toBe(0);
            }
          }
          for (const [id, u] of used) expect(u).toBeLessThanOrEqual(frees[Number(id.slice(2))] ?? 0);
        },
      ),
    );
  });
});
