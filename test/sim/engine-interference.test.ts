import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot } from '../../src/core/model.js';
import type { Configuration } from '../../src/scheduler/types.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { constantPairwise, type GroundTruth } from '../../src/world/ground-truth.js';
import {
  EventLog,
  instanceType,
  ScriptedScheduler,
  testCatalog,
  trace,
  traceJob,
  traceTask,
} from './sim-fixtures.js';

/** Round 0 puts every task of the snapshot on one new big.x; later rounds keep things as they are. */
function allOnOneInstance(snapshot: ClusterSnapshot, round: number): Configuration | undefined {
  if (round > 0) return undefined;
  return {
    instances: [{ id: 'new-1', typeName: 'big.x', isNew: true, taskIds: snapshot.tasks.map((t) => t.id) }],
  };
}

function observed(s: ScriptedScheduler, round: number): Record<string, number> {
  return Object.fromEntries((s.observations[round] ?? []).map((o) => [o.taskId, o.normalizedThroughput]));
}

describe('ground-truth interference on a shared instance', () => {
  it('gives each task its own rate next to the others, and speeds the survivor up when a neighbour ends', () => {
    // a runs at 0.5 next to anything, b at 0.8 (the model is asymmetric, like Eva's matrix).
    const truth: GroundTruth = (target, others) => (target === 'a' ? 0.5 : 0.8) ** others.length;
    const scheduler = new ScriptedScheduler('scripted', allOnOneInstance);
    const log = new EventLog();
    const result = runSimulation({
      trace: trace(
        traceJob('A', { workload: 'a', iterations: 1000 }),
        traceJob('B', { workload: 'b', iterations: 400 }),
      ),
      scheduler,
      catalog: testCatalog(),
      groundTruth: truth,
      onEvent: log.record,
    });
    // Both launched at 65 (ready 60 + fetch 2 + build 3; the image was not there yet for either), active at 72.
    expect(log.times('launched')).toEqual([65, 65]);
    // B: 400 / 0.8 = 500 s → 572. A: 250 iterations by then, 750 more alone → 1322.
    expect(result.jobs.map((j) => [j.id, j.endSeconds])).toEqual([
      ['A', 1322],
      ['B', 572],
    ]);
    expect(observed(scheduler, 1)).toEqual({ 'A/node0': 0.5, 'B/node0': 0.8 }); // round at 300
    expect(observed(scheduler, 2)).toEqual({ 'A/node0': 1 }); // round at 600
  });

  it('composes three co-located tasks as the product of pairwise rates (0.85² each)', () => {
    const log = new EventLog();
    const scheduler = new ScriptedScheduler('scripted', allOnOneInstance);
    const result = runSimulation({
      trace: trace(
        traceJob('j1', { iterations: 289 }),
        traceJob('j2', { iterations: 578 }),
        traceJob('j3', { iterations: 1000 }),
      ),
      scheduler,
      catalog: testCatalog(),
      groundTruth: constantPairwise(0.85),
      onEvent: log.record,
    });
    // From 72 all three at 0.7225: j1's 289 take 400 s → 472. Then two at 0.85: j2's remaining 289 take 340 s
    // → 812. j3 has 289 + 289 by then; 422 alone → 1234.
    expect(result.jobs.map((j) => j.endSeconds)).toEqual([472, 812, 1234]);
    expect(Object.values(observed(scheduler, 1))).toEqual(
      [0.7225, 0.7225, 0.7225].map((x) => expect.closeTo(x, 12)),
    );
  });

  it('leaves tasks on different instances alone', () => {
    const scheduler = new ScriptedScheduler('scripted', (snapshot, round) =>
      round > 0
        ? undefined
        : {
            instances: snapshot.tasks.map((t, i) => ({
              id: `new-${i + 1}`,
              typeName: 'small.x',
              isNew: true,
              taskIds: [t.id],
            })),
          },
    );
    const result = runSimulation({
      trace: trace(traceJob('A', { iterations: 1000 }), traceJob('B', { iterations: 1000 })),
      scheduler,
      catalog: testCatalog(),
      groundTruth: constantPairwise(0.5),
    });
    expect(result.jobs.map((j) => j.endSeconds)).toEqual([1072, 1072]); // alone: full speed
  });
});

describe('a multi-task job', () => {
  it('starts once all its tasks run (gang) and runs at its slowest task', () => {
    // M: two tasks, node0 next to S on a big.x, node1 alone on slow.x (ready at 160 instead of 60).
    const catalog = testCatalog([instanceType('slow.x', [1, 8, 32], 3.6, { workerRegisterSeconds: 130 })]);
    const scheduler = new ScriptedScheduler('scripted', (snapshot, round) =>
      round > 0
        ? undefined
        : {
            instances: [
              { id: 'new-1', typeName: 'big.x', isNew: true, taskIds: ['M/node0', 'S/node0'] },
              { id: 'new-2', typeName: 'slow.x', isNew: true, taskIds: ['M/node1'] },
            ],
          },
    );
    const log = new EventLog();
    const result = runSimulation({
      trace: trace(
        traceJob('M', { iterations: 1000, tasks: [traceTask('node0'), traceTask('node1')] }),
        traceJob('S', { iterations: 200 }),
      ),
      scheduler,
      catalog,
      groundTruth: constantPairwise(0.5),
      onEvent: log.record,
    });
    expect(log.times('launched', { jobId: 'M' })).toEqual([65, 165]);
    expect(log.time('job-active', { jobId: 'M' })).toBe(172);
    // S: 0.5 from 72 (M's node0 interferes from its launch at 65) → 200 / 0.5 → 472.
    // M: min(0.5, 1) = 0.5 from 172 to 472 = 150 iterations; 850 alone → 1322.
    expect(result.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds])).toEqual([
      ['M', 172, 1322],
      ['S', 72, 472],
    ]);
    // The round at 300 observes the job-level min for both of M's tasks.
    expect(observed(scheduler, 1)).toEqual({ 'M/node0': 0.5, 'M/node1': 0.5, 'S/node0': 0.5 });
    const m = scheduler.snapshots[1]?.jobs.find((j) => j.id === 'M');
    expect(m).toMatchObject({ reconfigurable: true, runningSinceSeconds: 172, lastCheckpointSeconds: 300 });
    expect(m?.expectedRemainingSeconds).toBeCloseTo(1000 - 64, 9); // 128 s at 0.5 by 300
    // max over tasks of fetch 2 + build 3 + upload 4, plus init 7.
    expect(m?.migrationDelaySeconds).toBe(16);
  });
});
