import { describe, expect, it } from 'vitest';
import { LineValidationError, parseCsv, splitCsvLine } from '../../../src/sim/traces/csv.js';

describe('CSV splitting', () => {
  it('handles quotes, escaped quotes and empty cells', () => {
    expect(splitCsvLine('a,"b,c","d""e",,')).toEqual(['a', 'b,c', 'd"e', '', '']);
    expect(splitCsvLine('"open,1')).toBeUndefined();
  });

  it('skips blank lines, strips a BOM and keeps 1-based line numbers', () => {
    const t = parseCsv('\uFEFFx,y\r\n\r\n1,2\r\n', 'f.csv');
    expect(t.header).toEqual(['x', 'y']);
    expect(t.rows).toEqual([{ line: 3, cells: ['1', '2'] }]);
  });

  it('caps the listed problems and counts the rest', () => {
    const text = ['x,y', ...Array.from({ length: 25 }, () => '1')].join('\n');
    try {
      parseCsv(text, 'f.csv');
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(LineValidationError);
      const err = e as LineValidationError;
      expect(err.lineProblems).toHaveLength(25);
      const lines = err.message.split('\n');
      expect(lines).toHaveLength(21);
      expect(lines[0]).toBe('f.csv:2: (row): expected 2 comma-separated fields like the header, found 1');
      expect(lines[20]).toBe('… and 5 more problems');
    }
  });
});
