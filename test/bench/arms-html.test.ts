import { describe, expect, it } from 'vitest';
import { armSentence, armsHtml } from '../../src/bench/arms-html.js';
import type { ArmsReport } from '../../src/bench/arms-report.js';
import { pairedDifferences } from '../../src/bench/paired-arms.js';
import { armsText } from '../../src/cli/commands/bench-arms.js';
import { armsFixture } from './arms-fixture.js';

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
