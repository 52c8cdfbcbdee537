import type { ClusterSnapshot } from './model.js';

/** The snapshot without these jobs (their tasks left out of instances too): what the scheduler plans with. */
export function withoutJobs(snapshot: ClusterSnapshot, jobIds: ReadonlySet<string>): ClusterSnapshot {
  if (jobIds.size === 0) return snapshot;
  const gone = new Set(snapshot.tasks.filter((t) => jobIds.has(t.jobId)).map((t) => t.id));
  return {
    ...snapshot,
    jobs: snapshot.jobs.filter((j) => !jobIds.has(j.id)),
    tasks: snapshot.tasks.filter((t) => !gone.has(t.id)),
    instances: snapshot.instances.map((i) =>
      i.taskIds.some((t) => gone.has(t)) ? { ...i, taskIds: i.taskIds.filter((t) => !gone.has(t)) } : i,
    ),
  };
}
