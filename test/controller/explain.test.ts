import { describe, expect, it } from 'vitest';
import { whyJob } from '../../src/controller/explain.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { RoundInput } from '../../src/controller/state-store.js';
import type { PlannedInstance } from '../../src/scheduler/types.js';
import { CPU_SMALL, jobSpec } from './controller-fixtures.js';

function round(instances: readonly PlannedInstance[]): RoundInput {
  return {
    configuration: { instances },
    decision: {
      scheduler: 'eva',
      nowSeconds: 0,
      candidates: [],
      chosen: 'stay',
      reason: 'only candidate',
      waiting: [],
      pinned: [],
    },
  };
}

describe('whyJob', () => {
  it('finds the rounds of a job that ended long ago, behind hundreds of later rounds', () => {
    let clock = 1000;
    const store = new MemoryStateStore({ nowSeconds: () => clock, storeId: 'test' });
    const job = store.submitJob(jobSpec('old', CPU_SMALL));
    const task = `${job.id}.0`;
    const applied = (n: number, moved: readonly string[]) =>
      store.appendEvent({
        kind: 'round.applied',
        message: `round ${n}`,
        data: { round: n, moved: [...moved] },
      });
    clock = 1010;
    const placed = store.recordRound(
      round([{ id: 'inst-1', typeName: 'c7i.xlarge', isNew: true, taskIds: [task] }]),
    ).round;
    applied(placed, []);
    clock = 1020;
    // The plan's own record does not list the move: only the round as carried out (its event) says so.
    const moved = store.recordRound(
      round([{ id: 'inst-2', typeName: 'c7i.xlarge', isNew: true, taskIds: [task] }]),
    ).round;
    applied(moved, [job.id]);
    clock = 1030;
    store.setJobState(job.id, 'cancelled');
    for (let i = 0; i < 300; i++) {
      clock = 1040 + 10 * i;
      applied(store.recordRound(round([])).round, []);
    }
    const why = whyJob(store, job.id, 10);
    expect(why.map((r) => [r.round, r.summary])).toEqual([
      [moved, expect.stringMatching(/^moved to inst-2 \(c7i\.xlarge, new\) /) as unknown],
      [placed, 'placed on inst-1 (c7i.xlarge, new)'],
    ]);
  });
});
