import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EventQueue } from '../../src/world/event-queue.js';

interface E {
  readonly timeSeconds: number;
  readonly rank: number;
  readonly id: number;
}

describe('EventQueue', () => {
  it('pops by time, then rank, then insertion order, whatever the insertion order', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({ timeSeconds: fc.integer({ min: 0, max: 20 }), rank: fc.integer({ min: 0, max: 3 }) }),
          {
            maxLength: 200,
          },
        ),
        (items) => {
          const q = new EventQueue<E>();
          const events = items.map((e, id) => ({ ...e, id }));
          for (const e of events) q.push(e);
          expect(q.size).toBe(events.length);
          const popped: E[] = [];
          for (let e = q.pop(); e !== undefined; e = q.pop()) popped.push(e);
          const expected = [...events].sort(
            (a, b) => a.timeSeconds - b.timeSeconds || a.rank - b.rank || a.id - b.id,
          );
          expect(popped).toEqual(expected);
        },
      ),
    );
  });

  it('interleaves pushes and pops and reports the next time', () => {
    const q = new EventQueue<E>();
    expect(q.peekTime()).toBeUndefined();
    q.push({ timeSeconds: 5, rank: 0, id: 1 });
    q.push({ timeSeconds: 3, rank: 2, id: 2 });
    expect(q.peekTime()).toBe(3);
    expect(q.pop()?.id).toBe(2);
    q.push({ timeSeconds: 5, rank: 0, id: 3 });
    expect([q.pop()?.id, q.pop()?.id, q.pop()]).toEqual([1, 3, undefined]);
  });

  it('rejects non-finite times (they would stall the clock)', () => {
    expect(() => new EventQueue<E>().push({ timeSeconds: Number.NaN, rank: 0, id: 0 })).toThrow(/finite/);
  });
});
