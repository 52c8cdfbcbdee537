import type { JobSpec } from './job-spec/spec.js';
import { MemoryEventLog } from './memory-event-log.js';
import {
  checkEvent,
  checkIntent,
  frozenCopy,
  instanceIdOf,
  jobSeqOf,
  newInstanceRecord,
  newTaskRecords,
  submittedEvent,
  submittedJobRecord,
  transitionInstance,
  transitionJob,
  withMigrationCounted,
  transitionTask,
  withCheckpoint,
  withProgress,
  withRetry,
  type Change,
} from './state/lifecycle.js';
import { valueJson } from './state/sql/key-values.js';
import {
  checkPrefixMatch,
  checkRawToken,
  checkTeamName,
  HASH_PREFIX_LENGTH,
  hashToken,
} from './state/tokens.js';
import {
  IllegalTransitionError,
  JOB_STATES,
  StateStoreError,
  TASK_STATES,
  UnknownRecordError,
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
  type TeamTokenRecord,
} from './state-store.js';

interface TokenRow {
  readonly hash: string;
  readonly team: string;
  readonly label?: string | undefined;
  readonly createdAtSeconds: number;
  readonly revokedAtSeconds?: number | undefined;
}

type Counter = 'job' | 'instance' | 'intent' | 'round' | 'event';

export interface MemoryStateStoreOptions extends StateStoreOptions {
  /** Prefix of default launch tokens (SQLite uses a random id per database). */
  readonly storeId?: string;
}

/**
 * In-memory StateStore for the simulator and tests: the same state machines (state/lifecycle.ts) and contract as
 * SqliteStateStore, with transactions implemented by an undo journal, and records frozen so callers cannot
 * change stored state behind the store's back.
 */
export class MemoryStateStore implements StateStore {
  private readonly now: () => number;
  private readonly storeId: string;
  private readonly jobs = new Map<string, JobRecord>();
  private readonly tasks = new Map<string, TaskRecord>();
  private readonly instances = new Map<string, InstanceRecord>();
  private readonly intents = new Map<number, IntentRecord>();
  private readonly intentByKey = new Map<string, number>();
  /**
   * The pending intents (a subset of `intents`): every reconcile pass lists them several times, while done and failed
   * intents pile up for as long as the controller runs (the SQL stores have a partial index for the same reason).
   */
  private readonly pendingIntents = new Map<number, IntentRecord>();
  private readonly rounds = new Map<number, RoundRecord>();
  private readonly events = new MemoryEventLog();
  private readonly tokens = new Map<string, TokenRow>();
  /**
   * Key-values as JSON text, as the SQL stores keep them: one native serialization per write (the scheduler's learned
   * state is written after every round), and a reader gets its own copy to do with as it likes.
   */
  private readonly values = new Map<string, string>();
  private readonly counters = new Map<Counter, number>();
  /** Undo actions of the open transaction, newest last; undefined outside a transaction. */
  private journal: (() => void)[] | undefined;
  /** What `afterCommit` was asked to run once the open outermost transaction commits. */
  private committed: (() => void)[] = [];
  private closed = false;

  constructor(options: MemoryStateStoreOptions = {}) {
    this.now = options.nowSeconds ?? wallClockSeconds;
    this.storeId = options.storeId ?? 'memory';
  }

  transaction<T>(fn: () => T): T {
    this.checkOpen();
    const outer = this.journal === undefined;
    const journal = this.journal ?? [];
    this.journal = journal;
    const mark = journal.length;
    const hooks = this.committed;
    const hookMark = hooks.length;
    let result: T;
    try {
      result = fn();
      if (result instanceof Promise) throw new StateStoreError('a transaction function must not be async');
    } catch (e) {
      while (journal.length > mark) (journal.pop() as () => void)();
      hooks.length = hookMark;
      throw e;
    } finally {
      if (outer) this.journal = undefined;
    }
    if (outer) {
      // Committed by now, as the SQL stores' hooks run after COMMIT: a hook that throws passes its error on and
      // skips the hooks after it, but undoes none of the transaction's writes.
      this.committed = [];
      for (const hook of hooks) hook();
    }
    return result;
  }

  afterCommit(fn: () => void): void {
    if (this.journal === undefined) fn();
    else this.committed.push(fn);
  }

  // ---- jobs and tasks ----------------------------------------------------------------------------------------

  reserveJobIds(throughSeq: number): void {
    this.transaction(() => this.claim('job', throughSeq));
  }

  submitJob(spec: JobSpec, kept?: KeptJobIdentity): JobRecord {
    return this.transaction(() => {
      const now = this.now();
      if (kept !== undefined && this.jobs.has(kept.id))
        throw new StateStoreError(`job ${kept.id} exists already: a kept id must be free`);
      const seq = kept === undefined ? this.next('job') : this.claim('job', jobSeqOf(kept.id));
      const job = Object.freeze(submittedJobRecord(seq, frozenCopy(spec), now, kept));
      const tasks = newTaskRecords(job, now).map((t) => Object.freeze(t));
      this.put(this.jobs, job.id, job);
      // Jobs list in id order, as SQLite's do: a kept id may be lower than ids given since.
      if (kept !== undefined) this.sortJobsById();
      for (const t of tasks) this.put(this.tasks, t.id, t);
      this.emit(submittedEvent(job, tasks.length), now);
      return job;
    });
  }

  getJob(id: string): JobRecord | undefined {
    return this.jobs.get(id);
  }

  listJobs(filter: JobFilter = {}): JobRecord[] {
    const after = filter.afterId === undefined ? 0 : jobSeqOf(filter.afterId);
    // Submission order, as the SQL stores list them (a restored job may be added after later ones).
    const jobs = [...this.jobs.values()]
      .filter((j) => jobMatches(j, filter))
      .map((j) => ({ j, seq: jobSeqOf(j.id) }))
      .filter((x) => x.seq > after)
      .sort((a, b) => a.seq - b.seq)
      .map((x) => x.j);
    // A whole number of rows, none for a negative limit, as SQL's LIMIT is given.
    return filter.limit === undefined ? jobs : jobs.slice(0, Math.max(0, Math.floor(filter.limit)));
  }

  countJobs(filter: JobFilter = {}): number {
    const after = filter.afterId === undefined ? 0 : jobSeqOf(filter.afterId);
    let count = 0;
    for (const j of this.jobs.values()) if (jobMatches(j, filter) && jobSeqOf(j.id) > after) count += 1;
    return filter.limit === undefined ? count : Math.min(count, filter.limit);
  }

  setJobState(id: string, state: JobState, reason?: string, options: JobStateOptions = {}): JobRecord {
    return this.transaction(() =>
      this.apply(this.jobs, transitionJob(this.job(id), state, this.now(), reason, options.atSeconds)),
    );
  }

  countMigration(id: string): JobRecord {
    return this.transaction(() => this.apply(this.jobs, withMigrationCounted(this.job(id), this.now())));
  }

  recordJobProgress(id: string, completedIterations: number, totalIterations?: number): JobRecord {
    return this.transaction(() =>
      this.apply(this.jobs, {
        record: withProgress(this.job(id), completedIterations, totalIterations, this.now()),
      }),
    );
  }

  retryJob(id: string, failure: AttemptFailureInput, reason: string): JobRecord {
    return this.transaction(() => {
      const now = this.now();
      const next = this.apply(this.jobs, withRetry(this.job(id), frozenCopy(failure), now));
      return this.apply(this.jobs, transitionJob(next, 'queued', now, reason));
    });
  }

  getTask(id: string): TaskRecord | undefined {
    return this.tasks.get(id);
  }

  listTasks(filter: TaskFilter = {}): TaskRecord[] {
    const jobStates = filter.jobStates;
    return [...this.tasks.values()].filter((t) => {
      if (filter.jobId !== undefined && t.jobId !== filter.jobId) return false;
      if (filter.instanceId !== undefined && t.instanceId !== filter.instanceId) return false;
      if (filter.states !== undefined && !filter.states.includes(t.state)) return false;
      const jobState = this.jobs.get(t.jobId)?.state;
      return jobStates === undefined || (jobState !== undefined && jobStates.includes(jobState));
    });
  }

  countByState(): StateCounts {
    const jobs = Object.fromEntries(JOB_STATES.map((st) => [st, 0])) as Record<JobState, number>;
    const tasks = Object.fromEntries(TASK_STATES.map((st) => [st, 0])) as Record<TaskState, number>;
    for (const j of this.jobs.values()) jobs[j.state] += 1;
    for (const t of this.tasks.values()) tasks[t.state] += 1;
    return { jobs, tasks };
  }

  setTaskState(id: string, state: TaskState, instanceId?: string): TaskRecord {
    return this.transaction(() => {
      const task = this.task(id);
      const instance = instanceId === undefined ? undefined : this.instance(instanceId);
      return this.apply(this.tasks, transitionTask(task, this.job(task.jobId), state, instance, this.now()));
    });
  }

  recordCheckpoint(taskId: string, key: string, atSeconds?: number, fromInstanceId?: string): TaskRecord {
    return this.transaction(() => {
      const now = this.now();
      return this.apply(
        this.tasks,
        withCheckpoint(this.task(taskId), key, atSeconds ?? now, now, fromInstanceId),
      );
    });
  }

  // ---- instances ---------------------------------------------------------------------------------------------

  createInstance(input: NewInstance): InstanceRecord {
    return this.transaction(() => {
      const change = newInstanceRecord(instanceIdOf(this.next('instance')), input, this.storeId, this.now());
      if ([...this.instances.values()].some((i) => i.launchToken === change.record.launchToken))
        throw new StateStoreError(`launch token ${change.record.launchToken} is already used`);
      return this.apply(this.instances, change);
    });
  }

  getInstance(id: string): InstanceRecord | undefined {
    return this.instances.get(id);
  }

  findInstanceByCloudId(cloudId: string): InstanceRecord | undefined {
    return [...this.instances.values()].find((i) => i.cloudId === cloudId);
  }

  listInstances(filter: InstanceFilter = {}): InstanceRecord[] {
    return [...this.instances.values()].filter(
      (i) => filter.states === undefined || filter.states.includes(i.state),
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
      return this.apply(this.instances, transitionInstance(instance, state, change, this.now()));
    });
  }

  setWorkerToken(instanceId: string, rawToken: string): InstanceRecord {
    checkRawToken(rawToken);
    return this.transaction(() => {
      const instance = this.instance(instanceId);
      const hash = hashToken(rawToken);
      if ([...this.instances.values()].some((i) => i.workerTokenHash === hash && i.id !== instanceId))
        throw new StateStoreError('this worker token is already used by another instance');
      return this.apply(this.instances, {
        record: { ...instance, workerTokenHash: hash, updatedAtSeconds: this.now() },
      });
    });
  }

  instanceForWorkerToken(rawToken: string): InstanceRecord | undefined {
    const hash = hashToken(rawToken);
    return [...this.instances.values()].find((i) => i.workerTokenHash === hash);
  }

  // ---- intents -----------------------------------------------------------------------------------------------

  recordIntent(
    intent: IntentInput,
    options: { readonly key?: string; readonly round?: number } = {},
  ): IntentRecord {
    return this.transaction(() => {
      const existing = options.key === undefined ? undefined : this.intentByKey.get(options.key);
      if (existing !== undefined) return this.intents.get(existing) as IntentRecord;
      checkIntent(intent);
      const now = this.now();
      const record = frozenCopy({
        ...intent,
        id: this.next('intent'),
        state: 'pending',
        ...(options.key === undefined ? {} : { key: options.key }),
        ...(options.round === undefined ? {} : { round: options.round }),
        createdAtSeconds: now,
        updatedAtSeconds: now,
      } as IntentRecord);
      this.put(this.intents, record.id, record);
      this.put(this.pendingIntents, record.id, record);
      if (options.key !== undefined) this.put(this.intentByKey, options.key, record.id);
      return record;
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
      const intent = this.intents.get(id);
      if (intent === undefined) throw new UnknownRecordError('intent', id);
      if (intent.state === state) return intent;
      if (intent.state !== 'pending') throw new IllegalTransitionError('intent', id, intent.state, state);
      const record = Object.freeze({ ...intent, state, error, updatedAtSeconds: this.now() }) as IntentRecord;
      this.put(this.intents, id, record);
      this.put(this.pendingIntents, id, undefined);
      return record;
    });
  }

  getIntent(id: number): IntentRecord | undefined {
    return this.intents.get(id);
  }

  getIntentByKey(key: string): IntentRecord | undefined {
    const id = this.intentByKey.get(key);
    return id === undefined ? undefined : this.intents.get(id);
  }

  listIntents(filter: IntentFilter = {}): IntentRecord[] {
    const matches = (i: IntentRecord): boolean =>
      (filter.states === undefined || filter.states.includes(i.state)) &&
      (filter.kind === undefined || i.kind === filter.kind);
    if (filter.states?.length === 1 && filter.states[0] === 'pending')
      // A rolled-back completion puts an intent back at the end of the map: sorted, oldest first as ever.
      return [...this.pendingIntents.values()].filter(matches).sort((a, b) => a.id - b.id);
    // A rolled-back prune puts intents back at the end of the map too.
    return [...this.intents.values()].filter(matches).sort((a, b) => a.id - b.id);
  }

  pruneFinishedIntents(beforeSeconds: number, limit: number): number {
    const most = Math.max(0, Math.floor(limit));
    return this.transaction(() => {
      let removed = 0;
      for (const intent of [...this.intents.values()].sort((a, b) => a.id - b.id)) {
        if (removed >= most) break;
        if (
          intent.state === 'pending' ||
          intent.kind === 'launch' ||
          intent.updatedAtSeconds >= beforeSeconds
        )
          continue;
        this.put(this.intents, intent.id, undefined);
        removed += 1;
      }
      return removed;
    });
  }

  // ---- rounds ------------------------------------------------------------------------------------------------

  recordRound(input: RoundInput): RoundRecord {
    return this.transaction(() => {
      const record = frozenCopy({
        round: this.next('round'),
        atSeconds: this.now(),
        configuration: input.configuration,
        decision: input.decision,
      });
      this.put(this.rounds, record.round, record);
      return record;
    });
  }

  getRound(round: number): RoundRecord | undefined {
    return this.rounds.get(round);
  }

  latestRound(): RoundRecord | undefined {
    return this.listRounds(1)[0];
  }

  listRounds(limit = Number.MAX_SAFE_INTEGER, window: RoundWindow = {}): RoundRecord[] {
    const since = window.sinceSeconds ?? Number.NEGATIVE_INFINITY;
    const until = window.untilSeconds ?? Number.POSITIVE_INFINITY;
    return [...this.rounds.values()]
      .filter((r) => r.atSeconds >= since && r.atSeconds <= until)
      .sort((a, b) => b.round - a.round)
      .slice(0, Math.max(0, limit));
  }

  pruneRounds(keep: number): number {
    return this.transaction(() => {
      const doomed = this.listRounds().slice(Math.max(0, keep));
      for (const r of doomed) this.put(this.rounds, r.round, undefined);
      return doomed.length;
    });
  }

  // ---- events ------------------------------------------------------------------------------------------------

  appendEvent(event: EventInput): EventRecord {
    checkEvent(event);
    return this.transaction(() => this.emit(event, this.now()));
  }

  listEvents(filter: EventFilter = {}): EventRecord[] {
    return this.events.list(filter);
  }

  pruneEvents(kind: string, beforeSeconds: number, limit: number): number {
    return this.transaction(() => {
      const { removed, undo } = this.events.prune(kind, beforeSeconds, limit);
      this.journal?.push(undo);
      return removed;
    });
  }

  // ---- tokens ------------------------------------------------------------------------------------------------

  addTeamToken(team: string, rawToken: string, label?: string): TeamTokenRecord {
    checkTeamName(team);
    checkRawToken(rawToken);
    return this.transaction(() => {
      const hash = hashToken(rawToken);
      if (this.tokens.has(hash)) throw new StateStoreError('this token is already registered');
      const row: TokenRow = Object.freeze({ hash, team, label, createdAtSeconds: this.now() });
      this.put(this.tokens, hash, row);
      return tokenRecord(row);
    });
  }

  teamForToken(rawToken: string): string | undefined {
    const row = this.tokens.get(hashToken(rawToken));
    return row === undefined || row.revokedAtSeconds !== undefined ? undefined : row.team;
  }

  revokeTeamToken(rawToken: string): boolean {
    return this.transaction(() => {
      const hash = hashToken(rawToken);
      const row = this.tokens.get(hash);
      if (row === undefined || row.revokedAtSeconds !== undefined) return false;
      this.put(this.tokens, hash, Object.freeze({ ...row, revokedAtSeconds: this.now() }));
      return true;
    });
  }

  revokeTeamTokenByPrefix(hashPrefix: string): TeamTokenRecord | undefined {
    return this.transaction(() => {
      const rows = [...this.tokens.values()].filter((r) => r.hash.startsWith(hashPrefix));
      const row = rows[0];
      if (checkPrefixMatch(hashPrefix, rows.length, row?.revokedAtSeconds) === undefined || row === undefined)
        return undefined;
      const revoked: TokenRow = Object.freeze({ ...row, revokedAtSeconds: this.now() });
      this.put(this.tokens, row.hash, revoked);
      return tokenRecord(revoked);
    });
  }

  listTeamTokens(team?: string): TeamTokenRecord[] {
    return [...this.tokens.values()].filter((r) => team === undefined || r.team === team).map(tokenRecord);
  }

  // ---- key-values --------------------------------------------------------------------------------------------

  getValue(key: string): JsonValue | undefined {
    const text = this.values.get(key);
    return text === undefined ? undefined : (JSON.parse(text) as JsonValue);
  }

  setValue(key: string, value: JsonValue): void {
    const text = valueJson(key, value);
    this.transaction(() => this.put(this.values, key, text));
  }

  deleteValue(key: string): boolean {
    return this.transaction(() => {
      const had = this.values.has(key);
      if (had) this.put(this.values, key, undefined);
      return had;
    });
  }

  close(): void {
    this.closed = true;
  }

  // ---- internals ---------------------------------------------------------------------------------------------

  private checkOpen(): void {
    if (this.closed) throw new StateStoreError('the state store is closed');
  }

  /** Set (or with `undefined`, delete) a map entry, journaling the previous value. */
  private put<K, V>(map: Map<K, V>, key: K, value: V | undefined): void {
    const journal = this.journal;
    if (journal === undefined) throw new Error('internal: write outside a transaction');
    const had = map.has(key);
    const previous = map.get(key);
    journal.push(() => (had ? map.set(key, previous as V) : map.delete(key)));
    if (value === undefined) map.delete(key);
    else map.set(key, value);
  }

  /** Move a counter up to `n` (a kept id), so it is never given again; returns `n`. */
  private claim(counter: Counter, n: number): number {
    const journal = this.journal;
    if (journal === undefined) throw new Error('internal: counter outside a transaction');
    const before = this.counters.get(counter) ?? 0;
    if (n > before) {
      this.counters.set(counter, n);
      journal.push(() => this.counters.set(counter, before));
    }
    return n;
  }

  private sortJobsById(): void {
    const sorted = [...this.jobs.entries()].sort(([a], [b]) => jobSeqOf(a) - jobSeqOf(b));
    this.jobs.clear();
    for (const [id, job] of sorted) this.jobs.set(id, job);
  }

  private next(counter: Counter): number {
    const journal = this.journal;
    if (journal === undefined) throw new Error('internal: counter outside a transaction');
    const n = (this.counters.get(counter) ?? 0) + 1;
    this.counters.set(counter, n);
    journal.push(() => this.counters.set(counter, n - 1));
    return n;
  }

  private emit(event: EventInput, atSeconds: number): EventRecord {
    const record = frozenCopy({
      ...withoutUndefined(event),
      seq: this.next('event'),
      atSeconds,
    }) as EventRecord;
    (this.journal as (() => void)[]).push(this.events.append(record));
    return record;
  }

  private apply<K, R>(
    map: Map<K, R & { readonly id: K }>,
    change: Change<R & { readonly id: K }>,
  ): R & { readonly id: K } {
    if (map.get(change.record.id) === change.record) return change.record;
    const record = Object.freeze(withoutUndefined(change.record));
    this.put(map, record.id, record);
    if (change.event !== undefined) this.emit(change.event, change.atSeconds ?? this.now());
    return record;
  }

  private job(id: string): JobRecord {
    const job = this.jobs.get(id);
    if (job === undefined) throw new UnknownRecordError('job', id);
    return job;
  }

  private task(id: string): TaskRecord {
    const task = this.tasks.get(id);
    if (task === undefined) throw new UnknownRecordError('task', id);
    return task;
  }

  private instance(id: string): InstanceRecord {
    const instance = this.instances.get(id);
    if (instance === undefined) throw new UnknownRecordError('instance', id);
    return instance;
  }
}

function tokenRecord(row: TokenRow): TeamTokenRecord {
  return {
    team: row.team,
    ...(row.label === undefined ? {} : { label: row.label }),
    hashPrefix: row.hash.slice(0, HASH_PREFIX_LENGTH),
    createdAtSeconds: row.createdAtSeconds,
    ...(row.revokedAtSeconds === undefined ? {} : { revokedAtSeconds: row.revokedAtSeconds }),
  };
}

/** The record without its undefined fields, as SQLite's JSON gives it back; itself when it has none (most writes). */
function withoutUndefined<T extends object>(value: T): T {
  if (!Object.values(value).includes(undefined)) return value;
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

function jobMatches(job: JobRecord, filter: JobFilter): boolean {
  return (
    (filter.states === undefined || filter.states.includes(job.state)) &&
    (filter.team === undefined || job.team === filter.team) &&
    (filter.endedSince === undefined ||
      job.finishedAtSeconds === undefined ||
      job.finishedAtSeconds >= filter.endedSince)
  );
}
