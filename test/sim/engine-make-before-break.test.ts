import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../src/core/catalog.js';
import type { Configuration } from '../../src/scheduler/types.js';
import { FIFO_CONFIG } from '../../src/queue/wfq.js';
import { runSimulation, type SimulationOptions } from '../../src/sim/run-simulation.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import {
  currentConfiguration,
  EventLog,
  ScriptedScheduler,
  testCatalog,
  testSpotMarket,
  trace,
  traceJob,
  traceTask,
} from './sim-fixtures.js';

/**
 * Make before break in the engine (round/gates.ts `moveStopGate`): J (2,000 iterations at 1/s) runs alone on i-1
 * (small.x, up at 60, active at 72); the round at 300 moves it to a new big.x (launched at 300, ready at 360).
 */
function moveJ(o: Partial<SimulationOptions> = {}, job = traceJob('J', { iterations: 2000 })) {
  const scheduler = new ScriptedScheduler('mover', (snapshot, round) => {
    if (round === 0)
      return { instances: [{ id: 'new-1', typeName: 'small.x', isNew: true, taskIds: ['J/node0'] }] };
    if (round === 1)
      return { instances: [{ id: 'new-1', typeName: 'big.x', isNew: true, taskIds: ['J/node0'] }] };
    return currentConfiguration(snapshot);
  });
  const log = new EventLog();
  const result = runSimulation({
    trace: trace(job),
    scheduler,
    catalog: testCatalog(),
    groundTruth: constantPairwise(0.5),
    onEvent: log.record,
    ...o,
  });
  return { log, result };
}

/** The test catalog with one spot pool (small.x in zone testa, >20%), and `slow` registering `registerSeconds` late. */
function spotCatalog(slow: string, registerSeconds: number): Catalog {
  const base = testCatalog();
  return {
    ...base,
    types: base.types.map((t) =>
      t.name === slow ? { ...t, delays: { ...t.delays, workerRegisterSeconds: registerSeconds } } : t,
    ),
    spot: testSpotMarket({ typeName: 'small.x', zone: 'testa', pricePerHour: 1.08, interruption: '>20%' }),
  };
}

/** J on a new spot small.x in the pool. */
const J_ON_SPOT: Configuration = {
  instances: [
    {
      id: 'new-1',
      typeName: 'small.x',
      isNew: true,
      taskIds: ['J/node0'],
      market: 'spot',
      placement: { zone: 'testa' },
    },
  ],
};

describe('make before break (engine)', () => {
  it('keeps a moving job working until its new instance is ready, then checkpoints it', () => {
    const { log, result } = moveJ({ makeBeforeBreak: true });
    // i-2 is ready at 360: only then the checkpoint (killed 361, uploaded 365); J ran 72 → 361, 289 iterations.
    expect(log.time('checkpoint-issued')).toBe(360);
    expect(log.time('killed')).toBe(361);
    expect(log.time('uploaded')).toBe(365);
    expect(log.all('terminate-issued')[0]).toMatchObject({ timeSeconds: 365, instanceId: 'i-1' });
    // Started on i-2 at 365 (fetch 2 + build 3 → 370), active at 377 (init 7): 1,711 left → 2,088.
    expect(log.times('start-issued')).toEqual([60, 365]);
    expect(log.times('job-active')).toEqual([72, 377]);
    expect(result.jobs[0]).toMatchObject({ endSeconds: 2088, migrations: 1 });
    // i-1 billed 10 → 370, i-2 310 → 2,105 (dropped at the 2,100 round, 5 s to terminate).
    expect(result.summary.totalCost).toBeCloseTo(360 * 0.001 + 1795 * 0.003, 12);
  });

  it('stops at once without it: the job idles through the new instance boot', () => {
    const { log, result } = moveJ();
    expect(log.time('checkpoint-issued')).toBe(300);
    expect(log.times('job-active')).toEqual([72, 372]);
    // 55 s later than with make before break: the 60 s boot less the 5 s its checkpoint now starts later.
    expect(result.jobs[0]?.endSeconds).toBe(2143);
  });

  it('under a cap, stops at once: the plan gave the room of the instance it drops to others', () => {
    // Two instances at most: i-2 may launch next to i-1 (it does, at 300), but J does not wait for it.
    const { log, result } = moveJ({
      makeBeforeBreak: true,
      queue: { caps: { maxInstances: 2 }, config: FIFO_CONFIG },
    });
    expect(log.all('instance-launch')[1]).toMatchObject({ timeSeconds: 300 });
    expect(log.time('checkpoint-issued')).toBe(300);
    expect(log.times('job-active')).toEqual([72, 372]);
    expect(result.jobs[0]?.endSeconds).toBe(2143);
  });

  it('drops the stop of a job that finishes while it waits for its new instance', () => {
    // J (250 iterations, active at 72) ends at 322, before i-2 (slow to register) is ready at 700.
    const catalog = testCatalog();
    const slow = {
      ...catalog,
      types: catalog.types.map((t) =>
        t.name === 'big.x' ? { ...t, delays: { ...t.delays, workerRegisterSeconds: 370 } } : t,
      ),
    };
    const { log, result } = moveJ(
      { catalog: slow, makeBeforeBreak: true },
      traceJob('J', { iterations: 250 }),
    );
    expect(result.jobs[0]?.endSeconds).toBe(322);
    expect(log.all('checkpoint-issued')).toEqual([]);
    // A move that never happened counts as none (the controller runtime counts a move when its job stops, too).
    expect(result.jobs[0]?.migrations).toBe(0);
    expect(result.summary.migrationsPerJob).toBe(0);
    expect(log.times('start-issued')).toEqual([60]);
    // Nothing is left waiting: both instances terminate and the run ends.
    expect(
      log
        .all('terminate-issued')
        .map((e) => e.instanceId)
        .sort(),
    ).toEqual(['i-1', 'i-2']);
  });

  it('calls off a move whose new spot instance gets its notice while it boots: the job checkpoints and loses nothing', () => {
    // J runs on demand; at 300 it moves to a spot small.x in a pool reclaimed every few seconds, while it boots.
    // small.x takes 230 s to be ready here, so that the reclaim (two minutes after the burst's notice) lands in the boot.
    const catalog = spotCatalog('small.x', 200);
    const scheduler = new ScriptedScheduler('mover', (snapshot, round) => {
      const j = snapshot.tasks[0];
      if (round === 1) return J_ON_SPOT;
      const queued = snapshot.jobs[0]?.reconfigurable === true;
      if (j !== undefined && j.instanceId === undefined && queued)
        return { instances: [{ id: 'new-1', typeName: 'small.x', isNew: true, taskIds: [j.id] }] };
      return currentConfiguration(snapshot);
    });
    const log = new EventLog();
    const result = runSimulation({
      trace: trace(traceJob('J', { iterations: 2000 })),
      scheduler,
      catalog,
      groundTruth: constantPairwise(1),
      onEvent: log.record,
      makeBeforeBreak: true,
      spot: { seed: 3, noticeHandling: 'checkpoint-and-drain', burstsPerPoolPerMonth: 432_000 },
    });
    // i-2 (spot, launched at 300) got its notice before it was ready at 530, and J had not stopped for it: the move
    // was called off and J checkpointed at the notice. The drained instance, in its first hour, was left for EC2 to
    // take (free) rather than terminated: the reclaim took it empty, two minutes after the notice.
    const gone = log.all('terminated').find((e) => e.instanceId === 'i-2');
    const checkpointed = log.time('checkpoint-issued') as number;
    expect(gone?.timeSeconds).toBeLessThan(530);
    expect(checkpointed).toBeGreaterThan(300);
    expect(gone?.timeSeconds).toBeCloseTo(checkpointed + 120, 9);
    expect(log.all('terminate-issued').filter((e) => e.instanceId === 'i-2')).toEqual([]);
    expect(result.spot?.interruptions).toBe(1);
    expect(result.spot?.lostWorkHours).toBe(0);
    // It ran from 242 to the reclaim, then resumed on demand from that checkpoint and finished.
    expect(result.jobs[0]?.endSeconds).not.toBeNull();
    // The move called off counts once, when its job stopped.
    expect(log.all('checkpoint-issued')).toHaveLength(1);
    expect(result.jobs[0]?.migrations).toBe(1);
    expect(result.series.migrations.at(-1)).toBe(1);
  });

  it('a notice on the spot instance a job is checkpointing to reach calls the move off: its checkpoint finishes where it was', () => {
    // J runs on demand on i-1; i-2 (spot small.x) runs empty. At 300 J moves to i-2, which is ready: its stop goes out
    // at once and its upload takes 200 s. i-2's pool gets its notice (this seed) while J uploads.
    const catalog: Catalog = {
      ...testCatalog(),
      spot: testSpotMarket({ typeName: 'small.x', zone: 'testa', pricePerHour: 1.08, interruption: '>20%' }),
    };
    // What no plan can act on must not be shown: a pinned job bound for no instance (its move called off).
    const pinnedUnplaced: string[] = [];
    const scheduler = new ScriptedScheduler('mover', (snapshot, round) => {
      for (const job of snapshot.jobs)
        if (
          !job.reconfigurable &&
          snapshot.tasks.some((t) => t.jobId === job.id && t.instanceId === undefined)
        )
          pinnedUnplaced.push(`${job.id}@${snapshot.nowSeconds}`);
      if (round === 0)
        return {
          instances: [
            { id: 'new-1', typeName: 'big.x', isNew: true, taskIds: ['J/node0'] },
            {
              id: 'new-2',
              typeName: 'small.x',
              isNew: true,
              taskIds: [],
              market: 'spot',
              placement: { zone: 'testa' },
            },
          ],
        };
      if (round === 1)
        return { instances: [{ id: 'i-2', typeName: 'small.x', isNew: false, taskIds: ['J/node0'] }] };
      const j = snapshot.tasks[0];
      if (j?.instanceId === undefined && snapshot.jobs[0]?.reconfigurable === true)
        return { instances: [{ id: 'new-3', typeName: 'big.x', isNew: true, taskIds: ['J/node0'] }] };
      return currentConfiguration(snapshot);
    });
    const log = new EventLog();
    const result = runSimulation({
      trace: trace(
        traceJob('J', { iterations: 2000, tasks: [traceTask('node0', { uploadDelaySeconds: 200 })] }),
      ),
      scheduler,
      catalog,
      groundTruth: constantPairwise(1),
      onEvent: log.record,
      spot: { seed: 5, noticeHandling: 'checkpoint-and-drain', burstsPerPoolPerMonth: 6000 },
    });
    expect(log.time('checkpoint-issued')).toBe(300);
    expect(log.time('uploaded')).toBe(501);
    // The notice drained i-2 while J uploaded: the move was called off, EC2 took the drained instance (left to it in
    // its first hour, not terminated), and J resumed from the checkpoint it finished on i-1, losing nothing.
    const reclaimed = log.all('terminated').find((e) => e.instanceId === 'i-2')?.timeSeconds as number;
    expect(reclaimed).toBeGreaterThan(300 + 120);
    expect(reclaimed).toBeLessThan(501);
    expect(log.all('terminate-issued').filter((e) => e.instanceId === 'i-2')).toEqual([]);
    expect(result.spot?.interruptions).toBe(1);
    expect(result.spot?.lostWorkHours).toBe(0);
    expect(result.jobs[0]?.endSeconds).not.toBeNull();
    expect(log.all('start-issued').map((e) => e.instanceId)).toEqual(['i-1', 'i-3']);
    expect(pinnedUnplaced).toEqual([]);
  });

  it('a spot notice on the instance a job waits to leave stops it at once: the two minutes are for the checkpoint', () => {
    // J runs on a spot small.x; at 300 it moves to an on-demand big.x that is ready only at 930. With this seed the
    // pool's burst sends its notice at 490.5 (reclaim at 610.5), in the middle of that boot.
    const catalog = spotCatalog('big.x', 600);
    const scheduler = new ScriptedScheduler('mover', (snapshot, round) => {
      if (round === 0) return J_ON_SPOT;
      if (round === 1)
        return { instances: [{ id: 'new-1', typeName: 'big.x', isNew: true, taskIds: ['J/node0'] }] };
      return currentConfiguration(snapshot);
    });
    const log = new EventLog();
    const result = runSimulation({
      trace: trace(traceJob('J', { iterations: 5000 })),
      scheduler,
      catalog,
      groundTruth: constantPairwise(1),
      onEvent: log.record,
      makeBeforeBreak: true,
      spot: { seed: 5, noticeHandling: 'checkpoint-and-drain', burstsPerPoolPerMonth: 4320 },
    });
    const notice = log.time('checkpoint-issued');
    expect(notice).toBeGreaterThan(300);
    expect(notice).toBeLessThan(930 - 120);
    // Stopped and uploaded well before the reclaim, which takes the empty instance (in its first hour it is left for
    // EC2 to take, free, not terminated): no work lost; J resumes on big.x.
    expect(log.time('uploaded')).toBeLessThan((notice as number) + 120);
    expect(log.all('terminated').find((e) => e.instanceId === 'i-1')?.timeSeconds).toBeCloseTo(
      (notice as number) + 120,
      9,
    );
    expect(log.all('terminate-issued').filter((e) => e.instanceId === 'i-1')).toEqual([]);
    expect(result.spot).toMatchObject({ interruptions: 1, lostWorkHours: 0 });
    expect(log.times('start-issued')).toEqual([60, 930]);
    expect(result.jobs[0]?.migrations).toBe(1);
    expect(result.series.migrations.at(-1)).toBe(1);
  });
});
