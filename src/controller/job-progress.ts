import { z } from 'zod';
import type { TaskReport } from '../protocol/worker-protocol.js';
import type { Clock } from './clock.js';
import { isFinalJobState } from './state/lifecycle.js';
import type { StateStore, TaskRecord } from './state-store.js';
import { isStaleReport } from './worker-reports.js';

/**
 * How long a running task that has written no progress while a sibling did counts as having done 0 of its job's
 * iterations (a slow first line: a restore, a warm-up) before it is taken for one that writes none (a gang's
 * coordinator) and left out of its job's progress: counted as nothing meanwhile, a gang's progress would jump to its
 * fastest task's count and fall back when the slower one reports its first line.
 */
export const SILENT_TASK_GRACE_SECONDS = 120;

/** What a `task.state` event records of the change (state/lifecycle.ts transitionTask): the state it went to. */
const taskStateData = z.object({ to: z.string() });

/** A job's iterations done, from the counts its tasks' workers report, kept until the loop stores them. */
export class JobProgress {
  private readonly completed = new Map<string, number>();
  /**
   * Tasks taken for ones that write no progress (a gang's coordinator): silent past SILENT_TASK_GRACE_SECONDS of
   * running while a sibling reported. Left out of their job's progress from then on, moves included.
   */
  private readonly silentTasks = new Set<string>();
  /** Task → when it became `running`, as read for its record of `recordAtSeconds` (`runningSince`). */
  private readonly runningSinceByTask = new Map<
    string,
    { readonly recordAtSeconds: number; readonly atSeconds: number }
  >();
  /** Job → iterations done, reported since the last `flush`. */
  private readonly progress = new Map<string, number>();

  constructor(
    private readonly store: StateStore,
    private readonly clock: Clock,
    /** The task's report in its worker's latest heartbeat. */
    private readonly latestReport: (task: TaskRecord) => TaskReport | undefined,
  ) {}

  /** The task's worker reports it has done `iterations`. */
  reported(taskId: string, iterations: number): void {
    this.completed.set(taskId, iterations);
    this.runningSinceByTask.delete(taskId);
  }

  /** Take the progress of jobs whose tasks reported, as their tasks' counts now make it. */
  update(jobIds: Iterable<string>): void {
    for (const jobId of jobIds) {
      const done = this.jobProgress(jobId);
      if (done !== undefined) this.progress.set(jobId, done);
    }
  }

  /**
   * Store the job progress heartbeats reported since the last call, in one transaction (the loop calls it before each
   * pass). Progress is level-triggered: workers report absolute iteration counts in every heartbeat, so keeping it
   * here until the next pass loses nothing a restart would not hear again, and spares each heartbeat a write, and
   * with it a sync of the store (an fsync of SQLite's WAL), which would bound heartbeats to a few hundred a second.
   */
  flush(): void {
    if (this.progress.size === 0) return;
    const reported = [...this.progress];
    this.progress.clear();
    this.store.transaction(() => {
      for (const [jobId, done] of reported) {
        const job = this.store.getJob(jobId);
        if (job === undefined || isFinalJobState(job.state) || done === job.completedIterations) continue;
        this.store.recordJobProgress(jobId, done, job.spec.totalIterations);
      }
    });
  }

  /**
   * A job's iterations done, from its tasks' reports: a gang has done what its least advanced task still at work has
   * done, among those that have not succeeded (one done with its part stays where its part ended while the others go
   * on). A task that has reported nothing yet has done 0, until it has been running SILENT_TASK_GRACE_SECONDS without
   * a word while a sibling reported: then it is taken for one that writes no progress (a gang's coordinator) and left
   * out. Once none is left at work, the most any reached. Undefined while no task has reported.
   */
  private jobProgress(jobId: string): number | undefined {
    const tasks = this.store.listTasks({ jobId });
    if (!tasks.some((t) => this.completed.has(t.id))) return undefined;
    const going: number[] = [];
    const ended: number[] = [];
    for (const t of tasks) {
      const done = this.completed.get(t.id);
      if (this.succeeded(t)) {
        if (done !== undefined) ended.push(done);
      } else if (done !== undefined) going.push(done);
      else if (!this.silent(t)) going.push(0);
    }
    if (going.length > 0) return Math.min(...going);
    return ended.length > 0 ? Math.max(...ended) : undefined;
  }

  /**
   * Whether a task that has reported no progress (while a sibling did) is one that writes none: it has run
   * SILENT_TASK_GRACE_SECONDS since it last became `running` (its newest `task.state` event; a store that no longer
   * has it, since its record last changed), now or before in this process.
   */
  private silent(task: TaskRecord): boolean {
    if (this.silentTasks.has(task.id)) return true;
    if (task.state !== 'running') return false;
    if (this.clock.nowSeconds() - this.runningSince(task) < SILENT_TASK_GRACE_SECONDS) return false;
    this.silentTasks.add(task.id);
    this.runningSinceByTask.delete(task.id);
    return true;
  }

  /**
   * When the running task last became `running`, read from the store once per change of its record (heartbeats ask
   * for it every few seconds while it has said nothing).
   */
  private runningSince(task: TaskRecord): number {
    const known = this.runningSinceByTask.get(task.id);
    if (known !== undefined && known.recordAtSeconds === task.updatedAtSeconds) return known.atSeconds;
    const [last] = this.store.listEvents({
      jobId: task.jobId,
      taskId: task.id,
      kind: 'task.state',
      newestFirst: true,
      limit: 1,
    });
    const atSeconds =
      last !== undefined && taskStateData.safeParse(last.data).data?.to === 'running'
        ? last.atSeconds
        : task.updatedAtSeconds;
    this.runningSinceByTask.set(task.id, { recordAtSeconds: task.updatedAtSeconds, atSeconds });
    return atSeconds;
  }

  /** The task succeeded, as the store has it or as its worker's latest report of this attempt says. */
  private succeeded(task: TaskRecord): boolean {
    if (task.state === 'succeeded') return true;
    const report = this.latestReport(task);
    return report?.state === 'succeeded' && !isStaleReport(this.store, report, task);
  }
}
