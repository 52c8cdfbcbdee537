import { CsvError, parse } from 'csv-parse/sync';
import { ValidationError } from '../../core/validation.js';

/** One problem of a text input, reported as `file:line: field: reason` so editors can jump to it. */
export interface LineProblem {
  readonly line: number;
  readonly field: string;
  readonly reason: string;
}

const LF = 0x0a;
const CR = 0x0d;

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
 * Parse comma-separated text with a header line (RFC 4180, via csv-parse): tolerates a BOM, CRLF and blank lines;
 * a quoted cell may hold commas, `""` escapes and line breaks, and a quote inside an unquoted cell is kept as text.
 * Cells are not trimmed here (callers decide); the header's are. Every row whose cell count differs from the
 * header's is reported with its line, as is an unterminated quote.
 */
export function parseCsv(text: string, source: string): CsvTable {
  const { table, problems } = readCsv(text, source);
  if (problems.length > 0) throw new LineValidationError(source, problems);
  return table;
}

/**
 * As `parseCsv`, but the rows' structural problems (a wrong cell count, an unterminated quote) come back with the
 * well-formed rows instead of being thrown, so a caller can check those rows' cells and report everything at once.
 * An empty file is still thrown.
 */
export function readCsv(
  text: string,
  source: string,
): { readonly table: CsvTable; readonly problems: readonly LineProblem[] } {
  // Line numbers are counted here from byte offsets, as `file:line` means to an editor: csv-parse's own count
  // also takes a lone CR for a line break and gives a record's last line, not its first.
  const bytes = Buffer.from(text, 'utf8');
  let offset = text.startsWith('\uFEFF') ? 3 : 0; // csv-parse drops the BOM (3 bytes in UTF-8)
  let line = 1;
  const advanceTo = (to: number): void => {
    for (; offset < to; offset++) if (bytes[offset] === LF) line++;
  };
  /** Skip the blank lines csv-parse passed over before the next record; returns where that record starts. */
  const recordStart = (): number => {
    let start = offset;
    for (;;) {
      if (bytes[start] === LF) start += 1;
      else if (bytes[start] === CR && bytes[start + 1] === LF) start += 2;
      else break;
    }
    advanceTo(start);
    return start;
  };

  const problems: LineProblem[] = [];
  let header: string[] | undefined;
  let headerLine = 0;
  const rows: CsvRow[] = [];
  try {
    parse(bytes, {
      bom: true,
      record_delimiter: ['\r\n', '\n'],
      skip_empty_lines: true,
      relax_quotes: true,
      relax_column_count: true, // checked below, so that every short or long row is reported
      on_record: (cells: string[], info) => {
        const start = recordStart();
        const first = line;
        advanceTo(info.bytes);
        if (bytes.toString('utf8', start, info.bytes).trim() === '') return null; // a line of spaces
        if (header === undefined) {
          header = cells.map((c) => c.trim());
          headerLine = first;
        } else if (cells.length !== header.length)
          problems.push({
            line: first,
            field: '(row)',
            reason: `expected ${header.length} comma-separated fields like the header, found ${cells.length}`,
          });
        else rows.push({ line: first, cells });
        return null; // collected here: csv-parse need not keep them
      },
    });
  } catch (e) {
    if (!(e instanceof CsvError)) throw e;
    recordStart();
    const reason = e.code === 'CSV_QUOTE_NOT_CLOSED' ? 'unterminated quoted field' : e.message;
    problems.push({ line, field: '(row)', reason });
  }
  if (header === undefined && problems.length === 0)
    throw new LineValidationError(source, [{ line: 1, field: '(header)', reason: 'the file is empty' }]);
  return { table: { header: header ?? [], headerLine, rows }, problems };
}

/**
 * Why a file with a header has no rows, when its line endings explain it: a lone CR (classic Mac OS) is not a line
 * break here, so such a file reads as one long header line.
 */
export function noRowsReason(text: string): string {
  return text.includes('\r') && !text.includes('\n')
    ? 'no data rows: the lines end in a lone CR, which is not read as a line break (save the file with LF or CRLF line endings)'
    : 'no data rows after the header';
}
