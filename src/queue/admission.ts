import { instancePricePerHour, typesByName, type Catalog } from '../core/catalog.js';
import { groupBy } from '../core/group.js';
import { inNoMoveWindow, type ClusterSnapshot, type SchedJob, type SchedTask } from '../core/model.js';
import { spotOffering } from '../core/spot.js';
import {
  dominantShare,
  fitsCaps,
  FootprintPrices,
  hasAnyCap,
  type JobFootprint,
  type QueueCaps,
} from './caps.js';
import type { StageDistribution } from './success.js';
import { admit, type AdmissionResult, type QueuedJob, type RunningQueuedJob } from './admit.js';
import { lagsAt, nextLagState, type ClassLagState } from './class-lag.js';
import { classify } from './class-shares.js';
import { FIFO_CONFIG, type WfqConfig } from './wfq.js';

/**
 * The queue layer of every round (PCS §3), one object for both runtimes: each round, before the scheduler plans,
 * `decide` lets waiting jobs into the snapshot under the caps (`admit`, admit.ts); jobs holding capacity (placed,
 * starting, moving) always stay in it and multi-task jobs are admitted whole. `victims` turns admission's
 * preemption proposals into the stops a round may carry out. It keeps what must survive between rounds (when each
 * job was admitted, classes' short-round counters and lags, preemptions still checkpointing, fairness bookkeeping) and
 * `fork()` copies all of it for a completion-time prediction, which then replays the very admission in use.
 */

/**
 * Assumed per-task duration of a job that declares none, for its size class and srpt key: a day (long enough to be
 * served after jobs that say they are short; finite so srpt's aging still bounds its wait).
 */
export const UNKNOWN_DURATION_SECONDS = 86_400;

/** What admission needs to know of a live job beyond the snapshot; the runtime supplies it. */
export interface AdmissionJobInfo {
  readonly team?: string | undefined;
  /**
   * Declared duration per task (PCS §3: the class is fixed at arrival by the declared size). Default: the job's
   * expected remaining time when admission first sees it, else `UNKNOWN_DURATION_SECONDS`.
   */
  readonly perTaskSeconds?: number | undefined;
  /** A declared success model and the stages the job has passed (success-ranked ordering). */
  readonly success?: { readonly distribution: StageDistribution; readonly stagesDone: number } | undefined;
  /**
   * When the job's current run began: its last placement out of the queue (by a round or between rounds), not its
   * first-ever start. A job holding capacity that no round admitted (placed between rounds, or found so after a
   * restart) counts as admitted then. A function: only such jobs need it, and a runtime may have to read it from the
   * job's history.
   */
  readonly runBeganSeconds?: (() => number | undefined) | undefined;
}

export type AdmissionInfo = (jobId: string) => AdmissionJobInfo;

export interface AdmissionSettings {
  readonly caps: QueueCaps;
  /** Default: one FIFO class (PCS's "no config"). */
  readonly config?: WfqConfig | undefined;
  /**
   * How a job is sized against a $/hour cap. `standalone` (default): one reservation-price instance per task.
   * `plan-cost`: that, scaled by what the fleet really costs per standalone dollar of the jobs holding capacity
   * (packing puts several tasks on one instance), so a packing plan uses the budget that was set; the plan's own cap
   * rail (scheduler/caps.ts enforceCaps, then round/plan-caps.ts) keeps it from ever going over.
   */
  readonly admitBy?: AdmitBy | undefined;
  /**
   * The run buys spot (default false, as Eva's own `spot` option): a job that may go on spot is then sized at spot
   * prices and against the spot quota groups (caps.ts FootprintPrices). Whoever opens the scheduler's spot market
   * opens this one: the controller on EC2, `simulate --spot on`. A catalog's spot section alone does not say it: the
   * controller's local mode keeps one though it buys no spot.
   */
  readonly spot?: boolean | undefined;
}

export const ADMIT_BY = ['standalone', 'plan-cost'] as const;
export type AdmitBy = (typeof ADMIT_BY)[number];

/**
 * Bounds of the factor `plan-cost` applies: a fleet briefly emptier than its jobs' footprints (instances still
 * launching), or fuller (instances idle until the next plan drops them), should not swing admission too far.
 */
export const MIN_PACKING_FACTOR = 0.25;
const MAX_PACKING_FACTOR = 4;

/** A job that no instance type of the catalog can host: it waits as never-fits whatever the caps. */
export interface UnhostableJob {
  readonly jobId: string;
  readonly classId: string;
}

export interface QueueDecision {
  readonly nowSeconds: number;
  /** The snapshot restricted to jobs holding capacity plus the waiting jobs admitted this round. */
  readonly snapshot: ClusterSnapshot;
  readonly result: AdmissionResult;
  /** Jobs holding capacity (always in the snapshot), their footprints as admission sized them (`admitBy`). */
  readonly running: readonly RunningQueuedJob[];
  /** Jobs that were waiting before this round, admitted or not, sized as admission sized them. */
  readonly waiting: ReadonlyMap<string, QueuedJob>;
  readonly unhostable: readonly UnhostableJob[];
  /** Waiting job ids per class, in queue order (never-fits jobs are not in line). */
  readonly queues: ReadonlyMap<string, readonly string[]>;
}

export interface PreemptionVictim {
  readonly jobId: string;
  readonly classId: string;
  readonly forClassId: string;
  readonly reason: string;
}

/** `Admission.exportState`: what survives between rounds, as plain data. */
export interface AdmissionState {
  readonly memory: readonly (readonly [string, JobMemory])[];
  readonly shortRounds: readonly (readonly [string, number])[] | undefined;
  readonly preempting: readonly (readonly [string, string])[];
  /** The classes' lags (class-lag.ts); absent before the first round. */
  readonly lag?: ClassLagState | undefined;
}

export interface JobMemory {
  readonly sizeSeconds: number;
  /** Null: no instance type of the catalog can host one of its tasks; undefined: to (re)compute. */
  footprint: JobFootprint | null | undefined;
  admittedSeconds: number | undefined;
  /** Σ live-job counts over the rounds the job was seen, and their number (PCS N̄_j, for unfairness). */
  liveSum: number;
  rounds: number;
  /**
   * A plan this admission let it into was cut to the caps without it (`noteCut`), and it has not run since: sized at
   * its standalone price, not the packing's, until it does. Its packed share understates what it adds when it needs an
   * instance of its own (the cut drops such instances whole), so at the packed size it would be let in and cut round
   * after round, and the jobs let in beside it with it, while the fleet stays far under the cap.
   */
  cutFromPlan?: boolean;
}

export class Admission {
  private prices: FootprintPrices;
  private memory = new Map<string, JobMemory>();
  private shortRounds: ReadonlyMap<string, number> | undefined;
  /** Preempted jobs still checkpointing back to the queue → the class reclaiming its share. */
  private preempting = new Map<string, string>();
  /** The classes' lags as of the last round, and how they accrue until the next (class-lag.ts). */
  private lag: ClassLagState | undefined;
  readonly config: WfqConfig;
  readonly caps: QueueCaps;
  readonly admitBy: AdmitBy;
  /** AdmissionSettings.spot. */
  readonly spot: boolean;

  constructor(
    private catalog: Catalog,
    settings: AdmissionSettings,
  ) {
    this.spot = settings.spot ?? false;
    this.prices = new FootprintPrices(catalog, this.spot);
    this.caps = settings.caps;
    this.config = settings.config ?? FIFO_CONFIG;
    this.admitBy = settings.admitBy ?? 'standalone';
  }

  /** The settings it was made with: with `exportState`, all a prediction elsewhere needs to rebuild it (`restore`). */
  get settings(): AdmissionSettings {
    return {
      caps: this.caps,
      config: this.config,
      admitBy: this.admitBy,
      ...(this.spot ? { spot: true } : {}),
    };
  }

  /** An independent copy of the queue state (a prediction replays admission from here without touching it). */
  fork(): Admission {
    const copy = new Admission(this.catalog, this.settings);
    copy.prices = this.prices;
    copy.memory = new Map([...this.memory].map(([id, m]) => [id, { ...m }]));
    copy.shortRounds = this.shortRounds;
    copy.preempting = new Map(this.preempting);
    copy.lag = this.lag; // never mutated, only replaced
    return copy;
  }

  /**
   * The queue state as plain data (structured-clonable): a prediction run in another thread rebuilds the admission
   * from it with `restore`, as `fork` copies it in this one.
   */
  exportState(): AdmissionState {
    return {
      memory: [...this.memory].map(([id, m]) => [id, { ...m }]),
      shortRounds: this.shortRounds === undefined ? undefined : [...this.shortRounds],
      preempting: [...this.preempting],
      ...(this.lag === undefined ? {} : { lag: copyLagState(this.lag) }),
    };
  }

  /** An admission with this catalog and settings in the state `exportState` took. */
  static restore(catalog: Catalog, settings: AdmissionSettings, state: AdmissionState): Admission {
    const admission = new Admission(catalog, settings);
    admission.memory = new Map(state.memory.map(([id, m]) => [id, { ...m }]));
    admission.shortRounds = state.shortRounds === undefined ? undefined : new Map(state.shortRounds);
    admission.preempting = new Map(state.preempting);
    admission.lag = state.lag === undefined ? undefined : copyLagState(state.lag);
    return admission;
  }

  /** Reprice footprints from the next round on (price refresh). */
  setCatalog(catalog: Catalog): void {
    this.catalog = catalog;
    this.prices = new FootprintPrices(catalog, this.spot);
    for (const m of this.memory.values()) m.footprint = undefined;
  }

  /** The class of a job of this declared total size (task-seconds) and team; fixed at arrival. */
  classOf(sizeSeconds: number, team: string | undefined): string {
    return classify(this.config, { sizeSeconds, team });
  }

  /** Forget an ended job. */
  forget(jobId: string): void {
    this.memory.delete(jobId);
    this.preempting.delete(jobId);
  }

  /**
   * This round's admissions over `snapshot` (every live job). Remembers admission times, short-round counters, the
   * classes' lags and fairness counts for the next round. `onPaidRoom`: the jobs would go on capacity already paid for
   * (`admissibleNow`).
   */
  decide(snapshot: ClusterSnapshot, info: AdmissionInfo, onPaidRoom = false): QueueDecision {
    const now = snapshot.nowSeconds;
    const tasksByJob = groupBy(snapshot.tasks, (t) => t.jobId);
    const running: RunningQueuedJob[] = [];
    const waiting = new Map<string, QueuedJob>();
    const unhostable: UnhostableJob[] = [];
    const holding = new Set<string>();
    for (const sched of snapshot.jobs) {
      const tasks = tasksByJob.get(sched.id) ?? [];
      const jobInfo = info(sched.id);
      const memory = this.memoryOf(sched, tasks, jobInfo);
      memory.liveSum += snapshot.jobs.length;
      memory.rounds += 1;
      const holdsCapacity = !sched.reconfigurable || tasks.some((t) => t.instanceId !== undefined);
      if (memory.footprint === null && !holdsCapacity) {
        unhostable.push({ jobId: sched.id, classId: this.classOf(memory.sizeSeconds, jobInfo.team) });
        continue;
      }
      const queued = queuedJob(sched, tasks.length, memory, jobInfo);
      if (holdsCapacity) {
        holding.add(sched.id);
        memory.cutFromPlan = false;
        // Placed between rounds, or found holding capacity after a restart: admitted when its current run began, in
        // both runtimes alike (preemption takes the most recently admitted first).
        memory.admittedSeconds ??= jobInfo.runBeganSeconds?.() ?? now;
        const preemptible =
          sched.reconfigurable &&
          tasks.some((t) => t.instanceId !== undefined) &&
          !inNoMoveWindow(sched, now);
        running.push({ ...queued, admittedSeconds: memory.admittedSeconds, preemptible });
      } else {
        // A job the plan sent back to the queue competes again from scratch.
        memory.admittedSeconds = undefined;
        waiting.set(sched.id, queued);
      }
    }
    // A preemption is over once its victim no longer holds capacity (checkpointed back to the queue, or ended).
    for (const id of [...this.preempting.keys()]) if (!holding.has(id)) this.preempting.delete(id);

    const factor = this.packingFactor(snapshot, running);
    // Whether a job can ever fit, and what it holds of its class's ceiling, are judged at a factor of at most 1: above
    // 1 the fleet has idle room the next plan drops, which no job holds and which says a job does not fit now, not
    // that it never will (it keeps its place in its class's order).
    const sized = <J extends QueuedJob>(j: J): J =>
      factor === 1
        ? j
        : {
            ...j,
            footprint: scaledCost(j.footprint, factor),
            ...(factor > 1 ? { fitFootprint: j.footprint, heldFootprint: j.footprint } : {}),
          };
    // The decision keeps the jobs as admission sized them, so what the queue views say a job needs and what the caps
    // have left (its usage) are in the same dollars.
    const sizedRunning = running.map(sized);
    // A job a plan was cut without counts at its own price, where that alone fits the caps (one that fits only
    // packed keeps its packed size: at its own price it would be never-fits for good); whether it ever fits is still
    // judged on its packed size.
    const cutSized = <J extends QueuedJob>(j: J): J => {
      if (!(factor < 1) || this.memory.get(j.id)?.cutFromPlan !== true) return sized(j);
      if (!fitsCaps([j.footprint], this.caps)) return sized(j);
      return { ...j, fitFootprint: scaledCost(j.footprint, factor) };
    };
    const sizedWaiting = new Map([...waiting].map(([id, j]) => [id, cutSized(j)]));
    const lagSeconds = lagsAt(this.lag, now);
    const result = admit({
      nowSeconds: now,
      caps: this.caps,
      config: this.config,
      running: sizedRunning,
      waiting: [...sizedWaiting.values()],
      shortRounds: this.shortRounds,
      lagSeconds,
      onPaidRoom,
    });
    this.shortRounds = result.shortRounds;
    this.lag = nextLagState(lagSeconds, result.classes, result.queued, now);
    for (const id of result.admitted) (this.memory.get(id) as JobMemory).admittedSeconds = now;

    const queues = new Map<string, string[]>();
    for (const q of result.queued) {
      if (q.reason === 'never-fits') continue; // not in line: it waits for the caps to change
      const list = queues.get(q.classId) ?? [];
      list.push(q.jobId);
      queues.set(q.classId, list);
    }
    const keep = new Set<string>([...holding, ...result.admitted]);
    const filtered =
      keep.size === snapshot.jobs.length
        ? snapshot
        : {
            ...snapshot,
            jobs: snapshot.jobs.filter((j) => keep.has(j.id)),
            tasks: snapshot.tasks.filter((t) => keep.has(t.jobId)),
          };
    return {
      nowSeconds: now,
      snapshot: filtered,
      result,
      running: sizedRunning,
      waiting: sizedWaiting,
      unhostable,
      queues,
    };
  }

  /**
   * The waiting jobs this admission would let in now onto capacity already paid for, in its order (placement between
   * rounds places only these). Such room adds nothing to the fleet, so the caps' exact check is left out (`admit`'s
   * `onPaidRoom`); a job over its class's ceiling (`maxShare`) or one that never fits is not let in, and the classes'
   * shares order the rest as at a round. Decided on a copy: what the rounds remember (admission times, short-round
   * counters, lags, fairness counts) is left as it was.
   */
  admissibleNow(snapshot: ClusterSnapshot, info: AdmissionInfo): readonly string[] {
    return this.fork().decide(snapshot, info, true).result.admitted;
  }

  /**
   * `plan-cost`: the fleet's $/hour over the standalone $/hour of the jobs holding capacity (1 with `standalone`, no
   * $ cap, or nothing running yet): what a standalone dollar of footprint really costs once packed. Above 1 too
   * (a fleet with idle room costs more than its jobs' footprints say): jobs holding capacity then count for what the
   * fleet costs, so admission never counts on money the fleet already spends. Both sides at the market they are
   * bought in: a spot instance at its pool's price, a job that may go on spot sized at spot prices (`spot`).
   */
  private packingFactor(snapshot: ClusterSnapshot, running: readonly RunningQueuedJob[]): number {
    if (this.admitBy !== 'plan-cost' || this.caps.maxCostPerHour === undefined) return 1;
    const standalone = running.reduce(
      (s, j) => s + j.footprint.instances.reduce((c, i) => c + i.costPerHour, 0),
      0,
    );
    if (standalone <= 0) return 1;
    const types = typesByName(this.catalog);
    const fleet = snapshot.instances.reduce((s, i) => {
      const onDemand = types.get(i.typeName)?.costPerHour ?? 0;
      if (i.market !== 'spot') return s + onDemand;
      // Its pool's price, as the plan check and the launch gate count it; on demand if the catalog lost the pool.
      const zone = i.placement?.zone;
      const pooled = spotOffering(this.catalog.spot, i.typeName, zone) !== undefined;
      return s + (pooled ? instancePricePerHour(this.catalog, i.typeName, 'spot', zone) : onDemand);
    }, 0);
    return Math.min(MAX_PACKING_FACTOR, Math.max(MIN_PACKING_FACTOR, fleet / standalone));
  }

  /**
   * The preemptions admission proposed that a round can carry out (PCS §3: only when a class reclaims its
   * guaranteed share, with `admit`'s hysteresis): the victim runs (reconfigurable, placed), is outside its no-move
   * window, and its reclaiming class does not already wait for an earlier preemption to finish checkpointing. A
   * victim is stopped through a checkpoint and returned to the queue, like a move.
   */
  victims(decision: QueueDecision): PreemptionVictim[] {
    const { snapshot } = decision;
    const now = snapshot.nowSeconds;
    const waitingFor = new Set(this.preempting.values());
    const jobs = new Map(snapshot.jobs.map((j) => [j.id, j]));
    const placed = new Set(snapshot.tasks.filter((t) => t.instanceId !== undefined).map((t) => t.jobId));
    const out: PreemptionVictim[] = [];
    for (const p of decision.result.preemptions) {
      if (waitingFor.has(p.forClassId)) continue;
      const job = jobs.get(p.jobId);
      if (job === undefined || !job.reconfigurable || !placed.has(job.id)) continue;
      if (inNoMoveWindow(job, now)) continue;
      out.push({ jobId: p.jobId, classId: p.classId, forClassId: p.forClassId, reason: p.reason });
    }
    return out;
  }

  /**
   * The round's plan, carried out, was cut to the caps without these jobs it had let in (the scheduler's own cap
   * check, scheduler/caps.ts): each is sized at its standalone price until it runs (JobMemory.cutFromPlan).
   */
  noteCut(jobIds: readonly string[]): void {
    for (const id of jobIds) {
      const m = this.memory.get(id);
      if (m !== undefined) m.cutFromPlan = true;
    }
  }

  /** The round carried these preemptions out: their classes wait for them before preempting again. */
  markPreempting(victims: readonly PreemptionVictim[]): void {
    for (const v of victims) this.preempting.set(v.jobId, v.forClassId);
  }

  /**
   * Mean PCS unfairness in percent (digest §2): unfair_j = 100 · max(0, JCT_j / FFT_j − 1) with
   * FFT_j = service_j / min(C / N̄_j, demand_j). C is the capped capacity (1 in dominant-share units), demand_j the
   * job's dominant share and N̄_j the mean number of live jobs over the rounds the job saw, itself included. Null
   * without any cap (nobody queues, a fair share is undefined) or without a finished job.
   */
  unfairnessPercent(
    jobs: readonly { readonly id: string; readonly jctSeconds: number | null }[],
    serviceSeconds: ReadonlyMap<string, number>,
  ): number | null {
    if (!hasAnyCap(this.caps)) return null;
    const values: number[] = [];
    for (const j of jobs) {
      const m = this.memory.get(j.id);
      const service = serviceSeconds.get(j.id);
      if (
        m === undefined ||
        m.footprint === null ||
        m.footprint === undefined ||
        service === undefined ||
        j.jctSeconds === null
      )
        continue;
      if (m.rounds === 0) continue;
      const demand = dominantShare(m.footprint, this.caps);
      const nBar = m.liveSum / m.rounds;
      const rate = Math.min(1 / nBar, demand) / demand; // fraction of full speed the fair share allows
      if (!(rate > 0) || !Number.isFinite(rate)) continue;
      values.push(100 * Math.max(0, j.jctSeconds / (service / rate) - 1));
    }
    return values.length === 0 ? null : values.reduce((a, b) => a + b, 0) / values.length;
  }

  private memoryOf(sched: SchedJob, tasks: readonly SchedTask[], info: AdmissionJobInfo): JobMemory {
    let m = this.memory.get(sched.id);
    if (m === undefined) {
      // PCS §3: the class is fixed at arrival, by the declared size, not recomputed from the remaining size.
      const perTask = info.perTaskSeconds ?? sched.expectedRemainingSeconds ?? UNKNOWN_DURATION_SECONDS;
      m = {
        sizeSeconds: perTask * tasks.length,
        footprint: undefined,
        admittedSeconds: undefined,
        liveSum: 0,
        rounds: 0,
      };
      this.memory.set(sched.id, m);
    }
    if (m.footprint === undefined) {
      try {
        m.footprint = this.prices.footprint(
          sched.id,
          tasks.map((t) => t.demand),
          sched.spot,
          this.caps,
        );
      } catch {
        m.footprint = null;
      }
    }
    return m;
  }
}

/** What `admit` orders and packs: multi-task jobs with their remaining work summed over tasks (Murmuration SJF). */
function queuedJob(sched: SchedJob, taskCount: number, memory: JobMemory, info: AdmissionJobInfo): QueuedJob {
  const remaining = sched.expectedRemainingSeconds ?? info.perTaskSeconds ?? UNKNOWN_DURATION_SECONDS;
  return {
    id: sched.id,
    arrivalSeconds: sched.arrivalSeconds,
    remainingWorkSeconds: remaining * taskCount,
    taskCount,
    sizeSeconds: memory.sizeSeconds,
    team: info.team,
    footprint: memory.footprint ?? { jobId: sched.id, instances: [] },
    success: info.success?.distribution,
    stagesDone: info.success?.stagesDone,
  };
}

function copyLagState(state: ClassLagState): ClassLagState {
  return { atSeconds: state.atSeconds, classes: state.classes.map((c) => [...c] as const) };
}

/** A footprint with its $/hour scaled (the instance count and quota use stay). */
function scaledCost(footprint: JobFootprint, factor: number): JobFootprint {
  return {
    jobId: footprint.jobId,
    instances: footprint.instances.map((i) => ({ ...i, costPerHour: i.costPerHour * factor })),
  };
}
