import { LRUCache } from 'lru-cache';
import type { JobSpec } from '../../job-spec/spec.js';
import {
  StateStoreError,
  JOB_STATES,
  TASK_STATES,
  UnknownRecordError,
  type StateCounts,
  type AttemptFailureInput,
  type JobFilter,
  type JobRecord,
  type JobState,
  type JobStateOptions,
  type KeptJobIdentity,
  type TaskFilter,
  type TaskRecord,
  type TaskState,
  type TaskStateOptions,
} from '../../state-store.js';
import {
  jobSeqOf,
  newTaskRecords,
  submittedEvent,
  submittedJobRecord,
  transitionJob,
  withMigrationCounted,
  transitionTask,
  withCheckpoint,
  withProgress,
  withRetry,
  type Change,
} from '../lifecycle.js';
import { Where, type SqlConnection } from './connection.js';
import type { EventQueries } from './events.js';
import type { InstanceQueries } from './instances.js';
import { deepFreeze, RecordCache } from './record-cache.js';
import { jobRecordFromRow, parseStoredSpec, taskFromRow } from './rows.js';
import { rowLimit } from './query-bounds.js';

/** Parsed specs and job records kept: more than the live jobs of a large cluster, a few MB each. */
const SPEC_CACHE_SIZE = 20_000;

/**
 * Job specs parsed once: a spec never changes after submission, and the loop, the API and heartbeats read jobs all
 * the time (JSON.parse of every spec was a good part of a pass). Frozen, since every reader shares it; the spec read
 * longest ago makes room first, so a listing of many finished jobs does not push out the live ones. An entry serves
 * only the very text it was parsed from: a submission rolled back (a rejected array, a failed commit) gives its id
 * back, and the next job under that id has another spec, which a cache by id alone would hide behind the first.
 */
class SpecCache {
  private readonly specs = new LRUCache<string, { readonly json: string; readonly spec: JobSpec }>({
    max: SPEC_CACHE_SIZE,
  });

  readonly specOf = (jobId: string, json: string): JobSpec => {
    const cached = this.specs.get(jobId);
    if (cached !== undefined && cached.json === json) return cached.spec;
    const spec = deepFreeze(parseStoredSpec(jobId, json));
    this.specs.set(jobId, { json, spec });
    return spec;
  };
}

/** Jobs and their tasks (a task moves with its job and onto instances). */
export class JobQueries {
  private readonly specs = new SpecCache();
  private readonly cache: RecordCache<JobRecord>;

  constructor(
    private readonly connection: SqlConnection,
    private readonly events: EventQueries,
    private readonly instances: InstanceQueries,
  ) {
    this.cache = new RecordCache(connection, SPEC_CACHE_SIZE);
  }

  submitJob(spec: JobSpec, kept?: KeptJobIdentity): JobRecord {
    return this.connection.transaction(() => {
      const now = this.connection.now();
      if (kept !== undefined && this.getJob(kept.id) !== undefined)
        throw new StateStoreError(`job ${kept.id} exists already: a kept id must be free`);
      const seq = kept === undefined ? this.connection.nextNumber('jobs') : jobSeqOf(kept.id);
      // A kept id above the counter moves it up, so later submissions never reuse it.
      if (kept !== undefined) this.connection.numberUsed('jobs', seq);
      const job = submittedJobRecord(seq, spec, now, kept);
      this.connection.run(
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
        this.connection.run(
          `INSERT INTO tasks (id, job_id, task_index, name, workload_key, state, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
          t.id,
          t.jobId,
          t.index,
          t.name,
          t.workloadKey,
          t.state,
          t.updatedAtSeconds,
        );
      this.events.emit(submittedEvent(job, tasks.length), now);
      return this.job(job.id);
    });
  }

  getJob(id: string): JobRecord | undefined {
    const cached = this.cache.get(id);
    if (cached !== undefined) return cached;
    const row = this.connection.get('SELECT * FROM jobs WHERE id = ?', id);
    return row === undefined ? undefined : this.cache.remember(id, jobRecordFromRow(row, this.specs.specOf));
  }

  listJobs(filter: JobFilter = {}): JobRecord[] {
    const where = jobWhere(filter);
    // Bound, not written into the statement: a limit that is no number is refused as the memory store refuses it.
    const limit = filter.limit === undefined ? [] : [rowLimit(filter.limit)];
    return this.connection
      .all(
        `SELECT * FROM jobs ${where.sql()} ORDER BY seq${limit.length === 0 ? '' : ' LIMIT ?'}`,
        ...where.params,
        ...limit,
      )
      .map((row) => jobRecordFromRow(row, this.specs.specOf));
  }

  countJobs(filter: JobFilter = {}): number {
    const where = jobWhere(filter);
    const count = Number(
      this.connection.get(`SELECT COUNT(*) AS n FROM jobs ${where.sql()}`, ...where.params)?.['n'] ?? 0,
    );
    return filter.limit === undefined ? count : Math.min(count, filter.limit);
  }

  setJobState(id: string, state: JobState, reason?: string, options: JobStateOptions = {}): JobRecord {
    return this.connection.transaction(() =>
      this.applyJob(transitionJob(this.job(id), state, this.connection.now(), reason, options.atSeconds)),
    );
  }

  countMigration(id: string): JobRecord {
    return this.connection.transaction(() =>
      this.applyJob(withMigrationCounted(this.job(id), this.connection.now())),
    );
  }

  recordJobProgress(id: string, completedIterations: number, totalIterations?: number): JobRecord {
    return this.connection.transaction(() =>
      this.applyJob({
        record: withProgress(this.job(id), completedIterations, totalIterations, this.connection.now()),
      }),
    );
  }

  retryJob(id: string, failure: AttemptFailureInput, reason: string): JobRecord {
    return this.connection.transaction(() => {
      const now = this.connection.now();
      const next = this.applyJob(withRetry(this.job(id), failure, now));
      return this.applyJob(transitionJob(next, 'queued', now, reason));
    });
  }

  getTask(id: string): TaskRecord | undefined {
    const row = this.connection.get('SELECT * FROM tasks WHERE id = ?', id);
    return row === undefined ? undefined : taskFromRow(row);
  }

  listTasks(filter: TaskFilter = {}): TaskRecord[] {
    const where = new Where();
    where.eq('job_id', filter.jobId);
    where.eq('instance_id', filter.instanceId);
    where.in('state', filter.states);
    if (filter.jobStates !== undefined)
      where.raw(
        filter.jobStates.length === 0
          ? '1 = 0'
          : `job_id IN (SELECT id FROM jobs WHERE state IN (${filter.jobStates.map(() => '?').join(', ')}))`,
        ...filter.jobStates,
      );
    return this.connection
      .all(`SELECT * FROM tasks ${where.sql()} ORDER BY seq`, ...where.params)
      .map(taskFromRow);
  }

  countByState(): StateCounts {
    const count = <S extends string>(table: 'jobs' | 'tasks', states: readonly S[]): Record<S, number> => {
      const counts = Object.fromEntries(states.map((st) => [st, 0])) as Record<S, number>;
      for (const row of this.connection.all(`SELECT state, COUNT(*) AS n FROM ${table} GROUP BY state`))
        counts[String(row['state']) as S] = Number(row['n']);
      return counts;
    };
    return { jobs: count('jobs', JOB_STATES), tasks: count('tasks', TASK_STATES) };
  }

  setTaskState(
    id: string,
    state: TaskState,
    instanceId?: string,
    options: TaskStateOptions = {},
  ): TaskRecord {
    return this.connection.transaction(() => {
      const task = this.task(id);
      const instance = instanceId === undefined ? undefined : this.instances.existing(instanceId);
      return this.applyTask(
        transitionTask(task, this.job(task.jobId), state, instance, this.connection.now(), options.atSeconds),
      );
    });
  }

  recordCheckpoint(taskId: string, key: string, atSeconds?: number, fromInstanceId?: string): TaskRecord {
    return this.connection.transaction(() => {
      const now = this.connection.now();
      return this.applyTask(withCheckpoint(this.task(taskId), key, atSeconds ?? now, now, fromInstanceId));
    });
  }

  private applyJob(change: Change<JobRecord>): JobRecord {
    const j = change.record;
    this.cache.forget(j.id);
    this.connection.run(
      `UPDATE jobs SET state = ?, reason = ?, started_at = ?, finished_at = ?, updated_at = ?, completed_iterations = ?,
         total_iterations = ?, migrations = ?, attempts = ?, attempt_failures_json = ? WHERE id = ?`,
      j.state,
      j.reason ?? null,
      j.startedAtSeconds ?? null,
      j.finishedAtSeconds ?? null,
      j.updatedAtSeconds,
      j.completedIterations,
      j.totalIterations ?? null,
      j.migrations,
      j.attempts,
      j.attemptFailures === undefined ? null : JSON.stringify(j.attemptFailures),
      j.id,
    );
    if (change.event !== undefined) this.events.emit(change.event, change.atSeconds ?? this.connection.now());
    return this.job(j.id);
  }

  private applyTask(change: Change<TaskRecord>): TaskRecord {
    const t = change.record;
    this.connection.run(
      `UPDATE tasks SET state = ?, instance_id = ?, last_checkpoint_key = ?, last_checkpoint_at = ?, updated_at = ? WHERE id = ?`,
      t.state,
      t.instanceId ?? null,
      t.lastCheckpointKey ?? null,
      t.lastCheckpointAtSeconds ?? null,
      t.updatedAtSeconds,
      t.id,
    );
    if (change.event !== undefined) this.events.emit(change.event, change.atSeconds ?? this.connection.now());
    return this.task(t.id);
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
}

function jobWhere(filter: JobFilter): Where {
  const where = new Where();
  where.in('state', filter.states);
  where.eq('team', filter.team);
  // finished_at is set exactly when a job reaches a final state.
  if (filter.endedSince !== undefined)
    where.raw('(finished_at IS NULL OR finished_at >= ?)', filter.endedSince);
  if (filter.afterId !== undefined) where.raw('seq > ?', jobSeqOf(filter.afterId));
  return where;
}
