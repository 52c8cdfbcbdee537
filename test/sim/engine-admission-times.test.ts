import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot } from '../../src/core/model.js';
import { Admission } from '../../src/queue/admission.js';
import { FIFO_CONFIG } from '../../src/queue/wfq.js';
import type { Configuration } from '../../src/scheduler/types.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import { Simulation } from '../../src/world/simulation.js';
import {
  currentConfiguration,
  EventLog,
  ScriptedScheduler,
  testCatalog,
  trace,
  traceJob,
  traceTask,
} from './sim-fixtures.js';

describe('admission times in the engine', () => {
  it('dates a job placed between rounds from its placement, as the controller dates it, not from the next round', () => {
    // Under three instances at most: A on a big.x at 0 s; at 300 s B (two tasks) next to it and on a new small.x,
    // while D waits for the cap; C arrives at 400 s and is placed between rounds on the big.x's free room.
    const catalog = testCatalog();
    const script = (snapshot: ClusterSnapshot, round: number): Configuration | undefined => {
      if (round === 0)
        return { instances: [{ id: 'n1', typeName: 'big.x', isNew: true, taskIds: ['A/node0'] }] };
      const current = currentConfiguration(snapshot);
      const placed = new Set(current.instances.flatMap((i) => i.taskIds));
      const unplaced = snapshot.tasks.filter((t) => !placed.has(t.id)).map((t) => t.id);
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
    const admission = new Admission(catalog, { caps: { maxInstances: 3 }, config: FIFO_CONFIG });
    const admitted = new Map<number, Map<string, number | undefined>>();
    const log = new EventLog();
    const sim = new Simulation({
      trace: trace(
        traceJob('A', { iterations: 5000 }),
        traceJob('B', {
          arrivalSeconds: 300,
          iterations: 1000,
          tasks: [traceTask('node0'), traceTask('node1')],
        }),
        traceJob('C', { arrivalSeconds: 400, iterations: 5000 }),
        traceJob('D', { arrivalSeconds: 300, iterations: 100 }),
      ),
      scheduler: new ScriptedScheduler('scripted', script),
      catalog,
      groundTruth: constantPairwise(1),
      admission,
      starts: { placeBetweenRounds: true },
      onEvent: log.record,
      onProgress: (p) => {
        admitted.set(
          p.nowSeconds,
          new Map(admission.exportState().memory.map(([id, m]) => [id, m.admittedSeconds])),
        );
      },
    });
    sim.run();
    expect(log.time('placed-between-rounds', { jobId: 'C' })).toBe(400);
    // Admitted by rounds: A at 0 s, B at 300 s; C, which no round admitted, at 400 s, when its run began.
    expect(admitted.get(600)?.get('A')).toBe(0);
    expect(admitted.get(600)?.get('B')).toBe(300);
    expect(admitted.get(600)?.get('C')).toBe(400);
  });
});
