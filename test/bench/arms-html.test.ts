import { describe, expect, it } from 'vitest';
import { armSentence, armsHtml, meanLabelPosition } from '../../src/bench/arms-html.js';
import { signedPercent, type ArmsReport } from '../../src/bench/arms-report.js';
import { pairedDifferences } from '../../src/bench/paired-arms.js';
import { armsText } from '../../src/cli/commands/bench-arms.js';
import { armsFixture, armsFixtureOnTwoCatalogs, DEARER_CATALOG, FIXTURE_CATALOG } from './arms-fixture.js';

describe('arms.html', () => {
  const report = armsFixture();

  it('leads each compared arm with its mean cost and JCT differences and its peak against the caps', () => {
    const b = report.arms[1];
    if (b === undefined) throw new Error('fixture');
    // Cost −1, +2, 0, −2%: mean −0.25%; squared deviations 0.5625 + 5.0625 + 0.0625 + 3.0625 = 8.75, sample sd
    // √(8.75 / 3) = 1.708, SE 1.708 / √4 = 0.854; t(0.975, 3) = 3.1824, so −0.25 ± 2.7175; p 0.79 (scipy); two seeds
    // lower and one higher: sign test p 1. Mean JCT −50% on every seed: no spread, so no t-test; 4 of 4 lower: 2/2⁴.
    expect(armSentence(report, b, report.comparisons['b'] ?? [])).toBe(
      'Against a on 4 seeds, on average: cost -0.25% (95% interval -2.97% to +2.47%: within noise; ' +
        'p 0.79 by t-test, 1.00 by sign test), lower on 2 of 4; ' +
        'mean JCT -50.00% (the same on every seed: no spread to judge it by; p 0.13 by sign test), lower on 4 of 4. ' +
        'Its peak was 99.90–99.90% of the cap.',
    );
  });

  it("puts a mean label below its line when the line is near the axis's top, clear of the panel's title", () => {
    // One seed: the mean is the bar's top and the axis's (0 to 0.6).
    expect(meanLabelPosition({ min: 0, max: 0.6 }, 0.6)).toBe('insideEndBottom');
    expect(meanLabelPosition({ min: 0, max: 3 }, 2.36)).toBe('insideEndTop');
    expect(meanLabelPosition({ min: -80, max: 0 }, -78.53)).toBe('insideEndTop');
    expect(meanLabelPosition(undefined, 0)).toBe('insideEndTop');
  });

  it('draws one chart per compared arm with a panel per metric both runs measured, and the tables', () => {
    const html = armsHtml(report);
    expect(html).toContain('<h1>fleetwise bench arms: b, c against a</h1>');
    expect(html.match(/<div class="chart" id="arms-[bc]"/g)).toHaveLength(2);
    // b: cost, mean JCT, barrier-idle, peak; c has no barrier-idle cost.
    const panels = (id: string) =>
      (
        html
          .split(`data-chart="${id}">`)[1]
          ?.split('</script>')[0]
          ?.match(/"text":"Δ [^"]+"/g) ?? []
      ).join(', ');
    expect(panels('arms-b')).toBe(
      '"text":"Δ cost (%)", "text":"Δ mean JCT (%)", "text":"Δ barrier-idle $ (%)", "text":"Δ peak $/h (%)"',
    );
    expect(panels('arms-c')).toBe('"text":"Δ cost (%)", "text":"Δ mean JCT (%)", "text":"Δ peak $/h (%)"');
    expect(html).toContain('id="summary-b"');
    // b's cost row over the seeds: mean, standard error, 95% interval, both p-values.
    const costRow = html
      .split('id="summary-b"')[1]
      ?.split('</tr>')
      .find((row) => row.includes('>cost<'));
    expect(costRow?.match(/<td class="num">([^<]*)<\/td>/g)?.slice(0, 5)).toEqual(
      ['-0.25%', '0.85', '-2.97% to +2.47%', '0.79', '1.00'].map((v) => `<td class="num">${v}</td>`),
    );
    // b's peak is 0.999 ÷ 0.6 of a's on every seed, equal but for rounding: no spread, so no interval and no t-test.
    const peakRow = html
      .split('id="summary-b"')[1]
      ?.split('</tr>')
      .find((row) => row.includes('>peak $/h<'));
    expect(peakRow?.match(/<td class="num">([^<]*)<\/td>/g)?.slice(0, 5)).toEqual(
      ['+66.50%', '0.00', '-', '-', '0.13'].map((v) => `<td class="num">${v}</td>`),
    );
    // The chart shades b's 95% interval of the cost difference.
    expect(html.split('data-chart="arms-b">')[1]).toMatch(/"yAxis":-2\.967\d*\},\{"yAxis":2\.467/);
    expect(html).toMatch(/<td class="num">\$2,040\.00<\/td>/);
    expect(html).toContain('--queue srpt --co-start on');
  });
});

describe('a metric whose baseline is 0', () => {
  // The baseline moved no job on any seed; b moved 2.5 and 2.7 per job.
  const fixture = armsFixture();
  const runs = {
    a: (fixture.runs['a'] ?? []).map((r) => ({ ...r, migrationsPerJob: 0 })),
    b: (fixture.runs['b'] ?? []).map((r, i) => ({ ...r, migrationsPerJob: [2.5, 2.7, 2.5, 2.7][i] })),
  };
  const report: ArmsReport = {
    ...fixture,
    arms: fixture.arms.slice(0, 2),
    runs,
    comparisons: { b: pairedDifferences(runs.a, runs.b) },
  };

  it('is shown as absolute differences, marked so, in the text tables and summary', () => {
    const text = armsText(report);
    expect(text).toContain('Δ moves/job (abs)');
    expect(text).toMatch(/\+2\.50 abs/);
    expect(text).toMatch(
      /moves\/job \(abs\) mean \+2\.60 abs \(SE 0\.06\), \+2\.50 abs to \+2\.70 abs, lower on 0 of 4.*\(a is 0: differences in the metric's units\)/,
    );
  });

  it('is shown as absolute differences, marked so, in arms.html', () => {
    const html = armsHtml(report);
    expect(html).toContain('Δ moves/job (abs)');
    expect(html).toContain('+2.60 abs');
  });
});

/** The chart option of arms.html's chart `id`, as the page's script reads it. */
function chartOption(
  html: string,
  id: string,
): {
  yAxis: { min?: number; max?: number; interval?: number }[];
  series: {
    data: ({ value: number } | null)[];
    markArea?: { data: [[{ yAxis: number }, { yAxis: number }]] };
  }[];
} {
  const json = html.split(`data-chart="${id}">`)[1]?.split('</script>')[0];
  if (json === undefined) throw new Error(`no chart ${id}`);
  return JSON.parse(json) as ReturnType<typeof chartOption>;
}

describe('arms.html panels', () => {
  it("size each panel's axis to its bars, mean and 95% interval, so the shading shows where the interval lies", () => {
    // Three seeds: the interval (t = 4.30) is far wider than the bars.
    const fixture = armsFixture();
    const seeds = fixture.seeds.slice(0, 3);
    const runs = { a: (fixture.runs['a'] ?? []).slice(0, 3), b: (fixture.runs['b'] ?? []).slice(0, 3) };
    const report: ArmsReport = {
      ...fixture,
      seeds,
      arms: fixture.arms.slice(0, 2),
      capBySeed: fixture.capBySeed.slice(0, 3),
      uncappedPeakBySeed: fixture.uncappedPeakBySeed.slice(0, 3),
      runs,
      comparisons: { b: pairedDifferences(runs.a, runs.b) },
    };
    const option = chartOption(armsHtml(report), 'arms-b');
    const withInterval = option.series.filter((s) => s.markArea !== undefined);
    expect(withInterval.length).toBeGreaterThan(0);
    option.series.forEach((s, i) => {
      const axis = option.yAxis[i];
      const values = s.data.filter((v) => v !== null).map((v) => v.value);
      const area = s.markArea?.data[0];
      if (area !== undefined) values.push(area[0].yAxis, area[1].yAxis);
      expect(axis?.min).toBeLessThanOrEqual(Math.min(0, ...values));
      expect(axis?.max).toBeGreaterThanOrEqual(Math.max(0, ...values));
      // Not so far out that the bars are lost: within two steps of the figures.
      expect((axis?.max ?? 0) - (axis?.min ?? 0)).toBeLessThanOrEqual(
        Math.max(0, ...values) - Math.min(0, ...values) + 2 * (axis?.interval ?? 0),
      );
    });
    // Cost −1%, +2%, 0%: mean +0.33%, interval −3.46% to +4.13% (t 4.303 × SE 0.882), wider than the bars.
    expect(option.yAxis[0]).toMatchObject({ min: -4, max: 6, interval: 2 });
  });

  it('print a difference that rounds to 0 without a sign', () => {
    expect(signedPercent(-0.001)).toBe('0.00%');
    expect(signedPercent(0.004)).toBe('0.00%');
    expect(signedPercent(-0.005, 1)).toBe('0.0%');
    expect(signedPercent(-0.006)).toBe('-0.01%');
    expect(signedPercent(0.25)).toBe('+0.25%');
  });
});

describe('a metric whose baseline is 0 on one seed only', () => {
  // The baseline moved no job on seed 5 alone, where b moved 3 per job.
  const fixture = armsFixture();
  const runs = {
    a: (fixture.runs['a'] ?? []).map((r, i) => ({ ...r, migrationsPerJob: [1, 0, 1, 1][i] })),
    b: (fixture.runs['b'] ?? []).map((r, i) => ({ ...r, migrationsPerJob: [1.5, 3, 1, 0.5][i] })),
  };
  const report: ArmsReport = {
    ...fixture,
    arms: fixture.arms.slice(0, 2),
    runs,
    comparisons: { b: pairedDifferences(runs.a, runs.b) },
  };

  it("is compared on every seed in the metric's units, and the text says on which seed the baseline was 0", () => {
    const text = armsText(report);
    expect(text).toContain('Δ moves/job (abs)');
    expect(text).toMatch(
      /moves\/job \(abs\) mean \+0\.75 abs .*lower on 1 of 4.*\(a is 0 on seed 5: differences in the metric's units\)/,
    );
  });

  it('and so does arms.html', () => {
    const html = armsHtml(report);
    expect(html).toContain('Δ moves/job (abs)');
    expect(html).toContain('moves/job: in the metric&#39;s units, as a is 0 on seed 5.');
  });
});

describe('a metric only one arm measured', () => {
  // c reports no barrier-idle cost (it names no start setting); a and b do.
  const report = armsFixture();

  it('is named in the text, with how to measure it on the other side', () => {
    const text = armsText(report);
    expect(text).toContain('  barrier-idle $: measured by a only, not compared; give c --co-start off\n');
    const reversed: ArmsReport = {
      ...report,
      arms: [report.arms[2], report.arms[0]] as ArmsReport['arms'],
      baseline: 'c',
    };
    expect(armsText(reversed)).toContain(
      '  barrier-idle $: measured by a only, not compared; give the baseline (c) --co-start off\n',
    );
  });

  it('is named in arms.html', () => {
    expect(armsHtml(report)).toContain(
      '<li>barrier-idle $: measured by a only, not compared; give c --co-start off.</li>',
    );
  });

  it('names p99 JCT, which only runs with the queue layer measure, with the flag that turns it on', () => {
    // b ran a queue (it reports p99 JCT), a did not.
    const fixture = armsFixture();
    const runs = {
      a: fixture.runs['a'] ?? [],
      b: (fixture.runs['b'] ?? []).map((r, i) => ({ ...r, p99JctHours: 30 + i })),
    };
    const report: ArmsReport = {
      ...fixture,
      arms: fixture.arms.slice(0, 2),
      runs,
      comparisons: { b: pairedDifferences(runs.a, runs.b) },
    };
    expect(armsText(report)).toContain(
      '  p99 JCT: measured by b only, not compared; give the baseline (a) --queue fifo\n',
    );
  });
});

describe('arms.html with arms on different catalogs', () => {
  const html = armsHtml(armsFixtureOnTwoCatalogs());

  it('names each arm’s catalog in the settings, and both catalogs where an arm is compared', () => {
    expect(html).toContain(`<dt>arm a (baseline)</dt><dd>--queue fifo (on ${FIXTURE_CATALOG})</dd>`);
    expect(html).toContain(`<dt>arm c</dt><dd>--queue srpt (on ${DEARER_CATALOG})</dd>`);
    expect(html).not.toContain('<dt>catalog</dt>');
    expect(html).toContain(
      `<li>catalogs: c runs ${DEARER_CATALOG}, a ${FIXTURE_CATALOG}: the differences hold the catalogs&#39; ` +
        'prices too; each is capped at 0.6 × its own catalog’s uncapped peak.</li>',
    );
    expect(html).toContain(`<li>catalog: b and a both run ${FIXTURE_CATALOG}.</li>`);
  });

  it('gives each arm’s caps a column, and takes its peak against its own', () => {
    const table = html.split('id="table-c"')[1]?.split('</table>')[0] ?? '';
    expect(table).toMatch(
      />cap \$\/h a<\/th><th [^>]*title="c&#39;s runs&#39; [^"]* on \/catalogs\/dearer\.json\.">cap \$\/h c</,
    );
    expect(table).toContain('<td class="num">$100.00</td><td class="num">$200.00</td>');
    expect(html).toContain('Its peak was 95.00–95.00% of the cap.');
  });

  it('says the catalog once when every arm runs it', () => {
    const same = armsHtml(armsFixture());
    expect(same).toContain(`<dt>catalog</dt><dd>${FIXTURE_CATALOG}</dd>`);
    expect(same).toContain('<dt>arm c</dt><dd>--queue srpt</dd>');
  });
});
