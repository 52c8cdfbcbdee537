import { describe, expect, it } from 'vitest';
import type { ArmsReport } from '../../src/bench/arms-report.js';
import { pairedDifferences } from '../../src/bench/paired-arms.js';
import { armsText } from '../../src/cli/commands/bench-arms.js';
import {
  armsFixture,
  armsFixtureOnTwoCatalogs,
  DEARER_CATALOG,
  FIXTURE_CATALOG,
} from '../bench/arms-fixture.js';

/** The summary lines under arm `name`'s table (after the blank line that ends it): a label, then its figures. */
function summaryLines(text: string, name: string): string[] {
  const section = text.split(`${name} against a:`)[1]?.split('\n\n')[1] ?? '';
  return section.split('\n').filter((l) => /^ {2}\S/.test(l) && !l.includes(': measured by'));
}

const LABELS = [
  'cost',
  'mean JCT',
  'barrier-idle $',
  'moves/job (abs)',
  'peak $/h',
  'slowdown $ (abs)',
  'peak ÷ cap',
];

/** The label a summary line starts with (labels hold spaces: the longest that fits). */
function labelOf(line: string): string {
  const label = LABELS.filter((l) => line.startsWith(`  ${l} `)).sort((x, y) => y.length - x.length)[0];
  if (label === undefined) throw new Error(`no label: ${line}`);
  return label;
}

/** The column where a summary line's figures start: past its label and the padding after it. */
function figuresAt(line: string): number {
  const from = 2 + labelOf(line).length;
  const rest = line.slice(from);
  return from + rest.length - rest.trimStart().length;
}

describe('bench arms text summary', () => {
  it('starts every metric’s figures in one column, however long its label', () => {
    // The baseline moved no job and spent nothing on slowdowns: those two are compared in absolute terms, and their
    // labels ("moves/job (abs)", "slowdown $ (abs)") are the longest.
    const fixture = armsFixture();
    const runs = {
      a: (fixture.runs['a'] ?? []).map((r) => ({ ...r, migrationsPerJob: 0, costSlowdown: 0 })),
      b: (fixture.runs['b'] ?? []).map((r, i) => ({
        ...r,
        migrationsPerJob: [2.5, 2.7, 2.5, 2.7][i],
        costSlowdown: [20, 27, 35, 12][i],
      })),
    };
    const report: ArmsReport = {
      ...fixture,
      arms: fixture.arms.slice(0, 2),
      runs,
      comparisons: { b: pairedDifferences(runs.a, runs.b) },
    };
    const lines = summaryLines(armsText(report), 'b');
    const labels = ['cost', 'mean JCT', 'barrier-idle $', 'moves/job (abs)', 'peak $/h', 'slowdown $ (abs)'];
    expect(lines.map(labelOf)).toEqual([...labels, 'peak ÷ cap']);
    // The figures ("mean …", or the peak's range) start a space after the longest label.
    const column = 2 + 'slowdown $ (abs)'.length + 1;
    expect(lines.map(figuresAt)).toEqual(lines.map(() => column));
    expect(lines.map((l) => l.slice(column, column + 4))).toEqual([
      ...labels.map(() => 'mean'),
      expect.stringMatching(/^\d/),
    ]);
  });

  it('sizes the label column to the labels it has', () => {
    const fixture = armsFixture();
    // c measures no barrier-idle cost: its longest label is "peak ÷ cap" or "mean JCT".
    const lines = summaryLines(armsText(fixture), 'c');
    expect(lines.map((l) => l.slice(0, 2 + 'peak ÷ cap'.length + 1))).toEqual([
      '  cost       ',
      '  mean JCT   ',
      '  peak $/h   ',
      '  peak ÷ cap ',
    ]);
    expect(lines.map(figuresAt)).toEqual(lines.map(() => 2 + 'peak ÷ cap'.length + 1));
  });
});

describe('bench arms text with arms on different catalogs', () => {
  it('names both catalogs of every comparison, and gives each arm’s caps a column where they differ', () => {
    const text = armsText(armsFixtureOnTwoCatalogs());
    // b runs the baseline's catalog: one cap column, and the catalog named since c runs another.
    expect(text).toContain(
      `b against a: --queue srpt --co-start on\ncatalog: b and a both run ${FIXTURE_CATALOG}\n`,
    );
    expect(text.split('b against a:')[1]?.split('\n')[2]).toMatch(/^seed\s+cap \$\/h\s+cost a\s/);
    expect(text).toContain(
      `c against a: --queue srpt\ncatalogs: c runs ${DEARER_CATALOG}, a ${FIXTURE_CATALOG}: the differences hold ` +
        "the catalogs' prices too; each is capped at 0.6 × its own catalog’s uncapped peak\n",
    );
    // Seed 4: a's cap $100, c's $200 (its catalog's peak is twice a's).
    const table = text.split('c against a:')[1]?.split('\n') ?? [];
    expect(table[2]).toMatch(/^seed\s+cap \$\/h a\s+cap \$\/h c\s+cost a\s+cost c\s/);
    expect(table[3]).toMatch(/^ +4\s+\$100\.00\s+\$200\.00\s+\$1,000\.00\s+\$1,010\.00\s/);
    // c's peak against its own caps.
    expect(text).toMatch(/^ {2}peak ÷ cap +95\.00% to 95\.00%$/m);
  });

  it('names no catalog when every arm runs the same one', () => {
    expect(armsText(armsFixture())).not.toMatch(/catalog/);
  });
});
