import { expectedDurationOf } from './job-spec/spec.js';
import type { Catalog, InstanceType } from '../core/catalog.js';
import { groupBy } from '../core/group.js';
import { UNKNOWN_DURATION_SECONDS, type Admission } from '../queue/admission.js';
import type { InstanceLifecycle, JobStatus, TaskState as SimTaskState } from '../world/entities.js';
import { neverAdmittedJobs, type NeverAdmittedJob } from '../world/never-fits.js';
import type { TraceJob, TraceTask } from '../world/trace.js';
import type { SimWorld, WorldEvent, WorldInstance, WorldJob, WorldTask } from '../world/world.js';
import { expandTasks } from './job-spec/tasks.js';
import type { SnapshotInputs } from './snapshot.js';
import { committedInstanceOf, placementOf } from './snapshot.js';
import { billedPricePerHour } from './instance-market.js';
import type { InstanceRecord, JobRecord, TaskRecord } from './state-store.js';
import { LIVE_JOB_STATES } from './state/lifecycle.js';

/**
 * The prediction world of the controller's completion-time predictions (PCS §4): the controller's state as a simulator
 * world (src/world/world.ts), run forward in virtual time with the same admission and a fork of the scheduler (its
 * learned co-location rates, so interference is included), launch delays from the catalog, restore and init delays from
 * the job specs, and no future arrivals. `controllerWorld` builds the world and `predictEtas` (eta-predictions.ts) runs
 * it (src/predict/predict.ts); predictions.ts decides when, at most once per round and only when the cluster changed.
 */

/** A controller world, and which of its jobs run for an assumed duration. */
export interface ControllerWorld {
  readonly world: SimWorld;
  /** Jobs whose duration is assumed (no `expectedDurationSeconds`): they get no ETA of their own. */
  readonly assumedDuration: ReadonlySet<string>;
  /**
   * Jobs that have run past their declared duration with no progress reports: the world ends them now (their room is
   * soon free, as far as anyone knows), but when they really end is unknown, so they get no ETA of their own either.
   */
  readonly overran: ReadonlySet<string>;
  /**
   * Held jobs that wait, directly or through other held jobs, for one of `assumedDuration` or `overran`: when they
   * start is as unknown as when that job ends, so they get no ETA of their own either (they stay in the world).
   */
  readonly waitsForUnknownEnd: ReadonlyMap<string, WaitsFor>;
  /**
   * Waiting jobs the caps can never admit (alone they break one, or need more than their class's ceiling lets it hold;
   * src/world/never-fits.ts): they never run, so they are left out of the world; simulated, they would keep every
   * prediction going to its horizon.
   */
  readonly neverAdmitted: ReadonlyMap<string, NeverAdmittedJob>;
  /** Held jobs that wait, directly or through other held jobs, for one of `neverAdmitted`: left out too. */
  readonly waitsForNeverAdmitted: ReadonlyMap<string, WaitsFor>;
}

/** What a held job waits for: the dependency it names (`via`), which is `root` or waits for it in turn. */
export interface WaitsFor {
  readonly via: string;
  readonly root: string;
}

export interface WorldOptions {
  readonly catalog: Catalog;
  /** When the world's first scheduling round happens (≥ now): it replays the admission and plan of that round. */
  readonly firstRoundSeconds: number;
  /**
   * The caps and classes the world's admission enforces; without them no job is taken for one they can never admit.
   */
  readonly admission?: Pick<Admission, 'caps' | 'admitBy' | 'config' | 'spot'> | undefined;
}

const LIVE: ReadonlySet<JobRecord['state']> = new Set(LIVE_JOB_STATES);

/**
 * The controller's state as a simulator world. Mapping (controller → simulator, src/world/entities.ts):
 * - instances: requested/launching → instantiating (instantiated after the catalog's instantiate delay, counted from
 *   the request); running → starting-worker/registering until its worker start + register delays have passed, then
 *   running; draining → running, not assignable, terminating once empty; terminating/terminated → left out. Each
 *   keeps its zone, its market and what it is billed at (on spot, its pool's price), as the round's snapshot has them.
 * - jobs: queued and waiting for dependencies (`heldJobs`) → held, waiting for those of them still live (the engine
 *   queues it when the last is predicted to end; src/world/job-dependencies.ts);
 *   queued → queued (tasks queued, or stopped once checkpointed), or migrating when the plan committed its tasks
 *   (a pending start); starting → migrating with launching tasks (launched after the restore + build delays,
 *   counted from when they started); running → executing (active once its init delay has passed since its tasks
 *   were all prepared; launching until then, as starting); migrating →
 *   migrating with killing tasks (their checkpoint upload follows), restarted where the pending start points or
 *   sent back to the queue.
 * - progress: iterations reported by workers when the spec gives `totalIterations`, else the declared duration minus
 *   the time spent running (as the snapshot's expected remaining time).
 * - left out: a waiting job the caps (`options.admission`) can never admit, and the held jobs waiting for it.
 */
export function controllerWorld(inputs: SnapshotInputs, options: WorldOptions): ControllerWorld {
  const now = inputs.nowSeconds;
  const types = new Map(options.catalog.types.map((t) => [t.name, t]));
  const assumedDuration = new Set<string>();
  const overran = new Set<string>();

  const instances: WorldInstance[] = [];
  const events: WorldEvent[] = [{ kind: 'round', timeSeconds: Math.max(now, options.firstRoundSeconds) }];
  const pendingTerminationIds: string[] = [];
  const known = new Set<string>();
  for (const inst of inputs.instances) {
    const type = types.get(inst.typeName);
    if (type === undefined || inst.state === 'terminating' || inst.state === 'terminated') continue;
    const { lifecycle, event } = lifecycleOf(inst, type, now);
    // Bought and priced as the round sees it (snapshot.ts): a spot instance taken for on demand would cost the world
    // its on-demand price, and under a $ cap its admission would stop jobs the round keeps running.
    const onSpot = inputs.spotInstances?.has(inst.id) === true;
    const placement = placementOf(inst);
    instances.push({
      id: inst.id,
      typeName: inst.typeName,
      lifecycle,
      assignable: inst.state !== 'draining',
      images: [],
      ...(placement === undefined ? {} : { placement }),
      ...(onSpot ? { market: 'spot' as const } : {}),
      pricePerHour: billedPricePerHour(options.catalog, inst, onSpot),
    });
    known.add(inst.id);
    if (event !== undefined) events.push(event);
    if (inst.state === 'draining') pendingTerminationIds.push(inst.id);
  }

  const tasksByJob = groupBy([...inputs.tasks, ...(inputs.heldTasks ?? [])], (t) => t.jobId);
  const liveJobs = [...inputs.jobs, ...(inputs.heldJobs ?? [])]
    .filter((j) => LIVE.has(j.state))
    .sort(bySubmission);
  const inWorld = new Set(liveJobs.map((j) => j.id));
  const queued = new Set(liveJobs.filter((j) => j.state === 'queued').map((j) => j.id));
  const jobs: WorldJob[] = [];
  let lastArrival = Number.NEGATIVE_INFINITY;
  for (const job of liveJobs) {
    // A task that succeeded has done its part (as in the round's snapshot, snapshot.ts): left in, it would read as a
    // task to start again, its job as moving, and the simulated plan would fail on it.
    const tasks = (tasksByJob.get(job.id) ?? [])
      .filter((t) => t.state !== 'succeeded')
      .sort((a, b) => a.index - b.index);
    if (tasks.length === 0) continue;
    const expanded = new Map(expandTasks(job.spec).map((t) => [t.index, t]));
    const declared = expectedDurationOf(job.spec);
    if (declared === undefined) assumedDuration.add(job.id);
    const duration = declared ?? UNKNOWN_DURATION_SECONDS;
    const restore = job.spec.checkpoint.restoreDelaySeconds ?? 0;
    const init = job.spec.checkpoint.initDelaySeconds ?? 0;
    const traceTasks: TraceTask[] = tasks.map((t) => {
      const template = expanded.get(t.index)?.template;
      if (template === undefined) throw new Error(`task ${t.id}: its job's spec has no task ${t.index}`);
      return {
        name: t.name,
        key: t.workloadKey, // the forked scheduler plans with the keys it learned under
        demand: template.demand,
        shmSizeGiB: template.shmSizeGiB,
        imageId: template.image ?? `build:${template.build?.context ?? ''}`,
        // A start fetches the checkpoint (restore delay); a stop uploads the same bytes (snapshot.ts estimates alike).
        fetchDelaySeconds: restore,
        buildImageDelaySeconds: 0,
        killDelaySeconds: 0,
        uploadDelaySeconds: restore,
      };
    });
    const totalIterations = job.spec.totalIterations ?? duration;
    // Arrival order is required by the simulator; clocks may step back a little between submissions.
    lastArrival = Math.max(lastArrival, job.submittedAtSeconds);
    const spec: TraceJob = {
      id: job.id,
      name: job.id,
      workload: tasks[0]?.workloadKey ?? job.id,
      arrivalSeconds: lastArrival,
      durationSeconds: duration,
      initDelaySeconds: init,
      fullThroughput: totalIterations / duration,
      totalIterations,
      tasks: traceTasks,
      team: job.team,
      ...(job.spec.success === undefined ? {} : { success: job.spec.success }),
      // Where it may be bought: the world's plans (and whether it can ever be admitted) depend on it.
      ...(job.spec.spot === undefined ? {} : { spot: job.spec.spot }),
      ...(job.spec.spotMaxDelaySeconds === undefined
        ? {}
        : { spotMaxDelaySeconds: job.spec.spotMaxDelaySeconds }),
    };
    const dependsOn = inputs.heldFor?.get(job.id);
    if (dependsOn !== undefined) {
      // Held until the dependencies it waits for are predicted to finish. One that is not in the world ended without
      // success (or waits for one that did): the job can never start (the next round fails it), so it is left out.
      if (dependsOn.some((id) => !inWorld.has(id))) {
        inWorld.delete(job.id);
        continue;
      }
      jobs.push(heldWorldJob({ ...spec, dependsOn }, tasks));
      continue;
    }
    // A running job makes progress from when its tasks were all prepared (snapshot.ts alike); until then its tasks
    // are still being prepared, as a starting job's are.
    const preparedAt = job.state === 'running' ? inputs.preparedSince.get(job.id) : undefined;
    const completed = completedIterations(job, totalIterations, duration, now, preparedAt);
    if (!reportsProgress(job) && completed >= totalIterations && !assumedDuration.has(job.id))
      overran.add(job.id);
    jobs.push(worldJob(job, spec, tasks, inputs.pendingStarts, known, now, completed, preparedAt, events));
  }
  const neverAdmitted = new Map(
    options.admission === undefined
      ? []
      : neverAdmittedJobs(
          jobs.filter((j) => waitsForAdmission(j, queued)).map((j) => j.spec),
          options.catalog,
          options.admission.caps,
          options.admission.config,
          options.admission.spot,
        ).map((n) => [n.jobId, n]),
  );
  const waitsForNeverAdmitted = waitingFor(
    jobs.map((j) => j.spec),
    new Set(neverAdmitted.keys()),
  );
  const kept = jobs.filter((j) => !neverAdmitted.has(j.spec.id) && !waitsForNeverAdmitted.has(j.spec.id));
  for (const id of neverAdmitted.keys()) assumedDuration.delete(id);
  for (const id of waitsForNeverAdmitted.keys()) assumedDuration.delete(id);
  return {
    world: { nowSeconds: now, jobs: kept, instances, events, pendingTerminationIds, instanceCounter: 0 },
    assumedDuration,
    overran,
    waitsForUnknownEnd: waitingFor(
      kept.map((j) => j.spec),
      new Set([...assumedDuration, ...overran]),
    ),
    neverAdmitted,
    waitsForNeverAdmitted,
  };
}

/**
 * A job admission has yet to let in (queued or held, nothing placed or committed): only such a job can wait for ever
 * as never-fits; one holding capacity stays in whatever the caps say now.
 */
function waitsForAdmission(job: WorldJob, queued: ReadonlySet<string>): boolean {
  return (
    queued.has(job.spec.id) &&
    (job.status === 'queued' || job.status === 'held') &&
    job.tasks.every((t) => t.committedInstanceId === undefined && t.occupyingInstanceId === undefined)
  );
}

/**
 * The held jobs of `jobs` that wait for one of `roots`, directly or through other held jobs. In submission order a
 * dependency comes before its dependents, so one pass finds them all.
 */
export function waitingFor(jobs: readonly TraceJob[], roots: ReadonlySet<string>): Map<string, WaitsFor> {
  const out = new Map<string, WaitsFor>();
  if (roots.size === 0) return out;
  for (const job of jobs)
    for (const via of job.dependsOn ?? []) {
      const root = roots.has(via) ? via : out.get(via)?.root;
      if (root === undefined) continue;
      out.set(job.id, { via, root });
      break;
    }
  return out;
}

/**
 * Submission order: ids are `job-<n>` with n increasing (state-store.ts); a dry run's job, whatever its id, is the
 * newest. A dependency is always submitted before its dependents, so it comes first in the world.
 */
function bySubmission(a: JobRecord, b: JobRecord): number {
  return submissionNumber(a.id) - submissionNumber(b.id);
}

function submissionNumber(id: string): number {
  const n = /^job-(\d+)$/.exec(id);
  return n === null ? Number.POSITIVE_INFINITY : Number(n[1]);
}

/** A job held for its dependencies: it has never run (a held job is queued, its tasks too). */
function heldWorldJob(spec: TraceJob, tasks: readonly TaskRecord[]): WorldJob {
  return {
    spec,
    status: 'held',
    active: false,
    completedIterations: 0,
    startSeconds: null,
    migrations: 0,
    tasks: tasks.map((t) => ({ name: t.name, state: 'queued' })),
    activationToken: 0,
  };
}

function lifecycleOf(
  inst: InstanceRecord,
  type: InstanceType,
  now: number,
): { lifecycle: InstanceLifecycle; event?: WorldEvent } {
  const d = type.delays;
  if (inst.state === 'requested' || inst.state === 'launching') {
    const at = Math.max(now, inst.requestedAtSeconds + d.instantiateSeconds);
    return {
      lifecycle: 'instantiating',
      event: { kind: 'instantiated', timeSeconds: at, instanceId: inst.id },
    };
  }
  const up = inst.runningAtSeconds ?? inst.requestedAtSeconds + d.instantiateSeconds;
  if (now < up + d.workerStartSeconds)
    return {
      lifecycle: 'starting-worker',
      event: { kind: 'worker-started', timeSeconds: up + d.workerStartSeconds, instanceId: inst.id },
    };
  if (now < up + d.workerStartSeconds + d.workerRegisterSeconds)
    return {
      lifecycle: 'registering',
      event: {
        kind: 'registered',
        timeSeconds: up + d.workerStartSeconds + d.workerRegisterSeconds,
        instanceId: inst.id,
      },
    };
  return { lifecycle: 'running' };
}

/** The job's workers report the iterations it did (its spec declares a total, and some were reported). */
function reportsProgress(job: JobRecord): boolean {
  return job.spec.totalIterations !== undefined && job.completedIterations > 0;
}

function completedIterations(
  job: JobRecord,
  total: number,
  duration: number,
  now: number,
  preparedAt: number | undefined,
): number {
  if (reportsProgress(job)) return Math.min(total, job.completedIterations);
  if (job.startedAtSeconds === undefined) return 0;
  // Without reports: the time spent working since its tasks were last all prepared and it initialized, at full
  // throughput (snapshot.ts alike).
  const ranFor =
    preparedAt === undefined
      ? 0
      : Math.max(0, now - preparedAt - (job.spec.checkpoint.initDelaySeconds ?? 0));
  return Math.min(total, (total / duration) * ranFor);
}

function worldJob(
  job: JobRecord,
  spec: TraceJob,
  tasks: readonly TaskRecord[],
  pendingStarts: ReadonlyMap<string, string>,
  known: ReadonlySet<string>,
  now: number,
  completed: number,
  preparedAt: number | undefined,
  events: WorldEvent[],
): WorldJob {
  const onKnown = (id: string | undefined): string | undefined =>
    id !== undefined && known.has(id) ? id : undefined;
  // Back in the queue with tasks still on their instances (a sibling's instance was lost): they stop before the job
  // is placed again, and its tasks off any instance count as stopped, as the world requeues a job once all have.
  const survivorsStop =
    job.state === 'queued' &&
    tasks.some(
      (t) => (t.state === 'running' || t.state === 'checkpointing') && onKnown(t.instanceId) !== undefined,
    );
  const worldTasks: WorldTask[] = tasks.map((t, i) => {
    const traceTask = spec.tasks[i] as TraceTask;
    const destination = onKnown(pendingStarts.get(t.id));
    const placed = onKnown(t.instanceId);
    const idle: SimTaskState = t.lastCheckpointKey === undefined && !survivorsStop ? 'queued' : 'stopped';
    // Being prepared on `on` (checkpoint, image): launched after its fetch, counted from its start.
    const launching = (on: string): WorldTask => {
      events.push({
        kind: 'launched',
        timeSeconds: Math.max(now, t.updatedAtSeconds + traceTask.fetchDelaySeconds),
        jobId: job.id,
        taskName: t.name,
      });
      return { name: t.name, state: 'launching', committedInstanceId: on, occupyingInstanceId: on };
    };
    switch (t.state) {
      case 'starting':
        if (placed !== undefined) return launching(placed);
        break;
      case 'running':
        // Running, but not yet known prepared: still launching, as a starting task is.
        if (job.state === 'running' && preparedAt === undefined && placed !== undefined)
          return launching(placed);
        // Its job is back in the queue (a sibling's instance was lost) while it works on: the round that places the
        // job again checkpoint-stops it first (plan-intents.ts), so it is as good as stopping. Headed where its start
        // points (in place too), else nowhere yet: the job goes back to the queue once it has stopped.
        if (placed !== undefined && survivorsStop && destination === undefined)
          return { name: t.name, state: 'running', occupyingInstanceId: placed, pendingStop: true };
        // A move waiting for its new instances (make before break), or a survivor's stop above headed somewhere:
        // working here, headed there.
        if (placed !== undefined && destination !== undefined && (destination !== placed || survivorsStop))
          return {
            name: t.name,
            state: 'running',
            committedInstanceId: destination,
            occupyingInstanceId: placed,
            pendingStart: true,
            pendingStop: true,
          };
        if (placed !== undefined)
          return { name: t.name, state: 'running', committedInstanceId: placed, occupyingInstanceId: placed };
        break;
      case 'checkpointing':
        if (placed !== undefined) {
          events.push({ kind: 'killed', timeSeconds: now, jobId: job.id, taskName: t.name });
          return {
            name: t.name,
            state: 'killing',
            committedInstanceId: destination,
            occupyingInstanceId: placed,
            pendingStart: destination !== undefined,
          };
        }
        break;
      default:
        break;
    }
    return destination === undefined
      ? { name: t.name, state: idle }
      : { name: t.name, state: idle, committedInstanceId: destination, pendingStart: true };
  });
  const status = statusOf(job, worldTasks);
  const init = spec.initDelaySeconds;
  let active = false;
  let activeSinceSeconds: number | undefined;
  if (status === 'executing' || worldTasks.some((t) => t.pendingStop === true)) {
    const since = preparedAt ?? job.startedAtSeconds ?? now;
    if (now >= since + init) {
      active = true;
      activeSinceSeconds = since + init;
    } else events.push({ kind: 'job-active', timeSeconds: since + init, jobId: job.id, token: 0 });
  }
  // Stopping: moving, or back in the queue with tasks still to stop.
  const stopping = job.state === 'migrating' || survivorsStop;
  return {
    spec,
    status,
    // A move with nowhere to restart (no pending start) sends the job back to the queue.
    requeueAfterStop: stopping && worldTasks.every((t) => t.committedInstanceId === undefined),
    active,
    ...(activeSinceSeconds === undefined ? {} : { activeSinceSeconds }),
    completedIterations: completed,
    // Back in the queue (preempted, its instance lost), a job starts anew: its record keeps its first start, which is
    // past, and the world would report that as the start ahead.
    startSeconds: job.state === 'queued' ? null : (job.startedAtSeconds ?? null),
    migrations: job.migrations,
    tasks: worldTasks,
    activationToken: 0,
  };
}

function statusOf(job: JobRecord, tasks: readonly WorldTask[]): JobStatus {
  if (tasks.some((t) => t.pendingStop === true)) return 'migrating';
  if (tasks.every((t) => t.state === 'running')) return 'executing';
  if (tasks.some((t) => t.committedInstanceId !== undefined || t.occupyingInstanceId !== undefined))
    return 'migrating';
  return job.state === 'running' ? 'executing' : 'queued';
}

/**
 * What a prediction depends on apart from the passing of time: job and task states, placements, pending starts and
 * instances and their markets. Progress is left out (it advances as predicted); a round that changes none of this
 * reuses the last prediction.
 */
export function worldFingerprint(inputs: SnapshotInputs): string {
  const parts: string[] = [];
  for (const j of inputs.jobs) if (LIVE.has(j.state)) parts.push(`${j.id}:${j.state}:${j.migrations}`);
  for (const j of inputs.heldJobs ?? []) parts.push(`${j.id}:held`);
  for (const t of inputs.tasks)
    parts.push(
      `${t.id}:${t.state}:${t.instanceId ?? ''}:${committedInstanceOf(t, inputs.pendingStarts) ?? ''}`,
    );
  // The market too: a spot launch found bought on demand later is priced anew.
  for (const i of inputs.instances)
    parts.push(`${i.id}:${i.state}${inputs.spotInstances?.has(i.id) === true ? ':spot' : ''}`);
  return parts.join('|');
}
