import { ValidationError } from '../../core/validation.js';

/** One problem of a text input, reported as `file:line: field: reason` so editors can jump to it. */
export interface LineProblem {
  readonly line: number;
  readonly field: string;
  readonly reason: string;
}

/** How many problems the message lists before summarizing the rest (a broken file can have thousands). */
const MAX_LISTED_PROBLEMS = 20;

/** A ValidationError for line-oriented files whose message lists `file:line: field: reason`, one per line. */
export class LineValidationError extends ValidationError {
  constructor(
    source: string,
    readonly lineProblems: readonly LineProblem[],
  ) {
    const formatted = lineProblems.map((p) => `${source}:${p.line}: ${p.field}: ${p.reason}`);
    super(source, formatted);
    const listed = formatted.slice(0, MAX_LISTED_PROBLEMS);
    const more = formatted.length - listed.length;
    this.message = more > 0 ? [...listed, `… and ${more} more problems`].join('\n') : listed.join('\n');
  }
}

export interface CsvRow {
  /** 1-based line number in the file. */
  readonly line: number;
  readonly cells: readonly string[];
}

export interface CsvTable {
  readonly header: readonly string[];
  readonly headerLine: number;
  readonly rows: readonly CsvRow[];
}

/**
 * Split one CSV line into cells (RFC 4180 quoting within a line: `"a,b"` and `""` escapes). Returns
 * undefined for an unterminated quote. Cells are not trimmed here; callers decide.
 */
export function splitCsvLine(line: string): string[] | undefined {
  const cells: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i] as string;
    if (quoted) {
      if (ch !== '"') cell += ch;
      else if (line[i + 1] === '"') {
        cell += '"';
        i++;
      } else quoted = false;
    } else if (ch === '"' && cell.length === 0) quoted = true;
    else if (ch === ',') {
      cells.push(cell);
      cell = '';
    } else cell += ch;
  }
  if (quoted) return undefined;
  cells.push(cell);
  return cells;
}

/**
 * Parse simple comma-separated text with a header line: tolerates a BOM, CRLF and blank lines; rejects rows
 * whose cell count differs from the header's, naming the line.
 */
export function parseCsv(text: string, source: string): CsvTable {
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  const problems: LineProblem[] = [];
  let header: string[] | undefined;
  let headerLine = 0;
  const rows: CsvRow[] = [];
  lines.forEach((raw, index) => {
    const line = index + 1;
    if (raw.trim() === '') return;
    const cells = splitCsvLine(raw);
    if (cells === undefined) {
      problems.push({ line, field: '(row)', reason: 'unterminated quoted field' });
      return;
    }
    if (header === undefined) {
      header = cells.map((c) => c.trim());
      headerLine = line;
      return;
    }
    if (cells.length !== header.length) {
      problems.push({
        line,
        field: '(row)',
        reason: `expected ${header.length} comma-separated fields like the header, found ${cells.length}`,
      });
      return;
    }
    rows.push({ line, cells });
  });
  if (header === undefined)
    throw new LineValidationError(source, [{ line: 1, field: '(header)', reason: 'the file is empty' }]);
  if (problems.length > 0) throw new LineValidationError(source, problems);
  return { header, headerLine, rows };
}
