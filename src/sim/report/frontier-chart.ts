import type { LineSeriesOption } from 'echarts';
import type { ValueOfTimeSetting } from '../../core/model.js';
import type { RunResult } from '../../world/run-result.js';
import { seriesStyle } from '../../report/palette.js';
import { AXIS_NAME, BASELINE, round, WIDTH, type ReportChart } from './chart-kit.js';

/** The policy a run belongs to: a value-of-time sweep names its runs `eva@vot=2`, the policy is `eva`. */
export function policyOf(runName: string): string {
  const at = runName.indexOf('@');
  return at < 0 ? runName : runName.slice(0, at);
}

/** A point's value of time for ordering a swept line (only numbers are swept). */
function dollarsOf(v: ValueOfTimeSetting | undefined): number {
  return typeof v === 'number' ? v : 0;
}

/** Where a swept policy's successive point labels go (top, bottom, right, left of the point, in turn). */
const LABEL_POSITIONS = ['top', 'bottom', 'right', 'left'] as const;

const HEIGHT = 460;
const GRID = { left: 90, right: 40, top: 50, bottom: 60 } as const;
/** The plot's size in pixels, for telling which points are drawn on one spot. */
const PLOT_WIDTH = WIDTH - GRID.left - GRID.right;
const PLOT_HEIGHT = HEIGHT - GRID.top - GRID.bottom;
/** Points whose centres are closer than this (pixels, on both axes) are drawn on top of each other. */
const COINCIDE_PX = 8;

/**
 * Points of different lines drawn on one spot (eva swept at $0/h and eva with a learned value of time that stayed
 * at 0) would print their labels on top of each other: ECharts moves labels apart only within a series. Per line and
 * point: `undefined` to keep its label, `null` to hide it, or the text of one label for the whole spot ("$0/h, eva
 * (auto value of time)"), on the spot's first point. `at` gives a point's place as shares of the axes.
 */
export function mergeCoincidingLabels<P extends { readonly label: string }>(
  lines: readonly (readonly P[])[],
  at: (p: P) => readonly [number, number],
): (string | null | undefined)[][] {
  const spots: { x: number; y: number; members: [number, number][] }[] = [];
  lines.forEach((points, line) =>
    points.forEach((p, i) => {
      const [x, y] = at(p);
      const spot = spots.find(
        (s) => Math.abs(s.x - x) * PLOT_WIDTH < COINCIDE_PX && Math.abs(s.y - y) * PLOT_HEIGHT < COINCIDE_PX,
      );
      if (spot === undefined) spots.push({ x, y, members: [[line, i]] });
      else spot.members.push([line, i]);
    }),
  );
  const result: (string | null | undefined)[][] = lines.map((points) => points.map(() => undefined));
  for (const { members } of spots) {
    const lineCount = new Set(members.map(([line]) => line)).size;
    if (lineCount < 2) continue;
    const texts = [...new Set(members.map(([line, i]) => lines[line]?.[i]?.label ?? ''))];
    members.forEach(([line, i], k) => {
      const row = result[line];
      if (row !== undefined) row[i] = k === 0 ? texts.join(', ') : null;
    });
  }
  return result;
}

/** A run's point on the cost–time plane. */
interface FrontierPoint {
  readonly meanJctHours: number;
  readonly cost: number;
  readonly valueOfTime: ValueOfTimeSetting | undefined;
  readonly run: string;
}

/**
 * Cost against mean job completion time, one point per run: where each policy sits in the trade-off a user makes
 * between dollars and waiting. A policy swept over values of time (`simulate --value-of-time a,b,c`) is a line
 * through its runs in the order of the value, each point labelled with it; a baseline is one point. Costs are
 * relative to No-Packing's when it ran (as the summary table), else in dollars. Lower and further left is better: a
 * point below and left of another dominates it.
 */
export function frontierChart(results: readonly RunResult[]): ReportChart {
  const baseline = results.find((r) => r.summary.scheduler === BASELINE)?.summary.totalCost;
  const relative = baseline !== undefined && baseline > 0;
  const byPolicy = new Map<string, FrontierPoint[]>();
  for (const r of results) {
    // A learned value of time ('auto') is its own point: it is no value on the swept line.
    const policy =
      policyOf(r.summary.scheduler) +
      (r.summary.valueOfTimePerJobHour === 'auto' ? ' (auto value of time)' : '');
    const list = byPolicy.get(policy) ?? [];
    list.push({
      meanJctHours: r.summary.meanJctHours,
      cost: relative ? r.summary.totalCost / (baseline as number) : r.summary.totalCost,
      valueOfTime: r.summary.valueOfTimePerJobHour,
      run: r.summary.scheduler,
    });
    byPolicy.set(policy, list);
  }
  // Axes padded around the points, so that none sits on a frame and every label shows.
  const all = [...byPolicy.values()].flat();
  const span = (values: number[], digits: number) => {
    const lo = Math.min(...values);
    const hi = Math.max(...values);
    const pad = Math.max((hi - lo) * 0.08, Math.abs(hi) * 0.01, 1e-6);
    return { min: round(Math.max(0, lo - pad), digits), max: round(hi + pad * 1.5, digits) };
  };
  const x = span(
    all.map((p) => p.meanJctHours),
    3,
  );
  const y = span(
    all.map((p) => p.cost),
    relative ? 3 : 2,
  );
  const lines = [...byPolicy.entries()].map(([policy, list]) => {
    const sorted = [...list].sort((a, b) => dollarsOf(a.valueOfTime) - dollarsOf(b.valueOfTime));
    const swept = sorted.some((p) => typeof p.valueOfTime === 'number') && sorted.length > 1;
    return {
      policy,
      swept,
      points: sorted.map((p) => ({ ...p, label: swept ? `$${p.valueOfTime ?? 0}/h` : policy })),
    };
  });
  const merged = mergeCoincidingLabels(
    lines.map((l) => l.points),
    (p) => [(p.meanJctHours - x.min) / (x.max - x.min || 1), (p.cost - y.min) / (y.max - y.min || 1)],
  );
  const series: LineSeriesOption[] = lines.map(({ policy, swept, points }, line) => {
    const style = seriesStyle(policy);
    return {
      type: 'line',
      name: policy,
      color: style.color,
      symbol: style.symbol,
      symbolSize: 11,
      showSymbol: true,
      lineStyle: { width: 2, type: style.dash, opacity: swept ? 1 : 0 },
      emphasis: { focus: 'series' },
      labelLayout: { moveOverlap: 'shiftY' },
      label: {
        show: true,
        position: 'top',
        fontSize: 11,
        color: '#333',
        formatter: swept ? '{@[2]}' : policy,
      },
      data: points.map((p, i) => {
        const text = merged[line]?.[i];
        // A sweep's points often land close together: their labels go round them in turn, not on top of each other.
        const position = swept ? { position: LABEL_POSITIONS[i % LABEL_POSITIONS.length] } : {};
        const label =
          text === null
            ? { show: false }
            : { ...position, ...(text === undefined ? {} : { formatter: text }) };
        return {
          value: [round(p.meanJctHours, 4), round(p.cost, relative ? 4 : 2), swept ? p.label : p.run],
          ...(Object.keys(label).length > 0 ? { label } : {}),
        };
      }),
    };
  });
  return {
    chart: {
      id: 'chart-frontier',
      title: 'Cost against mean job completion time',
      width: WIDTH,
      height: HEIGHT,
      option: {
        legend: { top: 0, type: 'scroll' },
        tooltip: { trigger: 'item', confine: true },
        grid: GRID,
        xAxis: {
          type: 'value',
          ...x,
          // The padded ends are not round numbers: only the ticks between them are labelled.
          axisLabel: { showMinLabel: false, showMaxLabel: false },
          name: 'mean job completion time (h)',
          ...AXIS_NAME,
        },
        yAxis: {
          type: 'value',
          ...y,
          axisLabel: { showMinLabel: false, showMaxLabel: false },
          name: relative ? 'cost (No-Packing = 1)' : 'cost ($)',
          ...AXIS_NAME,
          nameGap: 56,
        },
        series,
      },
    },
    caption:
      'Each run at its mean job completion time and cost; lower left is better, and a point below and left of ' +
      "another dominates it. A value-of-time sweep (--value-of-time a,b,c) draws a policy's runs as a line, each " +
      'point labelled with what an hour of a job’s completion time was worth to it.',
  };
}
