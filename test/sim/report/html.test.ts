import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { reportHtml } from '../../../src/sim/report/html.js';
import { withNormalizedCosts } from '../../../src/sim/report/normalize.js';
import { reportFiles } from '../../../src/sim/report/write.js';
import { seriesStyle } from '../../../src/report/palette.js';
import type { RunResult } from '../../../src/world/run-result.js';
import { fakeRun, twoRuns, unbalancedTags, withoutScripts } from './run-fixtures.js';

const CHART_IDS = [
  'chart-cumulative-cost',
  'chart-running-instances',
  'chart-resource-allocation',
  'chart-jct-distribution',
  'chart-frontier',
  'chart-migrations',
];

/** The static SVG drawn for one chart container. */
function chartSvg(page: string, id: string): string {
  return new RegExp(`<div class="chart" id="${id}"[^>]*>(<svg[\\s\\S]*?</svg>)</div>`).exec(page)?.[1] ?? '';
}

/** The chart's option, as the page's runtime reads it. */
function chartOption(page: string, id: string): { series: { name: string; type: string }[] } {
  const json = new RegExp(`<script type="application/json" data-chart="${id}">([\\s\\S]*?)</script>`).exec(
    page,
  )?.[1];
  return JSON.parse(json ?? 'null') as { series: { name: string; type: string }[] };
}

describe('report.html', () => {
  const html = reportHtml(withNormalizedCosts(twoRuns()), { trace: 'tiny synthetic', seed: 1, cap: null });

  it('has one chart per figure, in order, each a static SVG and its option for the page runtime', () => {
    const ids = [...html.matchAll(/<div class="chart" id="([^"]+)"/g)].map((m) => m[1]);
    expect(ids).toEqual(CHART_IDS);
    for (const id of CHART_IDS) {
      expect(chartSvg(html, id)).toMatch(/^<svg /);
      expect(chartOption(html, id).series.length).toBeGreaterThan(0);
    }
    // Resource allocation: a panel per run and resource (2 × 3), titled by resource.
    const resources = chartOption(html, 'chart-resource-allocation');
    expect(resources.series).toHaveLength(6);
    for (const dim of ['GPU', 'vCPU', 'Memory'])
      expect(chartSvg(html, 'chart-resource-allocation')).toContain(dim);
  });

  it('draws each scheduler in its own colour, the same whatever the order of the runs', () => {
    const reversed = reportHtml(withNormalizedCosts(twoRuns().reverse()), {});
    const colour = (page: string, name: string): unknown =>
      (
        chartOption(page, 'chart-cumulative-cost').series.find((s) => s.name === name) as unknown as {
          color: string;
        }
      ).color;
    expect(colour(html, 'eva')).toBe(colour(reversed, 'eva'));
    expect(colour(html, 'eva')).not.toBe(colour(html, 'no-packing'));
  });

  it('draws a learned value of time in its run’s colour in the frontier too, as in the summary and the other charts', () => {
    const at = (name: string, cost: number, meanJctHours: number, vot: number | 'auto'): RunResult => {
      const run = fakeRun(name, cost, 3, 1, [2]);
      return { ...run, summary: { ...run.summary, meanJctHours, valueOfTimePerJobHour: vot } };
    };
    const runs = withNormalizedCosts([
      at('eva@vot=0', 2, 3.1, 0),
      at('eva@vot=4', 2.4, 2.6, 4),
      at('eva@vot=auto', 2.2, 2.8, 'auto'),
      fakeRun('no-packing', 3, 3, 2, [2]),
    ]);
    const page = reportHtml(runs, {});
    const colourIn = (id: string, name: string): string | undefined =>
      (chartOption(page, id).series as unknown as { name: string; color: string }[]).find(
        (s) => s.name === name,
      )?.color;
    const swatch = /<span class="swatch" style="background:(#[0-9a-f]{6})"><\/span>eva@vot=auto</.exec(
      page,
    )?.[1];
    expect(swatch).toBeDefined();
    expect(colourIn('chart-cumulative-cost', 'eva@vot=auto')).toBe(swatch);
    expect(colourIn('chart-frontier', 'eva (auto value of time)')).toBe(swatch);
    // The swept line stands for eva, in eva's own colour; no-packing's point in its own.
    expect(colourIn('chart-frontier', 'eva')).toBe(seriesStyle('eva').color);
    expect(colourIn('chart-frontier', 'no-packing')).toBe(colourIn('chart-cumulative-cost', 'no-packing'));
  });

  it('leads with the saving in dollars against no-packing', () => {
    const lead = /<p class="lead" id="lead">([\s\S]*?)<\/p>/.exec(html)?.[1] ?? '';
    // eva $6 against no-packing $9.
    expect(lead.replace(/<[^>]+>/g, '')).toContain(
      'eva: $3.00 (33.3%) less than no-packing ($6.00 against $9.00)',
    );
  });

  it('says where the money went: the focus run against no-packing, in shares of each bill', () => {
    const [noPacking, eva] = withNormalizedCosts(twoRuns());
    if (noPacking === undefined || eva === undefined) throw new Error('fixture');
    const parts = { starting: 0, preparing: 0, checkpointing: 0, bootAndShutdown: 0 };
    // eva's $6: $4.80 work, $0.90 slowdown, $0.30 idle; no-packing's $9: $5.40 work, $3.60 idle.
    const runs = [
      { ...noPacking, costBreakdown: { ...parts, working: 5.4, slowdown: 0, idle: 3.6 } },
      { ...eva, costBreakdown: { ...parts, working: 4.8, slowdown: 0.9, idle: 0.3 } },
    ];
    const lead = (/<p class="lead" id="lead">([\s\S]*?)<\/p>/.exec(reportHtml(runs, {}))?.[1] ?? '').replace(
      /<[^>]+>/g,
      '',
    );
    expect(lead).toContain(
      'Of its bill, eva spent 80.0% on work, 15.0% on co-location slowdown and 5.0% on idle room ' +
        '(no-packing: 60.0% on work, 0.0% on co-location slowdown and 40.0% on idle room).',
    );
    // Without the ledger, no such sentence.
    expect(html).not.toContain('on idle room');
  });

  it('shows hand-checkable summary values, and explains every column', () => {
    expect(html).toContain('<td class="num">9.00</td>');
    expect(html).toContain('<td class="num">100.0%</td>');
    expect(html).toContain('<td class="num">66.7%</td>');
    // One table per group of columns, each keyed by the scheduler: cost and time, then the fleet (no spot, no queue).
    const tables = [...html.matchAll(/<table id="([^"]+)">/g)].map((m) => m[1]);
    expect(tables).toEqual(['summary-cost-and-time', 'summary-fleet']);
    const start = html.indexOf('<table id="summary-fleet">');
    const fleet = html.slice(start, html.indexOf('</table>', start));
    // eva: 1 GPU of 1, 4 vCPUs of 8, 16 GiB of 61 while running.
    expect(fleet).toMatch(
      /eva<\/td>(<td class="num">[^<]*<\/td>){3}<td class="num">100\.0%<\/td><td class="num">50\.0%<\/td><td class="num">26\.2%<\/td>/,
    );
    expect(html).toMatch(/<tr class="cheapest"><td><span class="swatch"[^>]*><\/span>eva<\/td>/);
    const headers = [...html.matchAll(/<th[ >][^>]*>/g)].map((m) => m[0]);
    expect(headers.length).toBeGreaterThan(10);
    for (const th of headers) expect(th).toMatch(/ title="[^"]{10,}"/);
    expect(html).toContain('<dt>full-reconf.</dt><dd>Share of planned rounds');
  });

  it('is self-contained and well-formed: no URLs or external resources, scripts inline', () => {
    expect(html.startsWith('<!doctype html>')).toBe(true);
    expect(withoutScripts(html)).not.toMatch(
      /<link|<img|\ssrc=|\shref=|@import|https?:\/\/(?!www\.w3\.org)/i,
    );
    expect(unbalancedTags(html)).toEqual([]);
    expect(html).toContain('<dt>trace</dt><dd>tiny synthetic</dd>');
    expect(html).toContain('<dt>cap</dt><dd>none</dd>');
  });

  it('is deterministic: the same runs give the same bytes', () => {
    expect(reportHtml(withNormalizedCosts(twoRuns()), { trace: 'tiny synthetic', seed: 1, cap: null })).toBe(
      html,
    );
  });

  it('with bounds: states them and the distance to them, and draws the timed bound dashed in the cost chart only', () => {
    const bounds = {
      workBound: 4.5,
      timedBound: 4.75,
      timedSeries: { timeSeconds: [0, 3600, 7200], cumulativeCost: [0, 3, 4.75] },
    };
    const page = reportHtml(withNormalizedCosts(twoRuns()), {}, bounds);
    // no-packing costs $9.00 in the fixture: 4.5 / 9 = 0.500.
    expect(page).toContain('no schedule can cost less than $4.50 (0.500 of no-packing)');
    expect(page).toContain('costs at least $4.75 (0.528 of no-packing)');
    // eva's $6 is $1.25 (26.3%) above the timed bound.
    expect(page).toContain('That is $1.25 (26.3%) above the lower bound of $4.75');
    const names = chartOption(page, 'chart-cumulative-cost').series.map((s) => s.name);
    expect(names).toContain('lower bound (fluid fleet, no delays)');
    expect(chartSvg(page, 'chart-cumulative-cost')).toContain('stroke-dasharray');
    expect(chartOption(page, 'chart-migrations').series.map((s) => s.name)).not.toContain(
      'lower bound (fluid fleet, no delays)',
    );
    expect(html).not.toContain('id="bounds"');
    expect(unbalancedTags(page)).toEqual([]);
    expect(page).toContain('<code>fleetwise bench bound</code>');
    expect(page).not.toContain('spot pool');
  });

  it('with bounds under a cap: marks the work bound at the end of the cost chart, not the timed bound’s pace', () => {
    const bounds = {
      workBound: 4.5,
      timedBound: 4.75,
      timedSeries: { timeSeconds: [0, 3600, 7200], cumulativeCost: [0, 3, 4.75] },
    };
    const runs = withNormalizedCosts(twoRuns());
    const costSeries = (page: string) =>
      chartOption(page, 'chart-cumulative-cost').series as unknown as {
        name: string;
        data: [number, number][];
        endLabel?: { formatter?: string };
      }[];
    const caption = (page: string) =>
      /id="chart-cumulative-cost"[\s\S]*?<figcaption>([\s\S]*?)<\/figcaption>/.exec(page)?.[1] ?? '';
    for (const capped of [
      { capDollarsPerHour: 40, capInstances: 'none (uncapped)', quotas: 'none' },
      { capDollarsPerHour: 'none (uncapped)', capInstances: 3, quotas: 'none' },
      { capDollarsPerHour: 'none (uncapped)', capInstances: 'none (uncapped)', quotas: 'p:gpus=4' },
    ]) {
      const page = reportHtml(runs, capped, bounds);
      const series = costSeries(page);
      expect(series.map((s) => s.name)).not.toContain('lower bound (fluid fleet, no delays)');
      const mark = series.find((s) => s.name === 'work bound (any schedule, total)');
      // One point: the work bound ($4.50) where the last run ended (3 h), labelled with its value.
      expect(mark?.data).toEqual([[3, 4.5]]);
      expect(mark?.endLabel?.formatter).toBe('work bound: $4.50');
      expect(caption(page)).toContain('Under a cap or quota jobs wait');
      // The lead, as the chart, measures the run against the work bound only: eva's $6 is $1.50 (33.3%) above it.
      const lead = (/<p class="lead" id="lead">([\s\S]*?)<\/p>/.exec(page)?.[1] ?? '').replace(
        /<[^>]+>/g,
        '',
      );
      expect(lead).toContain(
        'That is $1.50 (33.3%) above the work bound ($4.50), below which no schedule can go;',
      );
      expect(lead).not.toContain('$4.75');
    }
    // A capped run may cost less than the bound without delays: the lead prints no negative distance to it.
    const below = reportHtml(runs, { capDollarsPerHour: 40 }, { ...bounds, timedBound: 7 });
    const belowLead = /<p class="lead" id="lead">([\s\S]*?)<\/p>/.exec(below)?.[1] ?? '';
    expect(belowLead).toContain('above the work bound');
    expect(belowLead).not.toContain('$-');
    // Uncapped, as simulate states it: the timed bound's curve, dashed.
    const page = reportHtml(
      runs,
      { capDollarsPerHour: 'none (uncapped)', capInstances: 'none (uncapped)', quotas: 'none' },
      bounds,
    );
    const line = costSeries(page).find((s) => s.name === 'lower bound (fluid fleet, no delays)');
    expect(line?.data.at(-1)).toEqual([2, 4.75]);
    expect(costSeries(page).map((s) => s.name)).not.toContain('work bound (any schedule, total)');
    expect(caption(page)).toContain('Dashed grey: the timed lower bound');
  });

  it('with spot open and no-packing on demand: names it so wherever runs are compared with it, figures unchanged', () => {
    const spot = (spotShare: number) => ({
      interruptions: 0,
      lostWorkHours: 0,
      spotShare,
      rebalanceRecommendations: 0,
    });
    const [noPacking, eva] = twoRuns();
    if (noPacking === undefined || eva === undefined) throw new Error('fixture');
    const runs = withNormalizedCosts([
      { ...noPacking, spot: spot(0) },
      { ...eva, spot: spot(1) },
    ]);
    const bounds = {
      workBound: 4.5,
      timedBound: 4.75,
      atSpotPrices: true,
      timedSeries: { timeSeconds: [0, 3600, 7200], cumulativeCost: [0, 3, 4.75] },
    };
    const page = reportHtml(runs, {}, bounds);
    const lead = (/<p class="lead" id="lead">([\s\S]*?)<\/p>/.exec(page)?.[1] ?? '').replace(/<[^>]+>/g, '');
    expect(lead).toContain('eva: $3.00 (33.3%) less than no-packing (on demand) ($6.00 against $9.00)');
    // The normalised column: headed by its on-demand baseline, its figures as before.
    expect(page).toMatch(
      /<th class="num" scope="col" title="[^"]*bought no spot[^"]*">÷ no-packing \(on demand\)<\/th>/,
    );
    expect(page.includes('>norm. cost</th>')).toBe(false);
    expect(page).toContain('<td class="num">66.7%</td>');
    expect(page).toContain('The “÷ no-packing (on demand)” column');
    expect(page).toContain(
      "no schedule's instances can cost less than $4.50 (0.500 of no-packing (on demand))",
    );
    const frontier = chartOption(page, 'chart-frontier') as unknown as { yAxis: { name: string } };
    expect(frontier.yAxis.name).toBe('cost (No-Packing on demand = 1)');
    // Without spot, no-packing is plainly itself.
    const plainLead = (/<p class="lead" id="lead">([\s\S]*?)<\/p>/.exec(html)?.[1] ?? '').replace(
      /<[^>]+>/g,
      '',
    );
    expect(plainLead).toContain('less than no-packing ($6.00');
    expect(html.includes('>norm. cost</th>')).toBe(true);
    expect(withoutScripts(html).includes('on demand')).toBe(false);
  });

  it('with bounds at spot prices: says so and names the command that reproduces them', () => {
    const bounds = {
      workBound: 4.5,
      timedBound: 4.75,
      atSpotPrices: true,
      timedSeries: { timeSeconds: [0, 3600, 7200], cumulativeCost: [0, 3, 4.75] },
    };
    const page = reportHtml(withNormalizedCosts(twoRuns()), {}, bounds);
    expect(page).toContain('<code>fleetwise bench bound --spot on</code>');
    expect(page).toContain("each type at its cheapest spot pool's price where the job allows spot");
  });

  it('with spot open: the lead says what eva bought on spot, what reclaims cost it, and how it stands against the spot baselines', () => {
    const spot = (spotShare: number, interruptions: number, lostWorkHours: number) => ({
      interruptions,
      lostWorkHours,
      spotShare,
      rebalanceRecommendations: 0,
    });
    const runs = [
      // $9 and $4.50 against eva's $6: 33.3% less than the first, 33.3% more than the second.
      { ...fakeRun('skypilot-spot', 3, 3, 2, [2, 3]), spot: spot(1, 3, 0.25) },
      { ...fakeRun('eva', 2, 3, 1, [2.5, 3, null]), spot: spot(0.75, 2, 1.5) },
      { ...fakeRun('karpenter-spot', 1.5, 3, 1, [2, 3]), spot: spot(1, 0, 0) },
    ];
    const text = (page: string) =>
      (/<p class="lead" id="lead">([\s\S]*?)<\/p>/.exec(page)?.[1] ?? '').replace(/<[^>]+>/g, '');
    const lead = text(reportHtml(withNormalizedCosts(runs), {}));
    expect(lead).toContain(
      'eva bought 75.0% of its instance-hours on spot; 2 of its instances were reclaimed and interruptions lost ' +
        '1.500 job-hours of work.',
    );
    expect(lead).toContain(
      'Against the spot baselines, eva costs 33.3% less than skypilot-spot ($9.00 at a mean JCT of 2.500 h) ' +
        'and 33.3% more than karpenter-spot ($4.50 at 2.500 h).',
    );
    expect(reportHtml(withNormalizedCosts(runs), {})).toMatch(/<td class="num">75\.0%<\/td>/);
    const quiet = text(reportHtml([{ ...fakeRun('eva', 2, 3, 1, [2.5]), spot: spot(0.5, 0, 0) }], {}));
    expect(quiet).toContain('eva bought 50.0% of its instance-hours on spot; none was reclaimed.');
    expect(quiet).not.toContain('spot baselines');
    // karpenter-spot evicts at the notice and may end the emptied instance before EC2 takes it: work lost, none
    // reclaimed, and the lead says so rather than that nothing happened.
    const evicted = text(
      reportHtml([{ ...fakeRun('karpenter-spot', 2, 3, 1, [2.5]), spot: spot(1, 0, 11.29) }], {}),
    );
    expect(evicted).toContain(
      'karpenter-spot bought 100.0% of its instance-hours on spot; none was reclaimed, but evicting jobs at ' +
        'interruption notices lost 11.290 job-hours of work.',
    );
    // Without spot, nothing of it.
    expect(text(html)).not.toContain('on spot');
  });

  it('escapes user-controlled names', () => {
    const page = reportHtml([fakeRun('<img src=x>', 1, 1, 1, [1])], {});
    expect(page).not.toContain('<img src=x>');
    expect(page).toContain('&lt;img src=x&gt;');
  });
});

describe('reportFiles', () => {
  it('gives report.json, runs.csv and report.html for a directory, writing nothing', () => {
    const out = join(tmpdir(), 'fleetwise-report-never-written', 'out');
    const bounds = {
      workBound: 4.5,
      timedBound: 4.75,
      timedSeries: { timeSeconds: [0], cumulativeCost: [0] },
    };
    const files = reportFiles(out, withNormalizedCosts(twoRuns()), { seed: 3 }, bounds);
    expect(files.map((f) => f.path.slice(out.length + 1))).toEqual([
      'report.json',
      'runs.csv',
      'report.html',
    ]);
    expect(existsSync(out)).toBe(false);
    const [json, csv, html] = files.map((f) => f.text);
    const report = JSON.parse(json ?? '') as {
      runs: { scheduler: string; normalizedCost: number | null }[];
      settings: { seed: number };
      bounds: unknown;
    };
    expect(report.bounds).toEqual({ workBound: 4.5, timedBound: 4.75 });
    expect(report.runs.map((r) => [r.scheduler, r.normalizedCost])).toEqual([
      ['no-packing', 1],
      ['eva', 6 / 9],
    ]);
    expect(report.settings.seed).toBe(3);
    expect((csv ?? '').trimEnd().split('\n')).toHaveLength(3);
    expect(html).toContain('<div class="chart" id="chart-migrations"');
  });
});
