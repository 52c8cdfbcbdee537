import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { spreadEndLabels, type EndLabelBox } from '../../../src/sim/report/end-labels.js';
import { costChart, migrationsChart } from '../../../src/sim/report/over-time-charts.js';
import { fakeRun } from './run-fixtures.js';

const LINE = 17;

describe('end labels spread apart', () => {
  it('stacks two labels that would overprint, centred on where their lines end', () => {
    const offsets = spreadEndLabels(
      [
        { x: 500, y: 105, width: 120 },
        { x: 520, y: 100, width: 140 },
      ],
      LINE,
      300,
    );
    // Centre 102.5, two lines: 94 and 111, the higher line's label on top.
    expect(offsets[0]).toBeCloseTo(111 - 105, 9);
    expect(offsets[1]).toBeCloseTo(94 - 100, 9);
  });

  it('leaves labels side by side, and labels far apart, where they are', () => {
    expect(
      spreadEndLabels(
        [
          { x: 100, y: 50, width: 120 },
          { x: 300, y: 52, width: 120 },
          { x: 100, y: 200, width: 120 },
        ],
        LINE,
        300,
      ),
    ).toEqual([0, 0, 0]);
  });

  it('keeps a stack inside the plot: two labels at the bottom edge go up', () => {
    const offsets = spreadEndLabels(
      [
        { x: 0, y: 200, width: 100 },
        { x: 10, y: 200, width: 100 },
      ],
      LINE,
      200,
    );
    expect(offsets[0]).toBeCloseTo(166 + 8.5 - 200, 9);
    expect(offsets[1]).toBeCloseTo(166 + 25.5 - 200, 9);
  });

  it('moves a label that shares width with neither of its neighbours in height not at all', () => {
    // b lies between a and c in height but far to the right: a and c stack around it, b stays.
    const offsets = spreadEndLabels(
      [
        { x: 0, y: 100, width: 100 },
        { x: 400, y: 104, width: 100 },
        { x: 50, y: 108, width: 100 },
      ],
      LINE,
      300,
    );
    expect(offsets[1]).toBe(0);
    expect(offsets[0]).toBeCloseTo(95.5 - 100, 9);
    expect(offsets[2]).toBeCloseTo(112.5 - 108, 9);
  });

  it('never leaves two labels that share width less than a line apart (property)', () => {
    const box = fc.record({
      x: fc.integer({ min: 0, max: 800 }),
      y: fc.integer({ min: 0, max: 340 }),
      width: fc.integer({ min: 40, max: 200 }),
    });
    fc.assert(
      fc.property(fc.array(box, { maxLength: 10 }), (labels: EndLabelBox[]) => {
        const offsets = spreadEndLabels(labels, LINE, 340);
        expect(offsets).toHaveLength(labels.length);
        labels.forEach((p, i) =>
          labels.forEach((q, j) => {
            if (j <= i || !(p.x < q.x + q.width && q.x < p.x + p.width)) return;
            const gap = Math.abs(p.y + (offsets[i] ?? 0) - (q.y + (offsets[j] ?? 0)));
            expect(gap).toBeGreaterThanOrEqual(LINE - 1e-6);
          }),
        );
      }),
      { numRuns: 300 },
    );
  });
});

describe('the charts over time', () => {
  type Series = {
    name: string;
    endLabel?: { show?: boolean; offset?: [number, number]; formatter?: string };
  };
  const seriesOf = (option: unknown): Series[] => (option as { series: Series[] }).series;

  it('move the end labels of two runs that end close together, one up and one down', () => {
    // $900 and $910 over 3 h: 1% of the axis apart, far less than a line.
    const runs = [fakeRun('no-packing', 300, 3, 2, [2, 3]), fakeRun('eva', 303.333, 3, 1, [2.5, 3])];
    const series = seriesOf(costChart(runs, undefined).chart.option);
    const [low, high] = series.map((s) => s.endLabel?.offset?.[1] ?? 0);
    // The ends are 346 px × 10 / 1,000 = 3.46 px apart; each label moves half of the rest of a line, rounded.
    expect(low).toBe(7);
    expect(high).toBe(-7);
    // The y axis is fixed, so that where the lines end is known when the labels are placed.
    expect((costChart(runs, undefined).chart.option as { yAxis: { max: number } }).yAxis.max).toBe(1000);
  });

  it('widen the right margin for a long label at the right edge, and keep it for short ones', () => {
    const grid = (names: readonly string[]): number => {
      const runs = names.map((n) => fakeRun(n, 300, 3, 1, [2, 3]));
      return (costChart(runs, undefined).chart.option as { grid: { right: number } }).grid.right;
    };
    expect(grid(['eva', 'owl'])).toBe(190);
    // Two runs with the same total share one label of 45 characters (about 340 px); three, 65 characters, more
    // than the widest margin.
    expect(grid(['eva@valueOfTime=0', 'eva@valueOfTime=1'])).toBe(Math.round(45 * 7.4 + 11 + 8));
    expect(grid(['eva@valueOfTime=0', 'eva@valueOfTime=1', 'karpenter-balanced'])).toBe(420);
  });

  /** The end labels as shown, in series order (merged runs' label once). */
  const shownLabels = (option: unknown): (string | undefined)[] =>
    seriesOf(option)
      .filter((s) => s.endLabel?.show === true)
      .map((s) => s.endLabel?.formatter);

  it('give totals to the cent below $1,000, and merge only runs that ended on the same total', () => {
    // Two jobs: runs $0.02 apart and the bound below them, all "$1" in whole dollars.
    const runs = [fakeRun('eva', 0.83, 1, 1, [1]), fakeRun('no-packing', 0.85, 1, 1, [1])];
    const bounds = {
      workBound: 0.6,
      timedBound: 0.61,
      timedSeries: { timeSeconds: [0, 3600], cumulativeCost: [0, 0.61] },
    };
    expect(shownLabels(costChart(runs, bounds).chart.option)).toEqual([
      'eva: $0.83',
      'no-packing: $0.85',
      'lower bound: $0.61',
    ]);
    // The same total to the cent: one label for both.
    const same = [fakeRun('eva', 0.5, 1, 1, [1]), fakeRun('karpenter', 0.5, 1, 1, [1])];
    expect(shownLabels(costChart(same, undefined).chart.option)).toEqual(['eva, karpenter: $0.50']);
    // Totals that print alike in whole dollars keep a label each: the line ends tell them apart.
    const alike = [fakeRun('eva', 1400.4, 1, 1, [1]), fakeRun('karpenter', 1400.2, 1, 1, [1])];
    expect(shownLabels(costChart(alike, undefined).chart.option)).toEqual([
      'eva: $1,400',
      'karpenter: $1,400',
    ]);
  });

  it('leave labels alone when runs end far apart', () => {
    const runs = [fakeRun('no-packing', 3, 3, 2, [2, 3]), fakeRun('eva', 1, 3, 1, [2.5, 3])];
    for (const chart of [costChart(runs, undefined), migrationsChart(runs)]) {
      const shown = seriesOf(chart.chart.option).filter((s) => s.endLabel?.show === true);
      expect(shown.length).toBeGreaterThan(0);
      if (chart.chart.id === 'chart-cumulative-cost')
        expect(shown.map((s) => s.endLabel?.offset)).toEqual([undefined, undefined]);
    }
  });
});
