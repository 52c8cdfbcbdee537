import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { costBreakdownChart } from '../../../src/sim/report/cost-breakdown-chart.js';
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

describe('where the money went', () => {
  it('stacks one bar per run, a series per part in dollars to the cent', () => {
    const chart = costBreakdownChart(runs())?.chart;
    expect(chart?.id).toBe('chart-cost-breakdown');
    const option = chart?.option as {
      yAxis: { data: string[] };
      series: { name: string; stack: string; data: number[] }[];
    };
    expect(option.yAxis.data).toEqual(['no-packing', 'eva']);
    expect(option.series.map((s) => s.stack)).toEqual(COST_PARTS.map(() => 'cost'));
    expect(option.series[0]).toMatchObject({ name: 'working', data: [5, 5] });
    expect(option.series[1]).toMatchObject({ name: 'co-location slowdown', data: [0, 0.5] });
    expect(option.series.at(-1)).toMatchObject({ name: 'idle room', data: [3.5, 0] });
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
