import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frontierChart, mergeCoincidingLabels } from '../../../src/sim/report/frontier-chart.js';
import { reportHtml } from '../../../src/sim/report/html.js';
import { withNormalizedCosts } from '../../../src/sim/report/normalize.js';
import type { RunResult } from '../../../src/world/run-result.js';
import { fakeRun } from './run-fixtures.js';

/** A run at a mean JCT and total cost (and value of time, in a sweep). */
function at(name: string, meanJctHours: number, cost: number, valueOfTime?: number | 'auto'): RunResult {
  const r = fakeRun(name, cost / 3, 3, 1, [1]);
  return {
    ...r,
    summary: {
      ...r.summary,
      meanJctHours,
      ...(valueOfTime === undefined ? {} : { valueOfTimePerJobHour: valueOfTime }),
    },
  };
}

/** Fourteen schedulers on 30 jobs: five Eva variants on one spot, others a few pixels off it. */
const MANY = [
  at('eva', 25.644, 2485.07),
  at('eva-full-only', 25.679, 2633.66),
  at('eva-partial-only', 24.259, 2897.64),
  at('eva-rp', 25.944, 2527.07),
  at('eva-single', 25.644, 2485.07),
  at('eva-latency-blind', 25.644, 2485.07),
  at('eva-latency-no-migration', 25.644, 2485.07),
  at('no-packing', 23.986, 3309.94),
  at('stratus', 25.008, 3866.57),
  at('synergy', 25.361, 4008.66),
  at('owl', 24.461, 3001.69),
  at('karpenter', 28.78, 3768.86),
  at('karpenter-balanced', 26.471, 3465.89),
  at('karpenter-when-empty', 24.967, 8266.12),
];

/** A value-of-time sweep: the learned value lands next to $0/h. */
const SWEEP = [
  at('eva@vot=0', 27.298, 4209.08, 0),
  at('eva@vot=0.5', 27.298, 4209.08, 0.5),
  at('eva@vot=4', 26.919, 4103.19, 4),
  at('eva@vot=14', 25.288, 4785.79, 14),
  at('eva@vot=auto', 27.188, 4183.71, 'auto'),
  at('no-packing', 24.628, 5708.81),
];

describe('frontier chart labels', () => {
  it('merges only points drawn on one another, however they chain', () => {
    // The plot is 350 px high: a, b, c and e sit 3 px apart in a chain (one mark, 9 px long); d is 7 px past e.
    const point = (label: string, px: number) => ({ label, y: 0.5 + px / 350 });
    const merged = mergeCoincidingLabels(
      [[point('a', 0)], [point('b', 3)], [point('c', 6), point('e', 9)], [point('d', 16)]],
      (p) => [0.5, p.y],
    );
    expect(merged).toEqual([['a, b, c, e'], [null], [null, null], [undefined]]);
  });

  let browser: Browser;
  beforeAll(async () => {
    if (!existsSync('/usr/bin/chromium'))
      throw new Error('/usr/bin/chromium is missing (apt-get install chromium)');
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox'],
    });
  });
  afterAll(async () => {
    await browser.close();
  });

  /** The frontier's point labels as Chromium draws them (text and box). */
  async function drawnLabels(runs: readonly RunResult[]) {
    const dir = await mkdtemp(join(tmpdir(), 'fleetwise-frontier-'));
    try {
      const path = join(dir, 'report.html');
      await writeFile(path, reportHtml(withNormalizedCosts(runs), {}), 'utf8');
      const tab = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      await tab.goto(pathToFileURL(path).href, { waitUntil: 'load' });
      await tab.waitForFunction(`document.querySelector('#chart-frontier.live svg') !== null`, undefined, {
        timeout: 20_000,
      });
      await tab.waitForTimeout(800);
      const option = frontierChart(withNormalizedCosts(runs)).chart.option as {
        series: {
          label: { formatter: string };
          data: { label: { show?: boolean; formatter?: string }; value: unknown[] }[];
        }[];
      };
      // A swept line's points print their value of time, another's its policy, a merged spot its own text.
      const texts = new Set(
        option.series.flatMap((s) =>
          s.data
            .filter((d) => d.label.show !== false)
            .map(
              (d) =>
                d.label.formatter ??
                (s.label.formatter === '{@[2]}' ? String(d.value[2]) : s.label.formatter),
            ),
        ),
      );
      // The labels only: legend entries and axis names are other texts of the chart.
      const grid = await tab.$eval('#chart-frontier svg', (svg) => svg.getBoundingClientRect().top);
      const boxes = await tab.$$eval('#chart-frontier svg text', (nodes) =>
        nodes.map((n) => {
          const r = n.getBoundingClientRect();
          return { text: n.textContent ?? '', left: r.left, right: r.right, top: r.top, bottom: r.bottom };
        }),
      );
      return { texts, labels: boxes.filter((b) => texts.has(b.text) && b.top > grid + 40) };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  for (const [name, runs] of [
    ['fourteen schedulers', MANY],
    ['a value-of-time sweep', SWEEP],
  ] as const)
    it(`never prints one label over another: ${name}`, async () => {
      const { texts, labels } = await drawnLabels(runs);
      expect(labels.length).toBe(texts.size);
      for (const a of labels)
        for (const b of labels)
          if (a !== b)
            expect(
              a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top,
              `"${a.text}" overlaps "${b.text}"`,
            ).toBe(true);
    }, 60_000);
});
