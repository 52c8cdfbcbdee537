import { setupSeconds, type Catalog } from '../core/catalog.js';
import { hashUnit } from '../core/random.js';
import {
  interruptionRatePerHour,
  reclaimIsFree,
  SPOT_NOTICE_SECONDS,
  spotOffering,
  UNAVAILABLE_OFFERING_SECONDS,
  type SpotOffering,
} from '../core/spot.js';
import { REBALANCE_INTERRUPTION_RATE_PER_HOUR } from '../scheduler/spot-cost.js';
import { latestCheckpointIterations } from './checkpoints.js';
import { integrateProgress, type SimInstance, type SimJob, type SimTask } from './entities.js';

/**
 * The simulated spot market's interruptions (the ground truth of spot capacity). Each spot instance is reclaimed
 * after an exponential time drawn at its pool's rate (the catalog's interruption class, core/spot.ts), seeded per
 * instance so a run is reproducible whatever else happens; optionally, bursts reclaim every instance of one pool at
 * once (a pool running out of capacity). AWS warns two minutes before (the instance-action notice).
 *
 * What a notice does depends on the runtime (`NoticeHandling`): fleetwise's worker checkpoints and uploads its tasks at
 * once, saving each job's progress when the checkpoint fits in the notice; Karpenter evicts the node's pods at the
 * notice, and a job saves its progress on the eviction's SIGTERM when that checkpoint fits in the notice, else
 * restarts from its last periodic checkpoint; SkyPilot hears nothing (research digest industry-anchors §1.4, §3).
 * When the instance is reclaimed, every job with a task still on it or bound for it goes back to the queue at its
 * last checkpoint (all of its tasks: a gang restarts together), and a round follows at once to place it again.
 *
 * Optionally, a share of the reclaims is preceded by a rebalance recommendation (EC2's earlier signal that the
 * instance is at elevated risk; it is not guaranteed, and may come as late as the notice). Its lead before the reclaim
 * is drawn at the rate the scheduler assumes before it has learned one (spot-cost.ts
 * `REBALANCE_INTERRUPTION_RATE_PER_HOUR`: a mean of two hours); ahead of a burst, the pool's instances live at the
 * warning get one each (at the same share). fleetwise sees the instance marked and plans at once (Eva prices the risk
 * and moves the tasks off when that pays); the spot baselines ignore it, as Karpenter and SkyPilot do. Optionally,
 * false alarms: recommendations with no reclaim behind them, at a rate per spot instance, drawn per instance (EC2 says
 * a recommendation is not always followed by an interruption; how often is not published, so the rate is the user's).
 *
 * A runtime that reacts to notices does as the controller does on one (controller/spot-interruptions.ts, after
 * Karpenter): the noticed instance's pool takes no spot launch for `UNAVAILABLE_OFFERING_SECONDS` (a launch asked
 * there goes to the type's next open pool, else on demand: commands.ts), and a drained instance in its first hour
 * whose reclaim falls in that hour is left for EC2 to take rather than terminated, since AWS charges nothing for a spot
 * instance it interrupts in its first hour (`FREE_INTERRUPTED_SPOT_SECONDS`) and its owner pays for one it ends.
 */

/**
 * How a runtime meets EC2's two-minute interruption notice:
 * - `checkpoint-and-drain` (fleetwise): the worker checkpoints the instance's tasks at once; the controller drains the
 *   instance, closes its pool and plans at once, moving them off; it also plans at once on a rebalance recommendation;
 * - `drain-and-evict` (Karpenter's interruption controller, digest §1.4): the node is cordoned and drained, its pods
 *   evicted at once, a replacement provisioned in parallel and the offering marked unavailable; rebalance
 *   recommendations are ignored. An eviction is a SIGTERM, and the Karpenter baselines stand for jobs that checkpoint
 *   on it (their consolidation moves are checkpoint/restore: scheduler/baselines/karpenter.ts), so a job whose
 *   checkpoint fits in the notice restarts from the progress it has at the notice, as fleetwise's worker saves it;
 *   one whose checkpoint does not fit restarts from its last periodic checkpoint;
 * - `none` (SkyPilot, which finds a preemption by polling, digest §3): nothing happens until the reclaim, and each
 *   job restarts from the application's last periodic checkpoint.
 */
export type NoticeHandling = 'checkpoint-and-drain' | 'drain-and-evict' | 'none';

export { SPOT_NOTICE_SECONDS };

/**
 * When the instance was launched (EC2's first hour counts from then): the launch set when it is expected to register,
 * the type's setup later (commands.ts); undefined while a cap holds its launch back.
 */
function launchedAtSeconds(instance: SimInstance): number | undefined {
  const ready = instance.readyAtSeconds;
  return ready === undefined ? undefined : ready - setupSeconds(instance.type);
}

/** Whether EC2 taking the instance back at `at` costs nothing: a spot instance, in its first hour. */
export function reclaimedFree(instance: SimInstance, at: number): boolean {
  const launched = launchedAtSeconds(instance);
  return instance.market === 'spot' && launched !== undefined && reclaimIsFree(launched, at);
}

export interface SpotSimulation {
  /** Seed of the interruption draws. */
  readonly seed: number;
  /** What the runtime does on a notice (fleetwise, Karpenter or SkyPilot). */
  readonly noticeHandling: NoticeHandling;
  /** Bursts per pool per 30 days that reclaim all of the pool's instances together (default 0: none). */
  readonly burstsPerPoolPerMonth?: number | undefined;
  /** Share of reclaims a rebalance recommendation precedes, in [0, 1] (default 0: none). */
  readonly rebalanceShare?: number | undefined;
  /** Rebalance recommendations with no reclaim behind them, per spot instance per 30 days (default 0: none). */
  readonly falseRebalancesPerMonth?: number | undefined;
}

/** What the spot world needs of the engine: the clock, events, capacity and the instance's end. */
export interface SpotEngine {
  readonly now: number;
  /** Push a spot event at an absolute time. */
  schedule(event: SpotEvent): void;
  /**
   * EC2 took the instance back: stop billing, drop it from the fleet. `billedNothing`: AWS charges nothing for it (a
   * spot instance reclaimed in its first hour), so what it accrued leaves the bill (FleetMeter, CostLedger `forgive`).
   */
  reclaimInstance(instance: SimInstance, billedNothing: boolean): void;
  /** A task leaves its instance's capacity. */
  release(task: SimTask): void;
  /** The job's rates and completion must be recomputed. */
  touch(job: SimJob, instance: SimInstance | undefined): void;
  /** Ask for a round now (the runtime reacts to the reclaim). */
  requestRound(): void;
  /**
   * The job works on elsewhere while its move waits for this instance (make before break): its move is called off and
   * it returns to the queue from a checkpoint taken now. False when it does not (it runs on the instance, or stopped).
   */
  callOffMove(job: SimJob, instance: SimInstance): boolean;
  /** Moves waiting to leave this instance (make before break) stop now: a notice's two minutes are for the checkpoint. */
  stopMovesOff(instance: SimInstance): void;
  /** The instance takes no new task and terminates once empty (the controller drains a noticed instance). */
  drain(instance: SimInstance): void;
  /** A job headed to the instance, none of whose tasks works yet, returns to the queue (false when it does not). */
  callOffStart(job: SimJob, instance: SimInstance): boolean;
  /** Every instance not yet terminated. */
  liveInstances(): Iterable<SimInstance>;
}

export type SpotEvent =
  | {
      readonly kind: 'spot-notice' | 'spot-rebalance' | 'spot-reclaim';
      readonly timeSeconds: number;
      readonly instance: SimInstance;
      /** A notice's: when EC2 acts on it (the notice says when, as the instance-action notice does). */
      readonly reclaimAtSeconds?: number | undefined;
    }
  | {
      /** A burst, or the rebalance recommendations ahead of it (`warning`). */
      readonly kind: 'spot-burst' | 'spot-burst-warning';
      readonly timeSeconds: number;
      readonly pool: SpotOffering;
      readonly n: number;
    };

const SECONDS_PER_MONTH = 30 * 86_400;

export class SpotWorld {
  interruptions = 0;
  /** Rebalance recommendations given (each instance at most once). */
  rebalanceRecommendations = 0;
  private readonly noticed = new Map<SimJob, number>();
  /** Instances given their notice (the first one: a repeated notice changes nothing), and when EC2 acts on it. */
  private readonly noticedInstances = new Map<SimInstance, number>();
  /** Spot pools closed to launches after a notice, and until when (`typeName@zone`). */
  private readonly closedPools = new Map<string, number>();

  constructor(
    private readonly catalog: Catalog,
    private readonly options: SpotSimulation,
    private readonly engine: SpotEngine,
  ) {}

  /** Schedule the first burst of every pool (none without bursts). */
  start(): void {
    if ((this.options.burstsPerPoolPerMonth ?? 0) <= 0) return;
    for (const pool of this.catalog.spot?.offerings ?? []) this.scheduleBurst(pool, 0, this.engine.now);
  }

  /** A spot instance starts being billed: draw when it will be reclaimed. */
  onBilled(instance: SimInstance): void {
    if (instance.market !== 'spot') return;
    const pool = this.poolOf(instance);
    if (pool === undefined) return;
    this.scheduleEvents(instance, billedSpotEvents(this.options, instance.id, pool, this.engine.now));
  }

  /**
   * Whether the pool of `typeName` in `zone` takes spot launches now: not for `UNAVAILABLE_OFFERING_SECONDS` after a
   * notice for one of its instances, as the controller marks the offering unavailable (and EC2Provider and the
   * controller runtime's simulated cloud then skip it).
   */
  poolOpen(typeName: string, zone: string): boolean {
    const key = poolKey(typeName, zone);
    const until = this.closedPools.get(key);
    if (until === undefined) return true;
    if (this.engine.now < until) return false;
    this.closedPools.delete(key);
    return true;
  }

  /**
   * Whether the drained instance is left for EC2 to take, not terminated: it has its notice and EC2 acts on it within
   * the instance's first hour, when the reclaim costs nothing (the controller's reconciler leaves it so). The reclaim
   * always follows a notice in the simulated market, and ends it.
   */
  leftForEc2(instance: SimInstance): boolean {
    const reclaimAt = this.noticedInstances.get(instance);
    return reclaimAt !== undefined && reclaimedFree(instance, reclaimAt);
  }

  handle(event: SpotEvent): void {
    switch (event.kind) {
      case 'spot-notice':
        return this.onNotice(
          event.instance,
          event.reclaimAtSeconds ?? event.timeSeconds + SPOT_NOTICE_SECONDS,
        );
      case 'spot-rebalance':
        return this.onRebalance(event.instance);
      case 'spot-reclaim':
        return this.onReclaim(event.instance);
      case 'spot-burst':
        return this.onBurst(event.pool, event.n);
      case 'spot-burst-warning':
        return this.onBurstWarning(event.pool, event.n, event.timeSeconds);
    }
  }

  private poolOf(instance: SimInstance): SpotOffering | undefined {
    return spotOffering(this.catalog.spot, instance.type.name, instance.placement?.zone);
  }

  private scheduleReclaim(instance: SimInstance, at: number): void {
    this.scheduleEvents(
      instance,
      reclaimEvents(this.options, instance.id, this.engine.now, at, instance.rebalanceRecommended === true),
    );
  }

  /** An instance's events, its notice knowing when its reclaim comes (as the simulated market tells the controller). */
  private scheduleEvents(instance: SimInstance, events: readonly SpotInstanceEvent[]): void {
    const reclaimAt = events.find((e) => e.kind === 'spot-reclaim')?.timeSeconds;
    for (const event of events)
      this.engine.schedule(
        event.kind === 'spot-notice' && reclaimAt !== undefined
          ? { ...event, instance, reclaimAtSeconds: reclaimAt }
          : { ...event, instance },
      );
  }

  private scheduleBurst(pool: SpotOffering, n: number, from: number): void {
    const { burstAt, warningAt } = burstEvents(this.options, pool, n, from);
    this.engine.schedule({ kind: 'spot-burst', timeSeconds: burstAt, pool, n });
    if (warningAt !== undefined)
      this.engine.schedule({ kind: 'spot-burst-warning', timeSeconds: warningAt, pool, n });
  }

  private onBurstWarning(pool: SpotOffering, n: number, at: number): void {
    for (const inst of this.engine.liveInstances())
      if (inPool(inst, pool) && warnedOfBurst(this.options, inst.id, n, at)) this.onRebalance(inst);
  }

  private onBurst(pool: SpotOffering, n: number): void {
    for (const inst of this.engine.liveInstances())
      if (inPool(inst, pool)) this.scheduleReclaim(inst, this.engine.now + SPOT_NOTICE_SECONDS);
    this.scheduleBurst(pool, n + 1, this.engine.now);
  }

  private static live(instance: SimInstance): boolean {
    return instance.lifecycle !== 'terminated' && instance.lifecycle !== 'terminating';
  }

  /**
   * Both runtimes that hear the notice drain the instance and plan at once: nothing new goes on it, moves and starts
   * headed to it are called off, and its pool is closed to spot launches for a while. fleetwise's worker checkpoints
   * and uploads at once: a job whose tasks all checkpoint and upload within the notice keeps the progress it has now
   * (it runs on meanwhile, and those last seconds are lost), and the next plan moves its tasks off. Karpenter evicts
   * the node's pods now: each job with a task on it goes back to the queue, at the progress it saves on the
   * eviction's SIGTERM when that checkpoint fits in the notice (`savesAtNotice`), else at its last periodic
   * checkpoint, and the plan asked for places it again (the replacement, in parallel with the drain). A second notice
   * for the instance (its own reclaim and a burst's) changes nothing: the controller heeds one notice per instance.
   */
  private onNotice(instance: SimInstance, reclaimAt: number): void {
    const handling = this.options.noticeHandling;
    if (handling === 'none' || !SpotWorld.live(instance)) return;
    if (this.noticedInstances.has(instance)) return;
    this.noticedInstances.set(instance, reclaimAt);
    const zone = instance.placement?.zone;
    if (instance.market === 'spot' && zone !== undefined)
      this.closedPools.set(poolKey(instance.type.name, zone), this.engine.now + UNAVAILABLE_OFFERING_SECONDS);
    // A move waiting to leave the instance checkpoints now; an evicted job has no checkpoint to take.
    if (handling === 'checkpoint-and-drain') this.engine.stopMovesOff(instance);
    // Moves and starts headed to it are called off (a drained instance strands no job), before it drains.
    for (const job of jobsOn(instance))
      if (!this.engine.callOffMove(job, instance)) this.engine.callOffStart(job, instance);
    this.engine.drain(instance);
    this.engine.requestRound();
    const evicts = handling === 'drain-and-evict';
    for (const job of jobsOn(instance)) {
      if (evicts && !job.tasks.some((t) => t.occupying === instance)) continue;
      if (savesAtNotice(job)) {
        integrateProgress(job, this.engine.now);
        this.noticed.set(job, job.completedIterations);
      }
      if (evicts) this.restartFromCheckpoint(job, zone);
    }
  }

  /** The instance is marked for the plans; a runtime that acts on recommendations (fleetwise) plans at once. */
  private onRebalance(instance: SimInstance): void {
    if (!SpotWorld.live(instance) || instance.rebalanceRecommended === true) return;
    instance.rebalanceRecommended = true;
    this.rebalanceRecommendations += 1;
    if (this.options.noticeHandling === 'checkpoint-and-drain') this.engine.requestRound();
  }

  private onReclaim(instance: SimInstance): void {
    this.noticedInstances.delete(instance);
    if (!SpotWorld.live(instance)) return;
    this.interruptions += 1;
    const zone = instance.placement?.zone;
    const jobs = jobsOn(instance);
    for (const job of jobs)
      if (this.engine.callOffMove(job, instance)) this.noticed.delete(job);
      else this.restartFromCheckpoint(job, zone);
    this.engine.reclaimInstance(instance, reclaimedFree(instance, this.engine.now));
    // The controller plans at once for the jobs it lost; an instance drained empty (left for EC2) loses none.
    if (jobs.length > 0) this.engine.requestRound();
  }

  /** Back to the queue at its last checkpoint: the notice's, else the latest periodic one, else its last start. */
  private restartFromCheckpoint(job: SimJob, zone: string | undefined): void {
    rollBackToCheckpoint(job, this.engine.now, this.noticed.get(job), zone);
    this.noticed.delete(job);
    job.status = 'queued';
    job.requeueAfterStop = false;
    for (const task of job.tasks) {
      const held = task.occupying;
      if (held !== undefined) this.engine.release(task);
      task.committed?.committed.delete(task);
      task.committed = undefined;
      task.pendingStart = false;
      task.state = 'stopped';
      task.rate = 1;
      this.engine.touch(job, held);
    }
  }
}

function poolKey(typeName: string, zone: string): string {
  return `${typeName}@${zone}`;
}

/** A spot instance of the pool's type in the pool's zone. */
function inPool(inst: SimInstance, pool: SpotOffering): boolean {
  return inst.market === 'spot' && inst.type.name === pool.typeName && inst.placement?.zone === pool.zone;
}

/**
 * Whether a job saves its progress at a notice: it works now, and every task of it checkpoints (the kill) and uploads
 * within the notice's two minutes. Both runtimes ask it, whether the worker checkpoints (fleetwise) or the eviction's
 * SIGTERM does (Karpenter's drain).
 */
export function savesAtNotice(job: SimJob): boolean {
  if (!job.active) return false;
  const saveSeconds = Math.max(...job.tasks.map((t) => t.spec.killDelaySeconds + t.spec.uploadDelaySeconds));
  return saveSeconds <= SPOT_NOTICE_SECONDS;
}

/** Jobs with a task running on, held by or bound for the instance. */
function jobsOn(instance: SimInstance): SimJob[] {
  const jobs = new Set<SimJob>();
  for (const t of instance.occupants) jobs.add(t.job);
  for (const t of instance.committed) jobs.add(t.job);
  return [...jobs].filter((j) => j.status !== 'finished');
}

/** Seconds a spot instance of `pool` lives before EC2 reclaims it: exponential at the pool's rate, drawn per instance. */
function spotLifeSeconds(seed: number, instanceId: string, pool: SpotOffering): number {
  const ratePerSecond = interruptionRatePerHour(pool.interruption) / 3600;
  const u = hashUnit(seed, 'spot', instanceId);
  return -Math.log(1 - u) / ratePerSecond;
}

/** An instance's spot events, as both runtimes schedule them. */
export interface SpotInstanceEvent {
  readonly kind: 'spot-notice' | 'spot-rebalance' | 'spot-reclaim';
  readonly timeSeconds: number;
}

/**
 * A spot instance of `pool` is billed from `now`: its reclaim, drawn per instance at the pool's rate, what leads up to
 * it (`reclaimEvents`), and a false alarm before it when those are on.
 */
export function billedSpotEvents(
  options: SpotSimulation,
  instanceId: string,
  pool: SpotOffering,
  now: number,
): SpotInstanceEvent[] {
  const life = spotLifeSeconds(options.seed, instanceId, pool);
  const events = reclaimEvents(options, instanceId, now, now + life, false);
  const falseAlarm = falseRebalanceSeconds(options, instanceId, now, life);
  return falseAlarm === undefined ? events : [...events, { kind: 'spot-rebalance', timeSeconds: falseAlarm }];
}

/**
 * What leads up to a spot instance's reclaim due at `at` (seen at `now`): a rebalance recommendation for the share
 * asked for (unless the instance had one), its lead drawn at the rate the scheduler assumes before it has learned one
 * (spot-cost.ts `REBALANCE_INTERRUPTION_RATE_PER_HOUR`: a mean of two hours); the notice two minutes before; the reclaim.
 */
export function reclaimEvents(
  options: SpotSimulation,
  instanceId: string,
  now: number,
  at: number,
  alreadyRecommended: boolean,
): SpotInstanceEvent[] {
  const events: SpotInstanceEvent[] = [];
  if (!alreadyRecommended && recommends(options, instanceId, at)) {
    const lead = rebalanceLeadSeconds(options.seed, instanceId, at);
    events.push({ kind: 'spot-rebalance', timeSeconds: Math.max(now, at - lead) });
  }
  events.push({ kind: 'spot-notice', timeSeconds: Math.max(now, at - SPOT_NOTICE_SECONDS) });
  events.push({ kind: 'spot-reclaim', timeSeconds: Math.max(now, at) });
  return events;
}

/**
 * A false alarm for an instance billed from `now` that lives `life` seconds: a recommendation at its own exponential
 * time, whatever the instance's reclaim (the first of the two recommendations counts; an instance is recommended at
 * most once). Undefined when none comes before the reclaim, or false alarms are off.
 */
function falseRebalanceSeconds(
  options: SpotSimulation,
  instanceId: string,
  now: number,
  life: number,
): number | undefined {
  const perSecond = (options.falseRebalancesPerMonth ?? 0) / SECONDS_PER_MONTH;
  if (perSecond <= 0) return undefined;
  const v = hashUnit(options.seed, 'false-rebalance', instanceId);
  const at = now - Math.log(1 - v) / perSecond;
  return at < now + life ? at : undefined;
}

/**
 * The pool's burst number `n`, drawn from `from` at the bursts' rate, and when the pool's instances then live are
 * warned ahead of it (with recommendations on), as a recommendation ahead of a single reclaim is.
 */
export function burstEvents(
  options: SpotSimulation,
  pool: SpotOffering,
  n: number,
  from: number,
): { readonly burstAt: number; readonly warningAt?: number } {
  const perSecond = (options.burstsPerPoolPerMonth ?? 0) / SECONDS_PER_MONTH;
  const u = hashUnit(options.seed, 'burst', pool.typeName, pool.zone, n);
  const burstAt = from - Math.log(1 - u) / perSecond;
  if ((options.rebalanceShare ?? 0) <= 0) return { burstAt };
  const lead = rebalanceLeadSeconds(options.seed, 'burst', pool.typeName, pool.zone, n);
  return { burstAt, warningAt: Math.max(from, burstAt - lead) };
}

/** Whether an instance live at a burst's warning gets a recommendation (the share asked for, drawn per instance). */
export function warnedOfBurst(options: SpotSimulation, instanceId: string, n: number, at: number): boolean {
  return recommends(options, instanceId, 'burst', n, at);
}

/** A recommendation's lead before the reclaim it warns of: exponential at the rate Eva assumes after one. */
function rebalanceLeadSeconds(seed: number, ...parts: readonly (string | number)[]): number {
  const u = hashUnit(seed, 'rebalance-lead', ...parts);
  return (-Math.log(1 - u) / REBALANCE_INTERRUPTION_RATE_PER_HOUR) * 3600;
}

/** Whether a recommendation precedes this reclaim (the share asked for, drawn per instance and reclaim). */
function recommends(options: SpotSimulation, ...parts: readonly (string | number)[]): boolean {
  return hashUnit(options.seed, 'rebalance', ...parts) < (options.rebalanceShare ?? 0);
}

/**
 * A reclaim took the job's running work: it keeps the progress of its last checkpoint (the one taken on the notice,
 * `noticedIterations`, else its latest durable one: world/checkpoints.ts), the rest is counted lost, and
 * it stops progressing (a pending completion or activation is void). Where its tasks go is the runtime's.
 */
export function rollBackToCheckpoint(
  job: SimJob,
  now: number,
  noticedIterations: number | undefined,
  zone: string | undefined,
): void {
  let restored = latestCheckpointIterations(job, now);
  if (noticedIterations !== undefined) restored = Math.max(restored, noticedIterations);
  restored = Math.min(restored, job.completedIterations);
  job.lostWorkSeconds += (job.completedIterations - restored) / job.spec.fullThroughput;
  job.completedIterations = restored;
  job.checkpointIterations = restored;
  job.interruptions += 1;
  if (zone !== undefined) job.interruptedZones.push(zone);
  job.active = false;
  job.activeSinceSeconds = undefined;
  job.throughput = 0;
  job.version += 1; // its pending completion is void
  job.activationToken += 1; // and so is a pending activation
}
