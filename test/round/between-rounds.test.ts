import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { placeBetweenRounds, type PaidInstance, type WaitingJob } from '../../src/round/between-rounds.js';

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
const base = { nowSeconds: 100, launchDelaySeconds: () => 209, launchCostPerHour: () => 1.6 };

describe('placement between rounds', () => {
  it('places whole jobs on paid room in queue order, skipping one that does not fit', () => {
    const placed = placeBetweenRounds({
      ...base,
      jobs: [job('big', 3, 4), job('a', 2), job('b', 1)],
      instances: [inst('i-1', 4), inst('i-2', 2)],
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
