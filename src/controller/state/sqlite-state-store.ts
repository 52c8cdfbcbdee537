import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import type { JobSpec } from '../job-spec/spec.js';
import {
  IllegalTransitionError,
  SchemaVersionError,
  StateStoreError,
  UnknownRecordError,
  wallClockSeconds,
  type EventFilter,
  type EventInput,
  type EventRecord,
  type InstanceChange,
  type InstanceFilter,
  type InstanceRecord,
  type InstanceState,
  type IntentFilter,
  type IntentInput,
  type IntentRecord,
  type IntentState,
  type JobFilter,
  type JobRecord,
  type JobState,
  type JsonValue,
  type NewInstance,
  type RoundInput,
  type RoundRecord,
  type StateStore,
  type StateStoreOptions,
  type TaskFilter,
  type TaskRecord,
  type TaskState,
  type TeamTokenRecord,
} from '../state-store.js';
import {
  checkEvent,
  checkIntent,
  instanceIdOf,
  jobIdOf,
  newInstanceRecord,
  newJobRecord,
  newTaskRecords,
  submittedEvent,
  transitionInstance,
  transitionJob,
  transitionTask,
  withCheckpoint,
  withProgress,
  type Change,
} from './lifecycle.js';
import { LATEST_SCHEMA_VERSION, MIGRATIONS, MIGRATIONS_TABLE_SQL } from './sqlite-schema.js';
import { checkRawToken, checkTeamName, HASH_PREFIX_LENGTH, hashToken } from './tokens.js';

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

type Row = Record<string, unknown>;
type Param = string | number | null;

/**
 * The production StateStore: one SQLite file (better-sqlite3) in WAL mode with foreign keys on. Every method is
 * one IMMEDIATE transaction (the write lock is taken up front, so two writers never deadlock on an upgrade), and a
 * committed transaction survives the process being killed at any point. The schema is versioned by ordered
 * migrations (state/sqlite-schema.ts).
 */
export class SqliteStateStore implements StateStore {
  private readonly db: Database.Database;
  private readonly now: () => number;
  private readonly statements = new Map<string, Database.Statement>();
  readonly storeId: string;
  readonly schemaVersion: number;

  constructor(
    readonly path: string,
    options: SqliteStateStoreOptions = {},
  ) {
    this.now = options.nowSeconds ?? wallClockSeconds;
    this.db = new Database(path, { timeout: options.busyTimeoutMs ?? 5000 });
    try {
      this.db.pragma('journal_mode = WAL');
      this.db.pragma(`synchronous = ${options.synchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
      this.db.pragma('foreign_keys = ON');
      this.schemaVersion = this.migrate();
      this.storeId = this.ensureStoreId();
    } catch (e) {
      this.db.close();
      throw e;
    }
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

  transaction<T>(fn: () => T): T {
    const run = this.db.transaction(fn);
    return this.db.inTransaction ? run() : run.immediate();
  }

  // ---- jobs and tasks ----------------------------------------------------------------------------------------

  submitJob(spec: JobSpec): JobRecord {
    return this.transaction(() => {
      const now = this.now();
      const seq = this.nextSeq('jobs');
      const job = newJobRecord(jobIdOf(seq), spec, now);
      this.run(
        `INSERT INTO jobs (seq, id, name, team, spec_json, state, submitted_at, updated_at, completed_iterations, total_iterations, migrations)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        seq,
        job.id,
        job.name,
        job.team,
        JSON.stringify(spec),
        job.state,
        job.submittedAtSeconds,
        job.updatedAtSeconds,
        job.completedIterations,
        job.totalIterations ?? null,
        job.migrations,
      );
      const tasks = newTaskRecords(job, now);
      for (const t of tasks)
        this.run(
          `INSERT INTO tasks (id, job_id, task_index, name, workload_key, state, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
          t.id,
          t.jobId,
          t.index,
          t.name,
          t.workloadKey,
          t.state,
          t.updatedAtSeconds,
        );
      this.emit(submittedEvent(job, tasks.length), now);
      return this.job(job.id);
    });
  }

  getJob(id: string): JobRecord | undefined {
    const row = this.get('SELECT * FROM jobs WHERE id = ?', id);
    return row === undefined ? undefined : jobFromRow(row);
  }

  listJobs(filter: JobFilter = {}): JobRecord[] {
    const where = new Where();
    where.in('state', filter.states);
    where.eq('team', filter.team);
    return this.all(`SELECT * FROM jobs ${where.sql()} ORDER BY seq`, ...where.params).map(jobFromRow);
  }

  setJobState(id: string, state: JobState, reason?: string): JobRecord {
    return this.transaction(() => this.applyJob(transitionJob(this.job(id), state, this.now(), reason)));
  }

  recordJobProgress(id: string, completedIterations: number, totalIterations?: number): JobRecord {
    return this.transaction(() =>
      this.applyJob({ record: withProgress(this.job(id), completedIterations, totalIterations, this.now()) }),
    );
  }

  getTask(id: string): TaskRecord | undefined {
    const row = this.get('SELECT * FROM tasks WHERE id = ?', id);
    return row === undefined ? undefined : taskFromRow(row);
  }

  listTasks(filter: TaskFilter = {}): TaskRecord[] {
    const where = new Where();
    where.eq('job_id', filter.jobId);
    where.eq('instance_id', filter.instanceId);
    where.in('state', filter.states);
    return this.all(`SELECT * FROM tasks ${where.sql()} ORDER BY seq`, ...where.params).map(taskFromRow);
  }

  setTaskState(id: string, state: TaskState, instanceId?: string): TaskRecord {
    return this.transaction(() => {
      const task = this.task(id);
      const instance = instanceId === undefined ? undefined : this.instance(instanceId);
      return this.applyTask(transitionTask(task, this.job(task.jobId), state, instance, this.now()));
    });
  }

  recordCheckpoint(taskId: string, key: string, atSeconds?: number): TaskRecord {
    return this.transaction(() => {
      const now = this.now();
      return this.applyTask(withCheckpoint(this.task(taskId), key, atSeconds ?? now, now));
    });
  }

  // ---- instances ---------------------------------------------------------------------------------------------

  createInstance(input: NewInstance): InstanceRecord {
    return this.transaction(() => {
      const seq = this.nextSeq('instances');
      const { record, event } = newInstanceRecord(instanceIdOf(seq), input, this.storeId, this.now());
      if (this.get('SELECT 1 FROM instances WHERE launch_token = ?', record.launchToken) !== undefined)
        throw new StateStoreError(`launch token ${record.launchToken} is already used`);
      this.run(
        `INSERT INTO instances (seq, id, type_name, state, availability_zone, launch_token, requested_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        seq,
        record.id,
        record.typeName,
        record.state,
        record.availabilityZone ?? null,
        record.launchToken,
        record.requestedAtSeconds,
        record.updatedAtSeconds,
      );
      if (event !== undefined) this.emit(event, this.now());
      return this.instance(record.id);
    });
  }

  getInstance(id: string): InstanceRecord | undefined {
    const row = this.get('SELECT * FROM instances WHERE id = ?', id);
    return row === undefined ? undefined : instanceFromRow(row);
  }

  findInstanceByCloudId(cloudId: string): InstanceRecord | undefined {
    const row = this.get('SELECT * FROM instances WHERE cloud_id = ?', cloudId);
    return row === undefined ? undefined : instanceFromRow(row);
  }

  listInstances(filter: InstanceFilter = {}): InstanceRecord[] {
    const where = new Where();
    where.in('state', filter.states);
    return this.all(`SELECT * FROM instances ${where.sql()} ORDER BY seq`, ...where.params).map(
      instanceFromRow,
    );
  }

  setInstanceState(id: string, state: InstanceState, change: InstanceChange = {}): InstanceRecord {
    return this.transaction(() => {
      const instance = this.instance(id);
      if (change.cloudId !== undefined) {
        const other = this.findInstanceByCloudId(change.cloudId);
        if (other !== undefined && other.id !== id)
          throw new StateStoreError(`cloud id ${change.cloudId} already belongs to instance ${other.id}`);
      }
      return this.applyInstance(transitionInstance(instance, state, change, this.now()));
    });
  }

  setWorkerToken(instanceId: string, rawToken: string): InstanceRecord {
    checkRawToken(rawToken);
    return this.transaction(() => {
      const instance = this.instance(instanceId);
      const hash = hashToken(rawToken);
      const other = this.get('SELECT id FROM instances WHERE worker_token_hash = ?', hash);
      if (other !== undefined && other['id'] !== instanceId)
        throw new StateStoreError('this worker token is already used by another instance');
      return this.applyInstance({
        record: { ...instance, workerTokenHash: hash, updatedAtSeconds: this.now() },
      });
    });
  }

  instanceForWorkerToken(rawToken: string): InstanceRecord | undefined {
    const row = this.get('SELECT * FROM instances WHERE worker_token_hash = ?', hashToken(rawToken));
    return row === undefined ? undefined : instanceFromRow(row);
  }

  // ---- intents -----------------------------------------------------------------------------------------------

  recordIntent(
    intent: IntentInput,
    options: { readonly key?: string; readonly round?: number } = {},
  ): IntentRecord {
    return this.transaction(() => {
      if (options.key !== undefined) {
        const existing = this.get('SELECT * FROM intents WHERE idempotency_key = ?', options.key);
        if (existing !== undefined) return intentFromRow(existing);
      }
      checkIntent(intent);
      const now = this.now();
      const info = this.run(
        `INSERT INTO intents (kind, idempotency_key, round, payload_json, state, created_at, updated_at)
         VALUES (?, ?, ?, ?, 'pending', ?, ?)`,
        intent.kind,
        options.key ?? null,
        options.round ?? null,
        JSON.stringify(intent.payload),
        now,
        now,
      );
      return this.intent(Number(info.lastInsertRowid));
    });
  }

  completeIntent(id: number): IntentRecord {
    return this.finishIntent(id, 'done', undefined);
  }

  failIntent(id: number, error: string): IntentRecord {
    return this.finishIntent(id, 'failed', error);
  }

  private finishIntent(id: number, state: 'done' | 'failed', error: string | undefined): IntentRecord {
    return this.transaction(() => {
      const intent = this.intent(id);
      if (intent.state === state) return intent;
      if (intent.state !== 'pending') throw new IllegalTransitionError('intent', id, intent.state, state);
      this.run(
        'UPDATE intents SET state = ?, error = ?, updated_at = ? WHERE id = ?',
        state,
        error ?? null,
        this.now(),
        id,
      );
      return this.intent(id);
    });
  }

  getIntent(id: number): IntentRecord | undefined {
    const row = this.get('SELECT * FROM intents WHERE id = ?', id);
    return row === undefined ? undefined : intentFromRow(row);
  }

  listIntents(filter: IntentFilter = {}): IntentRecord[] {
    const where = new Where();
    where.in('state', filter.states);
    where.eq('kind', filter.kind);
    return this.all(`SELECT * FROM intents ${where.sql()} ORDER BY id`, ...where.params).map(intentFromRow);
  }

  // ---- rounds ------------------------------------------------------------------------------------------------

  recordRound(input: RoundInput): RoundRecord {
    return this.transaction(() => {
      const info = this.run(
        `INSERT INTO plans (at_seconds, scheduler, chosen, configuration_json, decision_json) VALUES (?, ?, ?, ?, ?)`,
        this.now(),
        input.decision.scheduler,
        input.decision.chosen,
        JSON.stringify(input.configuration),
        JSON.stringify(input.decision),
      );
      return this.getRound(Number(info.lastInsertRowid)) as RoundRecord;
    });
  }

  getRound(round: number): RoundRecord | undefined {
    const row = this.get('SELECT * FROM plans WHERE round = ?', round);
    return row === undefined ? undefined : roundFromRow(row);
  }

  latestRound(): RoundRecord | undefined {
    return this.listRounds(1)[0];
  }

  listRounds(limit = Number.MAX_SAFE_INTEGER): RoundRecord[] {
    return this.all('SELECT * FROM plans ORDER BY round DESC LIMIT ?', Math.max(0, Math.floor(limit))).map(
      roundFromRow,
    );
  }

  pruneRounds(keep: number): number {
    return this.transaction(
      () =>
        this.run(
          'DELETE FROM plans WHERE round NOT IN (SELECT round FROM plans ORDER BY round DESC LIMIT ?)',
          Math.max(0, Math.floor(keep)),
        ).changes,
    );
  }

  // ---- events ------------------------------------------------------------------------------------------------

  appendEvent(event: EventInput): EventRecord {
    checkEvent(event);
    return this.transaction(() => this.emit(event, this.now()));
  }

  listEvents(filter: EventFilter = {}): EventRecord[] {
    const where = new Where();
    if (filter.afterSeq !== undefined) where.raw('seq > ?', filter.afterSeq);
    where.eq('job_id', filter.jobId);
    where.eq('task_id', filter.taskId);
    where.eq('instance_id', filter.instanceId);
    where.eq('kind', filter.kind);
    const limit = Math.max(0, Math.floor(filter.limit ?? Number.MAX_SAFE_INTEGER));
    return this.all(`SELECT * FROM events ${where.sql()} ORDER BY seq LIMIT ?`, ...where.params, limit).map(
      eventFromRow,
    );
  }

  // ---- tokens ------------------------------------------------------------------------------------------------

  addTeamToken(team: string, rawToken: string, label?: string): TeamTokenRecord {
    checkTeamName(team);
    checkRawToken(rawToken);
    return this.transaction(() => {
      const hash = hashToken(rawToken);
      if (this.get('SELECT 1 FROM team_tokens WHERE token_hash = ?', hash) !== undefined)
        throw new StateStoreError('this token is already registered');
      this.run(
        'INSERT INTO team_tokens (token_hash, team, label, created_at) VALUES (?, ?, ?, ?)',
        hash,
        team,
        label ?? null,
        this.now(),
      );
      return tokenFromRow(this.get('SELECT * FROM team_tokens WHERE token_hash = ?', hash) as Row);
    });
  }

  teamForToken(rawToken: string): string | undefined {
    const row = this.get(
      'SELECT team FROM team_tokens WHERE token_hash = ? AND revoked_at IS NULL',
      hashToken(rawToken),
    );
    return row === undefined ? undefined : String(row['team']);
  }

  revokeTeamToken(rawToken: string): boolean {
    return this.transaction(
      () =>
        this.run(
          'UPDATE team_tokens SET revoked_at = ? WHERE token_hash = ? AND revoked_at IS NULL',
          this.now(),
          hashToken(rawToken),
        ).changes > 0,
    );
  }

  listTeamTokens(team?: string): TeamTokenRecord[] {
    const where = new Where();
    where.eq('team', team);
    return this.all(`SELECT * FROM team_tokens ${where.sql()} ORDER BY rowid`, ...where.params).map(
      tokenFromRow,
    );
  }

  // ---- key-values --------------------------------------------------------------------------------------------

  getValue(key: string): JsonValue | undefined {
    const row = this.get('SELECT value_json FROM kv WHERE key = ?', key);
    return row === undefined ? undefined : (JSON.parse(String(row['value_json'])) as JsonValue);
  }

  setValue(key: string, value: JsonValue): void {
    const json = JSON.stringify(value);
    this.transaction(() =>
      this.run(
        'INSERT INTO kv (key, value_json, updated_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET value_json = excluded.value_json, updated_at = excluded.updated_at',
        key,
        json,
        this.now(),
      ),
    );
  }

  deleteValue(key: string): boolean {
    return this.transaction(() => this.run('DELETE FROM kv WHERE key = ?', key).changes > 0);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  // ---- internals ---------------------------------------------------------------------------------------------

  /** Apply migrations up to LATEST_SCHEMA_VERSION; refuse a database written by a newer fleetwise. */
  private migrate(): number {
    const current = (): number =>
      Number(this.db.prepare('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations').pluck().get());
    const tables = this.db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
      .pluck()
      .all() as string[];
    if (tables.length > 0 && !tables.includes('schema_migrations'))
      throw new StateStoreError(
        `${this.path} is not a fleetwise state database (it has tables ${tables.join(', ')})`,
      );
    this.db.exec(MIGRATIONS_TABLE_SQL);
    const found = current();
    if (found > LATEST_SCHEMA_VERSION)
      throw new SchemaVersionError(
        `${this.path}: database schema version ${found} is newer than this fleetwise supports (${LATEST_SCHEMA_VERSION}); upgrade fleetwise, or point it at another database`,
      );
    for (const m of [...MIGRATIONS].sort((a, b) => a.version - b.version)) {
      if (current() >= m.version) continue;
      // The foreign_keys pragma is a no-op inside a transaction: turn it off around the one that rebuilds a table.
      if (m.rebuildsTables === true) this.db.pragma('foreign_keys = OFF');
      try {
        this.db
          .transaction(() => {
            // Re-read under the write lock: another process may have migrated since.
            if (current() >= m.version) return;
            this.db.exec(m.sql);
            if (m.rebuildsTables === true) {
              const broken = this.db.pragma('foreign_key_check') as unknown[];
              if (broken.length > 0)
                throw new StateStoreError(
                  `migration ${m.version} would break ${broken.length} foreign key(s); the database is left as it was`,
                );
            }
            this.db
              .prepare('INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)')
              .run(m.version, m.description, this.now());
          })
          .immediate();
      } finally {
        if (m.rebuildsTables === true) this.db.pragma('foreign_keys = ON');
      }
    }
    return current();
  }

  private ensureStoreId(): string {
    this.db.prepare("INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?)").run(randomUUID());
    return String(this.db.prepare("SELECT value FROM meta WHERE key = 'store_id'").pluck().get());
  }

  private statement(sql: string): Database.Statement {
    let s = this.statements.get(sql);
    if (s === undefined) {
      s = this.db.prepare(sql);
      this.statements.set(sql, s);
    }
    return s;
  }

  private run(sql: string, ...params: Param[]): Database.RunResult {
    return this.statement(sql).run(...params);
  }

  private get(sql: string, ...params: Param[]): Row | undefined {
    return this.statement(sql).get(...params) as Row | undefined;
  }

  private all(sql: string, ...params: Param[]): Row[] {
    return this.statement(sql).all(...params) as Row[];
  }

  /** The next AUTOINCREMENT value of `table` (never reused, even after deletes or rollbacks of later rows). */
  private nextSeq(table: 'jobs' | 'instances'): number {
    const row = this.get('SELECT seq FROM sqlite_sequence WHERE name = ?', table);
    return (row === undefined ? 0 : Number(row['seq'])) + 1;
  }

  private emit(event: EventInput, atSeconds: number): EventRecord {
    const info = this.run(
      'INSERT INTO events (at_seconds, kind, job_id, task_id, instance_id, message, data_json) VALUES (?, ?, ?, ?, ?, ?, ?)',
      atSeconds,
      event.kind,
      event.jobId ?? null,
      event.taskId ?? null,
      event.instanceId ?? null,
      event.message ?? null,
      event.data === undefined ? null : JSON.stringify(event.data),
    );
    return eventFromRow(this.get('SELECT * FROM events WHERE seq = ?', Number(info.lastInsertRowid)) as Row);
  }

  private applyJob(change: Change<JobRecord>): JobRecord {
    const j = change.record;
    this.run(
      `UPDATE jobs SET state = ?, reason = ?, started_at = ?, finished_at = ?, updated_at = ?, completed_iterations = ?,
         total_iterations = ?, migrations = ? WHERE id = ?`,
      j.state,
      j.reason ?? null,
      j.startedAtSeconds ?? null,
      j.finishedAtSeconds ?? null,
      j.updatedAtSeconds,
      j.completedIterations,
      j.totalIterations ?? null,
      j.migrations,
      j.id,
    );
    if (change.event !== undefined) this.emit(change.event, this.now());
    return this.job(j.id);
  }

  private applyTask(change: Change<TaskRecord>): TaskRecord {
    const t = change.record;
    this.run(
      `UPDATE tasks SET state = ?, instance_id = ?, last_checkpoint_key = ?, last_checkpoint_at = ?, updated_at = ? WHERE id = ?`,
      t.state,
      t.instanceId ?? null,
      t.lastCheckpointKey ?? null,
      t.lastCheckpointAtSeconds ?? null,
      t.updatedAtSeconds,
      t.id,
    );
    if (change.event !== undefined) this.emit(change.event, this.now());
    return this.task(t.id);
  }

  private applyInstance(change: Change<InstanceRecord>): InstanceRecord {
    const i = change.record;
    this.run(
      `UPDATE instances SET state = ?, cloud_id = ?, availability_zone = ?, launched_at = ?, running_at = ?, terminated_at = ?,
         updated_at = ?, worker_token_hash = ?, reason = ? WHERE id = ?`,
      i.state,
      i.cloudId ?? null,
      i.availabilityZone ?? null,
      i.launchedAtSeconds ?? null,
      i.runningAtSeconds ?? null,
      i.terminatedAtSeconds ?? null,
      i.updatedAtSeconds,
      i.workerTokenHash ?? null,
      i.reason ?? null,
      i.id,
    );
    if (change.event !== undefined) this.emit(change.event, this.now());
    return this.instance(i.id);
  }

  private job(id: string): JobRecord {
    const job = this.getJob(id);
    if (job === undefined) throw new UnknownRecordError('job', id);
    return job;
  }

  private task(id: string): TaskRecord {
    const task = this.getTask(id);
    if (task === undefined) throw new UnknownRecordError('task', id);
    return task;
  }

  private instance(id: string): InstanceRecord {
    const instance = this.getInstance(id);
    if (instance === undefined) throw new UnknownRecordError('instance', id);
    return instance;
  }

  private intent(id: number): IntentRecord {
    const intent = this.getIntent(id);
    if (intent === undefined) throw new UnknownRecordError('intent', id);
    return intent;
  }
}

/** A WHERE clause built from optional filters, with its bound parameters. */
class Where {
  private readonly clauses: string[] = [];
  readonly params: Param[] = [];

  eq(column: string, value: string | undefined): void {
    if (value === undefined) return;
    this.clauses.push(`${column} = ?`);
    this.params.push(value);
  }

  in(column: string, values: readonly string[] | undefined): void {
    if (values === undefined) return;
    this.clauses.push(values.length === 0 ? '0' : `${column} IN (${values.map(() => '?').join(', ')})`);
    this.params.push(...values);
  }

  raw(clause: string, ...params: Param[]): void {
    this.clauses.push(clause);
    this.params.push(...params);
  }

  sql(): string {
    return this.clauses.length === 0 ? '' : `WHERE ${this.clauses.join(' AND ')}`;
  }
}

// ---- row ↔ record ------------------------------------------------------------------------------------------------

function str(row: Row, column: string): string {
  return String(row[column]);
}
function num(row: Row, column: string): number {
  return Number(row[column]);
}
function optStr(row: Row, column: string): string | undefined {
  const v = row[column];
  return v === null || v === undefined ? undefined : String(v);
}
function optNum(row: Row, column: string): number | undefined {
  const v = row[column];
  return v === null || v === undefined ? undefined : Number(v);
}
/** Only defined fields, so records from both stores compare equal field by field. */
function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

function jobFromRow(row: Row): JobRecord {
  return defined({
    id: str(row, 'id'),
    name: str(row, 'name'),
    team: str(row, 'team'),
    // Stored specs were validated on submit; they are our own output, not external input.
    spec: JSON.parse(str(row, 'spec_json')) as JobSpec,
    state: str(row, 'state') as JobState,
    reason: optStr(row, 'reason'),
    submittedAtSeconds: num(row, 'submitted_at'),
    startedAtSeconds: optNum(row, 'started_at'),
    finishedAtSeconds: optNum(row, 'finished_at'),
    updatedAtSeconds: num(row, 'updated_at'),
    completedIterations: num(row, 'completed_iterations'),
    totalIterations: optNum(row, 'total_iterations'),
    migrations: num(row, 'migrations'),
  });
}

function taskFromRow(row: Row): TaskRecord {
  return defined({
    id: str(row, 'id'),
    jobId: str(row, 'job_id'),
    index: num(row, 'task_index'),
    name: str(row, 'name'),
    workloadKey: str(row, 'workload_key'),
    state: str(row, 'state') as TaskState,
    instanceId: optStr(row, 'instance_id'),
    lastCheckpointKey: optStr(row, 'last_checkpoint_key'),
    lastCheckpointAtSeconds: optNum(row, 'last_checkpoint_at'),
    updatedAtSeconds: num(row, 'updated_at'),
  });
}

function instanceFromRow(row: Row): InstanceRecord {
  return defined({
    id: str(row, 'id'),
    cloudId: optStr(row, 'cloud_id'),
    typeName: str(row, 'type_name'),
    state: str(row, 'state') as InstanceState,
    availabilityZone: optStr(row, 'availability_zone'),
    launchToken: str(row, 'launch_token'),
    requestedAtSeconds: num(row, 'requested_at'),
    launchedAtSeconds: optNum(row, 'launched_at'),
    runningAtSeconds: optNum(row, 'running_at'),
    terminatedAtSeconds: optNum(row, 'terminated_at'),
    updatedAtSeconds: num(row, 'updated_at'),
    workerTokenHash: optStr(row, 'worker_token_hash'),
    reason: optStr(row, 'reason'),
  });
}

function intentFromRow(row: Row): IntentRecord {
  return defined({
    id: num(row, 'id'),
    kind: str(row, 'kind'),
    payload: JSON.parse(str(row, 'payload_json')) as unknown,
    state: str(row, 'state') as IntentState,
    key: optStr(row, 'idempotency_key'),
    round: optNum(row, 'round'),
    error: optStr(row, 'error'),
    createdAtSeconds: num(row, 'created_at'),
    updatedAtSeconds: num(row, 'updated_at'),
  }) as IntentRecord;
}

function roundFromRow(row: Row): RoundRecord {
  return {
    round: num(row, 'round'),
    atSeconds: num(row, 'at_seconds'),
    configuration: JSON.parse(str(row, 'configuration_json')) as RoundRecord['configuration'],
    decision: JSON.parse(str(row, 'decision_json')) as RoundRecord['decision'],
  };
}

function eventFromRow(row: Row): EventRecord {
  const data = optStr(row, 'data_json');
  return defined({
    seq: num(row, 'seq'),
    atSeconds: num(row, 'at_seconds'),
    kind: str(row, 'kind'),
    jobId: optStr(row, 'job_id'),
    taskId: optStr(row, 'task_id'),
    instanceId: optStr(row, 'instance_id'),
    message: optStr(row, 'message'),
    data: data === undefined ? undefined : (JSON.parse(data) as JsonValue),
  });
}

function tokenFromRow(row: Row): TeamTokenRecord {
  return defined({
    team: str(row, 'team'),
    label: optStr(row, 'label'),
    hashPrefix: str(row, 'token_hash').slice(0, HASH_PREFIX_LENGTH),
    createdAtSeconds: num(row, 'created_at'),
    revokedAtSeconds: optNum(row, 'revoked_at'),
  });
}
