import { z } from 'zod';
import { JOB_STATES, type EventRecord, type JobRecord, type StateStore } from './state-store.js';

/**
 * A job's runs as its own events tell them: where each began and how those that went back to the queue ended (its
 * instance or worker lost, an attempt failed, a plan returned it), for `why` and the job's view.
 */

/** A run of a job that ended with the job back in the queue, not ended: it starts again. */
interface RunEnd {
  readonly seq: number;
  readonly atSeconds: number;
  /**
   * retried: an attempt failed (its retryStrategy, a host fault); returned: a plan returned it to the queue (a
   * migration); interrupted: anything else, its instance or worker lost, or stopped with the controller.
   */
  readonly kind: 'interrupted' | 'retried' | 'returned';
  /** What ended it, in words: "inst-4 was lost: worker stopped heartbeating". */
  readonly cause: string;
}

/** A job's runs: where each began (entered `running`) and how those that went back to the queue ended. */
export interface JobRuns {
  readonly beganAt: readonly number[];
  readonly ends: readonly RunEnd[];
}

/** What a `job.state` event's data says of the change (lifecycle.ts writes it). */
const stateChange = z.object({
  from: z.enum(JOB_STATES),
  to: z.enum(JOB_STATES),
  reason: z.string().optional(),
});

/**
 * The job's state changes and retries, in one read of its own events of those two kinds (indexed by job and kind, so
 * its checkpoint events are not walked): a few per run.
 */
export function readRuns(store: StateStore, jobId: string): JobRuns {
  return runsOf(store.listEvents({ jobId, kinds: ['job.state', 'job.retry'] }));
}

function runsOf(events: readonly EventRecord[]): JobRuns {
  const beganAt: number[] = [];
  const ends: RunEnd[] = [];
  // A retry records its event and then the job's return to the queue, in one transaction.
  let retried = false;
  let migratingBecause: string | undefined;
  for (const e of events) {
    if (e.kind === 'job.retry') {
      retried = true;
      continue;
    }
    const change = stateChange.safeParse(e.data);
    const after = retried;
    retried = false;
    if (!change.success) continue;
    const { from, to, reason } = change.data;
    if (to === 'running') beganAt.push(e.seq);
    if (to === 'migrating') migratingBecause = reason;
    if (to !== 'queued' || (from !== 'running' && from !== 'migrating')) continue;
    const lost = lossInWords(reason);
    const [kind, cause]: [RunEnd['kind'], string] = after
      ? ['retried', reason ?? 'an attempt failed']
      : lost !== undefined
        ? ['interrupted', lost]
        : from === 'migrating'
          ? ['returned', returnInWords(migratingBecause)]
          : ['interrupted', reason ?? 'it went back to the queue'];
    ends.push({ seq: e.seq, atSeconds: e.atSeconds, kind, cause });
  }
  return { beganAt, ends };
}

/**
 * A job's return to the queue because its instance or worker went (reconcile/cloud-sync.ts, worker-liveness.ts
 * word it), said of the instance: "inst-4 was lost: worker stopped heartbeating". Undefined for any other reason.
 */
function lossInWords(reason: string | undefined): string | undefined {
  if (reason === undefined) return undefined;
  const silent = /^worker of (\S+) stopped heartbeating/.exec(reason);
  if (silent !== null) return `${silent[1]} was lost: worker stopped heartbeating`;
  const lost = /^instance (\S+) lost: (.+)$/s.exec(reason);
  if (lost !== null) return `${lost[1]} was lost: ${lost[2]}`;
  const gone = /^instance (\S+) ((?:terminated|is gone).*)$/s.exec(reason);
  return gone === null ? undefined : `${gone[1]} ${gone[2]}`;
}

/**
 * How a plan's checkpoint-stop ended in the queue, from the reason the job began to migrate with
 * (reconcile/plan-intents.ts): "round 12 returned it to the queue", "its move in round 9 ended in the queue".
 */
function returnInWords(migratingBecause: string | undefined): string {
  const match = /^(returned to the queue|moving) \(round (\d+)\)/.exec(migratingBecause ?? '');
  if (match === null) return 'a plan returned it to the queue';
  return match[1] === 'moving'
    ? `its move in round ${match[2]} ended in the queue`
    : `round ${match[2]} returned it to the queue`;
}

/**
 * Why the job's start applied at `appliedSeq` is a restart: how its last run before then ended, when that run went back
 * to the queue (no run began since). Undefined for a first start.
 */
export function restartCause(runs: JobRuns, appliedSeq: number): string | undefined {
  const lastBegan = runs.beganAt.filter((seq) => seq < appliedSeq).at(-1);
  if (lastBegan === undefined) return undefined;
  return runs.ends.filter((end) => end.seq > lastBegan && end.seq < appliedSeq).at(-1)?.cause;
}

/** A run of a job its instance or worker ended (not an attempt, not a move): the job started again. */
export interface JobRestart {
  readonly atSeconds: number;
  /** "inst-4 was lost: worker stopped heartbeating". */
  readonly cause: string;
}

/**
 * The job's restarts, oldest first: runs that went back to the queue because their instance or worker was lost (or
 * stopped with the controller). Retried attempts and a plan's returns to the queue are not among them: the job's
 * attempts and migrations count those. One read of the job's own state events, and none for a job that never ran;
 * for one job's view, never a listing's.
 */
export function jobRestarts(store: StateStore, job: JobRecord): JobRestart[] {
  if (job.startedAtSeconds === undefined) return [];
  return readRuns(store, job.id)
    .ends.filter((end) => end.kind === 'interrupted')
    .map((end) => ({ atSeconds: end.atSeconds, cause: end.cause }));
}
