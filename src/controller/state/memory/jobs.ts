import type { JobSpec } from '../../job-spec/spec.js';
import {
  JOB_STATES,
  StateStoreError,
  TASK_STATES,
  UnknownRecordError,
  type AttemptFailureInput,
  type JobFilter,
  type JobRecord,
  type JobState,
  type JobStateOptions,
  type KeptJobIdentity,
  type StateCounts,
  type TaskFilter,
  type TaskRecord,
  type TaskState,
  type TaskStateOptions,
} from '../../state-store.js';
import {
  frozenCopy,
  jobSeqOf,
  newTaskRecords,
  submittedEvent,
  submittedJobRecord,
  transitionJob,
  transitionTask,
  withCheckpoint,
  withMigrationCounted,
  withProgress,
  withRetry,
} from '../lifecycle.js';
import type { MemoryEvents } from './events.js';
import type { MemoryInstances } from './instances.js';
import { checkQueryBound, checkRequired, type MemoryTransactions, type Transact } from './transactions.js';

/** The memory store's jobs and their tasks (a task moves with its job and onto instances). */
export class MemoryJobs {
  private readonly jobs = new Map<string, JobRecord>();
  private readonly tasks = new Map<string, TaskRecord>();

  constructor(
    private readonly tx: MemoryTransactions,
    private readonly transaction: Transact,
    private readonly events: MemoryEvents,
    private readonly instances: MemoryInstances,
  ) {}

  reserveJobIds(throughSeq: number): void {
    this.transaction(() => this.tx.claim('job', throughSeq));
  }

  submitJob(spec: JobSpec, kept?: KeptJobIdentity): JobRecord {
    return this.transaction(() => {
      const now = this.tx.now();
      if (kept !== undefined && this.jobs.has(kept.id))
        throw new StateStoreError(`job ${kept.id} exists already: a kept id must be free`);
      if (kept !== undefined) checkRequired(kept.submittedAtSeconds, `submittedAtSeconds of ${kept.id}`);
      const seq = kept === undefined ? this.tx.next('job') : this.tx.claim('job', jobSeqOf(kept.id));
      const job = Object.freeze(submittedJobRecord(seq, frozenCopy(spec), now, kept));
      const tasks = newTaskRecords(job, now).map((t) => Object.freeze(t));
      this.tx.put(this.jobs, job.id, job);
      // Jobs list in id order, as SQLite's do: a kept id may be lower than ids given since.
      if (kept !== undefined) this.sortJobsById();
      for (const t of tasks) this.tx.put(this.tasks, t.id, t);
      this.events.emit(submittedEvent(job, tasks.length), now);
      return job;
    });
  }

  getJob(id: string): JobRecord | undefined {
    return this.jobs.get(id);
  }

  listJobs(filter: JobFilter = {}): JobRecord[] {
    checkQueryBound(filter.endedSince, 'a job end time');
    if (Number.isNaN(filter.limit)) checkQueryBound(filter.limit, 'a job list limit');
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
      this.events.applyChange(
        this.jobs,
        transitionJob(this.job(id), state, this.tx.now(), reason, options.atSeconds),
      ),
    );
  }

  countMigration(id: string): JobRecord {
    return this.transaction(() =>
      this.events.applyChange(this.jobs, withMigrationCounted(this.job(id), this.tx.now())),
    );
  }

  recordJobProgress(id: string, completedIterations: number, totalIterations?: number): JobRecord {
    return this.transaction(() =>
      this.events.applyChange(this.jobs, {
        record: withProgress(this.job(id), completedIterations, totalIterations, this.tx.now()),
      }),
    );
  }

  retryJob(id: string, failure: AttemptFailureInput, reason: string): JobRecord {
    return this.transaction(() => {
      const now = this.tx.now();
      const next = this.events.applyChange(this.jobs, withRetry(this.job(id), frozenCopy(failure), now));
      return this.events.applyChange(this.jobs, transitionJob(next, 'queued', now, reason));
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

  setTaskState(
    id: string,
    state: TaskState,
    instanceId?: string,
    options: TaskStateOptions = {},
  ): TaskRecord {
    return this.transaction(() => {
      const task = this.task(id);
      const instance = instanceId === undefined ? undefined : this.instances.existing(instanceId);
      return this.events.applyChange(
        this.tasks,
        transitionTask(task, this.job(task.jobId), state, instance, this.tx.now(), options.atSeconds),
      );
    });
  }

  recordCheckpoint(taskId: string, key: string, atSeconds?: number, fromInstanceId?: string): TaskRecord {
    return this.transaction(() => {
      const now = this.tx.now();
      return this.events.applyChange(
        this.tasks,
        withCheckpoint(this.task(taskId), key, atSeconds ?? now, now, fromInstanceId),
      );
    });
  }

  private sortJobsById(): void {
    const sorted = [...this.jobs.entries()].sort(([a], [b]) => jobSeqOf(a) - jobSeqOf(b));
    this.jobs.clear();
    for (const [id, job] of sorted) this.jobs.set(id, job);
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
