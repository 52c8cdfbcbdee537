import type { AdmissionInfo } from '../queue/admission.js';
import type { CommandIssuer } from './commands.js';
import { successProgress } from './entities.js';
import type { WorldState } from './world-state.js';

/**
 * What the queue layer sees of a live job beyond the snapshot: its team, declared success model and when its current
 * run began (class by team, success-rank, the admission time of a job placed between rounds).
 */
export function admissionView(state: WorldState, commands: CommandIssuer): AdmissionInfo {
  return (jobId) => {
    const job = state.liveJobs.get(jobId);
    if (job === undefined) return {};
    const progress = successProgress(job);
    return {
      team: job.spec.team,
      runBeganSeconds: () => commands.runBeganSeconds(job),
      success:
        progress === undefined
          ? undefined
          : { distribution: progress.distribution, stagesDone: progress.stagesDone },
    };
  };
}
