import type { LineSeriesOption } from 'echarts';
import type { ValueOfTimeSetting } from '../../core/model.js';
import type { RunResult } from '../../world/run-result.js';
import { seriesStyle } from '../../report/palette.js';
import { AXIS_NAME, BASELINE, round, WIDTH, type ReportChart } from './chart-kit.js';
import { baselineLabel } from './format.js';

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
/**
 * Points whose centres are closer than this (pixels, on both axes) are drawn on top of each other: their 11 px symbols
 * read as one mark. Points further apart are told apart on the page, and each keeps its own label.
 */
const COINCIDE_PX = 4;

/**
 * Points of different lines drawn on one spot (eva swept at $0/h and eva with a learned value of time that stayed
 * at 0) would print their labels on top of each other. A spot is every point drawn on another of it (centres closer
 * than COINCIDE_PX on both axes, transitively: a chain of such points is one mark on the page), and only those. Per line and point: `undefined` to keep its label, `null` to hide it, or the text of one label for
 * the whole spot ("$0/h, eva (auto value of time)"), on the spot's first point. `at` gives a point's place as
 * shares of the axes.
 */
export function mergeCoincidingLabels<P extends { readonly label: string }>(
  lines: readonly (readonly P[])[],
  at: (p: P) => readonly [number, number],
): (string | null | undefined)[][] {
  const points = lines.flatMap((list, line) =>
    list.map((p, i) => {
      const [x, y] = at(p);
      return { line, i, x: x * PLOT_WIDTH, y: y * PLOT_HEIGHT };
    }),
  );
  // Union–find over touching symbols; a spot's root is its first point (in the lines' order).
  const parent = points.map((_, k) => k);
  const root = (k: number): number => {
    let r = k;
    while (parent[r] !== r) r = parent[r] as number;
    parent[k] = r;
    return r;
  };
  for (let a = 0; a < points.length; a++)
    for (let b = a + 1; b < points.length; b++) {
      const p = points[a];
      const q = points[b];
      if (p === undefined || q === undefined) continue;
      if (Math.abs(p.x - q.x) >= COINCIDE_PX || Math.abs(p.y - q.y) >= COINCIDE_PX) continue;
      const [ra, rb] = [root(a), root(b)];
      if (ra !== rb) parent[Math.max(ra, rb)] = Math.min(ra, rb);
    }
  const spots = new Map<number, number[]>();
  points.forEach((_, k) => {
    const r = root(k);
    spots.set(r, [...(spots.get(r) ?? []), k]);
  });
  const result: (string | null | undefined)[][] = lines.map((list) => list.map(() => undefined));
  for (const members of spots.values()) {
    if (new Set(members.map((k) => points[k]?.line)).size < 2) continue;
    const texts = [
      ...new Set(members.map((k) => lines[points[k]?.line ?? 0]?.[points[k]?.i ?? 0]?.label ?? '')),
    ];
    members.forEach((k, n) => {
      const p = points[k];
      const row = p === undefined ? undefined : result[p.line];
      if (p !== undefined && row !== undefined) row[p.i] = n === 0 ? texts.join(', ') : null;
    });
  }
  return result;
}

/** A point label's side of its point, as ECharts names it. */
export type LabelSide = (typeof LABEL_POSITIONS)[number];

/** A label to place: its point's centre (pixels from the chart's top left), its text, and the side it would rather take. */
export interface LabelToPlace {
  readonly x: number;
  readonly y: number;
  readonly text: string;
  readonly preferred: LabelSide;
}

/** Where a label goes: a side of its point and a further offset in pixels (ECharts' label position and offset). */
export interface PlacedLabel {
  readonly position: LabelSide;
  readonly offset: readonly [number, number];
  /** Its box as placed (pixels from the chart's top left). */
  readonly box: Box;
}

interface Box {
  readonly left: number;
  readonly top: number;
  readonly right: number;
  readonly bottom: number;
}

/** Label text metrics at the chart's 11 px (a little wide: a guess too small lets labels touch). */
const LABEL_CHAR_WIDTH = 6.6;
const LABEL_HEIGHT = 15;
const SYMBOL_SIZE = 11;
/** ECharts' gap between a symbol and its label. */
const LABEL_DISTANCE = 5;
/** How many label heights a label may be pushed away from its first place (outwards, or up and down beside its point). */
const MAX_PUSH = 4;

function overlap(a: Box, b: Box): number {
  const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
  const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
  return w > 0 && h > 0 ? w * h : 0;
}

/** The label's box at a side of (x, y), pushed down by dy. */
function boxAt(x: number, y: number, width: number, side: LabelSide, dy: number): Box {
  const gap = SYMBOL_SIZE / 2 + LABEL_DISTANCE;
  const left = side === 'right' ? x + gap : side === 'left' ? x - gap - width : x - width / 2;
  const top = side === 'top' ? y - gap - LABEL_HEIGHT : side === 'bottom' ? y + gap : y - LABEL_HEIGHT / 2;
  return { left, top: top + dy, right: left + width, bottom: top + dy + LABEL_HEIGHT };
}

/**
 * Places the point labels of every line together (ECharts moves labels apart only within a series, and not off a
 * point of another): each label in turn takes the first place, its preferred side first, then the others, each then
 * pushed further out or along, where it covers no label placed before it, no point and stays inside `area`; failing
 * that, the place that covers least. Labels are placed from the most crowded point out, so that those with the least
 * room choose first.
 */
export function placeLabels(
  labels: readonly LabelToPlace[],
  points: readonly { readonly x: number; readonly y: number }[],
  area: Box,
): PlacedLabel[] {
  const symbols: Box[] = points.map((p) => ({
    left: p.x - SYMBOL_SIZE / 2,
    top: p.y - SYMBOL_SIZE / 2,
    right: p.x + SYMBOL_SIZE / 2,
    bottom: p.y + SYMBOL_SIZE / 2,
  }));
  // How many points lie near each label's point, counted once (not in every comparison of the sort).
  const crowding = labels.map(
    (l) => points.filter((p) => Math.abs(p.x - l.x) < 120 && Math.abs(p.y - l.y) < 60).length,
  );
  const order = labels
    .map((_, k) => k)
    .sort((a, b) => {
      const la = labels[a] as LabelToPlace;
      const lb = labels[b] as LabelToPlace;
      return (crowding[b] as number) - (crowding[a] as number) || la.y - lb.y || la.x - lb.x || a - b;
    });
  const placed: (PlacedLabel | undefined)[] = labels.map(() => undefined);
  const taken: Box[] = [];
  for (const k of order) {
    const l = labels[k] as LabelToPlace;
    const width = l.text.length * LABEL_CHAR_WIDTH + 4;
    const sides = [l.preferred, ...LABEL_POSITIONS.filter((s) => s !== l.preferred)];
    let best: { cost: number; label: PlacedLabel } | undefined;
    search: for (let push = 0; push <= MAX_PUSH; push++)
      for (const side of sides)
        // Above or below a point, a label is pushed further out; beside it, further up or down.
        for (const dy of side === 'top'
          ? [-push * LABEL_HEIGHT]
          : side === 'bottom'
            ? [push * LABEL_HEIGHT]
            : push === 0
              ? [0]
              : [-push * LABEL_HEIGHT, push * LABEL_HEIGHT]) {
          const box = boxAt(l.x, l.y, width, side, dy);
          const outside =
            Math.max(0, area.left - box.left) +
            Math.max(0, box.right - area.right) +
            Math.max(0, area.top - box.top) +
            Math.max(0, box.bottom - area.bottom);
          const cost =
            taken.reduce((a, t) => a + overlap(box, t), 0) +
            symbols.reduce((a, s) => a + overlap(box, s), 0) +
            outside * LABEL_HEIGHT * 4 +
            // Among places that cover something, the nearer one.
            push * 0.01;
          if (best === undefined || cost < best.cost)
            best = { cost, label: { position: side, offset: [0, dy], box } };
          if (cost < 0.5) break search;
        }
    const chosen = (best as { label: PlacedLabel }).label;
    placed[k] = chosen;
    taken.push(chosen.box);
  }
  return placed as PlacedLabel[];
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
    // A point alone is drawn as its run is in every other chart (`eva@vot=auto` in its own shade); a swept line, of
    // several runs, in its policy's colour.
    const only = sorted.length === 1 ? sorted[0] : undefined;
    return {
      policy,
      swept,
      style: seriesStyle(only?.run ?? policy),
      points: sorted.map((p) => ({ ...p, label: swept ? `$${p.valueOfTime ?? 0}/h` : policy })),
    };
  });
  const share = (p: FrontierPoint): [number, number] => [
    (p.meanJctHours - x.min) / (x.max - x.min || 1),
    (p.cost - y.min) / (y.max - y.min || 1),
  ];
  const merged = mergeCoincidingLabels(
    lines.map((l) => l.points),
    share,
  );
  // Every shown label placed at once, clear of the others and of every point (pixels from the chart's top left).
  const pixel = (p: FrontierPoint): { x: number; y: number } => {
    const [fx, fy] = share(p);
    return { x: GRID.left + fx * PLOT_WIDTH, y: GRID.top + (1 - fy) * PLOT_HEIGHT };
  };
  const toPlace = lines.flatMap(({ policy, swept, points }, line) =>
    points.flatMap((p, i) => {
      const text = merged[line]?.[i];
      if (text === null) return [];
      return [
        {
          line,
          i,
          ...pixel(p),
          text: text ?? (swept ? p.label : policy),
          // A sweep's points often land close together: their labels go round them in turn.
          preferred: swept ? (LABEL_POSITIONS[i % LABEL_POSITIONS.length] as LabelSide) : ('top' as const),
        },
      ];
    }),
  );
  const places = placeLabels(
    toPlace,
    lines.flatMap((l) => l.points.map(pixel)),
    { left: GRID.left, top: GRID.top, right: WIDTH - GRID.right, bottom: HEIGHT - GRID.bottom },
  );
  const placeOf = new Map(toPlace.map((t, k) => [`${t.line}:${t.i}`, places[k]]));
  const series: LineSeriesOption[] = lines.map(({ policy, swept, style, points }, line) => {
    return {
      type: 'line',
      name: policy,
      color: style.color,
      symbol: style.symbol,
      symbolSize: 11,
      showSymbol: true,
      lineStyle: { width: 2, type: style.dash, opacity: swept ? 1 : 0 },
      emphasis: { focus: 'series' },
      label: {
        show: true,
        position: 'top',
        fontSize: 11,
        color: '#333',
        formatter: swept ? '{@[2]}' : policy,
      },
      data: points.map((p, i) => {
        const text = merged[line]?.[i];
        const place = placeOf.get(`${line}:${i}`);
        const label =
          text === null || place === undefined
            ? { show: false }
            : {
                position: place.position,
                offset: [...place.offset],
                ...(text === undefined ? {} : { formatter: text }),
              };
        return {
          value: [round(p.meanJctHours, 4), round(p.cost, relative ? 4 : 2), swept ? p.label : p.run],
          label,
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
          // Under spot the baseline stays on demand: the axis says so, as the summary's column does.
          name: relative
            ? `cost (No-Packing${baselineLabel(results) === BASELINE ? '' : ' on demand'} = 1)`
            : 'cost ($)',
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
