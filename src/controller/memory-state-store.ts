import type { JobSpec } from './job-spec/spec.js';
import { MemoryEvents } from './state/memory/events.js';
import { MemoryInstances } from './state/memory/instances.js';
import { MemoryIntents } from './state/memory/intents.js';
import { MemoryJobs } from './state/memory/jobs.js';
import { MemoryKeyValues } from './state/memory/key-values.js';
import { MemoryRounds } from './state/memory/rounds.js';
import { MemoryTeamTokens } from './state/memory/team-tokens.js';
import { MemoryTransactions, type Transact } from './state/memory/transactions.js';
import {
  wallClockSeconds,
  type AttemptFailureInput,
  type StateCounts,
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
  type JobFilter,
  type JobRecord,
  type JobState,
  type JobStateOptions,
  type JsonValue,
  type KeptJobIdentity,
  type NewInstance,
  type RoundInput,
  type RoundRecord,
  type RoundWindow,
  type StateStore,
  type StateStoreOptions,
  type TaskFilter,
  type TaskRecord,
  type TaskState,
  type TaskStateOptions,
  type TeamTokenRecord,
} from './state-store.js';

export interface MemoryStateStoreOptions extends StateStoreOptions {
  /** Prefix of default launch tokens (SQLite uses a random id per database). */
  readonly storeId?: string;
}

/**
 * In-memory StateStore for the simulator and tests: the same state machines (state/lifecycle.ts) and contract as
 * SqliteStateStore, with transactions implemented by an undo journal, and records frozen so callers cannot
 * change stored state behind the store's back. The tables live per entity in state/memory/, as the SQL stores'
 * queries live in state/sql/, and share one journal (state/memory/transactions.ts).
 */
export class MemoryStateStore implements StateStore {
  private readonly tx: MemoryTransactions;
  private readonly jobs: MemoryJobs;
  private readonly instances: MemoryInstances;
  private readonly intents: MemoryIntents;
  private readonly rounds: MemoryRounds;
  private readonly events: MemoryEvents;
  private readonly teamTokens: MemoryTeamTokens;
  private readonly keyValues: MemoryKeyValues;

  constructor(options: MemoryStateStoreOptions = {}) {
    this.tx = new MemoryTransactions(options.nowSeconds ?? wallClockSeconds);
    // Through `this.transaction`, so a subclass that wraps transactions wraps every write.
    const transaction: Transact = (fn) => this.transaction(fn);
    this.events = new MemoryEvents(this.tx, transaction);
    this.instances = new MemoryInstances(this.tx, transaction, this.events, options.storeId ?? 'memory');
    this.jobs = new MemoryJobs(this.tx, transaction, this.events, this.instances);
    this.intents = new MemoryIntents(this.tx, transaction);
    this.rounds = new MemoryRounds(this.tx, transaction);
    this.teamTokens = new MemoryTeamTokens(this.tx, transaction);
    this.keyValues = new MemoryKeyValues(this.tx, transaction);
  }

  transaction<T>(fn: () => T): T {
    return this.tx.run(fn);
  }

  afterCommit(fn: () => void): void {
    this.tx.afterCommit(fn);
  }

  // ---- jobs and tasks ----------------------------------------------------------------------------------------

  reserveJobIds(throughSeq: number): void {
    this.jobs.reserveJobIds(throughSeq);
  }

  submitJob(spec: JobSpec, kept?: KeptJobIdentity): JobRecord {
    return this.jobs.submitJob(spec, kept);
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

  setJobState(id: string, state: JobState, reason?: string, options: JobStateOptions = {}): JobRecord {
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

  getTask(id: string): TaskRecord | undefined {
    return this.jobs.getTask(id);
  }

  listTasks(filter: TaskFilter = {}): TaskRecord[] {
    return this.jobs.listTasks(filter);
  }

  countByState(): StateCounts {
    return this.jobs.countByState();
  }

  setTaskState(id: string, state: TaskState, instanceId?: string, options?: TaskStateOptions): TaskRecord {
    return this.jobs.setTaskState(id, state, instanceId, options);
  }

  recordCheckpoint(taskId: string, key: string, atSeconds?: number, fromInstanceId?: string): TaskRecord {
    return this.jobs.recordCheckpoint(taskId, key, atSeconds, fromInstanceId);
  }

  // ---- instances ---------------------------------------------------------------------------------------------

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

  // ---- intents -----------------------------------------------------------------------------------------------

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

  // ---- rounds ------------------------------------------------------------------------------------------------

  recordRound(input: RoundInput): RoundRecord {
    return this.rounds.recordRound(input);
  }

  getRound(round: number): RoundRecord | undefined {
    return this.rounds.getRound(round);
  }

  latestRound(): RoundRecord | undefined {
    return this.listRounds(1)[0];
  }

  listRounds(limit = Number.MAX_SAFE_INTEGER, window: RoundWindow = {}): RoundRecord[] {
    return this.rounds.listRounds(limit, window);
  }

  pruneRounds(keep: number): number {
    return this.rounds.pruneRounds(keep);
  }

  // ---- events ------------------------------------------------------------------------------------------------

  appendEvent(event: EventInput): EventRecord {
    return this.events.appendEvent(event);
  }

  listEvents(filter: EventFilter = {}): EventRecord[] {
    return this.events.listEvents(filter);
  }

  pruneEvents(kind: string, beforeSeconds: number, limit: number): number {
    return this.events.pruneEvents(kind, beforeSeconds, limit);
  }

  // ---- tokens ------------------------------------------------------------------------------------------------

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

  // ---- key-values --------------------------------------------------------------------------------------------

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
    this.tx.close();
  }
}
