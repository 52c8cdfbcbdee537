import Database from 'better-sqlite3';
import { chmodSync, closeSync, existsSync, openSync } from 'node:fs';
import type { JobSpec } from '../job-spec/spec.js';
import {
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
  type AttemptFailureInput,
  type JobFilter,
  type JobRecord,
  type JobState,
  type JsonValue,
  type NewInstance,
  type RoundInput,
  type RoundRecord,
  type StateCounts,
  type StateStore,
  type StateStoreOptions,
  type TaskFilter,
  type TaskRecord,
  type TaskState,
  type TeamTokenRecord,
} from '../state-store.js';
import { SqliteConnection } from './sqlite/connection.js';
import { EventQueries } from './sqlite/events.js';
import { InstanceQueries } from './sqlite/instances.js';
import { IntentQueries } from './sqlite/intents.js';
import { JobQueries } from './sqlite/jobs.js';
import { KeyValueQueries } from './sqlite/key-values.js';
import { ensureStoreId, migrate } from './sqlite/migrate.js';
import { RoundQueries } from './sqlite/rounds.js';
import { TeamTokenQueries } from './sqlite/team-tokens.js';

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
 * migrations (state/sqlite-schema.ts). The queries live per entity in state/sqlite/, sharing one connection.
 */
export class SqliteStateStore implements StateStore {
  private readonly db: Database.Database;
  private readonly connection: SqliteConnection;
  private readonly jobs: JobQueries;
  private readonly instances: InstanceQueries;
  private readonly intents: IntentQueries;
  private readonly rounds: RoundQueries;
  private readonly events: EventQueries;
  private readonly teamTokens: TeamTokenQueries;
  private readonly keyValues: KeyValueQueries;
  readonly storeId: string;
  readonly schemaVersion: number;

  constructor(
    readonly path: string,
    options: SqliteStateStoreOptions = {},
  ) {
    const now = options.nowSeconds ?? wallClockSeconds;
    restrictToOwner(path);
    this.db = new Database(path, { timeout: options.busyTimeoutMs ?? 5000 });
    try {
      this.db.pragma('journal_mode = WAL');
      restrictToOwner(path);
      this.db.pragma(`synchronous = ${options.synchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
      this.db.pragma('foreign_keys = ON');
      this.schemaVersion = migrate(this.db, path, now);
      this.storeId = ensureStoreId(this.db);
    } catch (e) {
      this.db.close();
      throw e;
    }
    this.connection = new SqliteConnection(this.db, now);
    this.events = new EventQueries(this.connection);
    this.instances = new InstanceQueries(this.connection, this.events, this.storeId);
    this.jobs = new JobQueries(this.connection, this.events, this.instances);
    this.intents = new IntentQueries(this.connection);
    this.rounds = new RoundQueries(this.connection);
    this.teamTokens = new TeamTokenQueries(this.connection);
    this.keyValues = new KeyValueQueries(this.connection);
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
    return this.connection.transaction(fn);
  }

  // ---- jobs and tasks -------------------------------------------------------------------------------------------

  submitJob(spec: JobSpec): JobRecord {
    return this.jobs.submitJob(spec);
  }

  getJob(id: string): JobRecord | undefined {
    return this.jobs.getJob(id);
  }

  listJobs(filter: JobFilter = {}): JobRecord[] {
    return this.jobs.listJobs(filter);
  }

  setJobState(id: string, state: JobState, reason?: string): JobRecord {
    return this.jobs.setJobState(id, state, reason);
  }

  recordJobProgress(id: string, completedIterations: number, totalIterations?: number): JobRecord {
    return this.jobs.recordJobProgress(id, completedIterations, totalIterations);
  }

  retryJob(id: string, failure: AttemptFailureInput, reason: string): JobRecord {
    return this.jobs.retryJob(id, failure, reason);
  }

  getTask(id: string): TaskRecord | undefined {
    return this.jobs.getTask(id);
  }

  listTasks(filter: TaskFilter = {}): TaskRecord[] {
    return this.jobs.listTasks(filter);
  }

  countByState(): StateCounts {
    return this.jobs.countByState();
  }

  setTaskState(id: string, state: TaskState, instanceId?: string): TaskRecord {
    return this.jobs.setTaskState(id, state, instanceId);
  }

  recordCheckpoint(taskId: string, key: string, atSeconds?: number): TaskRecord {
    return this.jobs.recordCheckpoint(taskId, key, atSeconds);
  }

  // ---- instances ------------------------------------------------------------------------------------------------

  createInstance(input: NewInstance): InstanceRecord {
    return this.instances.createInstance(input);
  }

  getInstance(id: string): InstanceRecord | undefined {
    return this.instances.getInstance(id);
  }

  findInstanceByCloudId(cloudId: string): InstanceRecord | undefined {
    return this.instances.findInstanceByCloudId(cloudId);
  }

  listInstances(filter: InstanceFilter = {}): InstanceRecord[] {
    return this.instances.listInstances(filter);
  }

  setInstanceState(id: string, state: InstanceState, change: InstanceChange = {}): InstanceRecord {
    return this.instances.setInstanceState(id, state, change);
  }

  setWorkerToken(instanceId: string, rawToken: string): InstanceRecord {
    return this.instances.setWorkerToken(instanceId, rawToken);
  }

  instanceForWorkerToken(rawToken: string): InstanceRecord | undefined {
    return this.instances.instanceForWorkerToken(rawToken);
  }

  // ---- intents --------------------------------------------------------------------------------------------------

  recordIntent(
    intent: IntentInput,
    options: { readonly key?: string; readonly round?: number } = {},
  ): IntentRecord {
    return this.intents.recordIntent(intent, options);
  }

  completeIntent(id: number): IntentRecord {
    return this.intents.completeIntent(id);
  }

  failIntent(id: number, error: string): IntentRecord {
    return this.intents.failIntent(id, error);
  }

  getIntent(id: number): IntentRecord | undefined {
    return this.intents.getIntent(id);
  }

  listIntents(filter: IntentFilter = {}): IntentRecord[] {
    return this.intents.listIntents(filter);
  }

  // ---- rounds ---------------------------------------------------------------------------------------------------

  recordRound(input: RoundInput): RoundRecord {
    return this.rounds.recordRound(input);
  }

  getRound(round: number): RoundRecord | undefined {
    return this.rounds.getRound(round);
  }

  latestRound(): RoundRecord | undefined {
    return this.rounds.latestRound();
  }

  listRounds(limit?: number): RoundRecord[] {
    return this.rounds.listRounds(limit);
  }

  pruneRounds(keep: number): number {
    return this.rounds.pruneRounds(keep);
  }

  // ---- events ---------------------------------------------------------------------------------------------------

  appendEvent(event: EventInput): EventRecord {
    return this.events.appendEvent(event);
  }

  listEvents(filter: EventFilter = {}): EventRecord[] {
    return this.events.listEvents(filter);
  }

  // ---- tokens ---------------------------------------------------------------------------------------------------

  addTeamToken(team: string, rawToken: string, label?: string): TeamTokenRecord {
    return this.teamTokens.addTeamToken(team, rawToken, label);
  }

  teamForToken(rawToken: string): string | undefined {
    return this.teamTokens.teamForToken(rawToken);
  }

  revokeTeamToken(rawToken: string): boolean {
    return this.teamTokens.revokeTeamToken(rawToken);
  }

  revokeTeamTokenByPrefix(hashPrefix: string): TeamTokenRecord | undefined {
    return this.teamTokens.revokeTeamTokenByPrefix(hashPrefix);
  }

  listTeamTokens(team?: string): TeamTokenRecord[] {
    return this.teamTokens.listTeamTokens(team);
  }

  // ---- key-values -----------------------------------------------------------------------------------------------

  getValue(key: string): JsonValue | undefined {
    return this.keyValues.getValue(key);
  }

  setValue(key: string, value: JsonValue): void {
    this.keyValues.setValue(key, value);
  }

  deleteValue(key: string): boolean {
    return this.keyValues.deleteValue(key);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
