import { integrateProgress, type SimJob } from './entities.js';

/**
 * What a job's durable checkpoints hold, the rule both runtimes keep: the one it last resumed from, the periodic ones it
 * takes every `checkpointIntervalSeconds` of progress while it works, and the one a checkpoint-stop uploads.
 */

/**
 * Iterations of the job's latest durable checkpoint now: its latest periodic one while it works (every interval of
 * progress since it resumed, the throughput taken as constant since the last one: it changes only when a neighbour
 * starts or stops), else the one it last resumed from or stopped with. Integrates its progress to `now` first.
 */
export function latestCheckpointIterations(job: SimJob, now: number): number {
  integrateProgress(job, now);
  let latest = job.checkpointIterations;
  if (job.active && job.activeSinceSeconds !== undefined && job.checkpointIntervalSeconds > 0) {
    const since = now - job.activeSinceSeconds;
    if (since >= job.checkpointIntervalSeconds)
      latest = Math.max(
        latest,
        job.completedIterations - job.throughput * (since % job.checkpointIntervalSeconds),
      );
  }
  return Math.min(latest, job.completedIterations);
}

/**
 * The job stops working (a task of it is killed): its periodic checkpoints stay what a reclaim before it works again
 * sends it back to, and not just the point it last resumed from.
 */
export function keepCheckpointsAtStop(job: SimJob, now: number): void {
  if (job.active) job.checkpointIterations = latestCheckpointIterations(job, now);
}

/**
 * A task's checkpoint-stop finished uploading. Once every task of the job has (a move or an evacuation), its checkpoint
 * holds the progress it stopped with, and a reclaim before it resumes loses nothing of it.
 */
export function checkpointUploaded(job: SimJob): void {
  if (!job.active && job.tasks.every((t) => t.state === 'stopped'))
    job.checkpointIterations = Math.max(job.checkpointIterations, job.completedIterations);
}
