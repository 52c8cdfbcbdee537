/**
 * The SQLite schema as ordered migrations. A migration is applied once, in its own transaction together with its
 * row in `schema_migrations`; never edit a released migration, add the next one. Opening a database whose newest
 * migration is above `LATEST_SCHEMA_VERSION` fails (a newer fleetwise wrote it).
 */
export interface Migration {
  readonly version: number;
  readonly description: string;
  readonly sql: string;
  /**
   * The migration rebuilds a table other tables reference (SQLite cannot alter a CHECK constraint): it runs with
   * foreign keys off, and `PRAGMA foreign_key_check` must find nothing before it commits (SQLite's documented
   * procedure for schema changes, https://www.sqlite.org/lang_altertable.html#otheralter).
   */
  readonly rebuildsTables?: boolean;
}

const states = (values: readonly string[]): string => values.map((v) => `'${v}'`).join(', ');

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'jobs, tasks, instances, intents, plans, events, team tokens, key-values',
    sql: `
      CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
      ) STRICT;

      CREATE TABLE jobs (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        team TEXT NOT NULL,
        spec_json TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN (${states(['queued', 'starting', 'running', 'migrating', 'succeeded', 'failed', 'cancelled'])})),
        reason TEXT,
        submitted_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL,
        updated_at REAL NOT NULL,
        completed_iterations REAL NOT NULL DEFAULT 0,
        total_iterations REAL,
        migrations INTEGER NOT NULL DEFAULT 0
      ) STRICT;
      CREATE INDEX jobs_by_state ON jobs (state);
      CREATE INDEX jobs_by_team ON jobs (team);

      CREATE TABLE instances (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        cloud_id TEXT UNIQUE,
        type_name TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN (${states(['requested', 'launching', 'running', 'draining', 'terminating', 'terminated'])})),
        availability_zone TEXT,
        launch_token TEXT NOT NULL UNIQUE,
        requested_at REAL NOT NULL,
        launched_at REAL,
        running_at REAL,
        terminated_at REAL,
        updated_at REAL NOT NULL,
        worker_token_hash TEXT UNIQUE,
        reason TEXT
      ) STRICT;
      CREATE INDEX instances_by_state ON instances (state);

      CREATE TABLE tasks (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        job_id TEXT NOT NULL REFERENCES jobs (id),
        task_index INTEGER NOT NULL,
        name TEXT NOT NULL,
        workload_key TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN (${states(['pending', 'starting', 'running', 'checkpointing', 'stopped', 'succeeded', 'failed'])})),
        instance_id TEXT REFERENCES instances (id),
        last_checkpoint_key TEXT,
        last_checkpoint_at REAL,
        updated_at REAL NOT NULL,
        UNIQUE (job_id, task_index)
      ) STRICT;
      CREATE INDEX tasks_by_instance ON tasks (instance_id) WHERE instance_id IS NOT NULL;

      CREATE TABLE intents (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        idempotency_key TEXT UNIQUE,
        round INTEGER,
        payload_json TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'done', 'failed')),
        error TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
      ) STRICT;
      CREATE INDEX intents_pending ON intents (id) WHERE state = 'pending';

      CREATE TABLE plans (
        round INTEGER PRIMARY KEY AUTOINCREMENT,
        at_seconds REAL NOT NULL,
        scheduler TEXT NOT NULL,
        chosen TEXT NOT NULL,
        configuration_json TEXT NOT NULL,
        decision_json TEXT NOT NULL
      ) STRICT;

      CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at_seconds REAL NOT NULL,
        kind TEXT NOT NULL,
        job_id TEXT,
        task_id TEXT,
        instance_id TEXT,
        message TEXT,
        data_json TEXT
      ) STRICT;
      CREATE INDEX events_by_job ON events (job_id, seq) WHERE job_id IS NOT NULL;
      CREATE INDEX events_by_instance ON events (instance_id, seq) WHERE instance_id IS NOT NULL;

      -- Only the sha256 of a token is kept.
      CREATE TABLE team_tokens (
        token_hash TEXT PRIMARY KEY,
        team TEXT NOT NULL,
        label TEXT,
        created_at REAL NOT NULL,
        revoked_at REAL
      ) STRICT;

      CREATE TABLE kv (
        key TEXT PRIMARY KEY,
        value_json TEXT NOT NULL,
        updated_at REAL NOT NULL
      ) STRICT;
    `,
  },
  {
    version: 2,
    description: "job state 'unsuccessful' (stopped at a stage)",
    rebuildsTables: true,
    sql: `
      CREATE TABLE jobs_v2 (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        team TEXT NOT NULL,
        spec_json TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN (${states(['queued', 'starting', 'running', 'migrating', 'succeeded', 'failed', 'cancelled', 'unsuccessful'])})),
        reason TEXT,
        submitted_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL,
        updated_at REAL NOT NULL,
        completed_iterations REAL NOT NULL DEFAULT 0,
        total_iterations REAL,
        migrations INTEGER NOT NULL DEFAULT 0
      ) STRICT;
      INSERT INTO jobs_v2 (seq, id, name, team, spec_json, state, reason, submitted_at, started_at, finished_at,
                           updated_at, completed_iterations, total_iterations, migrations)
        SELECT seq, id, name, team, spec_json, state, reason, submitted_at, started_at, finished_at,
               updated_at, completed_iterations, total_iterations, migrations FROM jobs;
      DROP TABLE jobs;
      ALTER TABLE jobs_v2 RENAME TO jobs;
      CREATE INDEX jobs_by_state ON jobs (state);
      CREATE INDEX jobs_by_team ON jobs (team);
    `,
  },
  {
    version: 3,
    description: 'job attempts and the failures of retried attempts (retryStrategy)',
    sql: `
      ALTER TABLE jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1;
      ALTER TABLE jobs ADD COLUMN attempt_failures_json TEXT;
    `,
  },
  {
    version: 4,
    description: "instances' cluster placement group (latency-aware placement)",
    sql: `
      ALTER TABLE instances ADD COLUMN placement_group TEXT;
    `,
  },
  {
    version: 5,
    description: 'events by job and kind, and by instance and kind',
    // Each round reads a few kinds of a job's or an instance's events (when it last started running, where it lost
    // capacity, a market fallback); a job running for weeks holds tens of thousands of checkpoint events, which the
    // (job_id, seq) index alone made every such read walk.
    sql: `
      CREATE INDEX events_by_job_kind ON events (job_id, kind, seq) WHERE job_id IS NOT NULL;
      CREATE INDEX events_by_instance_kind ON events (instance_id, kind, seq) WHERE instance_id IS NOT NULL;
    `,
  },
  {
    version: 6,
    description: 'tasks by state, and events by kind',
    // The reconciler reads tasks by state at every pass, and the tasks of every job ever run stay in the table; the
    // incremental cost report reads a few kinds of event, and history retention deletes old checkpoint events, which
    // without an index walked the whole log.
    sql: `
      CREATE INDEX tasks_by_state ON tasks (state);
      CREATE INDEX events_by_kind ON events (kind, seq);
    `,
  },
];

export const LATEST_SCHEMA_VERSION = MIGRATIONS.reduce((v, m) => Math.max(v, m.version), 0);

export const MIGRATIONS_TABLE_SQL = `
  CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at REAL NOT NULL
  ) STRICT`;
