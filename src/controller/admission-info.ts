import type { ClusterSnapshot } from '../core/model.js';
import { UNKNOWN_DURATION_SECONDS, type AdmissionJobInfo } from '../queue/admission.js';
import { stagesDone, toDistribution } from '../queue/success.js';
import type { SnapshotInputs } from './snapshot.js';

/** What admission needs of each live job beyond the snapshot: team, declared size, success model, first start. */
export function admissionInfo(
  inputs: SnapshotInputs,
  snapshot: ClusterSnapshot,
): (jobId: string) => AdmissionJobInfo {
  const records = new Map(inputs.jobs.map((j) => [j.id, j]));
  const sched = new Map(snapshot.jobs.map((j) => [j.id, j]));
  return (jobId) => {
    const job = records.get(jobId);
    if (job === undefined) return {};
    const perTask = job.spec.expectedDurationSeconds ?? UNKNOWN_DURATION_SECONDS;
    const success = job.spec.success === undefined ? undefined : toDistribution(job.spec.success);
    const remaining = sched.get(jobId)?.expectedRemainingSeconds ?? perTask;
    return {
      team: job.team,
      perTaskSeconds: perTask,
      startedAtSeconds: job.startedAtSeconds,
      success:
        success === undefined
          ? undefined
          : { distribution: success, stagesDone: stagesDone(success, Math.max(0, perTask - remaining)) },
    };
  };
}
