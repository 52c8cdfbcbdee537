import { describe, expect, it } from 'vitest';
import { groupBy } from '../../src/core/group.js';

describe('groupBy', () => {
  it('groups in input order, keys in order of first appearance', () => {
    const g = groupBy(['a1', 'b1', 'a2', 'c1', 'b2'], (s) => s[0]);
    expect([...g]).toEqual([
      ['a', ['a1', 'a2']],
      ['b', ['b1', 'b2']],
      ['c', ['c1']],
    ]);
    expect(groupBy([], (x: number) => x).size).toBe(0);
  });
});
