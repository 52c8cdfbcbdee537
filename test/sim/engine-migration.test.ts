import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot } from '../../src/core/model.js';
import { InvalidPlanError } from '../../src/scheduler/actions.js';
import type { Configuration } from '../../src/scheduler/types.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import {
  EventLog,
  instanceType,
  ScriptedScheduler,
  testCatalog,
  trace,
  traceJob,
  traceTask,
} from './sim-fixtures.js';

/** Each queued task on its own new small.x (what No-Packing would do with this catalog). */
function ownInstances(snapshot: ClusterSnapshot): Configuration {
  const kept = snapshot.instances
    .filter((i) => i.taskIds.length > 0)
    .map((i) => ({ id: i.id, typeName: i.typeName, isNew: false, taskIds: [...i.taskIds] }));
  const fresh = snapshot.tasks
    .filter((t) => t.instanceId === undefined)
    .map((t, k) => ({ id: `new-${k + 1}`, typeName: 'small.x', isNew: true, taskIds: [t.id] }));
  return { instances: [...kept, ...fresh] };
}

describe('migration', () => {
  it('kills, uploads, relaunches on the target with fetch + build + init, and keeps the progress', () => {
    const scheduler = new ScriptedScheduler('mover', (snapshot, round) =>
      round === 1
        ? { instances: [{ id: 'new-1', typeName: 'big.x', isNew: true, taskIds: ['J/node0'] }] }
        : ownInstances(snapshot),
    );
    const log = new EventLog();
    const result = runSimulation({
      trace: trace(traceJob('J', { iterations: 2000 })),
      scheduler,
      catalog: testCatalog(),
      groundTruth: constantPairwise(0.5),
      onEvent: log.record,
    });
    // Active on i-1 from 72. Round 300 moves it: killed 301 (kill 1 s; it ran until then: 229 iterations),
    // uploaded 305 (upload 4 s), i-1 is empty → terminate issued 305, gone 310.
    expect(log.time('checkpoint-issued')).toBe(300);
    expect(log.time('killed')).toBe(301);
    expect(log.time('uploaded')).toBe(305);
    expect(log.all('terminate-issued')[0]).toMatchObject({ timeSeconds: 305, instanceId: 'i-1' });
    // i-2 (big.x) ready at 360 → launched 365 (fetch 2 + build 3) → active 372 (init 7); 1771 left → 2143.
    expect(log.times('start-issued')).toEqual([60, 360]);
    expect(log.times('launched')).toEqual([65, 365]);
    expect(log.times('job-active')).toEqual([72, 372]);
    expect(result.jobs[0]).toMatchObject({ startSeconds: 72, endSeconds: 2143, migrations: 1 });
    expect(result.summary.migrationsPerJob).toBe(1);
    expect(result.series.migrations.at(-1)).toBe(1);
    // i-1 billed 10 → 310 at $0.001/s; i-2 310 → 2405 (dropped at the 2400 round) at $0.003/s.
    expect(result.summary.totalCost).toBeCloseTo(300 * 0.001 + 2095 * 0.003, 12);
  });

  it('pins a job while it migrates and rejects a plan that moves it', () => {
    const catalog = testCatalog([instanceType('slow.x', [1, 8, 32], 3.6, { workerRegisterSeconds: 400 })]);
    let tried = false;
    const scheduler = new ScriptedScheduler('mover', (snapshot, round) => {
      if (round === 1)
        return { instances: [{ id: 'new-1', typeName: 'slow.x', isNew: true, taskIds: ['J/node0'] }] };
      if (round === 2) {
        // At 600 the target (ready at 730) is not up: the job is pinned there.
        expect(snapshot.jobs[0]).toMatchObject({ reconfigurable: false });
        expect(snapshot.tasks[0]?.instanceId).toBe('i-2');
        expect(snapshot.instances).toEqual([
          {
            id: 'i-2',
            typeName: 'slow.x',
            state: 'launching',
            taskIds: ['J/node0'],
            // The simulated cloud put it in some zone (the plan asked for none).
            placement: { zone: expect.any(String) as unknown },
          },
        ]);
        tried = true;
        return { instances: [{ id: 'new-1', typeName: 'small.x', isNew: true, taskIds: ['J/node0'] }] };
      }
      return ownInstances(snapshot);
    });
    expect(() =>
      runSimulation({
        trace: trace(traceJob('J', { iterations: 2000 })),
        scheduler,
        catalog,
        groundTruth: constantPairwise(0.5),
      }),
    ).toThrow(InvalidPlanError);
    expect(tried).toBe(true);
  });

  it('swaps two jobs between full instances: each start waits for the other to free the capacity', () => {
    const scheduler = new ScriptedScheduler('swapper', (snapshot, round) => {
      if (round !== 1) return ownInstances(snapshot);
      const [x, y] = snapshot.instances;
      return {
        instances: [
          { id: x?.id ?? '', typeName: 'small.x', isNew: false, taskIds: ['B/node0'] },
          { id: y?.id ?? '', typeName: 'small.x', isNew: false, taskIds: ['A/node0'] },
        ],
      };
    });
    const log = new EventLog();
    const result = runSimulation({
      trace: trace(
        traceJob('A', { iterations: 1000, tasks: [traceTask('node0', { imageId: 'img-a' })] }),
        traceJob('B', { iterations: 1000, tasks: [traceTask('node0', { imageId: 'img-b' })] }),
      ),
      scheduler,
      catalog: testCatalog(),
      groundTruth: constantPairwise(0.5),
      onEvent: log.record,
    });
    // Killed 301, uploaded 305: only then does either instance have room; builds are needed (other image).
    expect(log.times('start-issued')).toEqual([60, 60, 305, 305]);
    expect(log.times('launched')).toEqual([65, 65, 310, 310]);
    expect(log.times('terminate-issued').every((t) => t > 305)).toBe(true);
    // 229 iterations before the move, 771 after 317.
    expect(result.jobs.map((j) => j.endSeconds)).toEqual([1088, 1088]);
    expect(result.summary.instancesLaunched).toBe(2);
  });

  it('skips the image build on an instance that already built the image', () => {
    // The plan keeps i-1 (empty) after A finishes and puts B, which uses the same image, on it.
    const scheduler = new ScriptedScheduler('reuser', (snapshot, round) => {
      if (round === 0)
        return { instances: [{ id: 'new-1', typeName: 'small.x', isNew: true, taskIds: ['A/node0'] }] };
      const b = snapshot.tasks.find((t) => t.jobId === 'B');
      return {
        instances: [{ id: 'i-1', typeName: 'small.x', isNew: false, taskIds: b === undefined ? [] : [b.id] }],
      };
    });
    const log = new EventLog();
    const result = runSimulation({
      trace: trace(
        traceJob('A', { iterations: 100 }),
        traceJob('B', { arrivalSeconds: 500, iterations: 100 }),
      ),
      scheduler,
      catalog: testCatalog(),
      groundTruth: constantPairwise(0.5),
      onEvent: log.record,
    });
    // B is placed at the 600 round and starts at once on the running instance: fetch 2 s only.
    expect(log.times('start-issued')).toEqual([60, 600]);
    expect(log.times('launched')).toEqual([65, 602]);
    expect(result.summary.instancesLaunched).toBe(1);
  });

  it('returns a job the plan leaves out to the queue, keeping its progress, and restarts it later', () => {
    const scheduler = new ScriptedScheduler('evicter', (snapshot, round) => {
      if (round === 1) return { instances: [] };
      if (round === 2) {
        expect(snapshot.jobs[0]).toMatchObject({ reconfigurable: true, lastCheckpointSeconds: 600 });
        expect(snapshot.tasks[0]?.instanceId).toBeUndefined();
        expect(snapshot.jobs[0]?.expectedRemainingSeconds).toBeCloseTo(2000 - 229, 9);
      }
      return ownInstances(snapshot);
    });
    const log = new EventLog();
    const result = runSimulation({
      trace: trace(traceJob('J', { iterations: 2000 })),
      scheduler,
      catalog: testCatalog(),
      groundTruth: constantPairwise(0.5),
      onEvent: log.record,
    });
    // Out at 301; restarted by the 600 round on a new instance: ready 660, launched 665, active 672; 1771 left.
    expect(log.times('job-active')).toEqual([72, 672]);
    expect(result.jobs[0]).toMatchObject({ endSeconds: 672 + 1771, migrations: 1 });
    expect(result.summary.instancesLaunched).toBe(2);
  });
});
