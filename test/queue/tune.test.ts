import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/core/validation.js';
import {
  CEILING_RANGE,
  DECAY_GRID,
  dominates,
  generateCandidates,
  gridPercentiles,
  idealDistances,
  paretoFront,
  recommend,
  roundedWeights,
  type Objectives,
  type TuneCandidate,
  type TuneSearchOptions,
} from '../../src/queue/tune.js';
import { parseWfqConfig, wfqConfigSchema } from '../../src/queue/wfq.js';

const pt = (
  id: string,
  meanJctHours: number | null,
  predErrP99: number | null,
  unfairness: number | null,
): { id: string; objectives: Objectives } => ({ id, objectives: { meanJctHours, predErrP99, unfairness } });
const ids = (points: readonly { id: string }[]): string[] => points.map((p) => p.id);

describe('paretoFront', () => {
  it('digest P9: (JCT, err) points → the three PCS points', () => {
    const points = [
      pt('a', 1.0, 22.9, 0),
      pt('b', 1.088, 18.1, 0),
      pt('c', 1.383, 11.1, 0),
      pt('d', 1.12, 43.7, 0),
      pt('e', 1.521, 69.5, 0),
      pt('f', 2.111, 52.3, 0),
    ];
    expect(ids(paretoFront(points))).toEqual(['a', 'b', 'c']);
  });

  it('keeps identical points (ties) and drops a point only weakly worse', () => {
    const points = [pt('a', 1, 2, 3), pt('b', 1, 2, 3), pt('c', 1, 2, 4), pt('d', 0.5, 9, 9)];
    expect(ids(paretoFront(points))).toEqual(['a', 'b', 'd']);
    expect(dominates(points[0]!.objectives, points[1]!.objectives)).toBe(false);
    expect(dominates(points[0]!.objectives, points[2]!.objectives)).toBe(true);
  });

  it('treats null and NaN as worse than any number, and two nulls as equal', () => {
    const points = [pt('num', 5, 1000, 50), pt('null', 5, null, 50), pt('nan', 5, Number.NaN, 50)];
    expect(ids(paretoFront(points))).toEqual(['num']);
    // With the objective missing everywhere the others decide; equal nulls do not break ties.
    const noPred = [pt('a', 2, null, 10), pt('b', 1, null, 20), pt('c', 2, null, 20)];
    expect(ids(paretoFront(noPred))).toEqual(['a', 'b']);
    // A point better on a present objective survives a null elsewhere.
    expect(ids(paretoFront([pt('a', 1, null, 9), pt('b', 2, 3, 9)]))).toEqual(['a', 'b']);
  });

  it('counts objectives an ulp apart as equal: the point better on another objective dominates', () => {
    // The same schedule's mean JCT summed in two orders.
    const jct = 0.2611503571555728;
    const ulpMore = 0.26115035715557283;
    expect(ulpMore).not.toBe(jct);
    expect(dominates(pt('a', jct, 5, 5).objectives, pt('b', ulpMore, 5, 5).objectives)).toBe(false);
    expect(dominates(pt('b', ulpMore, 5, 5).objectives, pt('a', jct, 5, 5).objectives)).toBe(false);
    // Float noise around zero is no difference either.
    expect(dominates(pt('a', 1, 5, 0).objectives, pt('b', 1, 5, 1e-16).objectives)).toBe(false);
    const points = [pt('ulp-faster', jct, 5, 4), pt('fairer', ulpMore, 5, 3)];
    expect(ids(paretoFront(points))).toEqual(['fairer']);
    // A real difference still counts, and a missing value is still worse than any number.
    expect(dominates(pt('a', 0.26, 5, 5).objectives, pt('b', 0.2600001, 5, 5).objectives)).toBe(true);
    expect(dominates(pt('a', 1e300, 5, 5).objectives, pt('b', null, 5, 5).objectives)).toBe(true);
  });

  it('is empty only for no points', () => {
    expect(paretoFront([])).toEqual([]);
    expect(ids(paretoFront([pt('x', null, null, null)]))).toEqual(['x']);
  });

  it('property: front points are non-dominated, every other point is dominated by a front point', () => {
    const value = fc.option(fc.integer({ min: 0, max: 6 }), { nil: null });
    fc.assert(
      fc.property(fc.array(fc.tuple(value, value, value), { minLength: 1, maxLength: 25 }), (raw) => {
        const points = raw.map(([a, b, c], i) => pt(`p${i}`, a, b, c));
        const front = paretoFront(points);
        expect(front.length).toBeGreaterThan(0);
        for (const f of front)
          for (const q of points) expect(dominates(q.objectives, f.objectives)).toBe(false);
        for (const p of points)
          if (!front.includes(p)) expect(front.some((f) => dominates(f.objectives, p.objectives))).toBe(true);
      }),
    );
  });
});

describe('recommend', () => {
  const front = [
    pt('fast', 1, 40, 30),
    pt('mid', 1.2, 12, 12),
    pt('exact', 2, 1, 25),
    pt('fair', 1.9, 30, 2),
  ];

  it('jct / pred / fair pick the best point on that objective (PCS-JCT, PCS-pred)', () => {
    expect(recommend(front, 'jct')?.id).toBe('fast');
    expect(recommend(front, 'pred')?.id).toBe('exact');
    expect(recommend(front, 'fair')?.id).toBe('fair');
  });

  it('balanced picks the point closest to the ideal after min–max normalisation (PCS-bal)', () => {
    // mid: (0.2, 11/39, 10/28) → ≈ 0.50; the extremes are ≥ 1 away on some axis.
    expect(recommend(front)?.id).toBe('mid');
    const d = idealDistances(front);
    expect(d[1]).toBeCloseTo(Math.hypot(0.2, 11 / 39, 10 / 28), 12);
    expect(Math.min(...d)).toBe(d[1]);
  });

  it('gives an objective whose spread is an ulp no weight, and lets the other objectives pick', () => {
    const jct = 0.2611503571555728;
    const ulpMore = 0.26115035715557283;
    const ulpApart = [pt('ulp-faster', jct, 10, 5), pt('exact', ulpMore, 8, 5)];
    expect(idealDistances(ulpApart)).toEqual([1, 0]);
    expect(recommend(ulpApart)?.id).toBe('exact');
    expect(recommend(ulpApart, 'jct')?.id).toBe('exact');
  });

  it('counts a missing value as the worst and breaks ties by mean JCT, then order', () => {
    expect(idealDistances([pt('a', 1, null, 0), pt('b', 2, 5, 0)])).toEqual([1, 1]);
    expect(recommend([pt('b', 2, 5, 0), pt('a', 1, null, 0)])?.id).toBe('a');
    expect(recommend([pt('x', 1, 1, 1), pt('y', 1, 1, 1)])?.id).toBe('x');
    expect(recommend([pt('a', 3, null, null), pt('b', 2, null, null)], 'pred')?.id).toBe('b');
    expect(recommend([])).toBeUndefined();
  });
});

describe('roundedWeights (PCS 𝒲, 3 decimals)', () => {
  it('matches weightsFromDecay rounded, sums to 1, keeps every weight ≥ 0.001', () => {
    expect(roundedWeights(2, Math.log(19))).toEqual([0.95, 0.05]);
    expect(roundedWeights(3, 3)).toEqual([0.95, 0.047, 0.003]); // digest §7: .95/.048/.002-style skews
    expect(roundedWeights(1, 2)).toEqual([1]);
    for (const k of [2, 3, 4, 5])
      for (const decay of [-3, -1, 0, 0.7, 2, 3]) {
        const w = roundedWeights(k, decay);
        expect(w).toHaveLength(k);
        expect(w.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 9);
        for (const x of w) expect(x).toBeGreaterThanOrEqual(0.001);
      }
  });
});

describe('generateCandidates', () => {
  /** Heavy-tailed sizes, like batch traces: 1 … ~10^5 task-seconds. */
  const sizes = Array.from({ length: 200 }, (_, i) => Math.round(10 ** (1 + (4 * ((i * 37) % 200)) / 200)));
  const base: TuneSearchOptions = { samples: 60, seed: 7, classCounts: [1, 2, 3], orderings: ['fifo'] };

  function checkValid(candidates: readonly TuneCandidate[], sizesSeconds: readonly number[]): void {
    const largest = Math.max(...sizesSeconds);
    const keys = new Set<string>();
    for (const c of candidates) {
      expect(() => parseWfqConfig(c.config)).not.toThrow();
      expect(wfqConfigSchema.parse(c.config)).toEqual(c.config);
      const thresholds = c.config.classes.flatMap((k) =>
        k.maxSizeSeconds === undefined ? [] : [k.maxSizeSeconds],
      );
      expect(thresholds).toHaveLength(c.config.classes.length - 1);
      thresholds.forEach((t, i) => {
        expect(t).toBeLessThan(largest);
        if (i > 0) expect(t).toBeGreaterThan(thresholds[i - 1]!);
      });
      expect(c.thresholdPercentiles).toHaveLength(thresholds.length);
      const weights = c.config.classes.map((k) => k.weight);
      expect(weights.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 9);
      if (weights.length > 1) expect(weights).toEqual(roundedWeights(weights.length, c.decay));
      expect(new Set(c.config.classes.map((k) => k.ordering))).toEqual(new Set([c.ordering]));
      // Only random samples with two classes or more hold their largest class to a ceiling, within CEILING_RANGE.
      const ceilings = c.config.classes.map((k) => k.maxShare);
      expect(ceilings.slice(0, -1).every((m) => m === undefined)).toBe(true);
      const ceiling = ceilings[ceilings.length - 1];
      if (ceiling !== undefined) {
        expect(c.source).toBe('random');
        expect(c.config.classes.length).toBeGreaterThan(1);
        expect(ceiling).toBeGreaterThanOrEqual(CEILING_RANGE.min);
        expect(ceiling).toBeLessThanOrEqual(CEILING_RANGE.max);
      }
      const key = JSON.stringify([thresholds, weights, c.ordering, ceiling ?? null]);
      expect(keys.has(key), `duplicate ${c.id}`).toBe(false);
      keys.add(key);
    }
  }

  it('gives valid, distinct configs: increasing thresholds below the largest size, weights summing to 1', () => {
    const candidates = generateCandidates(sizes, base);
    expect(candidates).toHaveLength(60);
    expect(candidates.map((c) => c.id)).toEqual(candidates.map((_, i) => `c${i}`));
    checkValid(candidates, sizes);
    expect(new Set(candidates.map((c) => c.config.classes.length))).toEqual(new Set([1, 2, 3]));
    // The anchors and the grid (FIFO + 4×6 two-class + 5×6 three-class = 55 distinct configs; the two-class anchor is
    // also a grid point) come before random samples.
    expect(candidates.filter((c) => c.source === 'random')).toHaveLength(5);
    expect(candidates.slice(0, 55).every((c) => c.source !== 'random')).toBe(true);
  });

  it('starts with the anchors: FIFO and the simulator default (85th percentile, .85/.15)', () => {
    const [fifo, wfq] = generateCandidates(sizes, base);
    expect(fifo?.config.classes).toEqual([{ id: 'all', weight: 1, ordering: 'fifo' }]);
    expect(wfq?.source).toBe('anchor');
    expect(wfq?.config.classes.map((k) => k.weight)).toEqual([0.85, 0.15]);
    const p85 = [...sizes].sort((a, b) => a - b)[169]!;
    expect(wfq?.config.classes[0]?.maxSizeSeconds).toBe(Math.ceil(p85));
  });

  it('is deterministic given the seed, and the seed changes the sample', () => {
    const again = generateCandidates(sizes, base);
    expect(again).toEqual(generateCandidates(sizes, base));
    const other = generateCandidates(sizes, { ...base, seed: 8 });
    expect(other.map((c) => c.config)).not.toEqual(again.map((c) => c.config));
    expect(other.slice(0, 2)).toEqual(again.slice(0, 2)); // anchors do not depend on the seed
  });

  it('fills a large budget with seeded random samples across the allowed class counts and orderings', () => {
    const many = generateCandidates(sizes, { ...base, samples: 150, orderings: ['fifo', 'srpt'] });
    expect(many).toHaveLength(150);
    checkValid(many, sizes);
    expect(many.some((c) => c.source === 'random')).toBe(true);
    expect(new Set(many.map((c) => c.ordering))).toEqual(new Set(['fifo', 'srpt']));
    const random = many.filter((c) => c.source === 'random' && c.config.classes.length > 1);
    const capped = random.filter((c) => c.config.classes.at(-1)?.maxShare !== undefined);
    // About a third of the multi-class random samples carry a ceiling on the largest class.
    expect(capped.length).toBeGreaterThan(random.length / 6);
    expect(capped.length).toBeLessThan(random.length / 1.5);
    for (const c of many) {
      expect(c.config.classes.length).toBeLessThanOrEqual(3);
      expect(c.decay).toBeGreaterThanOrEqual(-3);
      expect(c.decay).toBeLessThanOrEqual(3);
    }
  });

  it('respects --classes: only those counts (thresholds that collapse give fewer)', () => {
    const three = generateCandidates(sizes, { ...base, classCounts: [3] });
    expect(three.every((c) => c.config.classes.length === 3)).toBe(true);
    expect(three.every((c) => c.source !== 'anchor')).toBe(true);
    const one = generateCandidates(sizes, { ...base, classCounts: [1] });
    expect(one).toHaveLength(1); // a single class has no threshold or weight to vary
  });

  it('drops thresholds that would leave an empty class: equal sizes support only one class', () => {
    const flat = generateCandidates([600, 600, 600, 600], { ...base, orderings: ['fifo', 'srpt'] });
    expect(flat.map((c) => c.config.classes.length)).toEqual([1, 1]);
    const two = generateCandidates([10, 10, 10, 5000], base);
    checkValid(two, [10, 10, 10, 5000]);
    expect(Math.max(...two.map((c) => c.config.classes.length))).toBe(2);
  });

  it('property: any sizes and seed give valid configs', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 1_000_000 }), { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 0, max: 2 ** 32 - 1 }),
        fc.subarray([1, 2, 3, 4, 5], { minLength: 1 }),
        (sizesSeconds, seed, classCounts) => {
          const candidates = generateCandidates(sizesSeconds, {
            samples: 12,
            seed,
            classCounts,
            orderings: ['fifo'],
          });
          expect(candidates.length).toBeGreaterThan(0);
          expect(candidates.length).toBeLessThanOrEqual(12);
          checkValid(candidates, sizesSeconds);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('grid: first threshold at 50/75/85/90 %, the rest evenly up to 100 %, plus even spacing', () => {
    expect(gridPercentiles(1)).toEqual([[]]);
    expect(gridPercentiles(2)).toEqual([[50], [75], [85], [90]]);
    expect(gridPercentiles(3)).toEqual([
      [33.3, 66.7],
      [50, 75],
      [75, 87.5],
      [85, 92.5],
      [90, 95],
    ]);
    expect(DECAY_GRID).toContain(0);
  });

  it('rejects bad options and sizes, naming the field', () => {
    expect(() => generateCandidates(sizes, { ...base, samples: 0 })).toThrow(/samples: must be ≥ 1/);
    expect(() => generateCandidates(sizes, { ...base, classCounts: [6] })).toThrow(
      /classCounts\.0: must be ≤ 5/,
    );
    expect(() => generateCandidates([], base)).toThrow(ValidationError);
    expect(() => generateCandidates([1, Number.NaN], base)).toThrow(/job sizes/);
  });
});
