import type { JobSpec } from '../job-spec/spec.js';
import type {
  AttemptFailureInput,
  EventFilter,
  EventInput,
  EventRecord,
  InstanceChange,
  InstanceFilter,
  InstanceRecord,
  InstanceState,
  IntentFilter,
  IntentInput,
  IntentRecord,
  JobFilter,
  JobRecord,
  JobState,
  JobStateOptions,
  JsonValue,
  KeptJobIdentity,
  NewInstance,
  RoundInput,
  RoundRecord,
  RoundWindow,
  StateCounts,
  StateStore,
  TaskFilter,
  TaskRecord,
  TaskState,
  TaskStateOptions,
  TeamTokenRecord,
} from '../state-store.js';
import type { SqlConnection } from './sql/connection.js';
import { EventQueries } from './sql/events.js';
import { InstanceQueries } from './sql/instances.js';
import { IntentQueries } from './sql/intents.js';
import { JobQueries } from './sql/jobs.js';
import { KeyValueQueries } from './sql/key-values.js';
import { RoundQueries } from './sql/rounds.js';
import { TeamTokenQueries } from './sql/team-tokens.js';

/**
 * The StateStore over SQL, whatever the database: the queries live per entity in state/sql/ and share one
 * connection, so SqliteStateStore and PostgresStateStore differ only in how they connect, migrate and close.
 */
export abstract class SqlStateStore implements StateStore {
  /** What `afterCommit` was asked to run once the open outermost transaction commits; undefined outside one. */
  private committed: (() => void)[] | undefined;
  private readonly jobs: JobQueries;
  private readonly instances: InstanceQueries;
  private readonly intents: IntentQueries;
  private readonly rounds: RoundQueries;
  private readonly events: EventQueries;
  private readonly teamTokens: TeamTokenQueries;
  private readonly keyValues: KeyValueQueries;

  protected constructor(
    private readonly connection: SqlConnection,
    readonly storeId: string,
  ) {
    this.events = new EventQueries(connection);
    this.instances = new InstanceQueries(connection, this.events, storeId);
    this.jobs = new JobQueries(connection, this.events, this.instances);
    this.intents = new IntentQueries(connection);
    this.rounds = new RoundQueries(connection);
    this.teamTokens = new TeamTokenQueries(connection);
    this.keyValues = new KeyValueQueries(connection);
  }

  transaction<T>(fn: () => T): T {
    const outer = this.committed === undefined;
    const hooks = this.committed ?? [];
    this.committed = hooks;
    const mark = hooks.length;
    try {
      const result = this.connection.transaction(fn);
      if (outer) {
        this.committed = undefined;
        for (const hook of hooks) hook();
      }
      return result;
    } catch (e) {
      // Rolled back (to its savepoint, when nested): what it asked for after the commit will not be.
      hooks.length = mark;
      throw e;
    } finally {
      if (outer) this.committed = undefined;
    }
  }

  afterCommit(fn: () => void): void {
    if (this.committed === undefined) fn();
    else this.committed.push(fn);
  }

  // ---- jobs and tasks -------------------------------------------------------------------------------------------

  submitJob(spec: JobSpec, kept?: KeptJobIdentity): JobRecord {
    return this.jobs.submitJob(spec, kept);
  }

  reserveJobIds(throughSeq: number): void {
    this.connection.transaction(() => this.connection.numberUsed('jobs', throughSeq));
  }

  getJob(id: string): JobRecord | undefined {
    return this.jobs.getJob(id);
  }

  listJobs(filter: JobFilter = {}): JobRecord[] {
    return this.jobs.listJobs(filter);
  }

  countJobs(filter: JobFilter = {}): number {
    return this.jobs.countJobs(filter);
  }

  setJobState(id: string, state: JobState, reason?: string, options?: JobStateOptions): JobRecord {
    return this.jobs.setJobState(id, state, reason, options);
  }

  countMigration(id: string): JobRecord {
    return this.jobs.countMigration(id);
  }

  recordJobProgress(id: string, completedIterations: number, totalIterations?: number): JobRecord {
    return this.jobs.recordJobProgress(id, completedIterations, totalIterations);
  }

  retryJob(id: string, failure: AttemptFailureInput, reason: string): JobRecord {
    return this.jobs.retryJob(id, failure, reason);
  }

  countByState(): StateCounts {
    return this.jobs.countByState();
  }

  getTask(id: string): TaskRecord | undefined {
    return this.jobs.getTask(id);
  }

  listTasks(filter: TaskFilter = {}): TaskRecord[] {
    return this.jobs.listTasks(filter);
  }

  setTaskState(id: string, state: TaskState, instanceId?: string, options?: TaskStateOptions): TaskRecord {
    return this.jobs.setTaskState(id, state, instanceId, options);
  }

  recordCheckpoint(taskId: string, key: string, atSeconds?: number, fromInstanceId?: string): TaskRecord {
    return this.jobs.recordCheckpoint(taskId, key, atSeconds, fromInstanceId);
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

  getIntentByKey(key: string): IntentRecord | undefined {
    return this.intents.getIntentByKey(key);
  }

  listIntents(filter: IntentFilter = {}): IntentRecord[] {
    return this.intents.listIntents(filter);
  }

  pruneFinishedIntents(beforeSeconds: number, limit: number): number {
    return this.intents.pruneFinishedIntents(beforeSeconds, limit);
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

  listRounds(limit?: number, window?: RoundWindow): RoundRecord[] {
    return this.rounds.listRounds(limit, window);
  }

  pruneRounds(keep: number): number {
    return this.rounds.pruneRounds(keep);
  }

  // ---- events ---------------------------------------------------------------------------------------------------

  appendEvent(event: EventInput): EventRecord {
    return this.events.appendEvent(event);
  }

  pruneEvents(kind: string, beforeSeconds: number, limit: number): number {
    return this.events.pruneEvents(kind, beforeSeconds, limit);
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

  abstract close(): void;
}
