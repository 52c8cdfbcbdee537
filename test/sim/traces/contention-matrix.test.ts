import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LineValidationError } from '../../../src/sim/traces/csv.js';
import { parseContentionMatrix, UNMEASURED_PAIR_RATE } from '../../../src/sim/traces/contention-matrix.js';
import { contentionCsv } from './fixtures.js';

const matrix = parseContentionMatrix(contentionCsv, 'contention_matrix.csv');

describe('contention matrix ground truth (digest §4: row = target, product composition)', () => {
  it('reads the 9 workloads without the _node0 suffix', () => {
    expect(matrix.workloads).toEqual([
      'resnet18',
      'sage',
      'cyclegan',
      'gpt2',
      'gcn',
      'openfoam',
      'seq',
      'a3c',
      'vit',
    ]);
  });

  it('uses row = target: gpt2 next to resnet18 runs at 0.793, resnet18 next to gpt2 at 0.919', () => {
    expect(matrix.rate('gpt2', ['resnet18'])).toBe(0.793);
    expect(matrix.rate('resnet18', ['gpt2'])).toBe(0.919);
    expect(matrix.pair('cyclegan', 'resnet18')).toBe(0.995); // the pair Eva's pkl swapped (digest §4)
    expect(matrix.pair('gcn', 'a3c')).toBe(0.647);
  });

  it('composes three co-located tasks as the product of pairwise values', () => {
    // gcn next to resnet18, openfoam and a3c: 0.915 × 0.962 × 0.647
    expect(matrix.rate('gcn', ['resnet18', 'openfoam', 'a3c'])).toBeCloseTo(0.915 * 0.962 * 0.647, 12);
    // two tasks of the same workload count twice
    expect(matrix.rate('gpt2', ['resnet18', 'resnet18'])).toBeCloseTo(0.793 ** 2, 12);
    expect(matrix.rate('gpt2', [])).toBe(1);
  });

  it('uses 0.95 for x (unmeasured) and for unknown workloads, per co-located task', () => {
    expect(matrix.isMeasured('resnet18', 'seq')).toBe(false);
    expect(matrix.rate('resnet18', ['seq'])).toBe(UNMEASURED_PAIR_RATE);
    expect(matrix.rate('bert', ['gpt2', 'gpt2'])).toBeCloseTo(0.95 ** 2, 12);
    expect(matrix.rate('gpt2', ['bert', 'resnet18'])).toBeCloseTo(0.95 * 0.793, 12);
    expect(parseContentionMatrix(contentionCsv, 'm.csv', 0.9).rate('seq', ['gpt2'])).toBe(0.9);
  });

  it('accepts job names like cyclegan[3] for their base workload', () => {
    expect(matrix.rate('gpt2[1]', ['resnet18[4]'])).toBe(0.793);
  });

  it('is order-independent and within (0, 1] for any multiset of co-located tasks', () => {
    const names = [...matrix.workloads, 'unknown'];
    fc.assert(
      fc.property(
        fc.constantFrom(...names),
        fc.array(fc.constantFrom(...names), { maxLength: 8 }),
        (t, others) => {
          const r = matrix.rate(t, others);
          expect(r).toBeGreaterThan(0);
          expect(r).toBeLessThanOrEqual(1);
          expect(matrix.rate(t, [...others].reverse())).toBeCloseTo(r, 12);
          if (others.length > 0)
            expect(r).toBeCloseTo(matrix.rate(t, others.slice(1)) * matrix.pair(t, others[0] as string), 12);
        },
      ),
    );
  });

  it('reports malformed cells as file:line: field: reason', () => {
    const text = ',a_node0,b_node0\na_node0,0.9,x\nb_node0,oops,1.2\n';
    try {
      parseContentionMatrix(text, 'm.csv');
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(LineValidationError);
      const message = (e as Error).message;
      expect(message).toContain('m.csv:3: a_node0: "oops" is neither');
      expect(message).toContain('m.csv:3: b_node0: "1.2" is neither');
    }
    expect(() => parseContentionMatrix(',a_node0\na_node0,0.9,0.8\n', 'm.csv')).toThrow(
      /m\.csv:2: \(row\): expected 2 comma-separated fields/,
    );
    expect(() => parseContentionMatrix(',a_node0\na_node0,0.9\na_node0,0.8\n', 'm.csv')).toThrow(
      /m\.csv:3: a: duplicate row/,
    );
  });
});
