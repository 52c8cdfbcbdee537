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
    expect(u.defaultRate).toBe(0.9);
    expect(u.summaries()).toEqual(t.summaries());
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
