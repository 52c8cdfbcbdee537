import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { costBreakdownChart, partDollars } from '../../../src/sim/report/cost-breakdown-chart.js';
import { renderChartSvg } from '../../../src/report/chart.js';
import { reportHtml } from '../../../src/sim/report/html.js';
import { COST_PARTS, type CostBreakdown } from '../../../src/world/cost-ledger.js';
import type { RunResult } from '../../../src/world/run-result.js';
import { fakeRun, withoutScripts } from './run-fixtures.js';

const EVA: CostBreakdown = {
  working: 5.004,
  slowdown: 0.5,
  starting: 0.1,
  preparing: 0.2,
  checkpointing: 0.05,
  bootAndShutdown: 0.146,
  idle: 0,
};
const NO_PACKING: CostBreakdown = { ...EVA, slowdown: 0, idle: 3.5 };

function runs(): RunResult[] {
  return [
    { ...fakeRun('no-packing', 3, 3, 2, [1, 2]), costBreakdown: NO_PACKING },
    { ...fakeRun('eva', 2, 3, 1, [1, 3]), costBreakdown: EVA },
  ];
}

/** A bar part as the chart holds it: drawn at `value`, described by `tip`. */
type Part = { value: number; tip: string };
type Option = { yAxis: { data: string[] }; series: { name: string; stack: string; data: Part[] }[] };

/** A one-instance run of a few minutes: its parts are cents and tenths of a cent. */
const SMALL: CostBreakdown = {
  working: 0.0892,
  slowdown: 0,
  starting: 0,
  preparing: 0,
  checkpointing: 0,
  bootAndShutdown: 0.0041,
  idle: 0.0032,
};
const SMALL_BILL = 0.0965;

/** The bar segments of the static SVG by series index, each as its left edge and width in pixels. */
function segments(svg: string): Map<number, { left: number; width: number }> {
  const found = new Map<number, { left: number; width: number }>();
  const bar =
    /<path d="M([\d.]+) [\d.]+l([\d.]+) 0l0 [\d.]+l-?[\d.]+ 0Z"[^>]*ecmeta_series_index="(\d+)" ecmeta_data_index="0" ecmeta_ssr_type="chart"/g;
  for (const m of svg.matchAll(bar)) found.set(Number(m[3]), { left: Number(m[1]), width: Number(m[2]) });
  return found;
}

describe('where the money went', () => {
  it('stacks one bar per run, a series per part in dollars at its exact value', () => {
    const chart = costBreakdownChart(runs())?.chart;
    expect(chart?.id).toBe('chart-cost-breakdown');
    const option = chart?.option as Option;
    expect(option.yAxis.data).toEqual(['no-packing', 'eva']);
    expect(option.series.map((s) => s.stack)).toEqual(COST_PARTS.map(() => 'cost'));
    const values = (i: number) => option.series[i]?.data.map((d) => d.value);
    expect(option.series[0]?.name).toBe('working');
    expect(values(0)).toEqual([5.004, 5.004]);
    expect(option.series[1]?.name).toBe('co-location slowdown');
    expect(values(1)).toEqual([0, 0.5]);
    expect(option.series.at(-1)?.name).toBe('idle room');
    expect(values(option.series.length - 1)).toEqual([3.5, 0]);
    expect(option.series[0]?.data[1]?.tip).toBe('eva: working\n$5.00 of $6.00 (83.4%)');
  });

  it("draws a small run's parts to their size, ending at its bill, and tells them apart from nothing", () => {
    const small = { ...fakeRun('eva', SMALL_BILL, 1, 1, [1]), costBreakdown: SMALL };
    const chart = costBreakdownChart([small])?.chart;
    if (chart === undefined) throw new Error('no chart');
    const series = (chart.option as Option).series;
    const parts = series.map((s) => s.data[0] as Part);
    expect(parts.reduce((a, p) => a + p.value, 0)).toBeCloseTo(SMALL_BILL, 12);
    const tip = (name: string) => parts[series.findIndex((s) => s.name === name)]?.tip;
    expect(tip('working')).toBe('eva: working\n$0.0892 of $0.0965 (92.4%)');
    expect(tip('boot and shutdown')).toBe('eva: boot and shutdown\n$0.0041 of $0.0965 (4.2%)');
    expect(tip('idle room')).toBe('eva: idle room\n$0.0032 of $0.0965 (3.3%)');
    expect(tip('checkpointing')).toBe('eva: checkpointing\n$0.00 of $0.0965 (0.0%)');
    // In the static SVG each part is as wide as its dollars, at one scale, and they join into one bar.
    const drawn = segments(renderChartSvg(chart));
    expect(drawn.size).toBe(COST_PARTS.length);
    const working = drawn.get(0);
    if (working === undefined) throw new Error('no working part');
    const perDollar = working.width / SMALL.working;
    COST_PARTS.forEach((part, i) => {
      const segment = drawn.get(i);
      expect(segment?.width, part).toBeCloseTo(SMALL[part] * perDollar, 0);
    });
    const [boot, idle] = [
      drawn.get(COST_PARTS.indexOf('bootAndShutdown')),
      drawn.get(COST_PARTS.indexOf('idle')),
    ];
    expect(boot?.width).toBeGreaterThan(30);
    expect(idle?.left).toBeCloseTo((boot?.left ?? 0) + (boot?.width ?? 0), 0);
    expect((idle?.left ?? 0) + (idle?.width ?? 0) - working.left).toBeCloseTo(SMALL_BILL * perDollar, 0);
  });

  it('writes dollars to the cent from $1 up and to three significant digits below', () => {
    expect(partDollars(12.345)).toBe('$12.35');
    expect(partDollars(1234.5)).toBe('$1,234.50');
    expect(partDollars(1)).toBe('$1.00');
    expect(partDollars(0.5)).toBe('$0.50');
    expect(partDollars(0.0965)).toBe('$0.0965');
    expect(partDollars(0.09)).toBe('$0.09');
    expect(partDollars(0.0041)).toBe('$0.0041');
    expect(partDollars(0.012345)).toBe('$0.0123');
    expect(partDollars(0.999999)).toBe('$1.00');
    expect(partDollars(0)).toBe('$0.00');
    expect(partDollars(1e-12)).toBe('$0.00');
  });

  it('is left out when no run has the ledger, and is in the report when one has', () => {
    const bare = runs().map(({ costBreakdown: _, ...r }) => r);
    expect(costBreakdownChart(bare)).toBeUndefined();
    expect(reportHtml(bare, {})).not.toContain('id="chart-cost-breakdown"');
    expect(reportHtml(runs(), {})).toContain('<div class="chart" id="chart-cost-breakdown"');
  });
});

describe('the cost breakdown legend without scripts', () => {
  it('draws every entry whole, none under another entry, in Chromium', async () => {
    if (!existsSync('/usr/bin/chromium'))
      throw new Error('/usr/bin/chromium is missing (apt-get install chromium)');
    // With the traffic across zones: eight entries, the longest legend.
    const network = {
      appPerformanceMean: 1,
      crossZoneCost: 0.25,
      latencySensitiveJobs: 0,
      latencySensitiveMeanJctHours: null,
      latencySensitiveMigrationsPerJob: null,
      latencyMovesPerJob: 0,
    };
    const withTraffic = runs().map((r) => ({ ...r, network }));
    const option = costBreakdownChart(withTraffic)?.chart.option as { series: { name: string }[] };
    const labels = option.series.map((s) => s.name);
    expect(labels).toHaveLength(8);
    const dir = await mkdtemp(join(tmpdir(), 'fleetwise-legend-'));
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox'],
    });
    try {
      const path = join(dir, 'report.html');
      await writeFile(path, withoutScripts(reportHtml(withTraffic, {})), 'utf8');
      const tab = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      await tab.goto(pathToFileURL(path).href, { waitUntil: 'load' });
      type Box = { what: string; left: number; right: number; top: number; bottom: number };
      const boxes = await tab.$$eval('#chart-cost-breakdown svg', (svgs) => {
        const svg = svgs[0];
        if (svg === undefined) return [];
        type Shape = {
          getBoundingClientRect(): { left: number; right: number; top: number; bottom: number };
        };
        const box = (what: string, e: Shape): Box => {
          const r = e.getBoundingClientRect();
          return { what, left: r.left, right: r.right, top: r.top, bottom: r.bottom };
        };
        const frame = box('chart', svg);
        // The entries' swatches: the legend's filled, unclickable shapes (each entry's hit area is unfilled).
        const swatches = [...svg.querySelectorAll('path[ecmeta_ssr_type="legend"][ecmeta_silent]')].map((e) =>
          box('swatch', e),
        );
        const texts = [...svg.querySelectorAll('text')].map((e) => box(e.textContent ?? '', e));
        return [frame, ...swatches, ...texts];
      });
      const [frame, ...rest] = boxes;
      if (frame === undefined) throw new Error('no chart');
      const swatches = rest.filter((b) => b.what === 'swatch');
      const names = rest.filter((b) => labels.includes(b.what));
      expect(swatches).toHaveLength(labels.length);
      expect(names.map((n) => n.what).sort()).toEqual([...labels].sort());
      const apart = (a: Box, b: Box): boolean =>
        a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top;
      for (const name of names) {
        expect(name.left >= frame.left && name.right <= frame.right, `${name.what} inside the chart`).toBe(
          true,
        );
        for (const other of [...names, ...swatches])
          if (other !== name) expect(apart(name, other), `${name.what} overlaps ${other.what}`).toBe(true);
      }
    } finally {
      await browser.close();
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
