import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { attributeJobObservation, ColocationTable } from '../../src/scheduler/colocation-table.js';

describe('co-location throughput table (Eva §4.3)', () => {
  it('uses the default per co-located task before anything is learned', () => {
    const t = new ColocationTable(0.95);
    expect(t.rate('a', [])).toBe(1);
    expect(t.rate('a', ['b'])).toBe(0.95);
    expect(t.rate('a', ['b', 'c'])).toBeCloseTo(0.9025, 12);
  });

  it('returns the mean of an exact entry, else the product of pairwise values, else defaults', () => {
    const t = new ColocationTable(0.95);
    t.record('a', ['b'], 0.8);
    t.record('a', ['b'], 0.9);
    t.record('a', ['c'], 0.5);
    expect(t.rate('a', ['b'])).toBeCloseTo(0.85, 12);
    // product of pairwise: 0.85 × 0.5
    expect(t.rate('a', ['c', 'b'])).toBeCloseTo(0.425, 12);
    // unknown partner falls back to the default inside the product: 0.85 × 0.95
    expect(t.rate('a', ['b', 'z'])).toBeCloseTo(0.8075, 12);
    t.record('a', ['c', 'b'], 0.7);
    // the exact set wins over the product, whatever the order of the others
    expect(t.rate('a', ['b', 'c'])).toBeCloseTo(0.7, 12);
  });

  it('a tunable default changes how conservative lookups are', () => {
    expect(new ColocationTable(0.8).rate('x', ['y', 'y'])).toBeCloseTo(0.64, 12);
    expect(() => new ColocationTable(0)).toThrow(/default co-location rate/);
  });

  it('round-trips through JSON', () => {
    const t = new ColocationTable(0.9);
    t.record('a', ['b'], 0.8);
    t.record('a', ['b'], 0.6);
    const u = ColocationTable.fromJSON(JSON.parse(JSON.stringify(t.toJSON())));
    expect(u.rate('a', ['b'])).toBeCloseTo(0.7, 12);
    // The configured rate is kept; the prior restored is what the pairs learned give: (0.9 + 0.7) / 2.
    expect(u.initialRate).toBe(0.9);
    expect(u.defaultRate).toBeCloseTo(0.8, 12);
    expect(u.summaries()).toEqual(t.summaries());
  });
});

describe('the prior for unseen pairs, learned from the pairs seen alone together', () => {
  it('is the mean of the pairs observed, the configured rate counted once; sets do not count', () => {
    const t = new ColocationTable(0.95);
    t.record('a', ['b'], 0.75);
    // Nothing moves until the round refreshes it.
    expect(t.rate('c', ['d'])).toBe(0.95);
    t.refreshPrior();
    // (0.95 + 0.75) / 2
    expect(t.defaultRate).toBeCloseTo(0.85, 12);
    expect(t.rate('c', ['d'])).toBeCloseTo(0.85, 12);
    expect(t.rate('c', ['d', 'e'])).toBeCloseTo(0.7225, 12);
    // A pair's mean counts once however often it was seen; a set of three is no pair.
    t.record('a', ['b'], 0.75);
    t.record('b', ['a'], 0.55);
    t.record('a', ['b', 'c'], 0.1);
    t.refreshPrior();
    // (0.95 + 0.75 + 0.55) / 3
    expect(t.defaultRate).toBeCloseTo(0.75, 12);
    // What was learned about a pair still wins over the prior.
    expect(t.rate('a', ['b'])).toBeCloseTo(0.75, 12);
  });

  it('drops memoized set values when it moves, and is restored with the table', () => {
    const t = new ColocationTable(0.95);
    t.storeValue('set', 0, ['x', 'y'], undefined, 1.23);
    t.refreshPrior(); // nothing learned: the prior stays, so does the value
    expect(t.cachedValue('set', 0)).toBe(1.23);
    t.record('a', ['b'], 0.55);
    t.refreshPrior();
    expect(t.cachedValue('set', 0)).toBeUndefined();
    const u = ColocationTable.fromJSON(JSON.parse(JSON.stringify(t.toJSON())));
    expect(u.initialRate).toBe(0.95);
    expect(u.defaultRate).toBeCloseTo(0.75, 12);
  });
});

describe('pair factors learned from sets of three or more (a pair never seen alone)', () => {
  it('learns the unseen pair from a larger set: 0.6 observed with b at 0.8 alone gives c 0.6 / 0.8 = 0.75', () => {
    const t = new ColocationTable(0.95);
    t.record('a', ['b'], 0.8);
    // Before: c is unknown, a new set with c is priced with the default.
    expect(t.rate('a', ['c', 'z'])).toBeCloseTo(0.9025, 12);
    t.record('a', ['b', 'c'], 0.6);
    expect(t.rate('a', ['c'])).toBeCloseTo(0.75, 12);
    // A new set holding c is priced with what was learned: 0.75 × 0.95 (z still unknown).
    expect(t.rate('a', ['c', 'z'])).toBeCloseTo(0.7125, 12);
    // The exact set keeps its own mean; the factor does not touch it.
    expect(t.rate('a', ['b', 'c'])).toBeCloseTo(0.6, 12);
    // A pair seen alone together afterwards wins over its factor.
    t.record('a', ['c'], 0.9);
    expect(t.rate('a', ['c'])).toBeCloseTo(0.9, 12);
  });

  it('shares the residual among unseen pairs: 0.81 for {c, d} from 0.95 each gives 0.9 each', () => {
    const t = new ColocationTable(0.95);
    t.record('a', ['c', 'd'], 0.81);
    expect(t.rate('a', ['c'])).toBeCloseTo(0.9, 12);
    expect(t.rate('a', ['d'])).toBeCloseTo(0.9, 12);
    // The pair factors learned for a say nothing about c's own rate next to a.
    expect(t.rate('c', ['a'])).toBe(0.95);
  });

  it('never learns a factor above 1 (interference only slows a task)', () => {
    const t = new ColocationTable(0.95);
    t.record('a', ['b'], 0.5);
    t.record('a', ['b', 'c'], 0.9);
    expect(t.rate('a', ['c'])).toBe(1);
  });

  it('stays where repeated observations agree, and stops moving after 32 updates', () => {
    const t = new ColocationTable(0.95);
    t.record('a', ['b'], 0.8);
    for (let i = 0; i < 5; i++) t.record('a', ['b', 'c'], 0.6);
    expect(t.rate('a', ['c'])).toBeCloseTo(0.75, 12);
    const u = new ColocationTable(0.95);
    for (let i = 0; i < 32; i++) u.record('a', ['c', 'd'], i % 2 === 0 ? 0.5 : 0.7);
    const settled = u.rate('a', ['c']);
    for (let i = 0; i < 10; i++) u.record('a', ['c', 'd'], 0.1);
    expect(u.rate('a', ['c'])).toBe(settled);
  });

  it('drops the memoized set values a factor changes', () => {
    const t = new ColocationTable(0.95);
    t.record('a', ['b'], 0.8);
    expect(t.rateInSet('a', 'a\u0001c\u0001z', () => ['c', 'z'])).toBeCloseTo(0.9025, 12);
    t.record('a', ['b', 'c'], 0.6);
    expect(t.rateInSet('a', 'a\u0001c\u0001z', () => ['c', 'z'])).toBeCloseTo(0.7125, 12);
  });

  it('round-trips its factors through JSON without learning them again from the restored sets', () => {
    const t = new ColocationTable(0.95);
    t.record('a', ['b'], 0.8);
    t.record('a', ['b', 'c'], 0.6);
    t.record('a', ['c', 'd'], 0.81);
    t.refreshPrior(); // as each round does: the restored table refreshes its prior from the same pairs
    const u = ColocationTable.fromJSON(JSON.parse(JSON.stringify(t.toJSON())));
    expect(u.factorSummaries()).toEqual(t.factorSummaries());
    for (const others of [['c'], ['d'], ['c', 'z'], ['b', 'c'], ['c', 'd']])
      expect(u.rate('a', others)).toBeCloseTo(t.rate('a', others), 12);
    // A table saved before factors existed loads with none.
    const { factors: _dropped, ...old } = t.toJSON();
    expect(ColocationTable.fromJSON(old).factorSummaries()).toEqual([]);
    // A factor that cannot be a rate is refused with what is wrong.
    const bad = { ...t.toJSON(), factors: [{ target: 'a', other: 'c', rate: 1.5, count: 1 }] };
    expect(() => ColocationTable.fromJSON(bad)).toThrow(
      /factor of a next to c: rate must be in \(0, 1\].*got 1\.5/,
    );
  });
});

describe('what the table saves', () => {
  const keys = ['a', 'b', 'c', 'd', 'B', 'a-2'];
  const observation = fc.record({
    target: fc.constantFrom(...keys),
    others: fc.array(fc.constantFrom(...keys), { minLength: 1, maxLength: 3 }),
    rate: fc.double({ min: 0.3, max: 1, noNaN: true }),
    saveAfter: fc.boolean(),
  });

  it('is what it has learned so far however often it was saved before (property)', () => {
    fc.assert(
      // Any length up to 40 (fast-check's default size stops near ten): a factor restored from its saved rate must
      // save the same rate again, which exp(log(r)) is not always.
      fc.property(fc.array(observation, { maxLength: 40, size: 'max' }), (observations) => {
        // The controller saves after every round; the saved order is kept between saves and grows with new entries.
        const saved = new ColocationTable(0.95);
        const fresh = new ColocationTable(0.95);
        for (const o of observations) {
          saved.record(o.target, o.others, o.rate);
          fresh.record(o.target, o.others, o.rate);
          if (o.saveAfter) saved.toJSON();
        }
        expect(saved.toJSON()).toEqual(fresh.toJSON());
        const restored = ColocationTable.fromJSON(JSON.parse(JSON.stringify(fresh.toJSON())));
        expect(restored.toJSON()).toEqual(fresh.toJSON());
      }),
      { numRuns: 200, seed: 7 },
    );
  });

  it('lists entries and factors in code-point order of their keys, whatever the locale', () => {
    const t = new ColocationTable(0.95);
    t.record('b', ['a'], 0.9);
    t.record('B', ['a'], 0.9);
    t.record('a', ['b', 'B'], 0.8);
    t.record('a', ['B'], 0.85);
    expect(t.summaries().map((s) => [s.target, ...s.others].join(' '))).toEqual([
      'B a',
      'a B',
      'a B b',
      'b a',
    ]);
    const fresh = new ColocationTable(0.95);
    fresh.record('b', ['a'], 0.9);
    // The table's state right after the first save: numbers move in place, and are saved as they are now.
    expect(fresh.summaries()[0]?.count).toBe(1);
    fresh.record('b', ['a'], 0.7);
    expect(fresh.summaries()).toEqual([{ target: 'b', others: ['a'], mean: 0.8, count: 2 }]);
  });
});

describe('attribution rules for multi-task jobs (Eva §4.4)', () => {
  const tasks = [
    { key: 'j_0', others: ['x'] },
    { key: 'j_1', others: ['x', 'y'] },
    { key: 'j_2', others: [] },
  ];

  it('with no previous observation, blames the task co-located with the most tasks', () => {
    expect(attributeJobObservation(new ColocationTable(), tasks, 0.7)).toBe(1);
  });

  it('when some recorded value is lower than the observation, updates the lowest recorded entry', () => {
    const t = new ColocationTable();
    t.record('j_0', ['x'], 0.6);
    expect(attributeJobObservation(t, tasks, 0.7)).toBe(0);
  });

  it('when all recorded values are higher, updates the unrecorded task co-located with the most tasks', () => {
    const t = new ColocationTable();
    t.record('j_0', ['x'], 0.9);
    expect(attributeJobObservation(t, tasks, 0.7)).toBe(1);
  });

  it('when every entry is recorded, updates the lowest one; a job running alone records nothing', () => {
    const t = new ColocationTable();
    t.record('j_0', ['x'], 0.9);
    t.record('j_1', ['x', 'y'], 0.8);
    expect(attributeJobObservation(t, tasks, 0.7)).toBe(1);
    expect(t.recordJob([{ key: 'solo', others: [] }], 0.5)).toBeUndefined();
  });

  it('recorded values stay lower bounds: the observation lands on one entry only', () => {
    const t = new ColocationTable();
    expect(t.recordJob(tasks, 0.7)).toBe(1);
    expect(t.recorded('j_1', ['x', 'y'])).toBe(0.7);
    expect(t.recorded('j_0', ['x'])).toBeUndefined();
  });
});
