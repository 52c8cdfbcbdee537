import { JOB_PREPARED_EVENT, preparedSinceOf } from '../../snapshot.js';
import type { ReconcileContext } from '../context.js';

/**
 * When a running job's tasks are all prepared, as far as the controller knows: the round pins the job until then and
 * dates its progress from then (snapshot.ts), as the simulator's engine does.
 */

/**
 * Record that every task of a running job is prepared (snapshot.ts JOB_PREPARED_EVENT: the round pins the job until
 * then and dates its progress from then), once per run of its tasks.
 */
export function notePrepared(ctx: ReconcileContext, jobId: string, how: string): void {
  if (ctx.store.getJob(jobId)?.state !== 'running' || preparedSinceOf(ctx.store, jobId) !== undefined) return;
  ctx.store.appendEvent({ kind: JOB_PREPARED_EVENT, jobId, message: `job ${jobId} prepared: ${how}` });
}

/**
 * Per store, each job last found prepared → its tasks heard running then (`task@instance@updated`): while the same
 * tasks are heard unchanged, its run is the one already recorded, and the pass reads nothing more for it.
 */
const knownPrepared = new WeakMap<object, Map<string, string>>();

/**
 * Record as prepared the running jobs every task of which was heard running in this pass (no longer starting: its
 * image fetched and built, its checkpoint restored) or has done its part.
 */
export function notePreparedJobs(
  ctx: ReconcileContext,
  jobs: ReadonlyMap<string, readonly string[]>,
  heard: ReadonlyMap<string, string>,
): void {
  const known = knownPrepared.get(ctx.store);
  const next = new Map<string, string>();
  knownPrepared.set(ctx.store, next);
  if (jobs.size === 0) return;
  ctx.store.transaction(() => {
    for (const [jobId, marks] of jobs) {
      const mark = [...marks].sort().join(' ');
      if (known?.get(jobId) === mark) {
        next.set(jobId, mark);
        continue;
      }
      const all = ctx.store
        .listTasks({ jobId })
        .every(
          (t) =>
            t.state === 'succeeded' ||
            (t.state === 'running' && t.instanceId !== undefined && heard.get(t.id) === t.instanceId),
        );
      if (!all) continue;
      notePrepared(ctx, jobId, 'every task heard running');
      next.set(jobId, mark);
    }
  });
}
