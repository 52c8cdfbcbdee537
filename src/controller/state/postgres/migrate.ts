import { randomUUID } from 'node:crypto';
import { SchemaVersionError, StateStoreError } from '../../state-store.js';
import { PostgresError, type PostgresConnection } from './connection.js';
import { LATEST_POSTGRES_SCHEMA_VERSION, POSTGRES_MIGRATIONS } from './schema.js';

/** Any 64-bit number, the same in every fleetwise: the advisory lock two controllers migrating at once queue on. */
export const MIGRATION_LOCK = 0x666c656574;

/**
 * Apply the migrations up to the latest in the connection's current schema and return the schema version; refuse a
 * schema written by a newer fleetwise, or one holding tables that are not fleetwise's. Two controllers starting
 * together against a new database take turns on an advisory lock, and the second finds the work done.
 */
export function migratePostgres(connection: PostgresConnection, where: string, now: () => number): number {
  try {
    return migrate(connection, where, now);
  } catch (e) {
    throw located(e, where, connection);
  }
}

/**
 * A migration's error, naming the store (the URL without its password) when it does not already: PostgreSQL's own
 * words name neither the database nor the schema. A missing schema (3F000: the search_path names none that exists)
 * also names the search_path and database the connection has.
 */
function located(e: unknown, where: string, connection: PostgresConnection): unknown {
  if (!(e instanceof Error) || e.message.includes(where)) return e;
  let context = '';
  if (e instanceof PostgresError && e.sqlState?.startsWith('3F') === true) {
    try {
      const row = connection.query(
        "SELECT current_setting('search_path') AS search_path, current_database() AS database",
      )[0];
      context = ` (search_path ${String(row?.['search_path'])} in database ${String(row?.['database'])})`;
    } catch {
      // the error itself still says what failed
    }
  }
  // The same error, so its class and whether it is transient stay.
  e.message = `${where}: ${e.message}${context}`;
  return e;
}

function migrate(connection: PostgresConnection, where: string, now: () => number): number {
  return connection.transaction(() => {
    // The connection's statement and lock timeouts bound a controller's queries, not this: waiting for another
    // controller's migrations, or a migration rewriting a large table, may take longer, and failing half-way through an
    // upgrade (rolled back, retried at every start) would keep the controller down. It runs before the controller
    // contends for the lease, so no renewal waits on it. For this transaction only.
    connection.query('SET LOCAL statement_timeout = 0');
    connection.query('SET LOCAL lock_timeout = 0');
    connection.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    const tables = connection
      .query(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'",
      )
      .map((r) => String(r['table_name']));
    if (tables.length > 0 && !tables.includes('schema_migrations'))
      throw new StateStoreError(
        `${where} is not a fleetwise state database (its schema has tables ${tables.sort().join(', ')})`,
      );
    if (!tables.includes('schema_migrations'))
      connection.script(`
      CREATE TABLE schema_migrations (
        version INTEGER PRIMARY KEY,
        description TEXT NOT NULL,
        applied_at DOUBLE PRECISION NOT NULL
      )`);
    const current = (): number =>
      Number(connection.query('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations')[0]?.['v'] ?? 0);
    const found = current();
    if (found > LATEST_POSTGRES_SCHEMA_VERSION)
      throw new SchemaVersionError(
        `${where}: database schema version ${found} is newer than this fleetwise supports (${LATEST_POSTGRES_SCHEMA_VERSION}); upgrade fleetwise, or point it at another database`,
      );
    for (const m of [...POSTGRES_MIGRATIONS].sort((a, b) => a.version - b.version)) {
      if (m.version <= found) continue;
      connection.script(m.sql);
      connection.query(
        'INSERT INTO schema_migrations (version, description, applied_at) VALUES ($1, $2, $3)',
        [m.version, m.description, now()],
      );
    }
    connection.query("INSERT INTO meta (key, value) VALUES ('store_id', $1) ON CONFLICT (key) DO NOTHING", [
      randomUUID(),
    ]);
    return current();
  });
}

/** The store's id, made once when the database is created (launch tokens carry it). */
export function storeIdOf(connection: PostgresConnection): string {
  return String(connection.query("SELECT value FROM meta WHERE key = 'store_id'")[0]?.['value']);
}
