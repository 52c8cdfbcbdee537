import type { InstanceType } from '../core/catalog.js';
import type { Resources } from '../core/resources.js';
import { taskShareOf } from '../scheduler/expected-start.js';
import type { CostLedger } from './cost-ledger.js';
import { barrierIdleCost, startSkewSeconds, type TaskStart } from '../round/co-start.js';
import { taskDemandOn, type SimInstance, type SimJob, type SimTask } from './entities.js';
import { EventQueue } from './event-queue.js';
import { FleetMeter } from './fleet-meter.js';
import type { NetworkWorld } from './network-world.js';
import type { SpotEvent, SpotWorld } from './spot-world.js';
import type { RunOptions, SimLogEntry, SimLogKind } from './simulation-types.js';

// Same-time events run in this order, as in Eva's simulator: effects of earlier commands, then arrivals, then the
// scheduling round, then completions (a job finishing exactly at a round is still seen running by that round).
export const RANK_EFFECT = 0;
export const RANK_ARRIVAL = 1;
export const RANK_ROUND = 2;
export const RANK_COMPLETION = 3;

/** The delayed effect of a command: an instance coming up or going, a task launching or stopping, a job activating. */
export type EffectEvent =
  | {
      readonly kind: 'instantiated' | 'worker-started' | 'registered' | 'terminated';
      readonly timeSeconds: number;
      readonly rank: number;
      readonly instance: SimInstance;
    }
  | {
      readonly kind: 'launched' | 'killed' | 'uploaded';
      readonly timeSeconds: number;
      readonly rank: number;
      readonly task: SimTask;
    }
  | {
      readonly kind: 'job-active';
      readonly timeSeconds: number;
      readonly rank: number;
      readonly job: SimJob;
      readonly token: number;
    };

export type SimEvent =
  | EffectEvent
  | { readonly kind: 'arrival'; readonly timeSeconds: number; readonly rank: number; readonly job: SimJob }
  | { readonly kind: 'round'; readonly timeSeconds: number; readonly rank: number; readonly early?: boolean }
  | { readonly kind: 'network-tick'; readonly timeSeconds: number; readonly rank: number }
  /** A co-started task's time to start preparing (nothing happens but the gated commands being issued). */
  | { readonly kind: 'co-start-wake'; readonly timeSeconds: number; readonly rank: number }
  | (SpotEvent & { readonly rank: number })
  | {
      readonly kind: 'completion';
      readonly timeSeconds: number;
      readonly rank: number;
      readonly job: SimJob;
      readonly token: number;
    };

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/**
 * The live state of a simulated cluster, shared by the parts of the engine (simulation.ts, commands.ts, effects.ts,
 * progress.ts, world-io.ts) and mutated only by them: the world's bookkeeping, and the few steps every part takes
 * the same way (the clock, events, the log, capacity held).
 */
/** What the multi-task starts of a run cost in waiting (Murmuration digest §7.5 metrics). */
export class StartMeter {
  /** Per start of a multi-task job: max − min of its tasks' ready times. */
  readonly skews: number[] = [];
  /** Σ over those starts and tasks of (release − ready) × the task's share of its instance's $/hour. */
  barrierIdleCost = 0;

  /**
   * A job's tasks all run from `nowSeconds`: the barrier releases. Its start skew and barrier-idle cost count the tasks
   * that (re)started for this release, each from when it was ready to now, on the instance `placedOn` says it holds,
   * at its billed price (round/co-start.ts); each task's ready time is then spent. A job of one task counts nothing.
   */
  releaseJob(
    job: SimJob,
    placedOn: (
      task: SimTask,
    ) =>
      { readonly type: InstanceType; readonly demand: Resources; readonly pricePerHour: number } | undefined,
    nowSeconds: number,
  ): void {
    if (job.tasks.length < 2) return;
    const starts: TaskStart[] = [];
    for (const t of job.tasks) {
      const on = placedOn(t);
      if (t.readySeconds === undefined || on === undefined) continue;
      starts.push({
        startSeconds: t.readySeconds,
        // What the instance is billed at (its spot price on spot), as the ledger bills it.
        costPerHour: on.pricePerHour,
        share: taskShareOf(on.demand, on.type.capacity),
      });
      t.readySeconds = undefined;
    }
    if (starts.length === 0) return;
    this.skews.push(startSkewSeconds(starts));
    this.barrierIdleCost += barrierIdleCost(starts, nowSeconds);
  }
}

export class WorldState {
  /** Every job of the run, in arrival order. */
  readonly jobs: readonly SimJob[];
  readonly queue = new EventQueue<SimEvent>();
  /** Arrived and unfinished, in arrival order. */
  readonly liveJobs = new Map<string, SimJob>();
  /** Arrived and waiting for their dependencies to finish (job-dependencies.ts), out of every round. */
  readonly heldJobs = new Map<string, SimJob>();
  /** Every instance ever launched. */
  readonly instances = new Map<string, SimInstance>();
  /** Up and in the plan, in launch order. */
  readonly assignable = new Map<string, SimInstance>();
  /** Starts waiting for their gates. */
  pendingStarts: SimTask[] = [];
  /** Moving tasks still working until the instances their job moves to are ready (make before break). */
  pendingStops: SimTask[] = [];
  /** Instances the plan dropped, terminated once empty. */
  pendingTerminations: SimInstance[] = [];
  /** Launches held back because they would break a cap (caps are never exceeded, not even in transit). */
  deferredLaunches: SimInstance[] = [];
  /** Instances launched and not yet terminated: what the caps count (AWS counts an instance until it is gone). */
  readonly launched = new Set<SimInstance>();
  /** Instances whose set of active tasks changed: their tasks' rates are recomputed. */
  readonly dirtyInstances = new Set<SimInstance>();
  /** Jobs whose throughput may have changed: their completion is rescheduled. */
  readonly dirtyJobs = new Set<SimJob>();
  /** Index in `jobs` of the next arrival to schedule. */
  nextArrival = 0;
  finishedJobs = 0;
  /** Instances launched so far: the number in the next instance id. */
  instanceCounter = 0;
  /** Time of the pending early round, so several events at one time share one round. */
  earlyRoundAt: number | undefined;
  readonly meter = new FleetMeter();
  /** What the billed capacity was doing, in dollars (cost-ledger.ts); never in a prediction's world, which bills nothing. */
  ledger: CostLedger | undefined;
  /** Start skew and barrier-idle cost of multi-task jobs' starts (round/co-start.ts). */
  readonly starts = new StartMeter();
  /** The network's ground truth (zones, round trips); undefined in a prediction's world, which ignores latency. */
  readonly network: NetworkWorld | undefined;
  /** Spot interruptions (a run with spot on; never in a prediction's world). */
  spot: SpotWorld | undefined;
  private nowSeconds = 0;
  /** The latest in arrival order of the jobs queued so far (a job arriving after it needs no reordering). */
  newestQueuedIndex = -1;
  private readonly onEvent: RunOptions['onEvent'];

  constructor(jobs: readonly SimJob[], onEvent: RunOptions['onEvent'], network?: NetworkWorld) {
    this.jobs = jobs;
    this.onEvent = onEvent;
    this.network = network;
  }

  get now(): number {
    return this.nowSeconds;
  }

  /** Move the clock (billing accrues up to the new time). */
  advanceTo(t: number): void {
    this.ledger?.accrueInstances(this.launched, t - this.nowSeconds);
    this.meter.advanceTo(t);
    this.nowSeconds = t;
  }

  /** Push an event `delaySeconds` from now (rank: effects of commands unless said otherwise). */
  at(delaySeconds: number, e: DistributiveOmit<SimEvent, 'timeSeconds' | 'rank'>, rank = RANK_EFFECT): void {
    this.queue.push({ ...e, timeSeconds: this.now + delaySeconds, rank } as SimEvent);
  }

  log(kind: SimLogKind, ids: Omit<SimLogEntry, 'timeSeconds' | 'kind'> = {}): void {
    this.onEvent?.({ timeSeconds: this.now, kind, ...ids });
  }

  /** The task starts or stops (`sign`) holding `d` of its instance's capacity. */
  addUsage(inst: SimInstance, d: Resources, sign: 1 | -1): void {
    inst.used[0] += sign * d[0];
    inst.used[1] += sign * d[1];
    inst.used[2] += sign * d[2];
    this.meter.allocate(d, sign);
  }

  /** The task stops holding its instance's capacity. */
  release(task: SimTask): void {
    const inst = task.occupying;
    if (inst === undefined) return;
    inst.occupants.delete(task);
    this.addUsage(inst, taskDemandOn(task, inst), -1);
    task.occupying = undefined;
  }

  /**
   * The job joins the queue now, in arrival order among the live jobs (a job released from its dependencies arrived
   * before some of them; the controller's rounds list jobs by submission too).
   */
  enqueue(job: SimJob): void {
    job.status = 'queued';
    job.integratedToSeconds = this.now;
    this.heldJobs.delete(job.spec.id);
    this.liveJobs.set(job.spec.id, job);
    if (job.index > this.newestQueuedIndex) {
      this.newestQueuedIndex = job.index;
      return;
    }
    const ordered = [...this.liveJobs.values()].sort((a, b) => a.index - b.index);
    this.liveJobs.clear();
    for (const j of ordered) this.liveJobs.set(j.spec.id, j);
  }

  get allJobsFinished(): boolean {
    return this.finishedJobs === this.jobs.length;
  }

  allTerminated(): boolean {
    if (this.assignable.size > 0 || this.pendingTerminations.length > 0) return false;
    for (const inst of this.instances.values()) if (inst.lifecycle !== 'terminated') return false;
    return true;
  }
}
