import type { Catalog } from '../core/catalog.js';
import { groupBy } from '../core/group.js';
import type { ClusterSnapshot, SchedJob, SchedTask } from '../core/model.js';
import {
  addUsage,
  capViolations,
  dominantShare,
  hasAnyCap,
  reservationFootprint,
  usageOf,
  type CapUsage,
  type JobFootprint,
  type QueueCaps,
} from '../queue/caps.js';
import { toDistribution, type StageDistribution } from '../queue/success.js';
import {
  admit,
  classify,
  FIFO_CONFIG,
  type AdmissionResult,
  type QueuedJob,
  type RunningQueuedJob,
  type WaitReason,
  type WfqConfig,
} from '../queue/wfq.js';
import type { Configuration } from '../scheduler/types.js';
import { PriceBook } from '../scheduler/reservation-price.js';
import type { JobRecord } from './state-store.js';

/**
 * The queue layer in the controller (issue 6), mirroring the simulator's (src/sim/admission.ts): each round, before
 * Eva plans, `admit` (src/queue/wfq.ts) decides which waiting jobs enter the snapshot under the caps; the others
 * stay queued in their WFQ class and their job view says why (class share, caps, never fits), in which class and
 * at which position. Jobs holding capacity (placed, starting, moving) always stay in the snapshot; multi-task
 * jobs are admitted whole. Quotas per family group are enforced here; Eva enforces $/hour and instance count on its
 * plans, and the controller's safety rail checks all of them (`planCapViolations`).
 */

/**
 * Assumed duration per task of a job that declares no `expectedDurationSeconds`, for its size class and srpt key:
 * a day (long enough to be served after jobs that say they are short; finite so srpt's aging still bounds its wait).
 */
export const UNKNOWN_DURATION_SECONDS = 86_400;

export type QueueStatus = 'admitted' | 'waiting';

/** What a job's view says about its place in the queue (persisted per job, see queue-records.ts). */
export interface JobQueueView {
  readonly classId: string;
  /** `admitted`: in this round's plan (or holding capacity); `waiting`: queued. */
  readonly status: QueueStatus;
  /** 1 = head of its class queue; null when admitted (or admitted but left out by the plan). */
  readonly position: number | null;
  readonly reason: WaitReason | null;
  /** One line, e.g. "class small is at its share of the capped capacity (95.0% used of 95.0%)". */
  readonly detail: string;
  /** When this view was computed; unchanged views keep the time they were first shown (see the controller). */
  readonly sinceSeconds: number;
}

export interface QueueDecision {
  /** The snapshot restricted to jobs holding capacity plus the waiting jobs admitted this round. */
  readonly snapshot: ClusterSnapshot;
  readonly result: AdmissionResult;
  readonly views: ReadonlyMap<string, JobQueueView>;
  /** Waiting job ids per class, in queue order (the ETA's basis counts the jobs ahead). */
  readonly queues: ReadonlyMap<string, readonly string[]>;
}

export interface ControllerQueueSettings {
  readonly caps: QueueCaps;
  /** Default: one FIFO class (PCS's "no config"). */
  readonly config?: WfqConfig | undefined;
}

/** Stages passed by a job with a declared success model, from its attained service (seconds at full throughput). */
export function stagesDone(dist: StageDistribution, attainedSeconds: number): number {
  let n = 0;
  // The last checkpoint is the end of the job: passing it means done, not "one more stage passed".
  while (
    n < dist.checkpointsSeconds.length - 1 &&
    (dist.checkpointsSeconds[n] as number) <= attainedSeconds + 1e-9
  )
    n += 1;
  return n;
}

/** A job's declared per-task duration, or the assumption for jobs without one. */
export function perTaskSeconds(job: JobRecord): number {
  return job.spec.expectedDurationSeconds ?? UNKNOWN_DURATION_SECONDS;
}

/** What admission knows about one live job. */
export function queuedJobOf(
  job: JobRecord,
  sched: SchedJob,
  footprint: JobFootprint,
  taskCount: number,
): QueuedJob {
  const perTask = perTaskSeconds(job);
  const remaining = sched.expectedRemainingSeconds ?? perTask;
  const success = job.spec.success === undefined ? undefined : toDistribution(job.spec.success);
  return {
    id: job.id,
    arrivalSeconds: job.submittedAtSeconds,
    // Multi-task jobs: remaining work summed over tasks (Murmuration SJF), as the simulator does.
    remainingWorkSeconds: remaining * taskCount,
    // PCS §3: the class is fixed at arrival, so it is the declared size, not the remaining one.
    sizeSeconds: perTask * taskCount,
    team: job.team,
    footprint,
    ...(success === undefined
      ? {}
      : { success, stagesDone: stagesDone(success, Math.max(0, perTask - remaining)) }),
  };
}

export class ControllerAdmission {
  private prices: PriceBook;
  private readonly footprints = new Map<string, JobFootprint | null>();
  /** When each job holding capacity was admitted (preemption picks the most recent first); in memory only. */
  private readonly admittedAt = new Map<string, number>();
  private shortRounds: ReadonlyMap<string, number> | undefined;
  readonly config: WfqConfig;

  constructor(
    catalog: Catalog,
    readonly settings: ControllerQueueSettings,
  ) {
    this.prices = new PriceBook(catalog);
    this.config = settings.config ?? FIFO_CONFIG;
  }

  get caps(): QueueCaps {
    return this.settings.caps;
  }

  /** Reprice footprints from the next round on (price refresh). */
  setCatalog(catalog: Catalog): void {
    this.prices = new PriceBook(catalog);
    this.footprints.clear();
  }

  /** The class a job belongs to (fixed by its declared size or its team). */
  classOf(job: JobRecord): string {
    return classify(this.config, {
      sizeSeconds: perTaskSeconds(job) * job.spec.tasks.reduce((n, t) => n + t.replicas, 0),
      team: job.team,
    });
  }

  /**
   * Decide this round's admissions. `jobs` are the live job records by id (the snapshot's jobs are among them).
   * Pure apart from the admission times and short-round counters it remembers for the next round.
   */
  decide(snapshot: ClusterSnapshot, jobs: ReadonlyMap<string, JobRecord>): QueueDecision {
    const now = snapshot.nowSeconds;
    const tasksByJob = groupBy(snapshot.tasks, (t) => t.jobId);
    const running: RunningQueuedJob[] = [];
    const waiting: QueuedJob[] = [];
    const unhostable: { job: JobRecord; classId: string }[] = [];
    const live = new Set<string>();
    for (const sched of snapshot.jobs) {
      const job = jobs.get(sched.id);
      if (job === undefined) continue;
      live.add(job.id);
      const tasks = tasksByJob.get(job.id) ?? [];
      const holdsCapacity = !sched.reconfigurable || tasks.some((t) => t.instanceId !== undefined);
      const footprint = this.footprintOf(job.id, tasks);
      if (footprint === null) {
        // No instance type of the (repriced) catalog can host a task: it cannot be admitted, whatever the caps.
        if (holdsCapacity) running.push(this.runningJob(job, sched, emptyFootprint(job.id), tasks, now));
        else unhostable.push({ job, classId: this.classOf(job) });
        continue;
      }
      if (holdsCapacity) running.push(this.runningJob(job, sched, footprint, tasks, now));
      else {
        // A job the plan sent back to the queue competes again from scratch.
        this.admittedAt.delete(job.id);
        // `admit` lists a job over the caps on its own as never-fits without letting it block its class.
        waiting.push(queuedJobOf(job, sched, footprint, tasks.length));
      }
    }
    for (const id of [...this.admittedAt.keys()]) if (!live.has(id)) this.admittedAt.delete(id);

    const result = admit({
      nowSeconds: now,
      caps: this.caps,
      config: this.config,
      running,
      waiting,
      shortRounds: this.shortRounds,
    });
    this.shortRounds = result.shortRounds;
    for (const id of result.admitted) this.admittedAt.set(id, now);

    const views = new Map<string, JobQueueView>();
    const byId = new Map(waiting.map((j) => [j.id, j]));
    for (const j of running)
      views.set(j.id, {
        classId: classify(this.config, j),
        status: 'admitted',
        position: null,
        reason: null,
        detail: 'holds capacity',
        sinceSeconds: now,
      });
    for (const id of result.admitted)
      views.set(id, {
        classId: classify(this.config, byId.get(id) as QueuedJob),
        status: 'admitted',
        position: null,
        reason: null,
        detail: 'admitted under the caps this round',
        sinceSeconds: now,
      });
    const queues = new Map<string, string[]>();
    for (const q of result.queued) {
      const job = byId.get(q.jobId) as QueuedJob;
      if (q.reason === 'never-fits') {
        // Not in line: it waits for caps to change, not for the jobs ahead of it.
        views.set(q.jobId, {
          classId: q.classId,
          status: 'waiting',
          position: null,
          reason: 'never-fits',
          detail: this.waitDetail('never-fits', q.classId, 0, job, result),
          sinceSeconds: now,
        });
        continue;
      }
      const list = queues.get(q.classId) ?? [];
      list.push(q.jobId);
      queues.set(q.classId, list);
      // A class holding the whole capped capacity (one class, or the others idle) waits for the caps, not its share.
      const whole = (result.classes.find((c) => c.classId === q.classId)?.fluidShare ?? 0) >= 1 - 1e-9;
      const reason: WaitReason = q.reason === 'class-share' && whole ? 'caps' : q.reason;
      views.set(q.jobId, {
        classId: q.classId,
        status: 'waiting',
        position: q.position + 1,
        reason,
        detail: this.waitDetail(reason, q.classId, q.position, job, result),
        sinceSeconds: now,
      });
    }
    for (const { job, classId } of unhostable)
      views.set(job.id, {
        classId,
        status: 'waiting',
        position: null,
        reason: 'never-fits',
        detail: 'no instance type of the current catalog can host one of its tasks',
        sinceSeconds: now,
      });

    const keep = new Set<string>([...running.map((j) => j.id), ...result.admitted]);
    const filtered =
      keep.size === snapshot.jobs.length
        ? snapshot
        : {
            ...snapshot,
            jobs: snapshot.jobs.filter((j) => keep.has(j.id)),
            tasks: snapshot.tasks.filter((t) => keep.has(t.jobId)),
          };
    return { snapshot: filtered, result, views, queues };
  }

  private runningJob(
    job: JobRecord,
    sched: SchedJob,
    footprint: JobFootprint,
    tasks: readonly SchedTask[],
    now: number,
  ): RunningQueuedJob {
    let at = this.admittedAt.get(job.id);
    if (at === undefined) {
      // After a restart: the job was admitted no later than it started (or now, if it never did).
      at = job.startedAtSeconds ?? now;
      this.admittedAt.set(job.id, at);
    }
    return { ...queuedJobOf(job, sched, footprint, tasks.length), admittedSeconds: at };
  }

  private footprintOf(jobId: string, tasks: readonly SchedTask[]): JobFootprint | null {
    let f = this.footprints.get(jobId);
    if (f === undefined) {
      try {
        f = reservationFootprint(
          jobId,
          tasks.map((t) => t.demand),
          this.prices,
        );
      } catch {
        f = null;
      }
      this.footprints.set(jobId, f);
    }
    return f;
  }

  /** Forget a job's cached footprint (it ended). */
  forget(jobId: string): void {
    this.footprints.delete(jobId);
    this.admittedAt.delete(jobId);
  }

  private waitDetail(
    reason: WaitReason,
    classId: string,
    position: number,
    job: QueuedJob,
    result: AdmissionResult,
  ): string {
    const ahead = position === 0 ? '' : `; ${position} job(s) ahead of it in class ${classId}`;
    if (reason === 'never-fits') {
      const broken = capViolations(usageOf([job.footprint], this.caps), this.caps);
      if (broken.length > 0) return `it can never run under the caps: alone it breaks ${broken.join(', ')}`;
      const ceiling = this.config.classes.find((c) => c.id === classId)?.maxShare ?? 1;
      return (
        `it can never run in class ${classId}: it needs ${pct(dominantShare(job.footprint, this.caps))} of the ` +
        `capped capacity, over the class's maxShare of ${pct(ceiling)}`
      );
    }
    if (reason === 'class-share') {
      const k = result.classes.find((c) => c.classId === classId);
      const used = k === undefined ? 0 : k.usedShare;
      const fluid = k === undefined ? 0 : k.fluidShare;
      return (
        `class ${classId} is at its share of the capped capacity (${pct(used)} used of ${pct(fluid)}; ` +
        `this job needs ${pct(dominantShare(job.footprint, this.caps))})${ahead}`
      );
    }
    const broken = capViolations(addUsage(result.usage, job.footprint, this.caps), this.caps);
    if (broken.length === 0) return `waiting behind the head of class ${classId}${ahead}`;
    return `admitting it now would break ${broken.join(', ')} (${describeUsage(result.usage, this.caps)})${ahead}`;
  }
}

function emptyFootprint(jobId: string): JobFootprint {
  return { jobId, instances: [] };
}

function pct(share: number): string {
  return `${(100 * share).toFixed(1)}%`;
}

/** "$3.20/h, 4 instances, standard 48 vCPUs" — the capped dimensions in use. */
export function describeUsage(usage: CapUsage, caps: QueueCaps): string {
  const parts: string[] = [];
  if (caps.maxCostPerHour !== undefined)
    parts.push(`$${usage.costPerHour.toFixed(2)}/h of $${caps.maxCostPerHour}/h`);
  if (caps.maxInstances !== undefined) parts.push(`${usage.instances} of ${caps.maxInstances} instances`);
  for (const q of caps.quotas ?? []) {
    const u = usage.byGroup.get(q.group) ?? { vcpus: 0, gpus: 0 };
    if (q.maxVcpus !== undefined) parts.push(`${q.group} ${u.vcpus} of ${q.maxVcpus} vCPUs`);
    if (q.maxGpus !== undefined) parts.push(`${q.group} ${u.gpus} of ${q.maxGpus} GPUs`);
  }
  return parts.length === 0 ? 'nothing capped' : `in use: ${parts.join(', ')}`;
}

/**
 * The caps a plan's instances break (the safety rail: quotas are checked on the real instance types, whatever
 * the footprints assumed). Named like `capViolations`: `maxCostPerHour`, `quota p maxGpus`, …
 */
export function planCapViolations(configuration: Configuration, catalog: Catalog, caps: QueueCaps): string[] {
  if (!hasAnyCap(caps)) return [];
  const types = new Map(catalog.types.map((t) => [t.name, t]));
  const footprint: JobFootprint = {
    jobId: 'plan',
    instances: configuration.instances.flatMap((i) => {
      const t = types.get(i.typeName);
      return t === undefined
        ? []
        : [{ family: t.family, gpus: t.capacity[0], vcpus: t.capacity[1], costPerHour: t.costPerHour }];
    }),
  };
  return capViolations(usageOf([footprint], caps), caps);
}

/**
 * The queue layer in one line, for the controller's startup log: "2 classes by size: small ≤ 3600 s (weight 0.95,
 * srpt), large (weight 0.05, fifo); preemption off; caps: $20/h, quota p 8 GPUs".
 */
export function describeQueue(config: WfqConfig, caps: QueueCaps): string {
  const classes = config.classes
    .map((c) => {
      const what =
        config.classifyBy === 'size'
          ? c.maxSizeSeconds === undefined
            ? ''
            : ` ≤ ${c.maxSizeSeconds} s`
          : c.teams === undefined
            ? ' (other teams)'
            : ` (${c.teams.join(', ')})`;
      const ceiling = c.maxShare === undefined ? '' : `, at most ${pct(c.maxShare)}`;
      return `${c.id}${what} (weight ${c.weight}, ${c.ordering}${ceiling})`;
    })
    .join(', ');
  const capped: string[] = [];
  if (caps.maxCostPerHour !== undefined) capped.push(`$${caps.maxCostPerHour}/h`);
  if (caps.maxInstances !== undefined) capped.push(`${caps.maxInstances} instances`);
  for (const q of caps.quotas ?? []) {
    if (q.maxVcpus !== undefined) capped.push(`quota ${q.group} ${q.maxVcpus} vCPUs`);
    if (q.maxGpus !== undefined) capped.push(`quota ${q.group} ${q.maxGpus} GPUs`);
  }
  return (
    `${config.classes.length} class(es) by ${config.classifyBy}: ${classes}; ` +
    `preemption ${config.preemption.enabled ? `on (margin ${config.preemption.marginShare} of the capacity, after ${config.preemption.minShortRounds} short round(s))` : 'off'}; ` +
    `caps: ${capped.length === 0 ? 'none (every job is admitted)' : capped.join(', ')}`
  );
}

export interface PreemptionVictim {
  readonly jobId: string;
  readonly classId: string;
  readonly forClassId: string;
  readonly reason: string;
}

/**
 * The preemptions admission proposed that can be carried out this round (PCS §3: only when a class reclaims its
 * guaranteed share, with the hysteresis `admit` applies): the victim must be running (reconfigurable, placed),
 * outside its no-move window, and the reclaiming class must not already wait for an earlier preemption to
 * finish checkpointing (`inFlight`: victim job id → the class it was stopped for). A victim is stopped through a
 * checkpoint and returned to the queue, like a move: it loses the work since that checkpoint plus a restore.
 */
export function preemptionVictims(
  decision: QueueDecision,
  inFlight: ReadonlyMap<string, string>,
): PreemptionVictim[] {
  const { snapshot } = decision;
  const now = snapshot.nowSeconds;
  const waitingFor = new Set(inFlight.values());
  const jobs = new Map(snapshot.jobs.map((j) => [j.id, j]));
  const placed = new Set(snapshot.tasks.filter((t) => t.instanceId !== undefined).map((t) => t.jobId));
  const out: PreemptionVictim[] = [];
  for (const p of decision.result.preemptions) {
    if (waitingFor.has(p.forClassId)) continue;
    const job = jobs.get(p.jobId);
    if (job === undefined || !job.reconfigurable || !placed.has(job.id)) continue;
    const since = job.runningSinceSeconds;
    if (since !== undefined && job.noMoveSeconds !== undefined && now < since + job.noMoveSeconds) continue;
    out.push({ jobId: p.jobId, classId: p.classId, forClassId: p.forClassId, reason: p.reason });
  }
  return out;
}

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
