import { StateStoreFaultError } from '../../state-store.js';
import type { Param } from './connection.js';

/**
 * Refuse a parameter the two databases would not store alike, before its statement runs (so the transaction it is
 * part of rolls back whole), naming the value and the column it was meant for. SQLite binds undefined and NaN as NULL:
 * a time gone wrong would read back as no time, and a job counter moved to `MAX(seq, NULL)` would number from 1 again.
 * PostgreSQL is sent parameters as text: undefined as the word `undefined`, NaN and Infinity as theirs (kept by a
 * DOUBLE PRECISION column, refused by an integer one without saying which parameter). The type rules these values
 * out; a caller's value at run time need not follow it. An optional field the queries pass as `?? null` is NULL.
 */
export function checkParams(sql: string, params: readonly Param[]): void {
  for (const [i, p] of params.entries()) {
    const value: unknown = p;
    if (value === null || typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value)))
      continue;
    const column = parameterColumns(sql)[i];
    const verb = /^\s*SELECT\b/i.test(sql) ? 'query by' : 'store';
    throw new StateStoreFaultError(
      `cannot ${verb} ${shown(value)}${column === undefined ? '' : ` as ${column}`} ` +
        `(parameter ${i + 1} of \`${statementHead(sql)}\`): the state keeps finite numbers, text and null`,
    );
  }
}

function shown(value: unknown): string {
  return typeof value === 'object' || typeof value === 'function'
    ? `a value of type ${typeof value}`
    : String(value);
}

/** The start of a statement, enough to tell which it is. */
function statementHead(sql: string): string {
  const flat = sql.replace(/\s+/g, ' ').trim();
  return flat.length > 60 ? `${flat.slice(0, 60)}…` : flat;
}

/** A placeholder, `?` (the shared queries) or `$n` (PostgreSQL's own), or a quoted literal to step over. */
const PLACEHOLDER = /'(?:[^']|'')*'|\?|\$(\d+)/g;
const INSERT = /^\s*INSERT\s+INTO\s+(\w+)\s*\(([^)]*)\)\s*VALUES\s*\(([^)]*)\)/i;
/** The table a placeholder's column belongs to: the nearest one named before it (a subquery's own, inside one). */
const TABLE = /\b(?:FROM|UPDATE|INTO)\s+(?!SET\b)(\w+)/gi;
const COMPARED = /(\w+)\s*(?:=|<>|!=|<=|>=|<|>)\s*$/;
const LISTED = /(\w+)\s+IN\s*\([^()]*$/i;
/** `MAX(seq, ?)`, `GREATEST(value, $2)`: the value a column is moved up to. */
const RAISED = /\b(?:MAX|GREATEST)\(\s*(\w+)\s*,\s*$/i;

/**
 * What each parameter of `sql` is bound to, by position: `table.column` where the statement says (an INSERT's column
 * list, `column = ?`, `column IN (?, ?)`, `MAX(column, ?)`), `LIMIT`, or undefined (an argument of a function). Read
 * from the text only when a parameter is refused.
 */
function parameterColumns(sql: string): (string | undefined)[] {
  const names: (string | undefined)[] = [];
  const insert = INSERT.exec(sql);
  if (insert !== null) {
    const [, table, columns = '', values = ''] = insert;
    const columnNames = columns.split(',').map((c) => c.trim());
    let position = 0;
    values.split(',').forEach((v, i) => {
      const n = placeholderIndex(v.trim(), position);
      if (n === undefined) return;
      position += 1;
      names[n] = `${table}.${columnNames[i] ?? '?'}`;
    });
    return names;
  }
  let position = 0;
  for (const match of sql.matchAll(PLACEHOLDER)) {
    if (match[0].startsWith("'")) continue;
    const n = match[1] === undefined ? position : Number(match[1]) - 1;
    position += 1;
    if (names[n] !== undefined) continue;
    const before = sql.slice(0, match.index);
    if (/\bLIMIT\s*$/i.test(before)) {
      names[n] = 'LIMIT';
      continue;
    }
    const column = (COMPARED.exec(before) ?? LISTED.exec(before) ?? RAISED.exec(before))?.[1];
    const table = [...before.matchAll(TABLE)].at(-1)?.[1];
    names[n] = column === undefined ? undefined : table === undefined ? column : `${table}.${column}`;
  }
  return names;
}

/** The parameter index of a VALUES entry that is a placeholder (`?` the next one, `$n` its own), else undefined. */
function placeholderIndex(value: string, next: number): number | undefined {
  if (value === '?') return next;
  const numbered = /^\$(\d+)$/.exec(value);
  return numbered === null ? undefined : Number(numbered[1]) - 1;
}
