import { parseCheckpointKey } from '../protocol/object-keys.js';
import type { TaskReport } from '../protocol/worker-protocol.js';
import type { StateStore, TaskRecord } from './state-store.js';

/** What an instance's worker said in its latest heartbeat: the tasks it has, by task id. */
export interface InstanceReports {
  readonly seq: number;
  readonly atSeconds: number;
  readonly tasks: ReadonlyMap<string, TaskReport>;
}

/**
 * A report of an earlier attempt of the task's job: after a retry the worker still reports the exit that ended
 * that attempt until it runs the task again.
 */
export function isStaleReport(store: StateStore, report: TaskReport, task: TaskRecord): boolean {
  const job = store.getJob(task.jobId);
  return job !== undefined && (report.attempt ?? 1) < job.attempts;
}

/**
 * Whether a reported checkpoint is older than the task's recorded one. Checkpoints are numbered per task across its
 * workers (a resumed task's worker continues after the newest stored number), so the numbers decide; their times are
 * the clocks of the hosts that wrote them, which a move between hosts with skewed clocks would make disagree. Times
 * decide only for a key outside the checkpoint layout.
 */
export function isOlderCheckpoint(
  task: TaskRecord,
  reported: { readonly key: string; readonly atSeconds: number },
): boolean {
  if (task.lastCheckpointKey === undefined) return false;
  const ref = { jobId: task.jobId, taskId: task.id };
  const recordedSeq = parseCheckpointKey(ref, task.lastCheckpointKey)?.seq;
  const reportedSeq = parseCheckpointKey(ref, reported.key)?.seq;
  if (recordedSeq !== undefined && reportedSeq !== undefined) return reportedSeq < recordedSeq;
  return task.lastCheckpointAtSeconds !== undefined && reported.atSeconds < task.lastCheckpointAtSeconds;
}

/** The most earlier runs of an instance's worker remembered, so that their late heartbeats are told from new ones. */
const SUPERSEDED_RUNS_KEPT = 8;

/**
 * The order of each instance's heartbeats: those of one worker process (`bootId`) are numbered (`seq`), and one that
 * arrives after a later one of the same process (its request timed out at the worker and reached the controller
 * late, or was retransmitted) reports an older state: progress and checkpoints that would go backwards. So does one of
 * a worker process that another has replaced on the instance (a restarted worker). In memory only: after a
 * controller restart the first heartbeat of each worker is taken as it comes; one without a number (an older worker)
 * always is.
 */
export class HeartbeatOrder {
  private readonly last = new Map<
    string,
    { readonly bootId: string; readonly seq: number; readonly superseded: readonly string[] }
  >();

  /** Whether the heartbeat is newer than every one taken from the instance; if so it is the newest from now on. */
  take(instanceId: string, bootId: string | undefined, seq: number | undefined): boolean {
    if (bootId === undefined || seq === undefined) return true;
    const last = this.last.get(instanceId);
    if (last === undefined) {
      this.last.set(instanceId, { bootId, seq, superseded: [] });
      return true;
    }
    if (last.bootId === bootId) {
      if (seq <= last.seq) return false;
      this.last.set(instanceId, { ...last, seq });
      return true;
    }
    if (last.superseded.includes(bootId)) return false;
    const superseded = [...last.superseded, last.bootId].slice(-SUPERSEDED_RUNS_KEPT);
    this.last.set(instanceId, { bootId, seq, superseded });
    return true;
  }

  /** The instance's worker is gone (its instance replaced). */
  forget(instanceId: string): void {
    this.last.delete(instanceId);
  }
}
