import type { Catalog } from '../core/catalog.js';
import { canHost, demandSignature } from '../scheduler/reservation-price.js';
import type { SimJob } from './entities.js';
import { dependencyProblems } from './job-dependencies.js';
import { DEFAULT_CHECKPOINT_INTERVAL_SECONDS, type Trace } from './trace.js';

/**
 * The simulator's jobs and tasks for a trace, checked before the run starts: unique job ids, arrival order,
 * unique task names within a job, a catalog type that can host every task (else no scheduler could run it), and
 * dependencies on earlier jobs that succeed (or, `dependenciesMayHaveEnded` for a world taken mid-run, on jobs gone
 * from it).
 */
export function buildSimJobs(
  trace: Trace,
  catalog: Catalog,
  options: { readonly dependenciesMayHaveEnded?: boolean } = {},
): SimJob[] {
  const problems: string[] = dependencyProblems(trace.jobs, options.dependenciesMayHaveEnded === true);
  const ids = new Set<string>();
  const hostable = new Map<string, boolean>();
  const jobs = trace.jobs.map((spec, index) => {
    if (ids.has(spec.id)) problems.push(`job ${spec.id}: duplicate job id`);
    ids.add(spec.id);
    if (index > 0 && spec.arrivalSeconds < (trace.jobs[index - 1]?.arrivalSeconds ?? 0))
      problems.push(`job ${spec.id}: jobs must be sorted by arrival time`);
    if (spec.tasks.length === 0) problems.push(`job ${spec.id}: has no tasks`);
    const names = new Set<string>();
    for (const t of spec.tasks) {
      if (names.has(t.name)) problems.push(`job ${spec.id}: duplicate task name ${t.name}`);
      names.add(t.name);
      const sig = demandSignature(t.demand);
      let ok = hostable.get(sig);
      if (ok === undefined) {
        ok = catalog.types.some((type) => canHost(type, t.demand));
        hostable.set(sig, ok);
      }
      if (!ok)
        problems.push(`job ${spec.id} task ${t.name}: no instance type of the catalog can host ${sig}`);
    }
    const root = spec.network?.rootTask;
    const rootIndex = root === undefined ? 0 : spec.tasks.findIndex((t) => t.name === root);
    if (rootIndex < 0) problems.push(`job ${spec.id}: network.root ${root} is not one of its tasks`);
    const moveSeconds = spec.tasks.reduce(
      (m, t) => Math.max(m, t.fetchDelaySeconds + t.buildImageDelaySeconds + t.uploadDelaySeconds),
      0,
    );
    const job: SimJob = {
      index,
      spec,
      tasks: [],
      taskIds: spec.tasks.map((t) => taskIdOf(spec.id, t.name)),
      migrationDelaySeconds: moveSeconds + spec.initDelaySeconds,
      status: 'pending',
      requeueAfterStop: false,
      active: false,
      activeSinceSeconds: undefined,
      progressFromSeconds: undefined,
      activationToken: 0,
      completedIterations: 0,
      integratedToSeconds: spec.arrivalSeconds,
      throughput: 0,
      version: 0,
      startSeconds: null,
      endSeconds: null,
      migrations: 0,
      rootIndex: Math.max(0, rootIndex),
      latencyFactor: 1,
      crossZoneCostPerHour: 0,
      performanceSeconds: 0,
      activeSeconds: 0,
      crossZoneCost: 0,
      checkpointIntervalSeconds: spec.checkpointIntervalSeconds ?? DEFAULT_CHECKPOINT_INTERVAL_SECONDS,
      checkpointIterations: 0,
      interruptions: 0,
      lostWorkSeconds: 0,
      interruptedZones: [],
    };
    for (const t of spec.tasks)
      job.tasks.push({
        id: taskIdOf(spec.id, t.name),
        job,
        spec: t,
        key: t.key ?? `${spec.name}_${t.name}`,
        state: 'queued',
        committed: undefined,
        occupying: undefined,
        pendingStart: false,
        rate: 1,
      });
    return job;
  });
  if (problems.length > 0)
    throw new Error(`trace ${trace.name} cannot be simulated:\n  ${problems.join('\n  ')}`);
  return jobs;
}

/** Task ids are `<job id>/<task name>` (task names are unique within a job). */
function taskIdOf(jobId: string, taskName: string): string {
  return `${jobId}/${taskName}`;
}
