import Database from 'better-sqlite3';
import { chmodSync, closeSync, existsSync, openSync } from 'node:fs';
import { StateStoreFaultError, wallClockSeconds, type StateStoreOptions } from '../state-store.js';
import type { Param, Row } from './sql/connection.js';
import { checkParams } from './sql/parameter-check.js';
import { SqlStateStore } from './sql-state-store.js';
import { SqliteConnection } from './sqlite/connection.js';
import { ensureStoreId, migrate } from './sqlite/migrate.js';

/**
 * The state holds job specs with their environments (often credentials): only its owner may read it. SQLite gives a
 * new -wal/-shm the database file's mode, so the file is created 0600 before SQLite opens it; files an older run or
 * an operator left readable are narrowed too, since a mode given at creation never changes an existing file.
 */
function restrictToOwner(path: string): void {
  if (path === '' || path === ':memory:' || path.startsWith('file:')) return;
  closeSync(openSync(path, 'a', 0o600));
  for (const file of [path, `${path}-wal`, `${path}-shm`]) if (existsSync(file)) chmodSync(file, 0o600);
}

/** SQLite's codes for a file that is not, or is no longer, a whole database (SQLITE_CORRUPT_INDEX and the like too). */
const DAMAGED = /^SQLITE_(CORRUPT|NOTADB)/;

function isDamaged(e: unknown): boolean {
  return e instanceof Database.SqliteError && DAMAGED.test(e.code);
}

/**
 * SQLite's own words name neither the file nor a way out ("file is not a database"): the error the operator sees
 * names the state file and, when the file is damaged, how to get a state back.
 */
function stateFileError(path: string, e: unknown): unknown {
  if (!(e instanceof Database.SqliteError)) return e;
  if (!DAMAGED.test(e.code)) return new StateStoreFaultError(`${path}: ${e.message}`, { cause: e });
  return new StateStoreFaultError(
    `${path}: ${e.message}: the state database is damaged. Move it aside (with its -wal and -shm files), then ` +
      'restore the state from a backup (fleetwise controller … --restore-from <backups>), or start a new cluster ' +
      'with --init',
    { cause: e },
  );
}

/**
 * The store's connection, whose reads and writes report a damaged file by its path: damage often shows only when a
 * query first reaches the broken pages, long after the file opened. A parameter PostgreSQL would not store alike
 * (undefined, NaN, Infinity: better-sqlite3 binds the first two as NULL) is refused before its statement runs, as
 * the PostgreSQL store refuses it (sql/parameter-check.ts).
 */
class StateFileConnection extends SqliteConnection {
  constructor(
    db: Database.Database,
    now: () => number,
    private readonly path: string,
  ) {
    super(db, now);
  }

  override run(sql: string, ...params: Param[]): number {
    checkParams(sql, params);
    return this.naming(() => super.run(sql, ...params));
  }

  override get(sql: string, ...params: Param[]): Row | undefined {
    checkParams(sql, params);
    return this.naming(() => super.get(sql, ...params));
  }

  override all(sql: string, ...params: Param[]): Row[] {
    checkParams(sql, params);
    return this.naming(() => super.all(sql, ...params));
  }

  /** `query`, a damaged file's error named by its path; any other error as it came. */
  private naming<T>(query: () => T): T {
    try {
      return query();
    } catch (e) {
      throw isDamaged(e) ? stateFileError(this.path, e) : e;
    }
  }
}

export interface SqliteStateStoreOptions extends StateStoreOptions {
  /**
   * `full` (default) fsyncs the WAL on every commit, so a commit survives power loss too; `normal` survives a killed
   * process but may lose the last commits on an OS crash (SQLite "synchronous" pragma, WAL mode).
   */
  readonly synchronous?: 'full' | 'normal';
  /** Milliseconds to wait for another connection's write lock before failing. */
  readonly busyTimeoutMs?: number;
}

export interface SqliteStoreInfo {
  readonly path: string;
  readonly journalMode: string;
  readonly foreignKeys: boolean;
  readonly synchronous: number;
  readonly schemaVersion: number;
  readonly storeId: string;
}

/**
 * The production StateStore: one SQLite file (better-sqlite3) in WAL mode with foreign keys on. Every method is
 * one IMMEDIATE transaction (the write lock is taken up front, so two writers never deadlock on an upgrade), and a
 * committed transaction survives the process being killed at any point. The schema is versioned by ordered
 * migrations (state/sqlite-schema.ts). The queries are shared with PostgreSQL (sql-state-store.ts).
 */
export class SqliteStateStore extends SqlStateStore {
  private readonly db: Database.Database;
  readonly schemaVersion: number;

  constructor(
    readonly path: string,
    options: SqliteStateStoreOptions = {},
  ) {
    const now = options.nowSeconds ?? wallClockSeconds;
    restrictToOwner(path);
    let db: Database.Database;
    try {
      db = new Database(path, { timeout: options.busyTimeoutMs ?? 5000 });
    } catch (e) {
      throw stateFileError(path, e);
    }
    let schemaVersion: number;
    let storeId: string;
    try {
      db.pragma('journal_mode = WAL');
      restrictToOwner(path);
      db.pragma(`synchronous = ${options.synchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
      db.pragma('foreign_keys = ON');
      schemaVersion = migrate(db, path, now);
      storeId = ensureStoreId(db);
    } catch (e) {
      db.close();
      throw stateFileError(path, e);
    }
    super(new StateFileConnection(db, now, path), storeId);
    this.db = db;
    this.schemaVersion = schemaVersion;
  }

  info(): SqliteStoreInfo {
    return {
      path: this.path,
      journalMode: String(this.db.pragma('journal_mode', { simple: true })),
      foreignKeys: this.db.pragma('foreign_keys', { simple: true }) === 1,
      synchronous: Number(this.db.pragma('synchronous', { simple: true })),
      schemaVersion: this.schemaVersion,
      storeId: this.storeId,
    };
  }

  /**
   * Copy the database as of one moment to `destination` (a new file) with SQLite's online backup: pages are copied in
   * steps between turns of the event loop, so the loop and the API go on meanwhile; writes made during the copy are
   * carried into it (the same connection writes both).
   */
  async snapshotTo(destination: string): Promise<void> {
    await this.db.backup(destination);
  }

  /**
   * A mark that changes whenever the database does: this connection's writes (total_changes) and other
   * connections' commits (data_version). Equal marks mean nothing was written in between.
   */
  changeMark(): string {
    const changes = Number(this.db.prepare('SELECT total_changes()').pluck().get());
    return `${changes}:${Number(this.db.pragma('data_version', { simple: true }))}`;
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
