import { describe, expect, it } from 'vitest';
import { renderChartSvg } from '../../../src/report/chart.js';
import { seriesStyle } from '../../../src/report/palette.js';
import type { ReportChart } from '../../../src/sim/report/chart-kit.js';
import { jctChart } from '../../../src/sim/report/jct-chart.js';
import { costChart, migrationsChart } from '../../../src/sim/report/over-time-charts.js';
import { fakeRun } from './run-fixtures.js';

/** Runs whose styles differ in colour, dash and marker (palette.ts), one of them solid. */
const RUNS = [
  fakeRun('eva', 2, 3, 1, [2.5, 3]),
  fakeRun('no-packing', 3, 3, 2, [2, 3]),
  fakeRun('stratus', 2.6, 3.5, 2, [1.5, 3.2]),
  fakeRun('karpenter', 2.2, 3.2, 2, [2.1, 4]),
];
const NAMES = RUNS.map((r) => r.summary.scheduler);

interface LineSeries {
  type: string;
  name: string;
  symbol?: string;
  showSymbol?: boolean;
  lineStyle?: { type?: unknown };
}

interface Legend {
  itemWidth?: number;
  data?: (string | { name: string })[];
}

function optionOf(chart: ReportChart): { series: LineSeries[]; legend: Legend } {
  return JSON.parse(JSON.stringify(chart.chart.option)) as { series: LineSeries[]; legend: Legend };
}

/** The legend's line icons in the static SVG: their stroke (colour) and dash, and their length in pixels. */
function legendLines(svg: string): { color: string; dash: string; length: number }[] {
  return [...svg.matchAll(/<path d="M0 [\d.]+L([\d.]+) [\d.]+" transform="translate\([^"]*\)"([^>]*)>/g)].map(
    (m) => ({
      length: Number(m[1]),
      color: /stroke="([^"]+)"/.exec(m[2] ?? '')?.[1] ?? '',
      dash: /stroke-dasharray="([^"]+)"/.exec(m[2] ?? '')?.[1] ?? 'solid',
    }),
  );
}

const dashText = (dash: 'solid' | number[]): string => (dash === 'solid' ? 'solid' : dash.join(','));

describe('legends of the line charts', () => {
  const charts: [string, ReportChart][] = [
    ['cumulative cost', costChart(RUNS, undefined)],
    ['migrations', migrationsChart(RUNS)],
    ['JCT distribution', jctChart(RUNS)],
  ];

  for (const [title, chart] of charts)
    it(`${title}: each run's line carries its marker and dash, and its legend entry draws them`, () => {
      const option = optionOf(chart);
      for (const name of NAMES) {
        const style = seriesStyle(name);
        // The first series of a name is the one the legend draws its entry from.
        const line = option.series.find((s) => s.name === name);
        expect(line?.type, name).toBe('line');
        expect(line?.symbol, name).toBe(style.symbol);
        expect(line?.showSymbol, name).toBe(false);
        expect(line?.lineStyle?.type, name).toEqual(style.dash);
      }
      // One entry per run, in order, wide enough for a dash to show on both sides of the marker.
      expect(option.legend.data?.map((d) => (typeof d === 'string' ? d : d.name))).toEqual(NAMES);
      expect(option.legend.itemWidth).toBeGreaterThanOrEqual(40);
      const icons = legendLines(renderChartSvg(chart.chart));
      expect(icons).toHaveLength(NAMES.length);
      for (const [i, name] of NAMES.entries()) {
        const style = seriesStyle(name);
        expect(icons[i], name).toEqual({
          color: style.color,
          dash: dashText(style.dash),
          length: option.legend.itemWidth,
        });
      }
      // Told apart without colour: no two entries share both marker and dash.
      const keys = NAMES.map((n) => `${seriesStyle(n).symbol} ${dashText(seriesStyle(n).dash)}`);
      expect(new Set(keys).size).toBe(NAMES.length);
    });

  it('the lower bound: a dashed grey line in the legend, with no marker', () => {
    const bounds = {
      workBound: 4.5,
      timedBound: 4.75,
      timedSeries: { timeSeconds: [0, 3600, 7200], cumulativeCost: [0, 3, 4.75] },
    };
    const option = optionOf(costChart(RUNS, bounds));
    const entry = option.legend.data?.at(-1);
    expect(entry).toEqual({ name: 'lower bound (fluid fleet, no delays)', itemStyle: { opacity: 0 } });
    expect(option.series.at(-1)?.symbol).toBe('none');
  });
});
