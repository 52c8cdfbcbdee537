import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EventHistory, type LegacyEventHistoryState } from '../../src/scheduler/decision-rule.js';

/**
 * Eva's event history (§4.5) keeps a fixed-size summary of the events: the count, the earliest and latest time and
 * the Full Reconfigurations. What it gives must be exactly what the list of every event time gave, which the
 * reference below keeps as the history did before.
 */
class EveryEventTime {
  readonly times: number[] = [];
  fullCount = 0;

  addEvents(timesSeconds: readonly number[]): void {
    for (const t of timesSeconds) {
      let i = this.times.length;
      while (i > 0 && (this.times[i - 1] as number) > t) i--;
      this.times.splice(i, 0, t);
    }
  }

  recordFull(): void {
    this.fullCount += 1;
  }

  get firstEventSeconds(): number | undefined {
    return this.times[0];
  }

  get eventCount(): number {
    return this.times.length;
  }

  get eventRatePerSecond(): number | undefined {
    if (this.times.length < 2) return undefined;
    const span = (this.times[this.times.length - 1] as number) - (this.times[0] as number);
    return span > 0 ? (this.times.length - 1) / span : undefined;
  }

  get fullFraction(): number {
    return Math.min(1, this.fullCount / Math.max(1, this.times.length));
  }

  toJSON(): LegacyEventHistoryState {
    return { times: [...this.times], fullCount: this.fullCount };
  }

  static fromJSON(data: LegacyEventHistoryState): EveryEventTime {
    const h = new EveryEventTime();
    h.addEvents(data.times);
    h.fullCount = data.fullCount;
    return h;
  }
}

type Op =
  | { readonly kind: 'add'; readonly times: number[] }
  | { readonly kind: 'full' }
  | { readonly kind: 'reload' };

/** Ties, signed zeros and extremes as well as any double but NaN (event times are clock readings). */
const anyTime = fc.oneof(
  fc.integer({ min: -5, max: 5 }),
  fc.constantFrom(0, -0, Infinity, -Infinity, Number.MAX_VALUE, -Number.MAX_VALUE, Number.MIN_VALUE),
  fc.double({ noNaN: true }),
);
/** What a JSON state store can hold. */
const finiteTime = fc.oneof(
  fc.integer({ min: -5, max: 5 }),
  fc.constantFrom(0, -0, Number.MAX_VALUE, -Number.MAX_VALUE),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

function ops(time: fc.Arbitrary<number>, reload: boolean): fc.Arbitrary<Op[]> {
  const op: fc.Arbitrary<Op>[] = [
    fc.array(time, { maxLength: 6 }).map((times) => ({ kind: 'add' as const, times })),
    fc.constant({ kind: 'full' as const }),
  ];
  if (reload) op.push(fc.constant({ kind: 'reload' as const }));
  return fc.array(fc.oneof(...op), { maxLength: 40 });
}

function throughJson<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/** Both give the same values, to the bit (toBe is Object.is: −0 and 0 differ). */
function expectSame(h: EventHistory, ref: EveryEventTime): void {
  expect(h.eventCount).toBe(ref.eventCount);
  expect(h.firstEventSeconds).toBe(ref.firstEventSeconds);
  expect(h.eventRatePerSecond).toBe(ref.eventRatePerSecond);
  expect(h.fullFraction).toBe(ref.fullFraction);
}

describe("Eva's event history is a fixed-size summary of every event time", () => {
  it('gives exactly what the list of every event time gave, for any events in any order', () => {
    fc.assert(
      fc.property(ops(anyTime, false), (run) => {
        const h = new EventHistory();
        const ref = new EveryEventTime();
        for (const op of run) {
          if (op.kind === 'add') {
            h.addEvents(op.times);
            ref.addEvents(op.times);
          } else {
            h.recordFull();
            ref.recordFull();
          }
          expectSame(h, ref);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('gives the same after being saved as JSON and read back at any point, as the list did', () => {
    fc.assert(
      fc.property(ops(finiteTime, true), (run) => {
        let h = new EventHistory();
        let ref = new EveryEventTime();
        for (const op of run) {
          if (op.kind === 'add') {
            h.addEvents(op.times);
            ref.addEvents(op.times);
          } else if (op.kind === 'full') {
            h.recordFull();
            ref.recordFull();
          } else {
            h = EventHistory.fromJSON(throughJson(h.toJSON()));
            ref = EveryEventTime.fromJSON(throughJson(ref.toJSON()));
          }
          expectSame(h, ref);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('reads a history saved as every event time (older versions) into the same values', () => {
    fc.assert(
      fc.property(ops(finiteTime, false), (run) => {
        const ref = new EveryEventTime();
        for (const op of run)
          if (op.kind === 'add') ref.addEvents(op.times);
          else ref.recordFull();
        const saved = throughJson(ref.toJSON());
        const h = EventHistory.fromJSON(saved);
        expectSame(h, EveryEventTime.fromJSON(saved));
        // And goes on from it as the list would.
        h.addEvents([7, -3]);
        const went = EveryEventTime.fromJSON(saved);
        went.addEvents([7, -3]);
        expectSame(h, went);
      }),
      { numRuns: 300 },
    );
  });

  it('reads a literal state of the older form: λ = 3 / 600 s, p = 1/4, first event at 0', () => {
    const h = EventHistory.fromJSON({ times: [0, 100, 100, 600], fullCount: 1 });
    expect(h.eventCount).toBe(4);
    expect(h.firstEventSeconds).toBe(0);
    expect(h.eventRatePerSecond).toBe(3 / 600);
    expect(h.fullFraction).toBe(0.25);
    expect(h.toJSON()).toEqual({ count: 4, fullCount: 1, firstSeconds: 0, lastSeconds: 600 });
  });

  it('saves four numbers, whatever the number of events: the state is the same size after 1,000 and 9,999', () => {
    const after = (n: number): string => {
      const h = new EventHistory();
      h.addEvents([5000]);
      h.addEvents(Array.from({ length: n - 2 }, (_, i) => 5000 + ((i * 7919) % 4000)));
      h.addEvents([9000]);
      h.recordFull();
      return JSON.stringify(h.toJSON());
    };
    expect(JSON.parse(after(1000))).toEqual({
      count: 1000,
      fullCount: 1,
      firstSeconds: 5000,
      lastSeconds: 9000,
    });
    expect(after(9999).length).toBe(after(1000).length);
    expect(after(100_000).length).toBeLessThan(80);
    expect(JSON.stringify(new EventHistory().toJSON())).toBe('{"count":0,"fullCount":0}');
  });

  it('refuses a saved history that is neither form, or whose numbers cannot be its own', () => {
    const unreadable: unknown[] = [
      {},
      { fullCount: 0 },
      { count: 2, fullCount: 0 },
      { count: 0, fullCount: 0, firstSeconds: 1, lastSeconds: 1 },
      { count: 2, fullCount: 0, firstSeconds: 9, lastSeconds: 1 },
      { count: -1, fullCount: 0 },
      { count: 1.5, fullCount: 0, firstSeconds: 1, lastSeconds: 1 },
      { times: [0, null], fullCount: 0 },
      { times: [0], fullCount: -1 },
    ];
    for (const data of unreadable)
      expect(() => EventHistory.fromJSON(data as LegacyEventHistoryState), JSON.stringify(data)).toThrow();
  });
});
