/**
 * Numbers a caller reads by, made what the integer columns and LIMIT take in both databases: PostgreSQL refuses a
 * fraction or a number past BIGINT for an integer (`invalid input syntax for type bigint`), and SQLite a LIMIT that is
 * not an integer, where the memory store simply finds nothing, or everything. So all three answer alike. Not finite
 * numbers pass through unchanged, for the parameter check to refuse as the memory store does.
 */

/** A number that can be a record's id or sequence number: no other finds a record. */
export function isRecordNumber(n: number): boolean {
  return Number.isSafeInteger(n);
}

/**
 * A lower bound for `column > ?` over an integer column: its floor (the same rows, as `seq > 1.5` is `seq > 1`), within
 * the safe integers (past them no record is numbered).
 */
export function afterBound(after: number): number {
  if (!Number.isFinite(after)) return after;
  return Math.min(Number.MAX_SAFE_INTEGER, Math.max(Number.MIN_SAFE_INTEGER, Math.floor(after)));
}

/** A row count for LIMIT: whole, none for a negative one, and all of them for one past the safe integers. */
export function rowLimit(limit: number): number {
  return Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, Math.floor(limit)));
}
