import { describe, expect, it } from 'vitest';
import { writeUnreleasedCoStart, type CoStartRecord } from '../../src/controller/co-start-records.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { CPU_SMALL, jobSpec } from './controller-fixtures.js';

/**
 * The barrier-idle cost of holds that end without a release reaches /metrics (a counter, outside the store) only once
 * the write that ends them has committed: a transaction that rolls back ends nothing, and its retry counts the holds.
 */
describe('the barrier-idle hook of holds ended without a release', () => {
  const before: CoStartRecord = { attempt: 1, ready: {}, running: {} };
  const after: CoStartRecord = { ...before, unreleasedIdleCost: 0.25, barrierIdleCost: 0.25 };

  it('is told once, after the commit, not for a transaction that rolled back', () => {
    const store = new MemoryStateStore();
    const job = store.submitJob(jobSpec('gang', CPU_SMALL, { replicas: 2 }));
    const told: number[] = [];
    const onIdle = (dollars: number) => told.push(dollars);
    expect(() =>
      store.transaction(() => {
        writeUnreleasedCoStart(store, job.id, before, after, onIdle);
        throw new Error('commit failed');
      }),
    ).toThrow('commit failed');
    expect(told).toEqual([]);
    store.transaction(() => {
      writeUnreleasedCoStart(store, job.id, before, after, onIdle);
      expect(told).toEqual([]);
    });
    expect(told).toEqual([0.25]);
  });
});
