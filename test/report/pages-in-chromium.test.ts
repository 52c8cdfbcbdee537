import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { armsHtml } from '../../src/bench/arms-html.js';
import { attributeCosts, type BilledInstance } from '../../src/controller/cost-accounting.js';
import { buildReportDocument, reportHtml as costReportHtml } from '../../src/controller/reports.js';
import { generateCandidates } from '../../src/queue/tune.js';
import { reportHtml } from '../../src/sim/report/html.js';
import { withNormalizedCosts } from '../../src/sim/report/normalize.js';
import { tuneHtml } from '../../src/sim/report/tune-html.js';
import { controllerYaml, tuneJson, type CandidateOutcome } from '../../src/sim/report/tune-json.js';
import { armsFixture } from '../bench/arms-fixture.js';
import { fakeRun } from '../sim/report/run-fixtures.js';
import type { RunResult } from '../../src/world/run-result.js';

/**
 * Every HTML page fleetwise writes (report.html, tune.html, the controller's cost report, arms.html), loaded in headless
 * Chromium: no console error, no page error, no request leaving the file, and every chart drawn live by the inline
 * ECharts. Chromium is Debian's (`apt-get install chromium`); without it this fails rather than skips, since nothing
 * else checks that the pages' scripts run. With FLEETWISE_PAGE_SCREENSHOTS=<dir>, full-page screenshots go there.
 */
const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

function simulationPage(): string {
  const runs = withNormalizedCosts([
    fakeRun('eva', 2, 3, 1, [2.5, 3, null]),
    fakeRun('no-packing', 3, 3, 2, [2, 3]),
    fakeRun('stratus', 2.6, 3.5, 2, [1.5, 3.2]),
    fakeRun('synergy', 2.8, 3, 2, [2.2, 2.9]),
    fakeRun('owl', 2.4, 4, 3, [0.5, 3.5]),
    fakeRun('karpenter', 2.2, 3.2, 2, [2.1, 4]),
  ]);
  const bounds = {
    workBound: 4.5,
    timedBound: 4.75,
    timedSeries: { timeSeconds: [0, 3600, 7200, 10_800], cumulativeCost: [0, 2, 3.5, 4.75] },
  };
  return reportHtml(runs, { trace: 'fixture', seed: 1, capDollarsPerHour: null }, bounds);
}

/** A value-of-time sweep: eva at three values (cheaper and slower as time is worth less) and three baselines. */
function sweepPage(): string {
  const at = (run: RunResult, meanJctHours: number, valueOfTimePerJobHour?: number): RunResult => ({
    ...run,
    summary: {
      ...run.summary,
      meanJctHours,
      ...(valueOfTimePerJobHour === undefined ? {} : { valueOfTimePerJobHour }),
    },
  });
  const runs = withNormalizedCosts([
    at(fakeRun('eva@vot=0', 2, 3, 1, [2.5, 3]), 3.1, 0),
    at(fakeRun('eva@vot=1', 2.15, 3, 1, [2.4, 3]), 2.8, 1),
    at(fakeRun('eva@vot=4', 2.4, 3, 1, [2.2, 3]), 2.6, 4),
    at(fakeRun('no-packing', 3, 3, 2, [2, 3]), 2.5),
    at(fakeRun('owl', 2.5, 3, 2, [2.1, 3]), 2.65),
    at(fakeRun('karpenter-balanced', 2.2, 3, 2, [2.6, 3.4]), 3.2),
  ]);
  return reportHtml(runs, { trace: 'fixture', seed: 1, valueOfTimePerJobHour: '0, 1, 4' });
}

function tunePage(): string {
  const candidates = generateCandidates([60, 120, 600, 1200, 3600, 7200, 36_000, 72_000], {
    samples: 5,
    seed: 1,
    classCounts: [1, 2, 3],
    orderings: ['fifo'],
  });
  const outcomes = candidates.map((_, i): CandidateOutcome => {
    const base = fakeRun('eva', 2, 3, 1, [1, 2]);
    return {
      ok: true,
      result: {
        ...base,
        summary: { ...base.summary, meanJctHours: 2 + (i % 4) },
        queue: {
          p99JctHours: 5,
          unfairness: 10 + ((i * 37) % 50),
          predErrAvg: 5,
          predErrP99: 20 + ((i * 13) % 40),
          successfulSojournMeanHours: 2,
          preemptions: 0,
        },
      },
    };
  });
  const j = tuneJson(candidates, outcomes, 'balanced');
  return tuneHtml({
    settings: { trace: 'fixture' },
    ...j,
    controllerYaml: controllerYaml(j.recommended.config),
  });
}

function costPage(): string {
  const T0 = 1_700_000_000;
  const instances: BilledInstance[] = [
    {
      id: 'inst-1',
      typeName: 'c7i.xlarge',
      costPerHour: 0.1785,
      fromSeconds: T0,
      terminatedAtSeconds: T0 + 3600,
    },
    {
      id: 'inst-2',
      typeName: 'p3.2xlarge',
      costPerHour: 3.06,
      fromSeconds: T0 + 1800,
      terminatedAtSeconds: undefined,
    },
  ];
  const report = attributeCosts({
    instances,
    placements: [
      {
        taskId: 'job-1.0',
        jobId: 'job-1',
        instanceId: 'inst-1',
        fromSeconds: T0,
        toSeconds: T0 + 3000,
        kind: 'work',
      },
      {
        taskId: 'job-2.0',
        jobId: 'job-2',
        instanceId: 'inst-2',
        fromSeconds: T0 + 1800,
        toSeconds: T0 + 5400,
        kind: 'work',
      },
    ],
    reservationPrice: () => 1,
    jobs: new Map([
      ['job-1', { id: 'job-1', name: 'cifar', team: 'red' }],
      ['job-2', { id: 'job-2', name: 'gpt2', team: 'blue' }],
    ]),
    sinceSeconds: T0,
    nowSeconds: T0 + 5400,
  });
  return costReportHtml(buildReportDocument({ cluster: 'demo', reason: 'hourly', report, instances }));
}

const PAGES: readonly { name: string; html: () => string; charts: number }[] = [
  { name: 'report.html', html: simulationPage, charts: 6 },
  { name: 'report-sweep.html', html: sweepPage, charts: 6 },
  { name: 'tune.html', html: tunePage, charts: 2 },
  { name: 'costs.html', html: costPage, charts: 3 },
  { name: 'arms.html', html: () => armsHtml(armsFixture()), charts: 2 },
];

describe('HTML pages in headless Chromium', () => {
  let browser: Browser | undefined;
  let dir = '';

  beforeAll(async () => {
    if (!existsSync(CHROMIUM))
      throw new Error(
        `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium) to check the pages`,
      );
    dir = await mkdtemp(join(tmpdir(), 'fleetwise-pages-'));
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    if (dir !== '') await rm(dir, { recursive: true, force: true });
  });

  for (const page of PAGES)
    it(`${page.name}: loads without errors and draws its ${page.charts} charts live`, async () => {
      if (browser === undefined) throw new Error('Chromium did not start');
      const path = join(dir, page.name);
      await writeFile(path, page.html(), 'utf8');
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const tab = await context.newPage();
      const problems: string[] = [];
      tab.on('console', (m) => {
        if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`);
      });
      tab.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
      // Self-contained: the page may load nothing but itself.
      tab.on('request', (r) => {
        if (r.url() !== pathToFileURL(path).href) problems.push(`request: ${r.url()}`);
      });
      await tab.goto(pathToFileURL(path).href, { waitUntil: 'load' });
      // A string: the test's TypeScript has no DOM types, the page evaluates it.
      await tab.waitForFunction(
        `document.querySelectorAll('.chart.live').length === ${page.charts}`,
        undefined,
        {
          timeout: 20_000,
        },
      );
      // Every live chart drew something: ECharts' SVG with paths and text in it.
      const drawn = await tab.$$eval('.chart.live', (charts) =>
        charts.map((c) => c.querySelectorAll('svg path, svg text').length),
      );
      expect(drawn).toHaveLength(page.charts);
      for (const count of drawn) expect(count).toBeGreaterThan(5);
      // The tooltip works: hovering a chart's plot raises no error either.
      const box = await tab.locator('.chart.live').first().boundingBox();
      if (box !== null) await tab.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
      await tab.waitForTimeout(100);
      const screenshots = process.env.FLEETWISE_PAGE_SCREENSHOTS;
      if (screenshots !== undefined && screenshots !== '') {
        await mkdir(screenshots, { recursive: true });
        await tab.screenshot({ path: join(screenshots, `${page.name}.png`), fullPage: true });
      }
      await context.close();
      expect(problems).toEqual([]);
    }, 60_000);

  it('report.html of a value-of-time sweep draws eva as one line through its values, next to each baseline', async () => {
    if (browser === undefined) throw new Error('Chromium did not start');
    const path = join(dir, 'sweep-frontier.html');
    await writeFile(path, sweepPage(), 'utf8');
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const tab = await context.newPage();
    await tab.goto(pathToFileURL(path).href, { waitUntil: 'load' });
    await tab.waitForFunction(`document.querySelector('#chart-frontier.live svg') !== null`, undefined, {
      timeout: 20_000,
    });
    await tab.waitForTimeout(1500);
    const texts = await tab.$$eval('#chart-frontier svg text', (nodes) => nodes.map((n) => n.textContent));
    await context.close();
    // Each value of time labels eva's point, each baseline its own; eva is one legend entry, not three.
    for (const label of ['$0/h', '$1/h', '$4/h', 'no-packing', 'owl', 'karpenter-balanced'])
      expect(texts).toContain(label);
    expect(texts.filter((t) => t === 'eva')).toHaveLength(1);
    expect(texts.some((t) => t?.startsWith('eva@') === true)).toBe(false);
  }, 60_000);

  /**
   * Where each panel chart's texts (panel titles, axis labels) lie: the chart's box, what clips it, and how far its
   * page or scrolling box lets a reader go. Texts whose right end is past either are out of reach.
   */
  async function panelReach(
    html: string,
    name: string,
    selector: string,
    width: number,
  ): Promise<{ id: string; texts: string[]; unreachable: string[]; scrolls: boolean }[]> {
    if (browser === undefined) throw new Error('Chromium did not start');
    const path = join(dir, name);
    await writeFile(path, html, 'utf8');
    const context = await browser.newContext({ viewport: { width, height: 900 } });
    const tab = await context.newPage();
    await tab.goto(pathToFileURL(path).href, { waitUntil: 'load' });
    await tab.waitForFunction(
      `[...document.querySelectorAll(${JSON.stringify(selector)})].every((c) => c.classList.contains('live'))`,
      undefined,
      { timeout: 20_000 },
    );
    // A string: the test's TypeScript has no DOM types, the page evaluates it.
    const reach =
      (await tab.evaluate(`[...document.querySelectorAll(${JSON.stringify(selector)})].map((chart) => {
      let scroller = chart.parentElement;
      while (scroller !== null && !['auto', 'scroll'].includes(getComputedStyle(scroller).overflowX))
        scroller = scroller.parentElement;
      const box = chart.getBoundingClientRect();
      // How far right a reader can go: the scrolling box's whole content, else the page's.
      const limit = scroller === null
        ? document.documentElement.scrollWidth - window.scrollX
        : scroller.getBoundingClientRect().left - scroller.scrollLeft + scroller.scrollWidth;
      const texts = [...chart.querySelectorAll('svg text')].filter((t) => t.textContent.trim() !== '');
      return {
        id: chart.id,
        texts: texts.map((t) => t.textContent),
        unreachable: texts
          .filter((t) => t.getBoundingClientRect().right > Math.min(box.right, limit) + 1)
          .map((t) => t.textContent),
        scrolls: scroller !== null && scroller.scrollWidth > scroller.clientWidth,
      };
    })`)) as { id: string; texts: string[]; unreachable: string[]; scrolls: boolean }[];
    await context.close();
    return reach;
  }

  it('panel charts at 800 px: every panel drawn and within reach, the chart scrolling sideways', async () => {
    const report = await panelReach(
      simulationPage(),
      'panels-800.html',
      '#chart-running-instances, #chart-resource-allocation',
      800,
    );
    expect(report.map((c) => c.id)).toEqual(['chart-running-instances', 'chart-resource-allocation']);
    for (const chart of report) {
      expect(chart.unreachable, chart.id).toEqual([]);
      expect(chart.scrolls, chart.id).toBe(true);
    }
    // The last column's panels: karpenter's instances (the sixth run), and the memory column.
    expect(report[0]?.texts).toContain('karpenter');
    expect(report[1]?.texts).toContain('Memory (allocated ÷ provisioned)');
    // arms.html: four metrics to a row (b compares four, c three: no barrier-idle cost).
    const arms = await panelReach(armsHtml(armsFixture()), 'arms-800.html', '.chart[id^="arms-"]', 800);
    expect(arms.map((c) => c.texts.filter((t) => t.startsWith('Δ ')).length)).toEqual([4, 3]);
    for (const chart of arms) {
      expect(chart.unreachable, chart.id).toEqual([]);
      expect(chart.scrolls, chart.id).toBe(true);
    }
  }, 60_000);

  it('panel charts of one run at 800 px: running instances in view unscrolled, allocation scrolling to memory', async () => {
    const page = reportHtml(withNormalizedCosts([fakeRun('eva', 2, 3, 1, [2.5, 3])]), { trace: 'fixture' });
    const report = await panelReach(
      page,
      'panels-one-800.html',
      '#chart-running-instances, #chart-resource-allocation',
      800,
    );
    expect(report.map((c) => c.id)).toEqual(['chart-running-instances', 'chart-resource-allocation']);
    const [instances, allocation] = report;
    for (const chart of report) expect(chart.unreachable, chart.id).toEqual([]);
    // One panel, in the page's width: nothing to scroll onto but blank room.
    expect(instances?.texts).toContain('eva');
    expect(instances?.scrolls).toBe(false);
    // Three resources side by side still need the whole width.
    expect(allocation?.texts).toContain('Memory (allocated ÷ provisioned)');
    expect(allocation?.scrolls).toBe(true);
  }, 60_000);

  it('panel charts at 1400 px: the whole chart in view, nothing to scroll', async () => {
    const report = await panelReach(
      simulationPage(),
      'panels-1400.html',
      '#chart-running-instances, #chart-resource-allocation',
      1400,
    );
    const arms = await panelReach(armsHtml(armsFixture()), 'arms-1400.html', '.chart[id^="arms-"]', 1400);
    expect([...report, ...arms]).toHaveLength(4);
    for (const chart of [...report, ...arms]) {
      expect(chart.unreachable, chart.id).toEqual([]);
      expect(chart.scrolls, chart.id).toBe(false);
    }
  }, 60_000);

  it('report.html shows its charts as static SVG with scripts off', async () => {
    if (browser === undefined) throw new Error('Chromium did not start');
    const path = join(dir, 'static.html');
    await writeFile(path, simulationPage(), 'utf8');
    const context = await browser.newContext({ javaScriptEnabled: false });
    const tab = await context.newPage();
    await tab.goto(pathToFileURL(path).href);
    const drawn = await tab.$$eval('.chart > svg', (svgs) =>
      svgs.map((s) => s.querySelectorAll('path').length),
    );
    await context.close();
    expect(drawn).toHaveLength(6);
    for (const count of drawn) expect(count).toBeGreaterThan(5);
  }, 60_000);
});
