import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jctChart } from '../../../src/sim/report/jct-chart.js';
import { median } from '../../../src/world/metrics.js';
import { fakeRun } from './run-fixtures.js';

interface Series {
  type: string;
  xAxisIndex?: number;
  data: unknown[];
}

/** The CDF's line and its markers ([hours, percent]), and the strip's median marker, of the chart's only run. */
function drawn(jcts: readonly number[]): {
  line: [number, number][];
  markers: [number, number][];
  stripMedian: number | undefined;
} {
  const option = JSON.parse(JSON.stringify(jctChart([fakeRun('eva', 1, 3, 1, jcts)]).chart.option)) as {
    series: Series[];
  };
  const onCdf = option.series.filter((s) => s.xAxisIndex === undefined);
  const line = onCdf.find((s) => s.type === 'line')?.data as [number, number][];
  const markers = (onCdf.find((s) => s.type === 'scatter')?.data as { value: [number, number] }[]).map(
    (d) => d.value,
  );
  const strip = option.series.filter((s) => s.xAxisIndex === 1 && s.type === 'scatter');
  const stripMedian = (strip[0]?.data[0] as { value: [number, string] } | undefined)?.value[0];
  return { line, markers, stripMedian };
}

/**
 * Whether (x, y) is on a step line drawn `step: 'end'`: from each point level to the next point's x, then straight
 * up to its y.
 */
function onStepLine(line: readonly [number, number][], x: number, y: number): boolean {
  return line.some((a, i) => {
    const b = line[i + 1];
    if (b === undefined) return false;
    const level = a[1] === y && a[0] <= x && x <= b[0];
    const rise = b[0] === x && Math.min(a[1], b[1]) <= y && y <= Math.max(a[1], b[1]);
    return level || rise;
  });
}

describe('JCT chart markers', () => {
  it('marks the median the summary table gives: the mean of the two middle JCTs for an even count', () => {
    const jcts = [1, 2, 4, 8];
    const { markers, stripMedian } = drawn(jcts);
    expect(median(jcts)).toBe(3);
    expect(markers.find((m) => m[1] === 50)?.[0]).toBe(3);
    expect(stripMedian).toBe(3);
    // An odd count: the middle one.
    expect(drawn([1, 2, 4]).stripMedian).toBe(2);
  });

  it('starts each CDF at 0% at the fastest job: one job draws a line, and every marker sits on it', () => {
    expect(drawn([5]).line).toEqual([
      [5, 0],
      [5, 100],
    ]);
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 2000 }), { minLength: 1, maxLength: 12 }), (tenths) => {
        const { line, markers } = drawn(tenths.map((t) => t / 10));
        expect(line[0]?.[1]).toBe(0);
        expect(markers).toHaveLength(4);
        for (const [x, p] of markers) expect(onStepLine(line, x, p), `${p}% at ${x} h`).toBe(true);
      }),
      { numRuns: 200 },
    );
  });
});
