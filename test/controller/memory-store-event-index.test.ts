import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { EventFilter, EventInput, StateStore } from '../../src/controller/state-store.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';

/**
 * The memory store answers event queries from indexes (by job, instance, kind, and job or instance with kind), as
 * SQL answers them from its own: whatever the filter, and after prunes and transactions that were rolled back, it
 * gives what SQLite gives, in the same order.
 */
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const eventArb: fc.Arbitrary<EventInput> = fc.record({
  kind: fc.constantFrom('job.state', 'instance.market-fallback', 'instance.rebalance-recommendation', 'note'),
  jobId: maybe(fc.constantFrom('job-1', 'job-2', 'job-3')),
  taskId: maybe(fc.constantFrom('job-1.0', 'job-2.0')),
  instanceId: maybe(fc.constantFrom('inst-1', 'inst-2', 'inst-3')),
  message: maybe(fc.constantFrom('a', 'b')),
});
const anyFilterArb: fc.Arbitrary<EventFilter> = fc.record(
  {
    afterSeq: fc.integer({ min: 0, max: 30 }),
    jobId: fc.constantFrom('job-1', 'job-2', 'job-9'),
    taskId: fc.constantFrom('job-1.0', 'job-2.0'),
    instanceId: fc.constantFrom('inst-1', 'inst-2', 'inst-9'),
    kind: fc.constantFrom(
      'job.state',
      'instance.market-fallback',
      'instance.rebalance-recommendation',
      'nothing',
    ),
    kinds: fc.subarray(['job.state', 'instance.market-fallback', 'note', 'nothing']),
    limit: fc.integer({ min: 0, max: 5 }),
    newestFirst: fc.boolean(),
  },
  { requiredKeys: [] },
);
/** Filters by several kinds alone (the memory store merges its per-kind lists), and filters of every kind. */
const filterArb: fc.Arbitrary<EventFilter> = fc.oneof(
  anyFilterArb,
  fc.record(
    {
      afterSeq: fc.integer({ min: 0, max: 30 }),
      taskId: fc.constantFrom('job-1.0', 'job-2.0'),
      kinds: fc.subarray(['job.state', 'instance.market-fallback', 'note', 'nothing'], { minLength: 2 }),
      limit: fc.integer({ min: 0, max: 5 }),
      newestFirst: fc.boolean(),
    },
    { requiredKeys: ['kinds'] },
  ),
);
/** A batch of events appended, or old events of a kind pruned, in one transaction that commits or is rolled back. */
const batchArb = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      events: fc.array(eventArb, { minLength: 1, maxLength: 4 }),
      commit: fc.boolean(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      prune: fc.record({
        kind: fc.constantFrom('job.state', 'note'),
        before: fc.integer({ min: 0, max: 12 }),
        limit: fc.integer({ min: 0, max: 4 }),
      }),
      commit: fc.boolean(),
    }),
  },
);

function pruneBatch(
  store: StateStore,
  prune: { kind: string; before: number; limit: number },
  commit: boolean,
): number | undefined {
  try {
    return store.transaction(() => {
      const removed = store.pruneEvents(prune.kind, prune.before, prune.limit);
      if (!commit) throw new Error('rolled back');
      return removed;
    });
  } catch (e) {
    if ((e as Error).message !== 'rolled back') throw e;
    return undefined;
  }
}

function appendBatch(store: StateStore, events: readonly EventInput[], commit: boolean): void {
  try {
    store.transaction(() => {
      for (const e of events) store.appendEvent(e);
      if (!commit) throw new Error('rolled back');
    });
  } catch (e) {
    if ((e as Error).message !== 'rolled back') throw e;
  }
}

describe('MemoryStateStore event indexes', () => {
  it('give what SQLite gives for every filter, rolled-back transactions included', () => {
    fc.assert(
      fc.property(
        fc.array(batchArb, { maxLength: 12 }),
        fc.array(filterArb, { minLength: 1, maxLength: 12 }),
        (batches, filters) => {
          // Each batch a second later, so that pruning by time has something to tell apart.
          let clock = 0;
          const now = (): number => clock;
          const memory = new MemoryStateStore({ nowSeconds: now, storeId: 'x' });
          const sqlite = new SqliteStateStore(':memory:', { nowSeconds: now });
          try {
            for (const batch of batches) {
              clock += 1;
              if ('events' in batch) {
                appendBatch(memory, batch.events, batch.commit);
                appendBatch(sqlite, batch.events, batch.commit);
              } else
                expect(pruneBatch(memory, batch.prune, batch.commit)).toBe(
                  pruneBatch(sqlite, batch.prune, batch.commit),
                );
            }
            expect(memory.listEvents()).toEqual(sqlite.listEvents());
            for (const filter of filters)
              expect(memory.listEvents(filter)).toEqual(sqlite.listEvents(filter));
          } finally {
            memory.close();
            sqlite.close();
          }
        },
      ),
      { numRuns: 200, seed: 7 },
    );
  });
});
