import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { downsampleMinMax, minMaxIndices } from '../../../src/sim/report/downsample.js';

describe('min/max downsampling', () => {
  it('returns short series unchanged', () => {
    expect(downsampleMinMax([0, 1, 2], [5, 6, 7], 10)).toEqual({ xs: [0, 1, 2], ys: [5, 6, 7] });
  });

  it('keeps ordered indices including the ends, every extreme and every gap', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.integer({ min: -1000, max: 1000 }), fc.constant(Number.NaN)), {
          minLength: 1,
          maxLength: 400,
        }),
        fc.integer({ min: 1, max: 20 }),
        (ys, buckets) => {
          const xs = ys.map((_, i) => i * 3);
          const keep = minMaxIndices(xs, ys, buckets);
          for (let i = 1; i < keep.length; i++) expect(keep[i]).toBeGreaterThan(keep[i - 1] as number);
          expect(keep[0]).toBe(0);
          expect(keep.at(-1)).toBe(ys.length - 1);
          const finite = ys.filter(Number.isFinite);
          const kept = keep.map((i) => ys[i] as number);
          if (finite.length > 0) {
            expect(kept).toContain(Math.max(...finite));
            expect(kept).toContain(Math.min(...finite));
          }
          expect(kept.filter(Number.isNaN).length).toBe(ys.filter(Number.isNaN).length);
          if (ys.length > buckets * 4)
            expect(keep.length).toBeLessThanOrEqual(buckets * 4 + kept.filter(Number.isNaN).length);
        },
      ),
    );
  });

  it('bounds a long series to about 4 points per bucket', () => {
    const ys = Array.from({ length: 50_000 }, (_, i) => Math.sin(i / 100));
    const out = downsampleMinMax(
      ys.map((_, i) => i),
      ys,
      100,
    );
    expect(out.xs.length).toBeLessThanOrEqual(400);
    expect(Math.max(...out.ys)).toBe(Math.max(...ys));
  });
});
