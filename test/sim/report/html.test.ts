import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reportHtml } from '../../../src/sim/report/html.js';
import { withNormalizedCosts } from '../../../src/sim/report/normalize.js';
import { writeReport } from '../../../src/sim/report/write.js';
import { fakeRun, twoRuns, unbalancedTags } from './run-fixtures.js';

const CHART_IDS = [
  'chart-cumulative-cost',
  'chart-running-instances',
  'chart-resource-allocation',
  'chart-jct-distribution',
  'chart-migrations',
];

describe('report.html', () => {
  const html = reportHtml(withNormalizedCosts(twoRuns()), { trace: 'tiny synthetic', seed: 1 });

  it('has one inline SVG per chart, in order', () => {
    expect(html.match(/<svg /g)).toHaveLength(5);
    const ids = [...html.matchAll(/<svg id="([^"]+)"/g)].map((m) => m[1]);
    expect(ids).toEqual(CHART_IDS);
    // The resource chart has a GPU, a vCPU and a memory panel.
    const resources = /<svg id="chart-resource-allocation"[\s\S]*?<\/svg>/.exec(html)?.[0] ?? '';
    expect(resources.match(/<g class="panel">/g)).toHaveLength(3);
    for (const dim of ['GPU', 'vCPU', 'Memory']) expect(resources).toContain(`>${dim}</text>`);
  });

  it('names every scheduler in the table and in each chart legend', () => {
    for (const name of ['no-packing', 'eva']) {
      expect(html).toContain(`<td>${name}</td>`);
      expect(html.split(`class="legend-label">${name}</text>`)).toHaveLength(6);
    }
  });

  it('shows hand-checkable summary values: costs, normalized cost, time-weighted utilization', () => {
    expect(html).toContain('<td class="num">9.00</td>');
    expect(html).toContain('<td class="num">100.0%</td>');
    expect(html).toContain('<td class="num">66.7%</td>');
    // eva: 1 GPU of 1, 4 vCPUs of 8, 16 GiB of 61 while running.
    expect(html).toMatch(
      /<td>eva<\/td>(<td class="num">[^<]*<\/td>){10}<td class="num">100\.0%<\/td><td class="num">50\.0%<\/td><td class="num">26\.2%<\/td>/,
    );
    expect(html).toContain('<tr class="cheapest"><td>eva</td>');
  });

  it('is self-contained and well-formed: no URLs, scripts or external resources', () => {
    expect(html.startsWith('<!doctype html>')).toBe(true);
    expect(html).not.toMatch(/https?:\/\//);
    expect(html).not.toMatch(/<script|<link|<img|\ssrc=|\shref=|@import/i);
    expect(unbalancedTags(html)).toEqual([]);
    expect(html).toContain('<dt>trace</dt><dd>tiny synthetic</dd>');
  });

  it('with bounds: states them in the summary and draws the timed bound dashed in the cost chart only', () => {
    const bounds = {
      workBound: 4.5,
      timedBound: 4.75,
      timedSeries: { timeSeconds: [0, 3600, 7200], cumulativeCost: [0, 3, 4.75] },
    };
    const page = reportHtml(withNormalizedCosts(twoRuns()), {}, bounds);
    // no-packing costs $9.00 in the fixture: 4.5 / 9 = 0.500.
    expect(page).toContain('no schedule can cost less than $4.50 (0.500 of no-packing)');
    expect(page).toContain('costs at least $4.75 (0.528 of no-packing)');
    const cost = /<svg id="chart-cumulative-cost"[\s\S]*?<\/svg>/.exec(page)?.[0] ?? '';
    expect(cost.match(/stroke-dasharray/g)).toHaveLength(2); // the line and its legend swatch
    expect(cost).toContain('>lower bound (fluid fleet, no delays)</text>');
    expect(page.match(/stroke-dasharray/g)).toHaveLength(2);
    expect(html).not.toContain('stroke-dasharray');
    expect(html).not.toContain('id="bounds"');
    expect(unbalancedTags(page)).toEqual([]);
  });

  it('escapes user-controlled names', () => {
    const page = reportHtml([fakeRun('<img src=x>', 1, 1, 1, [1])], {});
    expect(page).not.toContain('<img src=x>');
    expect(page).toContain('&lt;img src=x&gt;');
  });
});

describe('writeReport', () => {
  let dir = '';
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'fleetwise-report-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('writes report.json, runs.csv and report.html into a new directory', async () => {
    const out = join(dir, 'nested', 'out');
    const bounds = {
      workBound: 4.5,
      timedBound: 4.75,
      timedSeries: { timeSeconds: [0], cumulativeCost: [0] },
    };
    const paths = await writeReport(out, withNormalizedCosts(twoRuns()), { seed: 3 }, bounds);
    expect(paths.map((p) => p.slice(out.length + 1))).toEqual(['report.json', 'runs.csv', 'report.html']);
    const json = JSON.parse(await readFile(join(out, 'report.json'), 'utf8')) as {
      runs: { scheduler: string; normalizedCost: number | null }[];
      settings: { seed: number };
      bounds: unknown;
    };
    expect(json.bounds).toEqual({ workBound: 4.5, timedBound: 4.75 });
    expect(json.runs.map((r) => [r.scheduler, r.normalizedCost])).toEqual([
      ['no-packing', 1],
      ['eva', 6 / 9],
    ]);
    expect(json.settings.seed).toBe(3);
    expect((await readFile(join(out, 'runs.csv'), 'utf8')).trimEnd().split('\n')).toHaveLength(3);
    expect(await readFile(join(out, 'report.html'), 'utf8')).toContain('<svg id="chart-migrations"');
  });
});
