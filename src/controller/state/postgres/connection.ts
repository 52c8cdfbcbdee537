import { StateStoreError, StateStoreFaultError } from '../../state-store.js';
import type { NumberedTable, Param, Row, SqlConnection } from '../sql/connection.js';
import { checkParams } from '../sql/parameter-check.js';
import { boundedConninfo, redactUrl, type ConnectionBounds } from './conninfo.js';
import { CONNECTION_BAD, endNativeClient, newNativeClient, type NativeClient } from './native-client.js';
import { describeSqlState } from './sql-state.js';

/**
 * A statement PostgreSQL refused, or a connection it did not give, with its SQLSTATE (e.g. 23505 unique violation,
 * 57014 statement timeout), which the message names with its meaning. `transient` when the same request may well
 * succeed if tried again shortly: the server was unreachable or the connection lost (but not during a COMMIT:
 * CommitOutcomeUnknownError), a timeout, a lock or serialization conflict, a server shutting down or short of
 * resources (the API answers 503). Any other is a fault of the store, not of the request (a read-only server, a
 * missing grant, damaged data, a constraint the store's own statement broke): the API's 500, logged for the operator.
 */
export class PostgresError extends StateStoreFaultError {
  override name = 'PostgresError';
  readonly transient: boolean;
  constructor(
    message: string,
    readonly sqlState: string | undefined,
    transient = isTransientSqlState(sqlState),
  ) {
    super(message);
    this.transient = transient;
  }
}

/**
 * The connection was lost while its COMMIT was on the way or being carried out, so no answer will say whether the
 * transaction committed: PostgreSQL may well have committed it (it commits locally before it answers, and then waits,
 * e.g. for a synchronous standby), or the server went before it read the COMMIT. Not transient: doing the same write
 * again may make it twice (a second job). The connection is replaced before the next transaction, as after any loss.
 */
export class CommitOutcomeUnknownError extends PostgresError {
  override name = 'CommitOutcomeUnknownError';
  constructor(lost: PostgresError) {
    super(
      'the state database connection was lost while committing: the change may or may not have been saved ' +
        `(${lost.message})`,
      lost.sqlState,
      false,
    );
    this.cause = lost;
  }
}

/**
 * SQLSTATEs of passing conditions: class 08 (connection exception), 53 (insufficient resources), 57P0x (the server
 * shutting down or starting), 57014 (statement timeout or cancel), 55P03 (lock timeout), 40001 and 40P01
 * (serialization failure, deadlock), 25P03 (idle in a transaction too long).
 */
export function isTransientSqlState(sqlState: string | undefined): boolean {
  if (sqlState === undefined) return false;
  return (
    sqlState.startsWith('08') ||
    sqlState.startsWith('53') ||
    sqlState.startsWith('57P') ||
    ['57014', '55P03', '40001', '40P01', '25P03'].includes(sqlState)
  );
}

/**
 * What must still hold for a write transaction to commit, checked in that transaction just before COMMIT (the
 * fencing token of the controller's lease, ha/): throwing rolls the transaction back.
 */
export type CommitCheck = () => void;

/** PQtransactionStatus inside a transaction a failed statement aborted: only a rollback is accepted. */
const TRANSACTION_FAILED = 3;

/** SQLSTATE of a statement sent after the transaction it is part of failed. */
const IN_FAILED_TRANSACTION = '25P02';

/** The statement that aborted the open transaction, and how. */
interface FailedStatement {
  readonly statement: string;
  readonly error: PostgresError;
}

/**
 * One PostgreSQL connection (pg-native, synchronous) as an SqlConnection. Nested transactions are savepoints. The
 * shared queries' `?` parameters become `$n`. A connection found broken after a failure is replaced before the next
 * transaction starts (never inside one: its earlier statements are lost with the old connection).
 */
export class PostgresConnection implements SqlConnection {
  private client: NativeClient;
  private readonly conninfo: string;
  private readonly translated = new Map<string, string>();
  private depth = 0;
  private versions = 0;
  /** The open transaction wrote something (so the commit check applies). */
  private wrote = false;
  /**
   * A statement of the open transaction may have changed data: a write, or a statement of this dialect (`query`,
   * `script`: the lease, the schema). Only then does a COMMIT lost on the way leave something unknown.
   */
  private mayHaveChanged = false;
  private broken = false;
  private closed = false;
  private commitCheck: CommitCheck | undefined;
  /** The first statement that failed since the transaction (or the savepoint rolled back to) was last sound. */
  private failed: FailedStatement | undefined;

  constructor(
    private readonly url: string,
    readonly now: () => number,
    bounds?: ConnectionBounds,
  ) {
    this.conninfo = boundedConninfo(url, bounds);
    this.client = this.connect();
  }

  private connect(): NativeClient {
    const client = newNativeClient();
    try {
      client.connectSync(this.conninfo);
    } catch (e) {
      throw new PostgresError(
        `cannot connect to PostgreSQL at ${redactUrl(this.url)}: ${firstLine((e as Error).message)}`,
        undefined,
        true,
      );
    }
    return client;
  }

  /** Every write transaction from now on runs `check` before it commits. */
  setCommitCheck(check: CommitCheck | undefined): void {
    this.commitCheck = check;
  }

  transaction<T>(fn: () => T): T {
    const outer = this.depth === 0;
    const savepoint = `fleetwise_${this.depth}`;
    if (outer) {
      this.retriedOnNewConnection(() => this.execute('BEGIN', []));
      this.failed = undefined;
    } else this.execute(`SAVEPOINT ${savepoint}`, []);
    this.depth += 1;
    try {
      const result = fn();
      if (isThenable(result)) throw new StateStoreError('a transaction function must not be async');
      // A statement failed and `fn` caught the error: PostgreSQL aborted the transaction, and COMMIT would quietly
      // roll it back (RELEASE would fail) while the caller believed its writes made. Say so instead.
      this.throwIfAborted();
      if (outer) {
        if (this.wrote) this.commitCheck?.();
        this.commit();
      } else this.execute(`RELEASE SAVEPOINT ${savepoint}`, []);
      return result;
    } catch (e) {
      this.rollback(outer ? 'ROLLBACK' : `ROLLBACK TO SAVEPOINT ${savepoint}`);
      throw e;
    } finally {
      this.depth -= 1;
      if (outer) {
        this.wrote = false;
        this.mayHaveChanged = false;
        this.failed = undefined;
      }
    }
  }

  /**
   * COMMIT the outermost transaction. PostgreSQL refusing it (a deferred constraint, a serialization failure) rolled
   * the transaction back, and that error says so; the connection lost with no answer leaves the outcome unknown.
   */
  private commit(): void {
    try {
      this.execute('COMMIT', []);
    } catch (e) {
      if (this.broken && this.mayHaveChanged && e instanceof PostgresError)
        throw new CommitOutcomeUnknownError(e);
      throw e;
    }
  }

  private throwIfAborted(): void {
    if (this.client.pq.transactionStatus() !== TRANSACTION_FAILED) return;
    const failed = this.failed;
    if (failed === undefined)
      throw new PostgresError(
        'PostgreSQL: the transaction failed, and the failure was not passed on; rolled back, nothing of it written',
        undefined,
      );
    throw new PostgresError(
      `PostgreSQL: the transaction failed at \`${failed.statement}\` (${failed.error.message}), and the failure was ` +
        'not passed on; rolled back, nothing of it written',
      failed.error.sqlState,
      failed.error.transient,
    );
  }

  /** Undo after a failure; a rollback that fails too (connection lost) leaves the error that caused it to be seen. */
  private rollback(sql: string): void {
    try {
      this.execute(sql, []);
      // Rolled back to a savepoint, the transaction is sound again.
      this.failed = undefined;
    } catch {
      // the original error says what went wrong
    }
  }

  run(sql: string, ...params: Param[]): number {
    // A write outside a transaction still gets its own, so the commit check covers it.
    if (this.depth === 0) return this.transaction(() => this.run(sql, ...params));
    this.wrote = true;
    this.mayHaveChanged = true;
    this.execute(this.translate(sql), params, sql);
    const changed = Number.parseInt(this.client.pq.cmdTuples(), 10);
    return Number.isNaN(changed) ? 0 : changed;
  }

  get(sql: string, ...params: Param[]): Row | undefined {
    return this.all(sql, ...params)[0];
  }

  all(sql: string, ...params: Param[]): Row[] {
    const text = this.translate(sql);
    // Outside a transaction a read stands alone: repeating it on a new connection changes nothing.
    if (this.depth === 0) return this.retriedOnNewConnection(() => this.execute(text, params, sql));
    return this.execute(text, params, sql);
  }

  /** From the `counters` row of the table, locked until the transaction ends (so numbers follow commit order). */
  nextNumber(table: NumberedTable): number {
    if (this.depth === 0) throw new StateStoreError('nextNumber outside a transaction');
    this.wrote = true;
    this.mayHaveChanged = true;
    const row = this.execute('UPDATE counters SET value = value + 1 WHERE name = $1 RETURNING value', [
      table,
    ])[0];
    if (row === undefined) throw new StateStoreError(`no counter for table ${table}`);
    return Number(row['value']);
  }

  /**
   * PostgreSQL has no cheap "changed since" mark, and other connections may write (another controller's fenced
   * attempt, `fleetwise token`): a new version every time, so cached records last one turn of the event loop.
   */
  dataVersion(): number {
    return ++this.versions;
  }

  inTransaction(): boolean {
    return this.depth > 0;
  }

  numberUsed(table: NumberedTable, number: number): void {
    if (this.depth === 0) throw new StateStoreError('numberUsed outside a transaction');
    this.wrote = true;
    this.mayHaveChanged = true;
    this.execute('UPDATE counters SET value = GREATEST(value, $2) WHERE name = $1', [table, number]);
  }

  /** Statements of this dialect, `$n` parameters, outside the shared queries (schema, lease). */
  query(sql: string, params: readonly Param[] = []): Row[] {
    if (this.depth === 0) this.reconnectIfBroken();
    else this.mayHaveChanged = true;
    return this.execute(sql, params);
  }

  /** Several statements at once (PQexec: no parameters), e.g. a migration. */
  script(sql: string): void {
    if (this.depth === 0) this.reconnectIfBroken();
    else this.mayHaveChanged = true;
    try {
      this.client.querySync(sql);
    } catch (e) {
      throw this.failure(e, sql);
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    endNativeClient(this.client);
  }

  /** `asWritten`: the statement as its caller wrote it (`?` parameters), which a refused parameter's error quotes. */
  private execute(sql: string, params: readonly Param[], asWritten = sql): Row[] {
    if (this.closed) throw new StateStoreError('the PostgreSQL store is closed');
    // As SQLite does (sqlite-state-store.ts), so a value neither stores alike is refused alike, in the same words.
    checkParams(asWritten, params);
    // libpq sends text parameters as C strings: one holding NUL would be cut there and stored short, without an error.
    // Each NUL is stored as U+FFFD instead, so that no write (a task's failure reason quoting binary output, an event)
    // is lost or refused for it; the API refuses control characters in the text users send.
    const sent = params.some((p) => typeof p === 'string' && p.includes('\u0000'))
      ? params.map((p) => (typeof p === 'string' ? p.replaceAll('\u0000', '\ufffd') : p))
      : params;
    try {
      return this.client.querySync(
        sql,
        sent.map((p) => (p === null ? null : String(p))),
      );
    } catch (e) {
      throw this.failure(e, asWritten);
    }
  }

  /** `statement`: what failed, as its caller wrote it, remembered when it aborts the open transaction. */
  private failure(e: unknown, statement: string): PostgresError {
    if (this.client.pq.transactionStatus() === CONNECTION_BAD) this.broken = true;
    const fields = this.client.pq.resultErrorFields();
    const primary = fields?.messagePrimary ?? firstLine(e instanceof Error ? e.message : String(e));
    const detail = fields?.messageDetail === undefined ? '' : ` (${fields.messageDetail})`;
    const sqlState = fields?.sqlState;
    const meaning = sqlState === undefined ? '' : ` [${describeSqlState(sqlState)}]`;
    // A statement refused because an earlier one failed: the earlier one is the cause, and says whether it passes.
    const cause = sqlState === IN_FAILED_TRANSACTION ? this.failed : undefined;
    const earlier =
      cause === undefined
        ? ''
        : `; the transaction had failed at \`${cause.statement}\`: ${cause.error.message}`;
    // A connection that broke has no SQLSTATE, and is replaced before the next transaction: worth trying again
    // (but for a COMMIT, which may have been carried out: `commit` says so instead).
    const error = new PostgresError(
      `PostgreSQL: ${primary}${detail}${meaning}${earlier}`,
      sqlState,
      this.broken || isTransientSqlState(sqlState) || cause?.error.transient === true,
    );
    // PostgreSQL ends a transaction's use at its first failed statement: that one is what a later COMMIT reports.
    if (this.depth > 0 && this.client.pq.transactionStatus() === TRANSACTION_FAILED)
      this.failed ??= { statement: statementHead(statement), error };
    return error;
  }

  /**
   * Run `attempt`, which must be safe to repeat (a BEGIN, or a read outside a transaction), once more on a new
   * connection when the old one turned out to be gone (the server restarted, or a failover moved it).
   */
  private retriedOnNewConnection<T>(attempt: () => T): T {
    this.reconnectIfBroken();
    try {
      return attempt();
    } catch (e) {
      if (!this.broken) throw e;
      this.reconnectIfBroken();
      return attempt();
    }
  }

  private reconnectIfBroken(): void {
    if (!this.broken || this.closed) return;
    try {
      endNativeClient(this.client);
    } catch {
      // already gone
    }
    this.client = this.connect();
    this.broken = false;
  }

  /** `?` → `$1`, `$2`, … (outside quoted literals), cached per statement text. */
  private translate(sql: string): string {
    let out = this.translated.get(sql);
    if (out !== undefined) return out;
    let n = 0;
    let quoted = false;
    out = '';
    for (const ch of sql) {
      if (ch === "'") quoted = !quoted;
      out += ch === '?' && !quoted ? `$${++n}` : ch;
    }
    this.translated.set(sql, out);
    return out;
  }
}

function isThenable(value: unknown): boolean {
  return (
    typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function'
  );
}

/** A statement on one line, shortened: enough to tell which it is. */
function statementHead(sql: string): string {
  const flat = sql.replace(/\s+/g, ' ').trim();
  return flat.length > 80 ? `${flat.slice(0, 80)}…` : flat;
}

function firstLine(message: string): string {
  return message.replace(/^ERROR:\s+/, '').split('\n')[0] ?? message;
}
