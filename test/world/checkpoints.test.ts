import { describe, expect, it } from 'vitest';
import {
  checkpointUploaded,
  keepCheckpointsAtStop,
  latestCheckpointIterations,
} from '../../src/world/checkpoints.js';
import type { SimJob } from '../../src/world/entities.js';
import { rollBackToCheckpoint } from '../../src/world/spot-world.js';
import { buildSimJobs } from '../../src/world/trace-jobs.js';
import { testCatalog, trace, traceJob, traceTask } from '../sim/sim-fixtures.js';

/**
 * A two-task job working at 2 iterations/s since t = 0, checkpointing every 1,800 s of progress: at t = 4,000 it has
 * done 8,000 iterations and its latest periodic checkpoint, at t = 3,600, holds 7,200.
 */
function workingJob(): SimJob {
  const spec = {
    ...traceJob('j', { iterations: 100_000, fullThroughput: 2, tasks: [traceTask('a'), traceTask('b')] }),
    checkpointIntervalSeconds: 1800,
  };
  const job = buildSimJobs(trace(spec), testCatalog())[0] as SimJob;
  job.active = true;
  job.activeSinceSeconds = 0;
  job.integratedToSeconds = 0;
  job.throughput = 2;
  for (const t of job.tasks) t.state = 'running';
  return job;
}

/** A kill: the job stops working (both runtimes keep its checkpoints first, then deactivate it). */
function kill(job: SimJob, now: number): void {
  keepCheckpointsAtStop(job, now);
  job.active = false;
  job.activeSinceSeconds = undefined;
  job.throughput = 0;
  for (const t of job.tasks) t.state = 'uploading';
}

describe('what a job’s durable checkpoints hold', () => {
  it('while it works: its latest periodic checkpoint (7,200 of 8,000 at t = 4,000), none before the first interval', () => {
    const job = workingJob();
    expect(latestCheckpointIterations(job, 4000)).toBe(7200);
    expect(job.completedIterations).toBe(8000);
    expect(latestCheckpointIterations(workingJob(), 1000)).toBe(0);
  });

  it('a reclaim while its checkpoint-stop still uploads goes back to the periodic checkpoint, not to its last start', () => {
    const job = workingJob();
    kill(job, 4000);
    expect(job.checkpointIterations).toBe(7200);
    // The reclaim lands before the upload is done: 800 iterations (400 s at full throughput 2) are lost.
    rollBackToCheckpoint(job, 4100, undefined, 'us-east-1a');
    expect(job.completedIterations).toBe(7200);
    expect(job.lostWorkSeconds).toBe(400);
  });

  it('once every task’s upload is done, the checkpoint holds the progress it stopped with', () => {
    const job = workingJob();
    kill(job, 4000);
    const [first, second] = job.tasks as [SimJob['tasks'][number], SimJob['tasks'][number]];
    first.state = 'stopped';
    checkpointUploaded(job);
    expect(job.checkpointIterations).toBe(7200); // the other task's upload is still on its way
    second.state = 'stopped';
    checkpointUploaded(job);
    expect(job.checkpointIterations).toBe(8000);
    // Its new host is reclaimed before it works again (during the fetch): nothing is lost.
    rollBackToCheckpoint(job, 4200, undefined, 'us-east-1b');
    expect(job.completedIterations).toBe(8000);
    expect(job.lostWorkSeconds).toBe(0);
  });
});
