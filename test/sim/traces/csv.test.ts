import { describe, expect, it } from 'vitest';
import { LineValidationError, noRowsReason, parseCsv, readCsv } from '../../../src/sim/traces/csv.js';

describe('CSV parsing', () => {
  it('handles quotes, escaped quotes and empty cells', () => {
    expect(parseCsv('a,b,c,d,e\na,"b,c","d""e",,\n', 'f.csv').rows).toEqual([
      { line: 2, cells: ['a', 'b,c', 'd"e', '', ''] },
    ]);
  });

  it('keeps a quote inside an unquoted cell as text, and cells untrimmed', () => {
    expect(parseCsv(' x , y\n12" , "a"\n', 'f.csv')).toEqual({
      header: ['x', 'y'],
      headerLine: 1,
      rows: [{ line: 2, cells: ['12" ', ' "a"'] }],
    });
  });

  it('lets a quoted cell span lines, numbering rows by their first line', () => {
    const t = parseCsv('x,y\n"two\nlines",1\n\n   \n3,4\n', 'f.csv');
    expect(t.rows).toEqual([
      { line: 2, cells: ['two\nlines', '1'] },
      { line: 6, cells: ['3', '4'] },
    ]);
  });

  it('reports an unterminated quote at the line it opens, after the rows before it', () => {
    expect(() => parseCsv('x,y\n1\n"open,1\n2,3\n', 'f.csv')).toThrow(
      'f.csv:2: (row): expected 2 comma-separated fields like the header, found 1\n' +
        'f.csv:3: (row): unterminated quoted field',
    );
  });

  it('returns the well-formed rows with the structural problems, for callers to check their cells too', () => {
    const { table, problems } = readCsv('x,y\n1,2\n3\n4,5\n', 'f.csv');
    expect(table.rows).toEqual([
      { line: 2, cells: ['1', '2'] },
      { line: 4, cells: ['4', '5'] },
    ]);
    expect(problems).toEqual([
      { line: 3, field: '(row)', reason: 'expected 2 comma-separated fields like the header, found 1' },
    ]);
  });

  it('says why a file has no rows when its lines end in a lone CR', () => {
    expect(noRowsReason('x,y\r1,2\r')).toMatch(/lone CR/);
    expect(noRowsReason('x,y\r\n')).toBe('no data rows after the header');
  });

  it('reports an empty file', () => {
    expect(() => parseCsv('\uFEFF\n \r\n', 'f.csv')).toThrow('f.csv:1: (header): the file is empty');
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
