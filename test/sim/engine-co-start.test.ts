import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot } from '../../src/core/model.js';
import type { Configuration } from '../../src/scheduler/types.js';
import { FIFO_CONFIG } from '../../src/queue/wfq.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import type { StartOptions } from '../../src/world/simulation-types.js';
import type { TraceTask } from '../../src/world/trace.js';
import {
  currentConfiguration,
  EventLog,
  ScriptedScheduler,
  testCatalog,
  trace,
  traceJob,
  traceTask,
  testSpotMarket,
} from './sim-fixtures.js';

/**
 * A 2-task job B arriving at 300 s: one task goes next to A on a running big.x (image there already: ready 2 s after
 * its start), the other on a new small.x (registered at 360 s, ready 5 s later). A 1-task job C arrives at 400 s
 * while the big.x has room. The script plans A at 0 s, B at 300 s, and anything still unplaced on the big.x.
 */
function scenario(
  starts: StartOptions,
  capHoldsD = false,
  c: { arrivalSeconds: number; tasks?: TraceTask[] } = { arrivalSeconds: 400 },
  ahead: readonly ReturnType<typeof traceJob>[] = [],
  log = new EventLog(),
  bigOnSpot = false,
) {
  // With `bigOnSpot`, the big.x is bought on spot at $3.24/h (a pool at 30% of its $10.8/h).
  const catalog = bigOnSpot
    ? {
        ...testCatalog(),
        spot: testSpotMarket({ typeName: 'big.x', zone: 'testa', pricePerHour: 3.24, interruption: '<5%' }),
      }
    : testCatalog();
  const script = (snapshot: ClusterSnapshot, round: number): Configuration | undefined => {
    if (round === 0)
      return {
        instances: [
          {
            id: 'n1',
            typeName: 'big.x',
            isNew: true,
            taskIds: ['A/node0'],
            ...(bigOnSpot ? { market: 'spot' as const, placement: { zone: 'testa' } } : {}),
          },
        ],
      };
    const current = currentConfiguration(snapshot);
    const placed = new Set(current.instances.flatMap((i) => i.taskIds));
    const unplaced = snapshot.tasks.filter((t) => !placed.has(t.id)).map((t) => t.id);
    if (unplaced.length === 0) return current;
    const big = current.instances.find((i) => i.typeName === 'big.x');
    if (unplaced.includes('B/node1'))
      return {
        instances: [
          ...current.instances.map((i) => (i === big ? { ...i, taskIds: [...i.taskIds, 'B/node0'] } : i)),
          { id: 'n2', typeName: 'small.x', isNew: true, taskIds: ['B/node1'] },
        ],
      };
    return {
      instances: current.instances.map((i) =>
        i === big ? { ...i, taskIds: [...i.taskIds, ...unplaced] } : i,
      ),
    };
  };
  const result = runSimulation({
    trace: trace(
      traceJob('A', { iterations: 5000 }),
      traceJob('B', {
        arrivalSeconds: 300,
        iterations: 1000,
        tasks: [traceTask('node0'), traceTask('node1')],
      }),
      traceJob('C', { ...c, iterations: 100 }),
      ...(capHoldsD ? [traceJob('D', { arrivalSeconds: 300, iterations: 100 })] : []),
      ...ahead,
    ),
    scheduler: new ScriptedScheduler('scripted', script),
    catalog,
    groundTruth: constantPairwise(1),
    onEvent: log.record,
    starts,
    // Three instances at most: A (1 standalone instance) and B (2) are admitted at 300 s, D (1 more) waits.
    ...(capHoldsD ? { queue: { caps: { maxInstances: 3 }, config: FIFO_CONFIG } } : {}),
  });
  return { log, result };
}

describe('co-start in the engine', () => {
  it('without it, the task next to A is ready at 302 s and idles until its sibling is at 365 s', () => {
    const { log, result } = scenario({});
    expect(log.time('start-issued', { taskId: 'B/node0' })).toBe(300);
    expect(log.time('launched', { taskId: 'B/node0' })).toBe(302);
    expect(log.time('launched', { taskId: 'B/node1' })).toBe(365);
    expect(result.starts?.startSkewSecondsMean).toBe(63);
    // 63 s × a quarter of a $10.8/h big.x.
    expect(result.starts?.barrierIdleCost).toBeCloseTo((63 * 0.25 * 10.8) / 3600, 12);
  });

  it('counts the idle time at what the instance is billed: its spot price on spot', () => {
    const { result } = scenario({}, false, { arrivalSeconds: 400 }, [], new EventLog(), true);
    expect(result.starts?.startSkewSecondsMean).toBe(63);
    // 63 s × a quarter of the big.x at its $3.24/h spot price, not its $10.8/h list price.
    expect(result.starts?.barrierIdleCost).toBeCloseTo((63 * 0.25 * 3.24) / 3600, 12);
  });

  it('with it, that task starts preparing at 363 s so both are ready at 365 s: no skew, no idle, same job start', () => {
    const off = scenario({});
    const { log, result } = scenario({ coStart: true });
    expect(log.time('start-issued', { taskId: 'B/node0' })).toBe(363);
    expect(log.time('launched', { taskId: 'B/node0' })).toBe(365);
    expect(log.time('launched', { taskId: 'B/node1' })).toBe(365);
    expect(result.starts?.startSkewSecondsMean).toBe(0);
    expect(result.starts?.barrierIdleCost).toBe(0);
    const jobB = (r: typeof result) => r.jobs.find((j) => j.id === 'B');
    expect(jobB(result)?.startSeconds).toBe(jobB(off.result)?.startSeconds);
    expect(jobB(result)?.endSeconds).toBe(jobB(off.result)?.endSeconds);
  });
});

describe('placement between rounds in the engine', () => {
  it('while a cap holds a job back, places an arriving job on paid room at once instead of at the next round', () => {
    // Without it, C waits behind the cap too (its own instance would be the fourth) until B ends.
    const off = scenario({}, true);
    expect(off.log.time('start-issued', { taskId: 'C/node0' })).toBe(1500);
    const on = scenario({ placeBetweenRounds: true }, true);
    expect(on.log.time('placed-between-rounds', { jobId: 'C' })).toBe(400);
    expect(on.log.time('start-issued', { taskId: 'C/node0' })).toBe(400);
    expect(on.result.starts?.placedBetweenRounds).toBeGreaterThanOrEqual(1);
    const c = (r: typeof on.result) => r.jobs.find((j) => j.id === 'C')?.jctSeconds ?? Infinity;
    expect(c(on.result)).toBe(c(off.result) - 1100);
    expect(on.result.starts?.waitToPlaceSecondsMean).toBeLessThan(
      off.result.starts?.waitToPlaceSecondsMean ?? 0,
    );
  });

  it('passes over a job that never fits the caps without keeping room for it: the job behind it is placed', () => {
    // E arrives before C: four tasks of 30 vCPUs, each a big.x of its own, four instances under a cap of three. No
    // round ever admits it (the run ends unfinished), and the big.x's free 24 vCPUs cannot take one of its tasks: it
    // must not hold that room.
    const wide = { demand: { any: [1, 30, 8] as [number, number, number] } };
    const e = traceJob('E', {
      arrivalSeconds: 350,
      iterations: 100,
      tasks: [0, 1, 2, 3].map((i) => traceTask(`node${i}`, wide)),
    });
    const log = new EventLog();
    expect(() => scenario({ placeBetweenRounds: true }, true, { arrivalSeconds: 400 }, [e], log)).toThrow(
      /1 jobs unfinished \(e\.g\. E\)/,
    );
    expect(log.time('placed-between-rounds', { jobId: 'C' })).toBe(400);
    expect(log.all('placed-between-rounds', { jobId: 'E' })).toEqual([]);
    expect(log.time('start-issued', { taskId: 'C/node0' })).toBe(400);
  });

  it('binds an arriving job to the instance still coming up when it is ready before a launch, and records why', () => {
    // C (a small-family task, 2 vCPUs) arrives at 320 s, while B's small.x is booting (ready at 360 s, with 4 vCPUs
    // free next to B/node1); a launch made now would be ready at 380 s.
    const small = { arrivalSeconds: 320, tasks: [traceTask('node0', { demand: { small: [0, 2, 4] } })] };
    const bound = scenario({ placeBetweenRounds: true, bind: true }, true, small);
    const [placed, ...more] = bound.log.all('placed-between-rounds', { jobId: 'C' });
    expect(more).toEqual([]);
    expect(placed?.timeSeconds).toBe(320);
    expect(placed?.bindChoice?.choice).toBe('bind');
    expect(placed?.bindChoice?.bindJobStartSeconds).toBe(360);
    expect(placed?.bindChoice?.launchJobStartSeconds).toBe(380);
    expect(bound.log.time('start-issued', { taskId: 'C/node0' })).toBe(360);
    // Without bind only running instances count: C is placed at the first completion after the small.x is up, with no
    // bind-or-launch choice to record.
    const unbound = scenario({ placeBetweenRounds: true }, true, small);
    const [later] = unbound.log.all('placed-between-rounds', { jobId: 'C' });
    expect(later?.timeSeconds).toBeGreaterThan(360);
    expect(later?.bindChoice).toBeUndefined();
  });

  it('without a cap holding jobs back, leaves the arriving job to the next round, which packs all that wait', () => {
    const on = scenario({ placeBetweenRounds: true });
    expect(on.log.all('placed-between-rounds')).toEqual([]);
    expect(on.log.time('start-issued', { taskId: 'C/node0' })).toBe(600);
    expect(on.result.starts?.placedBetweenRounds).toBe(0);
  });

  it('places a held-back job on an instance when its occupant ends (digest E2: the bind to a busy instance)', () => {
    // One instance at most. A runs alone on a small.x (active from 72 s, ends at 490 s); D arrives at 250 s and the
    // round at 300 s holds it back for the cap. The script keeps what runs and puts anything unplaced on that
    // small.x once it is empty.
    const run = (starts: StartOptions) => {
      const log = new EventLog();
      const result = runSimulation({
        trace: trace(
          traceJob('A', { iterations: 418 }),
          traceJob('D', { arrivalSeconds: 250, iterations: 100 }),
        ),
        scheduler: new ScriptedScheduler('scripted', (snapshot, round) => {
          const first = snapshot.tasks[0];
          if (round === 0 && first !== undefined)
            return { instances: [{ id: 'n1', typeName: 'small.x', isNew: true, taskIds: [first.id] }] };
          const current = currentConfiguration(snapshot);
          const unplaced = snapshot.tasks.filter((t) => t.instanceId === undefined).map((t) => t.id);
          const free = snapshot.instances.find((i) => i.taskIds.length === 0);
          if (current.instances.length > 0 || free === undefined || unplaced.length === 0) return current;
          return { instances: [{ id: free.id, typeName: free.typeName, isNew: false, taskIds: unplaced }] };
        }),
        catalog: testCatalog(),
        groundTruth: constantPairwise(1),
        onEvent: log.record,
        starts,
        queue: { caps: { maxInstances: 1 }, config: FIFO_CONFIG },
      });
      return { log, result };
    };
    const on = run({ placeBetweenRounds: true });
    const aEnds = on.result.jobs.find((j) => j.id === 'A')?.endSeconds;
    expect(aEnds).toBe(490);
    // Placed at A's end, on the instance A leaves: 60 s before a launch made then would be ready, and no launch.
    expect(on.log.time('placed-between-rounds', { jobId: 'D' })).toBe(490);
    expect(on.log.time('start-issued', { taskId: 'D/node0' })).toBe(490);
    expect(on.result.summary.instancesLaunched).toBe(1);
    // Without it, D waits for the round at 600 s.
    const off = run({});
    expect(off.log.time('start-issued', { taskId: 'D/node0' })).toBe(600);
    const d = (r: typeof on.result) => r.jobs.find((j) => j.id === 'D')?.jctSeconds ?? Infinity;
    expect(d(on.result)).toBe(d(off.result) - 110);
  });
});

describe('a scheduler that plans over the caps', () => {
  it('stalls, and the run says so: how many plans the cap check refused, the last breach, and what to do', () => {
    // Every plan buys a big.x ($10.8/h) under a $5/h cap: none is carried out, so the job never runs.
    const overspender = new ScriptedScheduler('overspender', (snapshot) => ({
      instances: [{ id: 'n1', typeName: 'big.x', isNew: true, taskIds: snapshot.tasks.map((t) => t.id) }],
    }));
    expect(() =>
      runSimulation({
        trace: trace(traceJob('A', { iterations: 100 })),
        scheduler: overspender,
        catalog: testCatalog(),
        groundTruth: constantPairwise(1),
        queue: { caps: { maxCostPerHour: 5 }, config: FIFO_CONFIG },
        maxSimulatedSeconds: 3_600,
      }),
    ).toThrow(
      /1 jobs unfinished \(e\.g\. A\); \d+ of its \d+ plans broke a cap and were not carried out \(the last: maxCostPerHour: \$10\.80\/h over the \$5\/h cap\); only Eva plans within the caps: run overspender without them$/,
    );
  });
});
