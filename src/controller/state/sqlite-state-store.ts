import Database from 'better-sqlite3';
import { chmodSync, closeSync, existsSync, openSync } from 'node:fs';
import { wallClockSeconds, type StateStoreOptions } from '../state-store.js';
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
    const db = new Database(path, { timeout: options.busyTimeoutMs ?? 5000 });
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
      throw e;
    }
    super(new SqliteConnection(db, now), storeId);
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
