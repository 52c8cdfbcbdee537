import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reportHtml } from '../../../src/sim/report/html.js';
import type { CostBreakdown } from '../../../src/world/cost-ledger.js';
import type { RunResult } from '../../../src/world/run-result.js';
import { fakeRun } from './run-fixtures.js';

/**
 * report.html's "Where the money went" at the width of a laptop's window: the chart keeps its legend's width and
 * scrolls sideways in a box narrower than itself; the dollars axis' labels, its last one included, are whole in the
 * part the box shows, not cut at its edge ("$" for "$1,000").
 */
const CHROMIUM = '/usr/bin/chromium';

/** Three runs whose bills (the bars' ends) are `scale` times about $240, $930 and $510. */
function runs(scale: number): RunResult[] {
  const breakdown = (working: number, slowdown: number, idle: number): CostBreakdown => ({
    working: scale * working,
    slowdown: scale * slowdown,
    starting: scale * 2,
    preparing: scale * 3,
    checkpointing: 0,
    bootAndShutdown: scale * 5,
    idle: scale * idle,
  });
  return [
    { ...fakeRun('eva', 80 * scale, 3, 1, [1, 2]), costBreakdown: breakdown(220, 5, 5) },
    { ...fakeRun('no-packing', 310 * scale, 3, 2, [1, 2]), costBreakdown: breakdown(710, 0, 210) },
    { ...fakeRun('karpenter-spot', 170 * scale, 3, 2, [1, 2]), costBreakdown: breakdown(300, 150, 50) },
  ];
}

describe('the cost breakdown chart in a 1100 px window', () => {
  let browser: Browser | undefined;
  let dir = '';

  beforeAll(async () => {
    if (!existsSync(CHROMIUM))
      throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`);
    dir = await mkdtemp(join(tmpdir(), 'fleetwise-breakdown-axis-'));
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox'] });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    if (dir !== '') await rm(dir, { recursive: true, force: true });
  });

  for (const [scale, last] of [
    [1, '$1,000'],
    [100, '$100,000'],
  ] as const)
    it(`shows every dollars label whole, ${last} last`, async () => {
      if (browser === undefined) throw new Error('Chromium did not start');
      const path = join(dir, `report-${scale}.html`);
      await writeFile(path, reportHtml(runs(scale), {}), 'utf8');
      const tab = await browser.newPage({ viewport: { width: 1100, height: 900 } });
      try {
        await tab.goto(pathToFileURL(path).href, { waitUntil: 'load' });
        await tab.waitForFunction(
          `document.querySelector('#chart-cost-breakdown.live svg') !== null`,
          undefined,
          {
            timeout: 20_000,
          },
        );
        type Box = { text: string; left: number; right: number };
        const { shown, scrolls, labels } = await tab.$eval('#chart-cost-breakdown', (chart) => {
          const box = (
            e: { getBoundingClientRect(): { left: number; right: number } },
            text: string,
          ): Box => {
            const r = e.getBoundingClientRect();
            return { text, left: r.left, right: r.right };
          };
          // What the reader sees of the chart: the scrolling box around it, unscrolled.
          const scroller = chart.parentElement ?? chart;
          return {
            shown: box(scroller, 'shown'),
            scrolls: scroller.scrollWidth > scroller.clientWidth,
            labels: [...chart.querySelectorAll('svg text')]
              .map((t) => box(t, t.textContent ?? ''))
              .filter((t) => t.text.startsWith('$')),
          };
        });
        // The chart is wider than the window: it scrolls sideways, as charts whose legend is laid out in pixels do.
        expect(scrolls).toBe(true);
        expect(labels.map((l) => l.text)).toContain('$0');
        expect(labels.at(-1)?.text).toBe(last);
        for (const label of labels)
          expect(
            label.left >= shown.left && label.right <= shown.right,
            `${label.text} (${label.left}–${label.right}) whole within ${shown.left}–${shown.right}`,
          ).toBe(true);
      } finally {
        await tab.close();
      }
    }, 60_000);
});
