import { randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import { SchemaVersionError, StateStoreError } from '../../state-store.js';
import { LATEST_SCHEMA_VERSION, MIGRATIONS, MIGRATIONS_TABLE_SQL } from '../sqlite-schema.js';

/**
 * Apply migrations up to LATEST_SCHEMA_VERSION and return the schema version; refuse a database written by a newer
 * fleetwise, or one that is not a fleetwise state database.
 */
export function migrate(db: Database.Database, path: string, now: () => number): number {
  const current = (): number =>
    Number(db.prepare('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations').pluck().get());
  const tables = db
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    .pluck()
    .all() as string[];
  if (tables.length > 0 && !tables.includes('schema_migrations'))
    throw new StateStoreError(
      `${path} is not a fleetwise state database (it has tables ${tables.join(', ')})`,
    );
  db.exec(MIGRATIONS_TABLE_SQL);
  const found = current();
  if (found > LATEST_SCHEMA_VERSION)
    throw new SchemaVersionError(
      `${path}: database schema version ${found} is newer than this fleetwise supports (${LATEST_SCHEMA_VERSION}); upgrade fleetwise, or point it at another database`,
    );
  for (const m of [...MIGRATIONS].sort((a, b) => a.version - b.version)) {
    if (current() >= m.version) continue;
    // The foreign_keys pragma is a no-op inside a transaction: turn it off around the one that rebuilds a table.
    if (m.rebuildsTables === true) db.pragma('foreign_keys = OFF');
    try {
      db.transaction(() => {
        // Re-read under the write lock: another process may have migrated since.
        if (current() >= m.version) return;
        db.exec(m.sql);
        if (m.rebuildsTables === true) {
          const broken = db.pragma('foreign_key_check') as unknown[];
          if (broken.length > 0)
            throw new StateStoreError(
              `migration ${m.version} would break ${broken.length} foreign key(s); the database is left as it was`,
            );
        }
        db.prepare('INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)').run(
          m.version,
          m.description,
          now(),
        );
      }).immediate();
    } finally {
      if (m.rebuildsTables === true) db.pragma('foreign_keys = ON');
    }
  }
  return current();
}

/**
 * Give a restored copy of a database an id of its own. Launch tokens carry the store id and its instance number, and
 * the old controller may have launched instances after its last backup with the numbers the copy gives again: with
 * the same id, a new launch would reuse such an instance's token (EC2's ClientToken) instead of launching.
 */
export function renewStoreId(db: Database.Database): string {
  const id = randomUUID();
  db.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES ('store_id', ?)").run(id);
  return id;
}

/** The store's id, made once when the database is created (launch tokens carry it). */
export function ensureStoreId(db: Database.Database): string {
  db.prepare("INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?)").run(randomUUID());
  return String(db.prepare("SELECT value FROM meta WHERE key = 'store_id'").pluck().get());
}
