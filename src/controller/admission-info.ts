import { expectedDurationOf } from './job-spec/spec.js';
import type { ClusterSnapshot } from '../core/model.js';
import { UNKNOWN_DURATION_SECONDS, type AdmissionJobInfo } from '../queue/admission.js';
import { stagesDone, toDistribution } from '../queue/success.js';
import { jobTransitions, type JobTransition } from './job-transitions.js';
import type { SnapshotInputs } from './snapshot.js';
import type { StateStore } from './state-store.js';

/**
 * What admission needs of each live job beyond the snapshot: team, declared size, success model, and when its current
 * run began (read from the job's history in `store`, only for the jobs admission asks about).
 */
export function admissionInfo(
  inputs: SnapshotInputs,
  snapshot: ClusterSnapshot,
  store: Pick<StateStore, 'listEvents'>,
): (jobId: string) => AdmissionJobInfo {
  const records = new Map(inputs.jobs.map((j) => [j.id, j]));
  const sched = new Map(snapshot.jobs.map((j) => [j.id, j]));
  return (jobId) => {
    const job = records.get(jobId);
    if (job === undefined) return {};
    const perTask = expectedDurationOf(job.spec) ?? UNKNOWN_DURATION_SECONDS;
    const success = job.spec.success === undefined ? undefined : toDistribution(job.spec.success);
    const remaining = sched.get(jobId)?.expectedRemainingSeconds ?? perTask;
    return {
      team: job.team,
      perTaskSeconds: perTask,
      // Its first start is no later, should its history not tell.
      runBeganSeconds: () =>
        currentRunBegan(jobTransitions(store.listEvents({ jobId, kind: 'job.state' }))) ??
        job.startedAtSeconds,
      // Attained service on the model's time scale: a spec's stages sum to its expectedDurationSeconds (within 1%,
      // job-spec/parse.ts), which is taken from them when not declared.
      success:
        success === undefined
          ? undefined
          : { distribution: success, stagesDone: stagesDone(success, Math.max(0, perTask - remaining)) },
    };
  };
}

/**
 * When the job's current run began: its last move out of the queue into starting or running (placed by a round or
 * between rounds), as the simulator dates it. A move (running → migrating → starting) continues the run; a return to
 * the queue ends it. Undefined while the job is queued, or when it never left the queue.
 */
export function currentRunBegan(transitions: readonly JobTransition[]): number | undefined {
  let began: number | undefined;
  let queued = true; // a job is submitted queued
  for (const t of transitions) {
    if (t.to === 'queued') {
      queued = true;
      began = undefined;
    } else if (queued && (t.to === 'starting' || t.to === 'running')) {
      queued = false;
      began = t.atSeconds;
    }
  }
  return began;
}
