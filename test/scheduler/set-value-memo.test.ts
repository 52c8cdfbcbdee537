import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ColocationTable } from '../../src/scheduler/colocation-table.js';
import {
  classify,
  Composition,
  compositionValue,
  type PackTask,
  type RateModel,
} from '../../src/scheduler/packing.js';

/**
 * Set values are memoized in the co-location table and dropped only when a mean they read changes (an exact entry
 * drops only its own set). These tests hold the memo to a table that never saw a lookup: same values, bit for bit.
 */
const KEYS = ['a', 'b', 'c', 'd'] as const;

function tasksFor(counts: readonly number[]): PackTask[] {
  return counts.flatMap((n, k) =>
    Array.from({ length: n }, (_, i) => ({
      id: `${KEYS[k]}-${i}`,
      jobId: `${KEYS[k]}-${i}`,
      key: KEYS[k] as string,
      demand: { c7i: [0, 1, 1] as [number, number, number] },
      rp: 1 + k,
      jobTaskCount: 1,
    })),
  );
}

type Observation = { target: string; others: string[]; value: number };

function replay(observations: readonly Observation[]): ColocationTable {
  const t = new ColocationTable();
  for (const o of observations) t.record(o.target, o.others, o.value);
  return t;
}

/** Value of the multiset `members` (+ `extra`) under `table`. */
function valueOf(table: ColocationTable, members: readonly string[], extra?: string): number {
  const classes = classify(
    tasksFor(KEYS.map((k) => members.filter((m) => m === k).length + (extra === k ? 1 : 0))),
  );
  const byKey = new Map(classes.map((c) => [c.key, c]));
  const comp = new Composition();
  for (const m of members) comp.add(byKey.get(m) as NonNullable<ReturnType<typeof byKey.get>>);
  const model: RateModel = { table, throughputAware: true, multiTaskAware: true };
  return compositionValue(comp, model, true, extra === undefined ? undefined : byKey.get(extra));
}

describe('memoized set values', () => {
  it('an exact entry drops only its own set; a pair entry drops every set holding its target', () => {
    const table = new ColocationTable();
    table.record('a', ['b'], 0.9); // a has entries: its sets use pair products
    const abc = valueOf(table, ['a', 'b', 'c']);
    const abd = valueOf(table, ['a', 'b', 'd']);
    expect(abc).toBeCloseTo(1 * 0.9 * 0.95 + 2 * 0.95 ** 2 + 3 * 0.95 ** 2, 12);
    table.record('a', ['b', 'c'], 0.5);
    expect(valueOf(table, ['a', 'b', 'c'])).toBeCloseTo(1 * 0.5 + 2 * 0.95 ** 2 + 3 * 0.95 ** 2, 12);
    expect(valueOf(table, ['a', 'b', 'd'])).toBe(abd);
    table.record('a', ['d'], 0.8);
    expect(valueOf(table, ['a', 'b', 'd'])).toBeCloseTo(1 * 0.9 * 0.8 + 2 * 0.95 ** 2 + 4 * 0.95 ** 2, 12);
  });

  it('equal a fresh table’s values, bit for bit, under any order of lookups and observations', () => {
    // Three keys and small sets, so that lookups and observations often meet the same multiset.
    const key = fc.constantFrom('a', 'b', 'c');
    const step = fc.oneof(
      fc.record({
        kind: fc.constant('observe' as const),
        target: key,
        others: fc.array(key, { minLength: 1, maxLength: 2 }),
        value: fc.constantFrom(0.5, 0.7, 0.8, 0.9, 1),
      }),
      fc.record({
        kind: fc.constant('lookup' as const),
        members: fc.array(key, { minLength: 1, maxLength: 3 }),
        extra: fc.option(key, { nil: undefined }),
      }),
    );
    fc.assert(
      fc.property(fc.array(step, { minLength: 20, maxLength: 60, size: 'max' }), (steps) => {
        const table = new ColocationTable();
        const seen: Observation[] = [];
        for (const s of steps) {
          if (s.kind === 'observe') {
            table.record(s.target, s.others, s.value);
            seen.push(s);
          } else expect(valueOf(table, s.members, s.extra)).toBe(valueOf(replay(seen), s.members, s.extra));
        }
      }),
      { numRuns: 500, seed: 11 },
    );
  });

  it('a set value does not depend on the order its members were added, nor on earlier lookups', () => {
    const learned: Observation[] = [
      { target: 'a', others: ['b'], value: 0.83 },
      { target: 'b', others: ['a', 'c'], value: 0.71 },
      { target: 'c', others: ['a'], value: 0.97 },
    ];
    const table = replay(learned);
    const one = valueOf(table, ['a', 'b', 'c', 'a']);
    expect(valueOf(replay(learned), ['c', 'a', 'a', 'b'])).toBe(one);
    expect(valueOf(table, ['c', 'a', 'b'], 'a')).toBe(one);
    expect(valueOf(new ColocationTable(), ['a'])).toBe(1); // a task alone is worth its reservation price
  });
});
