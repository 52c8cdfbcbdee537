import { describe, expect, it } from 'vitest';
import { formatDollars, formatTable } from '../../src/cli/table.js';

/** Where each line's cell `text` ends (its last character's column), for cells found once per line. */
const endsOf = (table: string, texts: readonly string[]): number[] =>
  table
    .trimEnd()
    .split('\n')
    .map((line, i) => {
      const text = texts[i] as string;
      const at = line.indexOf(text);
      if (at < 0) throw new Error(`line ${i} has no ${text}: ${line}`);
      return at + text.length;
    });

describe('formatTable', () => {
  it('right-aligns a column of formatted figures, header and all, so their digits line up', () => {
    // `fleetwise report`'s instances: a cost under a cent has four decimals, above it two.
    const costs = [0.0015, 0.04, 12.5].map(formatDollars);
    const byInstance = formatTable(
      ['INSTANCE', 'TYPE', 'COST', 'IDLE'],
      [
        ['i-0a1', 'c7i.xlarge', costs[0] as string, '-'],
        ['i-0b2', 'p3.2xlarge', costs[1] as string, '$0.01'],
        ['i-0c3', 'g5.xlarge', costs[2] as string, '$1,204.00'],
      ],
    );
    expect(byInstance).toBe(
      [
        'INSTANCE  TYPE           COST       IDLE',
        'i-0a1     c7i.xlarge  $0.0015          -',
        'i-0b2     p3.2xlarge    $0.04      $0.01',
        'i-0c3     g5.xlarge    $12.50  $1,204.00',
        '',
      ].join('\n'),
    );
    expect(endsOf(byInstance, ['COST', '$0.0015', '$0.04', '$12.50'])).toEqual([29, 29, 29, 29]);
  });

  it('takes signs, percents and units as figures, and leaves text and mixed columns left-aligned', () => {
    // tune's front, and bench arms' differences.
    const table = formatTable(
      ['', 'id', 'mean JCT h', 'Δ cost', 'Δ moves/job (abs)', 'wait', 'config'],
      [
        ['→', 'c1', '8.174', '-11.98%', '+0.97 abs', '3.2 h', '2 classes ≤10.3 h (p85), fifo'],
        ['', 'c10', '10.975', '+2.24%', '+20.47 abs', '–', '1 class, fifo'],
        ['', 'c4', '–', '0.00%', '0.00 abs', '12 h', 'fifo'],
      ],
    );
    const lines = table.trimEnd().split('\n');
    expect(lines).toEqual([
      '   id   mean JCT h   Δ cost  Δ moves/job (abs)   wait  config',
      '→  c1        8.174  -11.98%          +0.97 abs  3.2 h  2 classes ≤10.3 h (p85), fifo',
      '   c10      10.975   +2.24%         +20.47 abs      –  1 class, fifo',
      '   c4            –    0.00%           0.00 abs   12 h  fifo',
    ]);
  });

  it('right-aligns JS numbers and keeps a column of words, ids and times left-aligned', () => {
    const table = formatTable(
      ['REPORT', 'BYTES', 'WRITTEN', 'SEED'],
      [
        ['reports/a.json', 1234, '2024-06-10 14:03:22Z', '7'],
        ['reports/bb.json', 56, '-', '12'],
      ],
    );
    expect(table).toBe(
      [
        'REPORT           BYTES  WRITTEN               SEED',
        'reports/a.json    1234  2024-06-10 14:03:22Z     7',
        'reports/bb.json     56  -                       12',
        '',
      ].join('\n'),
    );
  });

  it('takes microseconds for a unit', () => {
    // `fleetwise cluster`'s latencies: under a millisecond in µs.
    const latencies = formatTable(
      ['FROM', 'P99'],
      [
        ['a', '850 µs'],
        ['b', '11.20 ms'],
      ],
    );
    expect(latencies.trimEnd().split('\n')).toEqual(['FROM       P99', 'a       850 µs', 'b     11.20 ms']);
  });
});
