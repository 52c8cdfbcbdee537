import Database from 'better-sqlite3';
import {
  closeSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { ValidationError } from '../../core/validation.js';
import { SCHEDULER_STATE_KEY } from '../../controller/scheduler-state.js';
import { LATEST_SCHEMA_VERSION } from '../../controller/state/sqlite-schema.js';
import { eventFromRow, jobFromRow } from '../../controller/state/sql/rows.js';
import type { Param, Row } from '../../controller/state/sql/connection.js';
import { PostgresConnection } from '../../controller/state/postgres/connection.js';
import { redactUrl, TOOL_CONNECTION_BOUNDS } from '../../controller/state/postgres/conninfo.js';
import { LATEST_POSTGRES_SCHEMA_VERSION } from '../../controller/state/postgres/schema.js';
import { wallClockSeconds } from '../../controller/state-store.js';
import { JOB_STATE_EVENT, TASK_STATE_EVENT, WORK_EVENT_KINDS, type StateHistory } from './state-history.js';

/**
 * A controller's job history read from its state without changing it (`fleetwise export-trace`), from either store
 * the controller keeps it in: a SQLite file opened read-only (the store's own constructor would migrate the file and
 * set its journal mode, which an export must not do to a live or an older controller's state), or PostgreSQL in a
 * read-only transaction (the store's constructor would migrate the schema a live controller runs on). Both read in
 * one transaction, so jobs and their events come from one snapshot even while a controller writes, and map rows with
 * the store's own row readers, so records read here are the ones the controller sees.
 */

export interface ReadStateHistoryOptions {
  /** Also read the scheduler's saved learned state (Eva's table and event history), which only some exports need. */
  readonly schedulerState?: boolean;
}

/** What better-sqlite3 throws for SQLite's errors (its types give only the class). */
type SqliteError = InstanceType<typeof Database.SqliteError>;

/** The few reads an export makes, in the `?`-parameter SQL both stores share (state/sql/connection.ts). */
type Query = (sql: string, ...params: Param[]) => Row[];

/** The tables every fleetwise state has; an export refuses a database without them. */
const REQUIRED_TABLES = ['schema_migrations', 'jobs', 'events'];

function historyFrom(
  query: Query,
  where: string,
  tables: readonly string[],
  latestVersion: number,
  options: ReadStateHistoryOptions,
): StateHistory {
  const missing = REQUIRED_TABLES.filter((t) => !tables.includes(t));
  if (missing.length > 0)
    throw new ValidationError(where, [
      `not a fleetwise state database: no ${missing.join(', ')} table${missing.length > 1 ? 's' : ''} (it has ${tables.length === 0 ? 'no tables' : [...tables].sort().join(', ')})`,
    ]);
  const version = Number(
    query('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations')[0]?.['v'] ?? 0,
  );
  if (version > latestVersion)
    throw new ValidationError(where, [
      `schema version ${version} is newer than this fleetwise reads (${latestVersion}); export with the fleetwise that wrote it`,
    ]);
  const jobs = query('SELECT * FROM jobs ORDER BY seq').map(jobFromRow);
  const jobStateEvents = query('SELECT * FROM events WHERE kind = ? ORDER BY seq', JOB_STATE_EVENT).map(
    eventFromRow,
  );
  // Of the many task changes only those into checkpointing, picked out by their text (both stores keep the data as
  // JSON text) and then by their data.
  const others = WORK_EVENT_KINDS.filter((k) => k !== TASK_STATE_EVENT);
  const workEvents = query(
    `SELECT * FROM events WHERE kind IN (${others.map(() => '?').join(', ')}) OR (kind = ? AND data_json LIKE ?) ORDER BY seq`,
    ...others,
    TASK_STATE_EVENT,
    '%"checkpointing"%',
  )
    .map(eventFromRow)
    .filter((e) => e.kind !== TASK_STATE_EVENT || intoCheckpointing(e.data));
  const saved =
    options.schedulerState === true && tables.includes('kv')
      ? query('SELECT value_json FROM kv WHERE key = ?', SCHEDULER_STATE_KEY)[0]?.['value_json']
      : undefined;
  return {
    jobs,
    jobStateEvents,
    workEvents,
    ...(typeof saved === 'string' ? { schedulerState: JSON.parse(saved) as unknown } : {}),
  };
}

function intoCheckpointing(data: unknown): boolean {
  return (
    typeof data === 'object' && data !== null && (data as { readonly to?: unknown }).to === 'checkpointing'
  );
}

/** Read a SQLite state file (`<state-dir>/state.db`). */
export function readSqliteStateHistory(dbPath: string, options: ReadStateHistoryOptions = {}): StateHistory {
  if (!existsSync(dbPath))
    throw new ValidationError(dbPath, [
      "no controller state here (is --state-dir the controller's state directory?)",
    ]);
  try {
    return readSqliteFile(dbPath, dbPath, options);
  } catch (e) {
    if (!needsFilesBeside(e)) throw e;
    try {
      // Opened, not access(2)ed: that asks about the real user, where the reads are the effective user's.
      closeSync(openSync(dbPath, 'r'));
    } catch (denied) {
      throw new ValidationError(dbPath, [`cannot open the state database: ${(denied as Error).message}`]);
    }
    return readCopy(dbPath, e, options);
  }
}

/**
 * SQLite could not make the files a reader of a WAL database keeps beside it (`state.db-shm`): the state is in a
 * directory this user cannot write to (a read-only mount, another user's state directory, an archived copy).
 */
function needsFilesBeside(e: unknown): e is SqliteError {
  return e instanceof Database.SqliteError && /^SQLITE_(CANTOPEN|READONLY)/.test(e.code);
}

/** Read `file`, naming `where` in what goes wrong; an error `needsFilesBeside` is passed on as SQLite gave it. */
function readSqliteFile(file: string, where: string, options: ReadStateHistoryOptions): StateHistory {
  let db: Database.Database;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
  } catch (e) {
    if (needsFilesBeside(e)) throw e;
    throw new ValidationError(where, [`cannot open the state database: ${(e as Error).message}`]);
  }
  try {
    // A deferred transaction: in WAL mode its reads all see the state as of its first one.
    return db.transaction(() => {
      let tables: string[];
      try {
        tables = db
          .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
          .pluck()
          .all() as string[];
      } catch (e) {
        if (needsFilesBeside(e)) throw e;
        // Only a file SQLite does not take for a database at all is not a state; a damaged one is a state still.
        const notOurs = e instanceof Database.SqliteError && e.code === 'SQLITE_NOTADB';
        throw new ValidationError(where, [
          `${notOurs ? 'not a fleetwise state database' : 'cannot read the state database'}: ${(e as Error).message}`,
        ]);
      }
      const query: Query = (sql, ...params) => db.prepare(sql).all(...params) as Row[];
      return historyFrom(query, where, tables, LATEST_SCHEMA_VERSION, options);
    })();
  } finally {
    db.close();
  }
}

/**
 * Read a copy of the database and its log, made in a private temporary directory where SQLite may write beside it;
 * the copy is removed afterwards, and the state is left as it was.
 */
function readCopy(dbPath: string, cause: SqliteError, options: ReadStateHistoryOptions): StateHistory {
  const cannot = (why: string): ValidationError =>
    new ValidationError(dbPath, [
      `cannot read the state database: ${cause.message}: SQLite must write ${basename(dbPath)}-shm beside it, ` +
        `which this user cannot, and ${why}; copy the state directory somewhere writable and export from the copy`,
    ]);
  removeAbandonedCopies();
  let dir: string;
  try {
    dir = mkdtempSync(join(tmpdir(), `${COPY_PREFIX}${process.pid}-`));
  } catch (e) {
    throw cannot(`no temporary directory to copy it to could be made (${(e as Error).message})`);
  }
  try {
    const copy = join(dir, basename(dbPath));
    try {
      copyConsistently(dbPath, copy);
    } catch (e) {
      throw cannot(`copying it to a temporary directory failed (${(e as Error).message})`);
    }
    try {
      return readSqliteFile(copy, dbPath, options);
    } catch (e) {
      if (needsFilesBeside(e))
        throw cannot(`its copy in a temporary directory could not be read either (${e.message})`);
      throw e;
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A copy's directory: the prefix, the reading process's pid, a dash, mkdtemp's suffix. */
const COPY_PREFIX = 'fleetwise-export-';
const COPY_DIR = /^fleetwise-export-(\d+)-/;

/**
 * Remove the copies earlier reads of this user left: a signal or a kill ends an export without its `finally`, and its
 * copy (the whole state: job environments, token hashes) would stay in the temporary directory for good. A copy is
 * abandoned when the process named in its directory's name is gone.
 */
function removeAbandonedCopies(): void {
  const root = tmpdir();
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return;
  }
  for (const name of names) {
    const pid = Number(COPY_DIR.exec(name)?.[1] ?? Number.NaN);
    if (!Number.isInteger(pid) || pid === process.pid || processAlive(pid)) continue;
    const path = join(root, name);
    try {
      if (statSync(path).uid === process.geteuid?.()) rmSync(path, { recursive: true, force: true });
    } catch {
      // Gone meanwhile, or not this user's to remove: another export's sweep, or its owner's, deals with it.
    }
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: it runs, as another user.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Copy a database and its write-ahead log (the commits not yet moved into the database). A controller that can write
 * there may commit meanwhile, so the copy is made again until neither file changed while it was made.
 */
function copyConsistently(from: string, to: string): void {
  const mark = (): string =>
    [from, `${from}-wal`]
      .map((f) => {
        const s = statSync(f, { throwIfNoEntry: false });
        return s === undefined ? '-' : `${s.size}:${s.mtimeMs}`;
      })
      .join(' ');
  for (let attempt = 0; attempt < 5; attempt += 1) {
    const before = mark();
    copyFileSync(from, to);
    rmSync(`${to}-wal`, { force: true });
    if (existsSync(`${from}-wal`)) copyFileSync(`${from}-wal`, `${to}-wal`);
    if (mark() === before) return;
  }
  throw new Error('it changed every time it was copied');
}

/** Read a PostgreSQL state (`fleetwise controller --state postgres://…`), in the schema its search_path names first. */
export function readPostgresStateHistory(url: string, options: ReadStateHistoryOptions = {}): StateHistory {
  const where = redactUrl(url);
  let connection: PostgresConnection;
  try {
    // Not the controller's bounds: this reader holds no lease, and a large state keeps its transaction open for long.
    connection = new PostgresConnection(url, wallClockSeconds, TOOL_CONNECTION_BOUNDS);
  } catch (e) {
    throw new ValidationError('--state', [(e as Error).message]);
  }
  try {
    return connection.transaction(() => {
      // First in the transaction, as PostgreSQL requires: one snapshot for every read, and no write can slip in.
      connection.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
      const tables = connection
        .query(
          "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'",
        )
        .map((r) => String(r['table_name']));
      const query: Query = (sql, ...params) => connection.all(sql, ...params);
      return historyFrom(query, where, tables, LATEST_POSTGRES_SCHEMA_VERSION, options);
    });
  } finally {
    connection.close();
  }
}
