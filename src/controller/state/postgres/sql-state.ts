/**
 * What a PostgreSQL SQLSTATE means, in the words an operator acts on: the store's errors carry it, so a log line says
 * whether the server is read-only, the role lacks a grant, or the server found its own data damaged, without a
 * look-up in PostgreSQL's appendix of error codes.
 */

/** Codes the store meets in practice, each with what to look at. */
const CODES: Readonly<Record<string, string>> = {
  '25006':
    'read-only server: a standby, a primary being demoted, or default_transaction_read_only set; point the ' +
    'controller at the primary',
  '25P02': 'in a failed transaction: an earlier statement of the transaction failed',
  '42501': "insufficient privilege: the role fleetwise connects as lacks a grant on the state's tables",
  '42P01': 'undefined table: the schema is not the one fleetwise made (search_path, or a table dropped)',
  XX001: "internal error: the server found a table's data damaged; see the server's log",
  XX002: "internal error: the server found an index damaged (REINDEX it); see the server's log",
};

/** The standard's classes (the code's first two characters), for codes not listed above. */
const CLASSES: Readonly<Record<string, string>> = {
  '08': 'connection exception',
  '0A': 'feature not supported',
  '22': 'data exception: a value its column cannot hold',
  '23': "integrity constraint violation: a write breaking the state's own rules",
  '25': 'invalid transaction state',
  '28': 'invalid authorization',
  '3D': 'the database does not exist',
  '3F': 'the schema does not exist',
  '40': 'transaction rollback: a serialization failure or a deadlock',
  '42': 'syntax error or access rule violation',
  '53': 'insufficient resources: disk, memory or connections',
  '54': 'program limit exceeded',
  '55': 'object not in prerequisite state',
  '57': 'operator intervention: a cancel, a timeout, or the server shutting down',
  '58': 'system error outside PostgreSQL (disk I/O)',
  XX: "internal error; see the server's log",
};

/** `SQLSTATE 25006, read-only server: …`: the code and what it means. */
export function describeSqlState(sqlState: string): string {
  const meaning = CODES[sqlState] ?? CLASSES[sqlState.slice(0, 2)];
  return meaning === undefined ? `SQLSTATE ${sqlState}` : `SQLSTATE ${sqlState}, ${meaning}`;
}
