import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { allocationChart } from '../../../src/sim/report/allocation-chart.js';
import { shortenNames, WIDTH } from '../../../src/sim/report/chart-kit.js';
import { frontierChart } from '../../../src/sim/report/frontier-chart.js';
import { reportHtml } from '../../../src/sim/report/html.js';
import { jctChart } from '../../../src/sim/report/jct-chart.js';
import { withNormalizedCosts } from '../../../src/sim/report/normalize.js';
import { instancesChart } from '../../../src/sim/report/over-time-charts.js';
import type { RunResult } from '../../../src/world/run-result.js';
import { fakeRun } from './run-fixtures.js';

/** The charts' option as plain JSON, as the page gets it. */
function optionOf(chart: { chart: { option: unknown } }): Record<string, unknown> {
  return JSON.parse(JSON.stringify(chart.chart.option)) as Record<string, unknown>;
}

interface GraphicText {
  name: string;
  x: number;
  style: { text: string; width: number; align: string };
}

// The longest in a middle column: a title that runs long runs into its right neighbour's.
const LONG_NAMES = [
  'eva',
  'eva-latency-no-migration',
  'eva-latency-blind',
  'karpenter-when-empty',
  'karpenter-balanced',
  'no-packing',
];

describe('JCT chart', () => {
  it('draws the CDF and the strip below it on one log scale, powers of ten around every JCT', () => {
    // The strip ends at p90 (under 10 h), the CDF at the slowest job (150 h): each axis left alone picked its own end.
    const runs = [
      fakeRun('eva', 2, 3, 1, [0.5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 150]),
      fakeRun('eva-latency-no-migration', 2, 3, 1, [0.4, 2, 3]),
    ];
    const option = optionOf(jctChart(runs));
    const axes = option.xAxis as { type: string; min?: number; max?: number }[];
    expect(axes.map((a) => [a.type, a.min, a.max])).toEqual([
      ['log', 0.1, 1000],
      ['log', 0.1, 1000],
    ]);
    // And both plots start at the same left edge, wide enough for the longest name.
    const grids = option.grid as { left: number }[];
    expect(grids[0]?.left).toBe(grids[1]?.left);
    expect(grids[0]?.left).toBeGreaterThanOrEqual(24 * 7.7);
  });
});

describe('names in the charts', () => {
  it('shortens from the middle, keeping the ends, and keeps distinct names distinct', () => {
    expect(shortenNames(['eva', 'eva-latency-blind'], 20)).toEqual(['eva', 'eva-latency-blind']);
    const cut = shortenNames(['eva-latency-blind@vot=auto', 'eva-latency-no-migration@vot=auto'], 16);
    expect(cut.every((c) => c.length <= 16)).toBe(true);
    expect(new Set(cut).size).toBe(2);
    expect(cut[1]?.startsWith('eva-')).toBe(true);
    expect(cut[1]?.endsWith('vot=auto')).toBe(true);
    // Differing only in the middle: the cut moves until they differ.
    const middle = shortenNames(['scheduler-aaaa-variant', 'scheduler-bbbb-variant'], 12);
    expect(new Set(middle).size).toBe(2);
  });

  it('allocation rows: every name whole and distinct, the column as wide as the longest', () => {
    const option = optionOf(allocationChart(LONG_NAMES.map((n) => fakeRun(n, 1, 3, 1, [1]))));
    const labels = option.graphic as GraphicText[];
    expect(labels.map((l) => l.style.text)).toEqual(LONG_NAMES);
    // The tooltip names the run whole even when the text had to be cut.
    expect(labels.map((l) => l.name)).toEqual(LONG_NAMES);
    const firstPanel = (option.grid as { left: number }[])[0]?.left ?? 0;
    expect(firstPanel).toBeGreaterThan(24 * 7.7);
    // Names longer than the column's widest: cut in the middle, the ends kept, still distinct.
    const sweep = [
      'eva-latency-blind@vot=auto',
      'eva-latency-no-migration@vot=auto',
      'eva-latency-blind@vot=2',
    ];
    const cut = (
      optionOf(allocationChart(sweep.map((n) => fakeRun(n, 1, 3, 1, [1])))).graphic as GraphicText[]
    ).map((l) => l.style.text);
    expect(new Set(cut).size).toBe(3);
    expect(cut.filter((t) => t.endsWith('@vot=auto'))).toHaveLength(2);
  });

  it('running-instance panel titles: the name and the figures fit the panel', () => {
    const runs = LONG_NAMES.map((n) => fakeRun(n, 1, 3, 41, [1]));
    const option = optionOf(instancesChart(runs));
    const texts = option.graphic as GraphicText[];
    const grids = option.grid as { left: number; width: number }[];
    expect(texts).toHaveLength(2 * runs.length);
    runs.forEach((r, i) => {
      const [name, figures] = [texts[2 * i], texts[2 * i + 1]];
      const grid = grids[i];
      if (name === undefined || figures === undefined || grid === undefined) throw new Error('missing');
      expect(name.name).toBe(r.summary.scheduler);
      expect(figures.style.text).toBe('peak 41, 41 launched');
      // Name from the panel's left, figures ending at its right: together no wider than the panel.
      expect(name.x).toBe(grid.left);
      expect(figures.x).toBe(grid.left + grid.width);
      expect(name.style.width + figures.style.width).toBeLessThanOrEqual(grid.width);
    });
  });
});

describe("panel charts' narrowest width", () => {
  it('running instances: as wide as the panel columns in use, so one or two runs do not scroll onto blank room', () => {
    const runs = LONG_NAMES.map((n) => fakeRun(n, 1, 3, 2, [1]));
    for (const count of [1, 2, 3, 6]) {
      const { chart } = instancesChart(runs.slice(0, count));
      const grids = optionOf({ chart }).grid as { left: number; width: number }[];
      const rightmost = Math.max(...grids.map((g) => g.left + g.width));
      // Every panel whole at the narrowest width, with no more than the grid's right margin beyond the last.
      expect(chart.minWidth, `${count} runs`).toBeGreaterThanOrEqual(rightmost);
      expect(chart.minWidth, `${count} runs`).toBeLessThanOrEqual(rightmost + 21);
    }
    // One run's panel fits an 800 px page; three columns need the chart's whole width.
    expect(instancesChart(runs.slice(0, 1)).chart.minWidth).toBeLessThan(500);
    expect(instancesChart(runs.slice(0, 3)).chart.minWidth).toBe(WIDTH);
  });

  it('resource allocation: a column per resource whatever the runs, so always the whole width', () => {
    for (const count of [1, 2, 6]) {
      const { chart } = allocationChart(LONG_NAMES.slice(0, count).map((n) => fakeRun(n, 1, 3, 2, [1])));
      const grids = optionOf({ chart }).grid as { left: number; width: number }[];
      expect(chart.minWidth).toBeGreaterThanOrEqual(Math.max(...grids.map((g) => g.left + g.width)));
      expect(chart.minWidth).toBe(WIDTH);
    }
  });
});

describe('frontier chart', () => {
  it('gives points of different lines on one spot one label, not two printed over each other', () => {
    const at = (
      run: RunResult,
      meanJctHours: number,
      valueOfTimePerJobHour?: number | 'auto',
    ): RunResult => ({
      ...run,
      summary: { ...run.summary, meanJctHours, valueOfTimePerJobHour },
    });
    // eva with a learned value of time ended where eva at $0/h did.
    const runs = withNormalizedCosts([
      at(fakeRun('eva@vot=0', 2, 3, 1, [1]), 25.64, 0),
      at(fakeRun('eva@vot=2', 1.98, 3, 1, [1]), 25.57, 2),
      at(fakeRun('eva@vot=auto', 2, 3, 1, [1]), 25.64, 'auto'),
      at(fakeRun('no-packing', 3, 3, 2, [1]), 24),
    ]);
    const option = optionOf(frontierChart(runs));
    const shown = (
      option.series as { name: string; label: { show: boolean; formatter: string }; data: unknown[] }[]
    )
      .flatMap((s) =>
        s.data.map((d) => {
          const own = (d as { label?: { show?: boolean; formatter?: string } }).label;
          return {
            series: s.name,
            show: own?.show ?? s.label.show,
            text:
              own?.formatter ??
              (s.label.formatter === '{@[2]}' ? (d as { value: unknown[] }).value[2] : s.label.formatter),
          };
        }),
      )
      .filter((l) => l.show);
    expect(shown.map((l) => l.text)).toEqual(['$0/h, eva (auto value of time)', '$2/h', 'no-packing']);
  });
});

describe('long names in Chromium', () => {
  it('running-instance panel titles stay apart, and allocation rows show each name whole', async () => {
    if (!existsSync('/usr/bin/chromium'))
      throw new Error('/usr/bin/chromium is missing (apt-get install chromium)');
    const runs = withNormalizedCosts(LONG_NAMES.map((n, i) => fakeRun(n, 1 + i / 10, 3, 10 + i, [1, 2])));
    const dir = await mkdtemp(join(tmpdir(), 'fleetwise-names-'));
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox'],
    });
    try {
      const path = join(dir, 'report.html');
      await writeFile(path, reportHtml(runs, {}), 'utf8');
      const tab = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      await tab.goto(pathToFileURL(path).href, { waitUntil: 'load' });
      await tab.waitForFunction(`document.querySelectorAll('.chart.live').length === 6`, undefined, {
        timeout: 20_000,
      });
      await tab.waitForTimeout(1200);
      type Box = { text: string; left: number; right: number; top: number; bottom: number };
      const boxes = (id: string): Promise<Box[]> =>
        tab.$$eval(`#${id} svg text`, (nodes) =>
          nodes.map((n) => {
            const r = n.getBoundingClientRect();
            return { text: n.textContent ?? '', left: r.left, right: r.right, top: r.top, bottom: r.bottom };
          }),
        );
      // The panels' titles (names and figures): no two of them share any pixel.
      const titles = (await boxes('chart-running-instances')).filter(
        (b) => b.text.includes('launched') || LONG_NAMES.some((n) => b.text.includes(n.slice(0, 3))),
      );
      expect(titles.length).toBeGreaterThanOrEqual(LONG_NAMES.length);
      for (const a of titles)
        for (const b of titles)
          if (a !== b)
            expect(
              a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top,
              `"${a.text}" overlaps "${b.text}"`,
            ).toBe(true);
      const rows = (await boxes('chart-resource-allocation')).map((b) => b.text);
      for (const name of LONG_NAMES) expect(rows).toContain(name);
    } finally {
      await browser.close();
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
