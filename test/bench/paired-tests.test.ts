import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { significant } from '../../src/bench/arms-report.js';
import { meanAndStandardError, pairedDifferences } from '../../src/bench/paired-arms.js';
import { pairedSignificance, signTestP } from '../../src/bench/paired-tests.js';

function significanceOf(values: readonly number[]): ReturnType<typeof pairedSignificance> {
  const { mean, standardError } = meanAndStandardError(values);
  const lower = values.filter((v) => v < 0).length;
  const higher = values.filter((v) => v > 0).length;
  return pairedSignificance(values.length, mean, standardError, lower, higher);
}

describe('significance of paired differences over seeds', () => {
  it('hand-checked t figures: 1, 2, 3, 4, 5', () => {
    // Mean 3, SE √(2.5 / 5) = 0.70711, t = 4.24264 on 4 degrees of freedom; t(0.975, 4) = 2.776445 (tables), so the
    // interval is 3 ± 1.963243; the two-sided p of t = 4.24264 on 4 dof is 0.013236 (scipy.stats.t).
    const s = significanceOf([1, 2, 3, 4, 5]);
    expect(s.confidence95?.low).toBeCloseTo(1.036757, 5);
    expect(s.confidence95?.high).toBeCloseTo(4.963243, 5);
    expect(s.tTestP).toBeCloseTo(0.013236, 5);
    // Five seeds all higher: 2 × (1/2)⁵.
    expect(s.signTestP).toBeCloseTo(0.0625, 12);
  });

  it("the capped Murmuration package's cost on 16 seeds (README table): within noise", () => {
    // Per-seed cost differences of the package against Eva as it was (seeds 4–19), as the README rounds them.
    // scipy.stats.ttest_1samp: p 0.358617, 95% interval −0.684657 to +0.263407.
    const d = [
      0.17, -0.15, 0.08, 1.06, 0.46, -1.27, -1.36, -0.1, -0.23, -1.2, 1.7, -1.58, -0.25, 0.24, -0.1, -0.84,
    ];
    const s = significanceOf(d);
    expect(s.tTestP).toBeCloseTo(0.358617, 5);
    expect(s.confidence95?.low).toBeCloseTo(-0.684657, 5);
    expect(s.confidence95?.high).toBeCloseTo(0.263407, 5);
    // 10 lower, 6 higher: 2 × Σ_{k≤6} C(16, k) / 2¹⁶ = 2 × 14,893 / 65,536.
    expect(s.signTestP).toBeCloseTo((2 * 14893) / 65536, 10);
  });

  it('the sign test leaves out ties and caps p at 1', () => {
    expect(signTestP(0, 0)).toBeNull();
    expect(signTestP(3, 3)).toBe(1);
    expect(signTestP(0, 1)).toBe(1);
    // 1 lower of 10: 2 × (1 + 10) / 1,024.
    expect(signTestP(1, 9)).toBeCloseTo(22 / 1024, 12);
    expect(significanceOf([0, 0, -2, -1]).signTestP).toBeCloseTo(0.5, 12);
  });

  it('gives no t figures below two seeds, nor without spread', () => {
    expect(significanceOf([-3])).toEqual({ confidence95: null, tTestP: null, signTestP: 1 });
    // Every seed the same difference (a trace the seed does not vary): no zero-width interval to call it more than noise.
    const flat = significanceOf([-1, -1, -1]);
    expect(flat.confidence95).toBeNull();
    expect(flat.tTestP).toBeNull();
    expect(flat.signTestP).toBeCloseTo(0.25, 12);
    // Nor a standard error of rounding alone, which would make a t of 10¹⁴ and an interval of no width.
    expect(pairedSignificance(3, -50, 2e-15, 3, 0)).toEqual({
      confidence95: null,
      tTestP: null,
      signTestP: 0.25,
    });
    // A standard error small against the mean but above rounding is still judged.
    expect(pairedSignificance(3, -50, 1e-6, 3, 0).tTestP).toBeLessThan(0.001);
    // Nor is a zero-width interval in a report written before it was left out read as more than noise.
    const [moves] = pairedDifferences(
      [{ totalCost: 10 }, { totalCost: 20 }],
      [{ totalCost: 9 }, { totalCost: 18 }],
    );
    if (moves === undefined) throw new Error('no difference');
    expect(significant({ ...moves, confidence95: { low: -10, high: -10 } })).toBeNull();
  });

  it('property: the interval holds the mean, and leaves out 0 exactly when the t-test has p < 0.05', () => {
    const value = fc.double({ min: -50, max: 50, noNaN: true });
    fc.assert(
      fc.property(fc.array(value, { minLength: 2, maxLength: 30 }), (values) => {
        const { mean, standardError } = meanAndStandardError(values);
        const s = significanceOf(values);
        if (mean === null) return false;
        if (s.confidence95 === null) return standardError === 0 && s.tTestP === null;
        if (s.confidence95.low > mean + 1e-9 || s.confidence95.high < mean - 1e-9) return false;
        if (s.tTestP === null) return standardError === 0;
        const excludesZero = s.confidence95.low > 0 || s.confidence95.high < 0;
        // Away from the boundary the two must agree (at it, rounding decides).
        if (Math.abs(s.tTestP - 0.05) < 1e-6) return true;
        return excludesZero === s.tTestP < 0.05 && s.tTestP >= 0 && s.tTestP <= 1;
      }),
      { seed: 7, numRuns: 300 },
    );
  });
});
