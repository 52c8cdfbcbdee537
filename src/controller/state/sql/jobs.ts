import type { JobSpec } from '../../job-spec/spec.js';
import {
  StateStoreError,
  UnknownRecordError,
  type AttemptFailureInput,
  type JobFilter,
  type JobRecord,
  type JobState,
  type KeptJobIdentity,
  type TaskFilter,
  type TaskRecord,
  type TaskState,
} from '../../state-store.js';
import {
  jobSeqOf,
  newTaskRecords,
  submittedEvent,
  submittedJobRecord,
  transitionJob,
  transitionTask,
  withCheckpoint,
  withProgress,
  withRetry,
  type Change,
} from '../lifecycle.js';
import { Where, type SqlConnection } from './connection.js';
import type { EventQueries } from './events.js';
import type { InstanceQueries } from './instances.js';
import { jobFromRow, taskFromRow } from './rows.js';

/** Jobs and their tasks (a task moves with its job and onto instances). */
export class JobQueries {
  constructor(
    private readonly connection: SqlConnection,
    private readonly events: EventQueries,
    private readonly instances: InstanceQueries,
  ) {}

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
    const row = this.connection.get('SELECT * FROM jobs WHERE id = ?', id);
    return row === undefined ? undefined : jobFromRow(row);
  }

  listJobs(filter: JobFilter = {}): JobRecord[] {
    const where = new Where();
    where.in('state', filter.states);
    where.eq('team', filter.team);
    return this.connection
      .all(`SELECT * FROM jobs ${where.sql()} ORDER BY seq`, ...where.params)
      .map(jobFromRow);
  }

  setJobState(id: string, state: JobState, reason?: string): JobRecord {
    return this.connection.transaction(() =>
      this.applyJob(transitionJob(this.job(id), state, this.connection.now(), reason)),
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
    return this.connection
      .all(`SELECT * FROM tasks ${where.sql()} ORDER BY seq`, ...where.params)
      .map(taskFromRow);
  }

  setTaskState(id: string, state: TaskState, instanceId?: string): TaskRecord {
    return this.connection.transaction(() => {
      const task = this.task(id);
      const instance = instanceId === undefined ? undefined : this.instances.existing(instanceId);
      return this.applyTask(
        transitionTask(task, this.job(task.jobId), state, instance, this.connection.now()),
      );
    });
  }

  recordCheckpoint(taskId: string, key: string, atSeconds?: number): TaskRecord {
    return this.connection.transaction(() => {
      const now = this.connection.now();
      return this.applyTask(withCheckpoint(this.task(taskId), key, atSeconds ?? now, now));
    });
  }

  private applyJob(change: Change<JobRecord>): JobRecord {
    const j = change.record;
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
    if (change.event !== undefined) this.events.emit(change.event, this.connection.now());
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
    if (change.event !== undefined) this.events.emit(change.event, this.connection.now());
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
