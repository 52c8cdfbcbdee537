import { wallClockSeconds, type StateStoreOptions } from '../state-store.js';
import { SqlStateStore } from './sql-state-store.js';
import type { ConnectionBounds } from './postgres/conninfo.js';
import { redactUrl } from './postgres/conninfo.js';
import { PostgresConnection } from './postgres/connection.js';
import { PostgresLeaseTable } from './postgres/lease-table.js';
import type { LeaseTerm } from '../ha/lease.js';
import { migratePostgres, storeIdOf } from './postgres/migrate.js';

export interface PostgresStateStoreOptions extends StateStoreOptions {
  /** Bounds on every wait for the database (postgres/conninfo.ts); settings in the URL win. */
  readonly bounds?: ConnectionBounds;
}

/**
 * The StateStore in PostgreSQL, for controllers that share one database (active and standby, ha/): the same
 * queries as SQLite (sql-state-store.ts) over one synchronous libpq connection (pg-native), in the schema the
 * connection's search_path names first (postgres/schema.ts). Every method is one transaction, as with SQLite; the
 * active controller's writes are fenced by its lease (`fenceWith`).
 */
export class PostgresStateStore extends SqlStateStore {
  private readonly postgres: PostgresConnection;
  readonly schemaVersion: number;
  /** The URL without its password. */
  readonly where: string;

  constructor(url: string, options: PostgresStateStoreOptions = {}) {
    const now = options.nowSeconds ?? wallClockSeconds;
    const connection = new PostgresConnection(url, now, options.bounds);
    let schemaVersion: number;
    let storeId: string;
    try {
      schemaVersion = migratePostgres(connection, redactUrl(url), now);
      storeId = storeIdOf(connection);
    } catch (e) {
      connection.close();
      throw e;
    }
    super(connection, storeId);
    this.postgres = connection;
    this.schemaVersion = schemaVersion;
    this.where = redactUrl(url);
  }

  /** The lease of this name, kept in this database (created free when missing). */
  lease(name: string): PostgresLeaseTable {
    return new PostgresLeaseTable(this.postgres, name);
  }

  /**
   * From now on every write transaction commits only while `lease` is still in `term`, its epoch and holder (checked
   * in the transaction, the row held until it commits): a controller whose lease passed to another can no longer
   * change the state.
   */
  fenceWith(lease: PostgresLeaseTable, term: LeaseTerm): void {
    this.postgres.setCommitCheck(() => lease.checkTerm(term));
  }

  close(): void {
    this.postgres.close();
  }
}
