import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { generateCandidates } from '../../../src/queue/tune.js';
import { parseWfqConfig } from '../../../src/queue/wfq.js';
import { describeConfig, tuneHtml } from '../../../src/sim/report/tune-html.js';
import {
  controllerYaml,
  objectivesOf,
  tuneJson,
  type CandidateOutcome,
  type TuneReport,
} from '../../../src/sim/report/tune-json.js';
import type { RunResult } from '../../../src/world/run-result.js';
import { fakeRun, unbalancedTags, withoutScripts } from './run-fixtures.js';

const sizes = [60, 120, 600, 1200, 3600, 7200, 36_000, 72_000];
const candidates = generateCandidates(sizes, {
  samples: 5,
  seed: 1,
  classCounts: [1, 2, 3],
  orderings: ['fifo'],
});

function run(meanJctHours: number, predErrP99: number | null, unfairness: number | null): CandidateOutcome {
  const base = fakeRun('eva', 2, 3, 1, [1, 2]);
  const result: RunResult = {
    ...base,
    summary: { ...base.summary, meanJctHours },
    queue: {
      p99JctHours: 2,
      unfairness,
      predErrAvg: predErrP99,
      predErrP99,
      successfulSojournMeanHours: 1.5,
      preemptions: 0,
    },
  };
  return { ok: true, result };
}

describe('tuneJson', () => {
  const outcomes: CandidateOutcome[] = [
    run(3, 0, 50), // FIFO-like: exact predictions, slow, unfair
    run(2, 30, 10),
    run(2.5, 40, 20), // dominated by the previous one
    { ok: false, error: 'did not finish' },
    run(1.5, 60, 15),
  ];

  it('marks the non-dominated rows, keeps candidate order, recommends a front row', () => {
    const j = tuneJson(candidates, outcomes, 'balanced');
    expect(Object.keys(j)).toEqual(['front', 'recommended', 'evaluated']);
    expect(j.evaluated.map((r) => r.id)).toEqual(candidates.map((c) => c.id));
    expect(j.front.map((r) => r.id)).toEqual(['c0', 'c1', 'c4']);
    expect(j.evaluated.map((r) => r.onFront)).toEqual([true, true, false, false, true]);
    expect(j.front.map((r) => r.id)).toContain(j.recommended.id);
    expect(j.recommended.preference).toBe('balanced');
    expect(tuneJson(candidates, outcomes, 'pred').recommended.id).toBe('c0');
    expect(tuneJson(candidates, outcomes, 'jct').recommended.id).toBe('c4');
  });

  it('records a failed run with null objectives and its error, off the front', () => {
    const failed = tuneJson(candidates, outcomes, 'balanced').evaluated[3];
    expect(failed).toMatchObject({
      error: 'did not finish',
      meanJctHours: null,
      predErrP99: null,
      unfairness: null,
      totalCost: null,
      onFront: false,
    });
  });

  it('describes each row from its config: thresholds, weights, class count', () => {
    for (const r of tuneJson(candidates, outcomes, 'balanced').evaluated) {
      const c = candidates.find((x) => x.id === r.id);
      expect(r.config).toEqual(c?.config);
      expect(r.classes).toBe(r.config.classes.length);
      expect(r.thresholdsSeconds).toHaveLength(r.classes - 1);
      expect(r.weights.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 9);
    }
  });

  it("reports the largest class's ceiling when a candidate has one", () => {
    const [first, second] = candidates;
    const last = second!.config.classes.length - 1;
    const capped = {
      ...second!,
      config: {
        ...second!.config,
        classes: second!.config.classes.map((k, i) => (i === last ? { ...k, maxShare: 0.4 } : k)),
      },
    };
    const rows = tuneJson([first!, capped], [run(3, 0, 50), run(2, 30, 10)], 'balanced').evaluated;
    expect(rows.map((r) => r.largestClassMaxShare)).toEqual([null, 0.4]);
    expect(describeConfig(rows[1]!)).toMatch(/, largest class at most 0\.4$/);
    expect(describeConfig(rows[0]!)).not.toMatch(/at most/);
  });

  it('throws when every candidate failed, quoting the first error', () => {
    const all = candidates.map((): CandidateOutcome => ({ ok: false, error: 'boom' }));
    expect(() => tuneJson(candidates, all, 'balanced')).toThrow('every candidate failed to simulate: boom');
  });

  it('takes a mean JCT only when some job finished', () => {
    const none: RunResult = fakeRun('eva', 2, 3, 1, [null, null]);
    expect(objectivesOf({ ok: true, result: none }).meanJctHours).toBeNull();
    expect(objectivesOf({ ok: true, result: none }).predErrP99).toBeNull();
  });
});

describe('controllerYaml', () => {
  it('round-trips through the controller schema under `queue:`, comment lines first', () => {
    const config = candidates[2]!.config;
    const text = controllerYaml(config, 'tuned on X\nmean JCT 1 h');
    expect(text.split('\n').slice(0, 3)).toEqual(['# tuned on X', '# mean JCT 1 h', 'queue:']);
    const doc = parse(text) as { queue: unknown };
    expect(Object.keys(doc)).toEqual(['queue']);
    expect(parseWfqConfig(doc.queue)).toEqual(config);
  });
});

describe('tuneHtml', () => {
  function report(outcomes: readonly CandidateOutcome[]): TuneReport {
    const j = tuneJson(candidates, outcomes, 'balanced');
    return { settings: { trace: 'x <y>' }, ...j, controllerYaml: controllerYaml(j.recommended.config) };
  }

  function option(page: string, id: string): { series: { name: string; data: { name: string }[] }[] } {
    const json = new RegExp(`<script type="application/json" data-chart="${id}">([\\s\\S]*?)</script>`).exec(
      page,
    )?.[1];
    return JSON.parse(json ?? 'null') as { series: { name: string; data: { name: string }[] }[] };
  }
  const names = (page: string, id: string, series: string): string[] =>
    option(page, id)
      .series.find((s) => s.name === series)
      ?.data.map((d) => d.name) ?? [];

  it('is self-contained, well-formed, with two charts, the ringed recommendation and every row', () => {
    const html = tuneHtml(
      report([run(3, 0, 50), run(2, 30, 10), run(2.5, 40, 20), run(1, 0, 1), run(4, 4, 4)]),
    );
    expect(withoutScripts(html)).not.toMatch(/https?:\/\/(?!www\.w3\.org)|<link|\ssrc=/);
    expect(unbalancedTags(html)).toEqual([]);
    expect(html.match(/<div class="chart" id="/g)).toHaveLength(2);
    expect(html.match(/<svg /g)).toHaveLength(2);
    // c3 dominates everything: the only front point, ringed in both charts.
    for (const id of ['chart-jct-pred', 'chart-jct-unfairness']) {
      expect(names(html, id, 'recommended')).toEqual(['c3']);
      expect(names(html, id, 'Pareto front')).toEqual(['c3']);
    }
    expect(html.match(/<tr class="front recommended">/g)).toHaveLength(1);
    expect(html.match(/<tr[ >]/g)).toHaveLength(1 + candidates.length);
    expect(html).toContain('x &lt;y&gt;');
    expect(html).toContain('queue:');
    // Cost is a column; 𝒲 and unfairness are explained.
    expect(html).toMatch(/<th class="num" scope="col" title="[^"]+">cost \$<\/th>/);
    expect(html).toContain('<dt>𝒲 (weight decay)</dt>');
    expect(html).toContain('<dt>unfairness</dt>');
  });

  it('gives size thresholds in hours', () => {
    const rows = tuneJson(
      candidates,
      candidates.map((_, i) => run(1 + i, 1, 1)),
      'balanced',
    ).evaluated;
    const twoClasses = rows.find((r) => r.classes === 2);
    expect(twoClasses).toBeDefined();
    expect(describeConfig(twoClasses!)).toMatch(/≤\d+(\.\d+)? h \(p\d/);
  });

  it('lists points without a prediction error under the chart instead of drawing them', () => {
    const html = tuneHtml(report(candidates.map((_, i) => run(1 + i, null, 10 - i))));
    expect(html).toContain('Not drawn, without a p99 prediction error (%) or a mean JCT:');
    expect(option(html, 'chart-jct-pred').series.every((s) => s.data.length === 0)).toBe(true);
  });

  it('draws configs with the same results apart, and says so in their tooltips', () => {
    const html = tuneHtml(report(candidates.map(() => run(2, 10, 10))));
    const points = option(html, 'chart-jct-unfairness').series.flatMap((s) =>
      s.name === 'recommended' ? [] : (s.data as unknown as { value: number[]; tip: string }[]),
    );
    expect(points).toHaveLength(candidates.length);
    expect(new Set(points.map((p) => p.value.slice(0, 2).join())).size).toBe(candidates.length);
    expect(points.every((p) => p.tip.includes('drawn slightly apart'))).toBe(true);
  });

  it('labels both ends of a colour bar with the precision of the table', () => {
    const html = tuneHtml(
      report([run(3, 0, 101), run(2, 30, 46.88), run(2.5, 40, 60), run(1, 2, 70), run(4, 4, 80)]),
    );
    const bar = (id: string): unknown =>
      (option(html, id) as unknown as { visualMap: { text: unknown } }).visualMap.text;
    expect(bar('chart-jct-pred')).toEqual(['mean unfairness (%)\nhigh: 101.0', 'low: 46.9']);
    expect(bar('chart-jct-unfairness')).toEqual(['p99 prediction error (%)\nhigh: 40.0', 'low: 0.0']);
  });

  it('counts one config in the singular', () => {
    const j = tuneJson(candidates.slice(0, 1), [run(3, 0, 50)], 'balanced');
    const html = tuneHtml({ settings: {}, ...j, controllerYaml: controllerYaml(j.recommended.config) });
    expect(html).toContain('; 1 config simulated, 1 on the Pareto front.');
    expect(tuneHtml(report(candidates.map((_, i) => run(1 + i, 1, 1))))).toContain(
      `; ${candidates.length} configs simulated,`,
    );
  });

  it('starts an axis at 0 where the room around the configs would reach below it: no objective is negative', () => {
    const axes = (page: string, id: string) =>
      option(page, id) as unknown as { xAxis: { min?: number }; yAxis: { min?: number } };
    // Prediction errors from 0 to 60%: the room below would be −4.8%.
    const near = tuneHtml(report(candidates.map((_, i) => run(2 + i, (i * 17) % 61, 50 + i))));
    expect(axes(near, 'chart-jct-pred').yAxis.min).toBe(0);
    // Unfairness 50% and up, mean JCT 2 h and up over a wider span: room to spare above 0, left to ECharts.
    expect(axes(near, 'chart-jct-unfairness').yAxis.min).toBeUndefined();
    expect(axes(near, 'chart-jct-pred').xAxis.min).toBeUndefined();
    // Configs with the same exact predictions, drawn apart: along 0, none below it.
    const same = tuneHtml(report(candidates.map(() => run(2, 0, 10))));
    const ys = option(same, 'chart-jct-pred').series.flatMap((s) =>
      (s.data as unknown as { value: number[] }[]).map((d) => d.value[1] ?? -1),
    );
    expect(Math.min(...ys)).toBe(0);
  });
});

describe('the evaluated configs table in Chromium', () => {
  it('shows the weights and the thresholds, one to a line, without scrolling sideways', async () => {
    if (!existsSync('/usr/bin/chromium'))
      throw new Error('/usr/bin/chromium is missing (apt-get install chromium)');
    // Four classes over many distinct sizes: three thresholds a row, the longest cells.
    const spread = Array.from({ length: 200 }, (_, i) => Math.round(60 * 1.05 ** i));
    const four = generateCandidates(spread, { samples: 6, seed: 2, classCounts: [4], orderings: ['fifo'] });
    const j = tuneJson(
      four,
      four.map((_, i) => run(1 + i, 10 * i, 5 + i)),
      'balanced',
    );
    expect(j.evaluated.filter((r) => r.thresholdsSeconds.length === 3).length).toBeGreaterThan(1);
    const page = withoutScripts(
      tuneHtml({ settings: {}, ...j, controllerYaml: controllerYaml(j.recommended.config) }),
    );
    const dir = await mkdtemp(join(tmpdir(), 'fleetwise-tune-table-'));
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox'],
    });
    try {
      const path = join(dir, 'tune.html');
      await writeFile(path, page, 'utf8');
      const tab = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      await tab.goto(pathToFileURL(path).href, { waitUntil: 'load' });
      const layout = await tab.$eval('#tune-table', (table) => {
        const wrap = table.parentElement?.getBoundingClientRect();
        const headers = [...table.querySelectorAll('th')].map((th) => th.textContent ?? '');
        const right = (header: string): number =>
          table.querySelectorAll('th')[headers.indexOf(header)]?.getBoundingClientRect().right ?? Infinity;
        const thresholdLines = [...table.querySelectorAll('tbody tr')].map(
          (tr) => tr.querySelectorAll('td')[headers.indexOf('thresholds')]?.innerText.split('\n') ?? [],
        );
        return {
          wrapRight: wrap?.right ?? 0,
          weights: right('weights'),
          thresholds: right('thresholds'),
          thresholdLines,
        };
      });
      expect(layout.weights).toBeLessThanOrEqual(layout.wrapRight);
      expect(layout.thresholds).toBeLessThanOrEqual(layout.wrapRight);
      // An anchor with one class has no threshold: an empty cell, one line.
      expect(layout.thresholdLines.map((lines) => lines.length)).toEqual(
        j.evaluated.map((r) => Math.max(1, r.thresholdsSeconds.length)),
      );
    } finally {
      await browser.close();
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
