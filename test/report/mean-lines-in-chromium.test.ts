import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { armsHtml } from '../../src/bench/arms-html.js';
import { differenceText } from '../../src/bench/arms-report.js';
import { pairedDifferences, type ArmFigures } from '../../src/bench/paired-arms.js';
import { reportHtml } from '../../src/sim/report/html.js';
import { withNormalizedCosts } from '../../src/sim/report/normalize.js';
import { armsFixture } from '../bench/arms-fixture.js';
import { fakeRun } from '../sim/report/run-fixtures.js';

/**
 * The dashed mean lines of the live charts (arms.html's panels, report.html's resource allocation) drawn where the
 * mean they label lies on their axis, whatever its size: ECharts would place a mark line at its value rounded to two
 * decimals, which moves a small mean (a difference of −0.0084%) by a large part of a panel.
 */
const CHROMIUM = '/usr/bin/chromium';

/** A drawn mean line: its panel, the mean it marks, where the axis puts that mean and where the line was drawn. */
interface MeanLine {
  readonly chart: string;
  readonly panel: string;
  readonly mean: number;
  readonly meanAtPx: number;
  readonly drawnAtPx: readonly number[];
}

/**
 * Evaluated in the page (a string: the test's TypeScript has no DOM types). For each series with a horizontal mark
 * line: the pixel row its axis gives the mean, and the rows of the dashed horizontal lines drawn across its grid.
 */
const MEAN_LINES = `(() => {
  const out = [];
  document.querySelectorAll('.chart.live').forEach((el) => {
    const chart = echarts.getInstanceByDom(el);
    const option = chart.getOption();
    const lines = [...el.querySelectorAll('path[stroke-dasharray]')]
      .filter((p) => p.getAttribute('stroke') === '#222')
      .map((p) => /^M(\\S+) (\\S+)L(\\S+) (\\S+)$/.exec(p.getAttribute('d') || ''))
      .filter((m) => m !== null)
      .map((m) => m.slice(1).map(Number));
    option.series.forEach((s, i) => {
      const mark = s.markLine && s.markLine.data && s.markLine.data[0];
      if (!mark || typeof mark.yAxis !== 'number') return;
      const gridIndex = option.yAxis[s.yAxisIndex].gridIndex || 0;
      const rect = chart.getModel().getComponent('grid', gridIndex).coordinateSystem.getRect();
      const meanAtPx = chart.convertToPixel({ seriesIndex: i }, [0, mark.yAxis])[1];
      const drawnAtPx = lines
        .filter(([x1, y1, x2, y2]) => y1 === y2 && Math.abs(x1 - rect.x) < 2)
        .filter(([, , x2]) => Math.abs(x2 - rect.x - rect.width) < 2)
        .filter(([, y]) => y >= rect.y - 1 && y <= rect.y + rect.height + 1)
        .map(([, y]) => y);
      out.push({ chart: el.id, panel: s.name, mean: mark.yAxis, meanAtPx, drawnAtPx });
    });
  });
  return out;
})()`;

/** The fixture with arm `b` costing 0.009%, 0.008%, 0.0086% and 0.008% less than `a`: a mean of −0.0084%. */
function smallMeanArms(): ReturnType<typeof armsFixture> {
  const fixture = armsFixture();
  const a = fixture.runs['a'] ?? [];
  const cheaper = [0.009, 0.008, 0.0086, 0.008];
  const b: ArmFigures[] = (fixture.runs['b'] ?? []).map((r, i) => ({
    ...r,
    totalCost: (a[i]?.totalCost ?? 0) * (1 - (cheaper[i] ?? 0) / 100),
  }));
  return {
    ...fixture,
    runs: { ...fixture.runs, b },
    comparisons: { ...fixture.comparisons, b: pairedDifferences(a, b) },
  };
}

describe('mean lines in headless Chromium', () => {
  let browser: Browser | undefined;
  let dir = '';

  beforeAll(async () => {
    if (!existsSync(CHROMIUM))
      throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`);
    dir = await mkdtemp(join(tmpdir(), 'fleetwise-mean-lines-'));
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox'] });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    if (dir !== '') await rm(dir, { recursive: true, force: true });
  });

  /** The page's mean lines once all its charts are drawn live, and its SVG texts. */
  async function meanLines(name: string, html: string): Promise<[MeanLine[], string[]]> {
    if (browser === undefined) throw new Error('Chromium did not start');
    const path = join(dir, name);
    await writeFile(path, html, 'utf8');
    const tab = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    try {
      await tab.goto(pathToFileURL(path).href, { waitUntil: 'load' });
      await tab.waitForFunction(
        `document.querySelectorAll('.chart.live').length === document.querySelectorAll('script[data-chart]').length`,
        undefined,
        { timeout: 20_000 },
      );
      const lines = (await tab.evaluate(MEAN_LINES)) as MeanLine[];
      const texts = await tab.$$eval('.chart.live svg text', (nodes) =>
        nodes.map((n) => n.textContent ?? ''),
      );
      return [lines, texts];
    } finally {
      await tab.close();
    }
  }

  /** Every line drawn once, within a pixel of its mean. */
  function expectAtTheirMeans(lines: readonly MeanLine[]): void {
    for (const line of lines) {
      const where = `${line.chart} ${line.panel} (mean ${line.mean})`;
      expect(line.drawnAtPx, where).toHaveLength(1);
      expect(Math.abs((line.drawnAtPx[0] ?? Infinity) - line.meanAtPx), where).toBeLessThanOrEqual(1);
    }
  }

  it('arms.html draws a mean of −0.0084% at its place on the axis, labelled as the page writes it', async () => {
    const report = smallMeanArms();
    const cost = report.comparisons['b']?.find((d) => d.metric === 'totalCost');
    const mean = cost?.meanPercent;
    if (cost === undefined || mean === null || mean === undefined) throw new Error('no cost difference');
    expect(mean).toBeCloseTo(-0.0084, 10);
    const [lines, texts] = await meanLines('arms.html', armsHtml(report));
    const small = lines.find((l) => l.chart === 'arms-b' && Math.abs(l.mean - mean) < 1e-12);
    expect(small, 'the cost panel of b keeps its mean unrounded').toBeDefined();
    expectAtTheirMeans(lines);
    expect(texts).toContain(`mean ${differenceText(cost, mean)}`);
  }, 60_000);

  it("report.html draws each run's mean allocation at its place on the axis", async () => {
    const runs = withNormalizedCosts([
      fakeRun('eva', 2, 3, 1, [2.5, 3]),
      fakeRun('no-packing', 3, 3, 2, [2, 3]),
    ]);
    const [lines] = await meanLines('report.html', reportHtml(runs, { trace: 'fixture', seed: 1 }));
    const allocation = lines.filter((l) => l.chart === 'chart-resource-allocation');
    expect(allocation.length).toBeGreaterThan(0);
    expectAtTheirMeans(allocation);
  }, 60_000);
});
