import type { Admission, PreemptionVictim } from '../queue/admission.js';
import type { JobQueueView } from '../queue/admission-views.js';
import { isQueueWait } from '../round/round.js';
import type { DecisionRecord } from '../scheduler/types.js';
import { readQueueRecord, writeQueueRecord } from './queue-records.js';
import type { StateStore } from './state-store.js';

/** Each live job's place in the queue, persisted in its queue record for the API after every round. */
export class QueueViews {
  /** Views last written per job, so unchanged ones are not rewritten every round. */
  private readonly written = new Map<string, string>();

  constructor(private readonly deps: { readonly store: StateStore; readonly admission: Admission }) {}

  /**
   * Persist each live job's place in the queue (`queue.job.<id>`, read by the API). A job admitted but left out by
   * the plan (a cap Eva enforces on the packed plan) is shown waiting with that cap. Unchanged views are not
   * rewritten, so `sinceSeconds` says since when the job has been in its state.
   */
  record(
    views: ReadonlyMap<string, JobQueueView>,
    decision: DecisionRecord | undefined,
    victims: readonly PreemptionVictim[] = [],
  ): void {
    const leftOut = new Map(
      (decision?.waiting ?? []).filter((w) => !isQueueWait(w.cap)).map((w) => [w.jobId, w.cap]),
    );
    const preempted = new Map(victims.map((v) => [v.jobId, v]));
    const changed: [string, JobQueueView][] = [];
    for (const [jobId, view] of views) {
      const cap = leftOut.get(jobId);
      const victim = preempted.get(jobId);
      const shown: JobQueueView =
        victim !== undefined
          ? {
              ...view,
              status: 'waiting',
              reason: 'class-share',
              detail: `preempted: checkpointing back to the queue so class ${victim.forClassId} reclaims its guaranteed share`,
            }
          : cap === undefined || view.status !== 'admitted'
            ? view
            : {
                ...view,
                status: 'waiting',
                reason: 'caps',
                detail: `admitted, but the packed plan breaks ${cap}; it waits for a later round`,
              };
      const { sinceSeconds: _since, ...content } = shown;
      const text = JSON.stringify(content);
      if (this.written.get(jobId) === text) continue;
      this.written.set(jobId, text);
      changed.push([jobId, shown]);
    }
    if (changed.length === 0) return;
    this.deps.store.transaction(() => {
      for (const [jobId, view] of changed)
        writeQueueRecord(this.deps.store, jobId, { ...readQueueRecord(this.deps.store, jobId), queue: view });
    });
  }

  /** An ended job's view is not written again; forget its memo. */
  forget(jobId: string): void {
    this.written.delete(jobId);
  }
}
