import { crossZonePricePerGiB, type Catalog } from '../core/catalog.js';
import { isLatencySensitive } from '../core/latency-curves.js';
import { Admission, type AdmissionJobInfo, type QueueDecision } from '../queue/admission.js';
import type { WfqConfig } from '../queue/wfq.js';
import { runRound, type PredictionFork } from '../round/round.js';
import type { Scheduler } from '../scheduler/types.js';
import { CommandIssuer } from './commands.js';
import { handleEffect } from './effects.js';
import { integrateProgress, successProgress, type SimJob } from './entities.js';
import { memoized } from './ground-truth.js';
import { neverAdmittedJobs, neverAdmittedProblems } from './never-fits.js';
import { jobOutcome, mean, networkMetrics, summarize } from './metrics.js';
import { BetweenRoundsPlacer } from './between-rounds.js';
import { defaultNetworkConfig } from './network-config.js';
import { NetworkWorld } from './network-world.js';
import { refreshNetwork, refreshRates, type TaskRate } from './progress.js';
import type { JobOutcome, RunResult } from './run-result.js';
import { buildSnapshot, observeThroughputs } from './scheduler-view.js';
import type { PredictedTimes, Predictor, RunOptions } from './simulation-types.js';
import { buildSimJobs } from './trace-jobs.js';
import { HeldJobs, waitsToPlace } from './job-dependencies.js';
import { SpotWorld } from './spot-world.js';
import type { SimWorld } from './world.js';
import { exportWorld, importWorld } from './world-io.js';
import { CostLedger } from './cost-ledger.js';
import { isFullReconfiguration } from '../scheduler/decision-rule.js';
import { RANK_ARRIVAL, RANK_EFFECT, RANK_ROUND, WorldState, type SimEvent } from './world-state.js';

export const DEFAULT_ROUND_SECONDS = 300;
const DEFAULT_MAX_SERIES_POINTS = 2000;

/** How a prediction run starts: from a world, with the scheduler's expected rates and a copy of the queue state. */
export interface ForkSetup {
  readonly world: SimWorld;
  /** The scheduler's expected rates (the prediction's model of interference). */
  readonly rateOf: TaskRate;
  /** The copy of the queue state (undefined: every job admitted). */
  readonly admission: Admission | undefined;
  /** Stop once these jobs have finished. */
  readonly targets: ReadonlySet<string>;
  /**
   * Asked before each step with the simulated time reached: true stops the run there, as the time limit does
   * (unfinished targets stay null). A caller's time budget; the engine itself reads no clock.
   */
  readonly shouldStop?: ((simulatedSeconds: number) => boolean) | undefined;
}

/**
 * The trace-driven simulator (Eva §5–§6; research digest §1, §7): an event queue on a virtual clock drives the
 * very Scheduler the controller runs, against a simulated cloud and executor.
 *
 * Timing follows Eva's simulator exactly, except that it jumps from event to event instead of stepping one
 * second at a time:
 * - rounds every `roundSeconds` on multiples of it; the scheduler sees a ClusterSnapshot and the throughputs
 *   it could have measured, never the ground truth;
 * - an instance is instantiated, starts its worker and registers (the type's catalog delays); it is billed
 *   per second from instantiate-complete to terminate-complete;
 * - starting a task takes fetch + build (build skipped when the image is on the instance already); the job
 *   makes progress init_delay after all its tasks run;
 * - a move is kill (kill_delay; the job keeps running meanwhile) → upload (upload_delay) → the capacity is
 *   freed → start at the target → init; a checkpoint is taken on kill, so no progress is lost;
 * - an instance the plan drops terminates (terminate_delay) once no task occupies it.
 *
 * Progress is integrated exactly between events (piecewise-constant throughput): a job runs at
 * full_throughput × min over its tasks of the ground-truth rate of the task next to the other active tasks of
 * its instance. Completion times are computed analytically and rescheduled whenever a rate changes; they are
 * rounded up to whole seconds, the resolution at which Eva's simulator detects completion. (Eva's simulator
 * also adds up the per-second progress in floating point, which can land a job one tick later: the digest's
 * worked example finishes at 1520 + 12,430 + 1 there, at 1520 + 12,430 here.)
 *
 * Known differences from the reference, all second-order: the throughputs a round observes include changes
 * made earlier in the same second (the reference reports the previous second's); a plan may leave a placed
 * job out, which checkpoints it back to the queue (the reference has no such path); once every job has
 * finished, the next round releases every instance without asking the scheduler (so a run always ends).
 * Calibration: No-Packing on pai_200 costs $20,736.38, the reference's figure to the cent (digest §6 C).
 *
 * The class runs the clock, the arrivals, the rounds and the completions. The world's state is a WorldState
 * (world-state.ts) shared with the engine's other parts: CommandIssuer (commands.ts) issues a plan's commands,
 * effects.ts carries out their delayed effects, progress.ts keeps rates and completion times, world-io.ts exports
 * and imports the world for predictions (run-forward.ts runs one).
 */
export class Simulation {
  private readonly scheduler: Scheduler;
  private readonly catalog: Catalog;
  private readonly rateOf: TaskRate;
  private readonly fork: ForkSetup | undefined;
  private targetsLeft = 0;
  /** Submission-time predictions (PCS §4) per job id; null where the prediction run could not tell. */
  private readonly predictions = new Map<string, PredictedTimes>();
  private readonly roundSeconds: number;
  private readonly earlyRounds: boolean;
  private readonly maxSeconds: number;
  private readonly maxSeriesPoints: number;
  private readonly onProgress: RunOptions['onProgress'];
  /** The queue layer (without caps it admits every job). */
  readonly admission: Admission;
  private readonly predictor: Predictor | undefined;
  private readonly state: WorldState;
  private readonly commands: CommandIssuer;
  /** Report network metrics (a network was configured or some job declares one). */
  private readonly reportsNetwork: boolean;
  /** Traffic across zones is metered for the cumulative cost series (runs that report the network). */
  private readonly metersTraffic: boolean;
  /** Latency-sensitive jobs' round trips vary (noise or episodes): ticks re-evaluate them every noise interval. */
  private readonly ticks: boolean;
  private tickPending = false;

  /** Report start skew, barrier-idle cost and wait to be placed (the run was given start options). */
  private readonly reportsStarts: boolean;
  /** Placement between rounds, when on. */
  private readonly placer: BetweenRoundsPlacer | undefined;
  /** Rounds whose plan broke a cap and was not carried out, and the last such breach. */
  private capRefusedRounds = 0;
  private lastCapViolation: string | undefined;
  private placedBetweenRounds = 0;
  /** The last round's admission: what a run stopped at its time limit left waiting in the queue. */
  private lastQueue: QueueDecision | undefined;

  private rounds = 0;
  /** The trace's jobs by id, built when first needed (a dependency's status, a prediction's targets). */
  private jobsByIdMemo: Map<string, SimJob> | undefined;
  /** The held jobs by what they wait for, built when a job is first held. */
  private heldMemo: HeldJobs | undefined;
  /** Job moves carried out by plans chosen for the network's sake. */
  private latencyMoves = 0;
  /** Jobs stopped by WFQ preemption. */
  private preemptions = 0;
  private fullRounds = 0;

  constructor(options: RunOptions, fork?: ForkSetup) {
    this.fork = fork;
    this.scheduler = options.scheduler;
    this.catalog = options.catalog;
    if (fork === undefined) {
      const truth = memoized(options.groundTruth);
      this.rateOf = (task, others) =>
        truth(
          task.job.spec.workload,
          others.map((o) => o.job.spec.workload),
        );
    } else this.rateOf = fork.rateOf;
    this.roundSeconds = options.roundSeconds ?? DEFAULT_ROUND_SECONDS;
    this.earlyRounds = options.earlyRounds ?? false;
    if (!(this.roundSeconds > 0 && Number.isFinite(this.roundSeconds)))
      throw new Error(`roundSeconds must be a positive number, got ${this.roundSeconds}`);
    this.maxSeriesPoints = options.maxSeriesPoints ?? DEFAULT_MAX_SERIES_POINTS;
    this.onProgress = options.onProgress;
    this.admission =
      (fork === undefined ? options.admission : fork.admission) ??
      new Admission(options.catalog, { caps: {} });
    this.predictor = fork === undefined ? options.predictor : undefined;
    // Predictions ignore the network (the scheduler's expected rates model co-location only).
    const network =
      fork === undefined
        ? new NetworkWorld(
            options.network?.config ?? defaultNetworkConfig(options.catalog.region),
            options.network?.seed ?? 0,
            crossZonePricePerGiB(options.catalog),
          )
        : undefined;
    this.state = new WorldState(
      fork === undefined
        ? buildSimJobs(options.trace, options.catalog)
        : // A world is taken mid-run: a dependency not in it has ended.
          buildSimJobs({ name: 'prediction', jobs: fork.world.jobs.map((j) => j.spec) }, options.catalog, {
            dependenciesMayHaveEnded: true,
          }),
      options.onEvent,
      network,
    );
    if (options.checkpointIntervalSeconds !== undefined)
      for (const job of this.state.jobs) job.checkpointIntervalSeconds = options.checkpointIntervalSeconds;
    // Interruptions are the world's ground truth; a prediction's world has none.
    if (fork === undefined && options.spot !== undefined) this.state.spot = this.spotWorld(options);
    // Where the money went is the run's; a prediction's world only looks ahead for completion times.
    if (fork === undefined) this.state.ledger = new CostLedger();
    this.reportsNetwork =
      options.network !== undefined || this.state.jobs.some((j) => j.spec.network !== undefined);
    this.metersTraffic = this.reportsNetwork && fork === undefined;
    this.ticks =
      network !== undefined &&
      network.varies &&
      this.state.jobs.some(
        (j) =>
          j.tasks.length > 1 &&
          j.spec.network !== undefined &&
          isLatencySensitive(j.spec.network.sensitivity),
      );
    const starts = fork === undefined ? options.starts : undefined;
    this.reportsStarts = starts !== undefined;
    this.commands = new CommandIssuer(
      this.state,
      options.catalog,
      this.admission,
      starts?.coStart === true,
      options.makeBeforeBreak === true,
    );
    this.placer =
      starts?.placeBetweenRounds === true
        ? new BetweenRoundsPlacer(
            this.state,
            this.commands,
            this.admission,
            this.jobInfo,
            options.catalog,
            starts.bind === true,
            this.scheduler.expectedRate?.bind(this.scheduler),
          )
        : undefined;
    const lastArrival = this.state.jobs.reduce((m, j) => Math.max(m, j.spec.arrivalSeconds), 0);
    const longest = this.state.jobs.reduce((m, j) => Math.max(m, j.spec.durationSeconds), 0);
    this.maxSeconds = options.maxSimulatedSeconds ?? lastArrival + 30 * 86_400 + 10 * longest;
    if (fork !== undefined) {
      importWorld(this.state, fork.world, options.catalog);
      // Held in the world's order, as arrivals would hold them; one whose dependencies have all ended is queued.
      for (const job of [...this.state.heldJobs.values()])
        if (!this.held().hold(job)) this.state.enqueue(job);
      this.targetsLeft = [...fork.targets].filter(
        (id) => this.state.liveJobs.has(id) || this.state.heldJobs.has(id),
      ).length;
      refreshRates(this.state, this.rateOf); // rates from the prediction's model; completions scheduled from them
    }
  }

  private spotWorld(options: RunOptions): SpotWorld {
    const state = this.state;
    return new SpotWorld(options.catalog, options.spot as NonNullable<RunOptions['spot']>, {
      get now() {
        return state.now;
      },
      schedule: (event) => state.queue.push({ ...event, rank: RANK_EFFECT }),
      callOffMove: (job, inst) => this.commands.callOffMove(job, inst),
      stopMovesOff: (inst) => this.commands.stopMovesOff(inst),
      drain: (inst) => this.commands.requestTermination(inst),
      callOffStart: (job, inst) => this.commands.callOffStart(job, inst),
      reclaimInstance: (inst, billedNothing) => {
        if (inst.billedFromSeconds !== undefined) {
          const seconds = state.now - inst.billedFromSeconds;
          state.meter.stopBilling(inst.type, inst.pricePerHour, seconds, true, billedNothing);
          if (billedNothing) state.ledger?.forgive(inst);
        }
        inst.billedFromSeconds = undefined;
        inst.lifecycle = 'terminated';
        inst.assignable = false;
        state.launched.delete(inst);
        state.assignable.delete(inst.id);
        state.pendingTerminations = state.pendingTerminations.filter((i) => i !== inst);
        state.deferredLaunches = state.deferredLaunches.filter((i) => i !== inst);
        state.log('terminated', { instanceId: inst.id });
      },
      release: (task) => {
        if (task.occupying !== undefined) state.dirtyInstances.add(task.occupying);
        state.release(task);
      },
      touch: (job, inst) => {
        state.dirtyJobs.add(job);
        if (inst !== undefined) state.dirtyInstances.add(inst);
      },
      // The runtime reacts to a reclaim at once: Karpenter provisions, SkyPilot relaunches, fleetwise re-plans.
      requestRound: () => {
        if (state.earlyRoundAt !== undefined) return;
        state.earlyRoundAt = state.now;
        state.queue.push({ kind: 'round', timeSeconds: state.now, rank: RANK_ROUND, early: true });
      },
      liveInstances: () => [...state.instances.values()].filter((i) => i.lifecycle !== 'terminated'),
    });
  }

  /**
   * Team, declared success model and when its current run began, of a live job, for admission (class by team,
   * success-rank, the admission time of a job placed between rounds).
   */
  private readonly jobInfo = (jobId: string): AdmissionJobInfo => {
    const job = this.state.liveJobs.get(jobId);
    if (job === undefined) return {};
    const progress = successProgress(job);
    return {
      team: job.spec.team,
      runBeganSeconds: () => this.commands.runBeganSeconds(job),
      success:
        progress === undefined
          ? undefined
          : { distribution: progress.distribution, stagesDone: progress.stagesDone },
    };
  };

  run(): void {
    if (this.state.jobs.length === 0) return;
    this.state.spot?.start();
    if (this.fork === undefined) {
      // Arrivals are fed one at a time (the trace is sorted by arrival) to keep the queue small.
      this.pushNextArrival();
      this.scheduleRoundAtOrAfter((this.state.jobs[0] as SimJob).spec.arrivalSeconds, true);
    }
    this.state.meter.sample(this.state.now, true);
    this.observeCrossZone();
    for (;;) {
      if (this.fork !== undefined && this.targetsLeft === 0) return;
      if (this.fork?.shouldStop?.(this.state.now) === true) return;
      const t = this.state.queue.peekTime();
      if (t === undefined) break;
      if (t > this.maxSeconds) {
        if (this.fork !== undefined) return; // the prediction cannot tell: unfinished targets stay null
        const unfinished = this.state.jobs.filter((j) => j.status !== 'finished').map((j) => j.spec.id);
        throw new Error(
          `simulation with ${this.scheduler.name} did not finish by ${this.maxSeconds} s: ` +
            `${unfinished.length} jobs unfinished (e.g. ${unfinished.slice(0, 5).join(', ')}); ${this.stallCause(unfinished)}`,
        );
      }
      this.state.advanceTo(t);
      do {
        while (this.state.queue.peekTime() === t) this.handle(this.state.queue.pop() as SimEvent);
        this.commands.issueGated();
        refreshRates(this.state, this.rateOf);
      } while (this.state.queue.peekTime() === t);
      this.state.meter.sample(this.state.now, false);
      this.observeCrossZone();
      if (this.state.allJobsFinished && this.state.meter.billedInstances === 0 && this.state.allTerminated())
        break;
    }
    this.state.meter.sample(this.state.now, true);
    this.observeCrossZone();
    if (this.fork !== undefined) return;
    if (this.state.finishedJobs < this.state.jobs.length)
      throw new Error(
        `simulation stopped with ${this.state.jobs.length - this.state.finishedJobs} jobs unfinished (engine bug)`,
      );
  }

  /**
   * The traffic across zones' rate from now until the next step: that of the jobs progressing (integrateProgress
   * bills a job's traffic while it has throughput).
   */
  private observeCrossZone(): void {
    if (!this.metersTraffic) return;
    let perHour = 0;
    for (const job of this.state.liveJobs.values())
      if (job.throughput > 0) perHour += job.crossZoneCostPerHour;
    this.state.meter.setTrafficPerHour(perHour);
  }

  /** Why a run stopped at its time limit with `unfinished` jobs, as far as the engine can tell. */
  private stallCause(unfinished: readonly string[]): string {
    const { caps, admitBy, config, spot } = this.admission;
    const never = neverAdmittedJobs(
      this.state.jobs.filter((j) => j.status !== 'finished').map((j) => j.spec),
      this.catalog,
      caps,
      config,
      spot,
    );
    if (never.length > 0)
      return `among them jobs the caps can never admit (never-fits): ${neverAdmittedProblems(never, unfinished.length, caps, admitBy).join('; ')}`;
    // Plans the cap check refused leave the fleet as it was: a scheduler that plans without the caps (the baselines)
    // can stall under them for good.
    if (this.capRefusedRounds > 0)
      return (
        `${this.capRefusedRounds} of its ${this.rounds} plans broke a cap and were not carried out (the last: ` +
        `${this.lastCapViolation ?? '?'}); only Eva plans within the caps: run ${this.scheduler.name} without them`
      );
    // Jobs the last round's admission kept out never reached the scheduler: the queue holds them back.
    const waiting =
      this.lastQueue === undefined ? undefined : queueWaits(this.lastQueue, new Set(unfinished), config);
    if (waiting !== undefined)
      return (
        `${waiting.count} of them still waited for admission at the last round (${waiting.why}): the queue layer ` +
        'held them back, not the scheduler; check the caps and the classes (weights, maxShare) against these jobs'
      );
    return 'does the scheduler place them?';
  }

  // ---------------------------------------------------------------- events

  private handle(e: SimEvent): void {
    switch (e.kind) {
      case 'arrival':
        return this.onArrival(e.job);
      case 'round':
        if (e.early === true) {
          this.state.earlyRoundAt = undefined;
          return this.onRound(true);
        }
        return this.onRound();
      case 'completion':
        return this.onCompletion(e.job, e.token);
      case 'network-tick':
        return this.onNetworkTick();
      case 'co-start-wake':
        return; // the gated commands are issued after every event
      case 'spot-notice':
      case 'spot-rebalance':
      case 'spot-reclaim':
      case 'spot-burst':
      case 'spot-burst-warning':
        return this.state.spot?.handle(e);
      default:
        return handleEffect(this.state, e);
    }
  }

  /** Round trips change at the start of every noise interval: re-evaluate the jobs they slow down. */
  private onNetworkTick(): void {
    this.tickPending = false;
    refreshNetwork(this.state);
    this.scheduleTick();
  }

  /** The next tick, at the next noise interval's start, while jobs are live (arrivals start it again). */
  private scheduleTick(): void {
    const network = this.state.network;
    if (!this.ticks || this.tickPending || network === undefined || this.state.liveJobs.size === 0) return;
    this.tickPending = true;
    const at = network.slotStart(this.state.now) + network.config.noiseIntervalSeconds;
    this.state.queue.push({ kind: 'network-tick', timeSeconds: at, rank: RANK_EFFECT });
  }

  private pushNextArrival(): void {
    const job = this.state.jobs[this.state.nextArrival];
    if (job === undefined) return;
    this.state.nextArrival += 1;
    this.state.queue.push({ kind: 'arrival', timeSeconds: job.spec.arrivalSeconds, rank: RANK_ARRIVAL, job });
  }

  private onArrival(job: SimJob): void {
    this.state.log('arrival', { jobId: job.spec.id });
    this.pushNextArrival();
    if (this.held().hold(job)) {
      job.status = 'held';
      job.integratedToSeconds = this.state.now;
      this.state.heldJobs.set(job.spec.id, job);
      return;
    }
    this.enqueue(job);
  }

  /** The job joins the queue: placed between rounds, planned at the next round. */
  private enqueue(job: SimJob): void {
    this.state.enqueue(job);
    this.placeBetweenRounds();
    this.requestEarlyRound();
    this.scheduleTick();
  }

  /** The held jobs for which `finished` was the last dependency left join the queue (job-dependencies.ts). */
  private releaseHeldJobs(finished: SimJob): void {
    if (this.heldMemo === undefined) return;
    for (const job of this.heldMemo.finished(finished.spec.id)) {
      this.state.log('released', { jobId: job.spec.id });
      this.enqueue(job);
    }
  }

  private held(): HeldJobs {
    this.heldMemo ??= new HeldJobs(this.jobsById());
    return this.heldMemo;
  }

  private jobsById(): ReadonlyMap<string, SimJob> {
    this.jobsByIdMemo ??= new Map(this.state.jobs.map((j) => [j.spec.id, j]));
    return this.jobsByIdMemo;
  }

  /** Waiting jobs onto paid capacity now, instead of at the next round (round/between-rounds.ts). */
  private placeBetweenRounds(): void {
    if (this.placer !== undefined) this.placedBetweenRounds += this.placer.place();
  }

  /** An early round one second after the event (so effects of the same second are seen), if enabled. */
  private requestEarlyRound(): void {
    if (!this.earlyRounds || this.state.earlyRoundAt !== undefined) return;
    this.state.earlyRoundAt = this.state.now + 1;
    this.state.queue.push({ kind: 'round', timeSeconds: this.state.now + 1, rank: RANK_ROUND, early: true });
  }

  /** The first round on the period's grid at or after `t` (strictly after now, except for the very first). */
  private scheduleRoundAtOrAfter(t: number, first = false): void {
    let at = Math.ceil(t / this.roundSeconds - 1e-12) * this.roundSeconds;
    if (!first && at <= this.state.now) at = this.state.now + this.roundSeconds;
    this.state.queue.push({ kind: 'round', timeSeconds: at, rank: RANK_ROUND });
  }

  private onRound(early = false): void {
    refreshRates(this.state, this.rateOf); // observe the rates as they are now
    this.state.log('round');
    if (this.state.allJobsFinished) {
      // Every job is done: the fleet is drained (any scheduler's plan drops idle instances; this guarantees the
      // run ends even if one would not).
      for (const inst of [...this.state.assignable.values()]) this.commands.requestTermination(inst);
    } else if (this.state.liveJobs.size > 0 || this.state.assignable.size > 0) {
      for (const job of this.state.liveJobs.values()) integrateProgress(job, this.state.now);
      const fresh = this.predictor === undefined ? [] : this.unpredictedJobs();
      const round = runRound({
        snapshot: buildSnapshot(
          this.state.now,
          this.state.liveJobs.values(),
          this.state.assignable.values(),
          this.state.network,
        ),
        jobInfo: this.jobInfo,
        admission: this.admission,
        scheduler: this.scheduler,
        observations: observeThroughputs(this.state.liveJobs.values()),
        catalog: this.catalog,
        forkForPrediction: fresh.length > 0,
        carriedOut: true,
      });
      this.placer?.noteRound(round.capHoldsJobsBack);
      this.lastQueue = round.queue;
      // Predicted before the round's actions are applied: the prediction replays this round from the fork.
      if (round.fork !== undefined) this.predict(fresh, round.fork, early);
      const planned = round.planned;
      if (planned !== undefined) {
        this.rounds += 1;
        if (isFullReconfiguration(planned.plan.decision.chosen)) this.fullRounds += 1;
        // A plan over a cap is not carried out (the safety rail; a scheduler that keeps the caps never trips it).
        if (planned.capViolation === undefined) {
          this.preemptions += planned.victims.length;
          // Moves of plans chosen for the network (the `latency` candidate: jobs measured slow, moved again).
          if (planned.plan.decision.chosen === 'latency')
            this.latencyMoves += planned.diff.movedJobIds.length;
          this.commands.apply(planned.diff.actions);
        } else {
          this.capRefusedRounds += 1;
          this.lastCapViolation = planned.capViolation;
        }
      }
    }
    this.onProgress?.({
      nowSeconds: this.state.now,
      finishedJobs: this.state.finishedJobs,
      totalJobs: this.state.jobs.length,
      rounds: this.rounds,
      costSoFar: this.state.meter.costSoFar,
    });
    if (this.state.allJobsFinished && this.state.assignable.size === 0) return; // no more rounds needed
    if (early) return; // the periodic chain continues on its own
    const idle =
      this.state.liveJobs.size === 0 &&
      this.state.assignable.size === 0 &&
      this.state.pendingTerminations.length === 0;
    const next = this.state.jobs[this.state.nextArrival - 1];
    if (idle && next !== undefined && next.status === 'pending')
      this.scheduleRoundAtOrAfter(next.spec.arrivalSeconds);
    else
      this.state.queue.push({
        kind: 'round',
        timeSeconds: this.state.now + this.roundSeconds,
        rank: RANK_ROUND,
      });
  }

  private onCompletion(job: SimJob, token: number): void {
    if (token !== job.version || job.status === 'finished') return;
    integrateProgress(job, this.state.now);
    job.status = 'finished';
    job.active = false;
    job.activeSinceSeconds = undefined;
    job.throughput = 0;
    job.endSeconds = this.state.now;
    job.version += 1;
    this.state.log('completion', { jobId: job.spec.id });
    this.requestEarlyRound();
    for (const task of job.tasks) {
      if (task.occupying !== undefined) {
        this.state.dirtyInstances.add(task.occupying);
        this.state.release(task);
      }
      task.committed?.committed.delete(task);
      task.committed = undefined;
      task.pendingStart = false;
      task.state = 'done';
    }
    this.state.liveJobs.delete(job.spec.id);
    this.state.finishedJobs += 1;
    this.placeBetweenRounds();
    this.releaseHeldJobs(job);
    if (this.fork?.targets.has(job.spec.id) === true) this.targetsLeft -= 1;
  }

  // ---------------------------------------------------------------- predictions (PCS §4)

  /**
   * Arrived jobs without a prediction yet (PCS §4: a job is predicted when a round first sees it; a job held for
   * its dependencies too, as the controller predicts it at submission).
   */
  private unpredictedJobs(): string[] {
    return [...this.state.liveJobs.values(), ...this.state.heldJobs.values()]
      .filter((j) => !this.predictions.has(j.spec.id))
      .map((j) => j.spec.id);
  }

  /**
   * Predict the completion of `fresh` jobs: run a copy of the world forward from this round with the round's fork
   * of the admission and the scheduler, the scheduler's expected (learned) rates instead of the ground truth, and no
   * future arrivals. The copy replays this round, so the world is exported before its actions are applied.
   */
  private predict(fresh: readonly string[], fork: PredictionFork, early: boolean): void {
    const times = (this.predictor as Predictor)({
      world: exportWorld(this.state, early),
      fork,
      jobIds: fresh,
      roundSeconds: this.roundSeconds,
      earlyRounds: this.earlyRounds,
    });
    for (const id of fresh)
      this.predictions.set(id, times.get(id) ?? { startSeconds: null, endSeconds: null });
  }

  get preemptionCount(): number {
    return this.preemptions;
  }

  /** When a job first made progress and when it finished in this run (null: not in this run). */
  timesOf(jobId: string): { startSeconds: number | null; endSeconds: number | null } {
    const job = this.jobsById().get(jobId);
    return { startSeconds: job?.startSeconds ?? null, endSeconds: job?.endSeconds ?? null };
  }

  // ---------------------------------------------------------------- result

  result(wallSeconds: number): RunResult {
    const jobs: JobOutcome[] = this.state.jobs.map((j) => jobOutcome(j, this.predictions.get(j.spec.id)));
    const network = this.reportsNetwork
      ? networkMetrics(this.state.jobs, jobs, this.latencyMoves)
      : undefined;
    const summary = summarize(
      {
        scheduler: this.scheduler.name,
        // Traffic across zones is money too (zero without jobs that declare traffic).
        totalCost: this.state.meter.totalCost + (network?.crossZoneCost ?? 0),
        peakCostPerHour: this.state.meter.peakCostPerHour,
        instancesLaunched: this.state.instanceCounter,
        plannedRounds: this.rounds,
        fullRounds: this.fullRounds,
        wallSeconds,
      },
      jobs,
    );
    const waits = waitsToPlace(this.state.jobs);
    const spot = this.state.spot;
    return {
      summary,
      // The cumulative cost ends at totalCost: the traffic across zones is part of it too (FleetMeter).
      series: this.state.meter.series(this.maxSeriesPoints),
      utilization: this.state.meter.utilization(),
      costBreakdown: this.state.ledger?.breakdown(),
      jobs,
      ...(network === undefined ? {} : { network }),
      ...(this.reportsStarts
        ? {
            starts: {
              startSkewSecondsMean: mean(this.state.starts.skews),
              barrierIdleCost: this.state.starts.barrierIdleCost,
              waitToPlaceSecondsMean: mean(waits),
              placedBetweenRounds: this.placedBetweenRounds,
            },
          }
        : {}),
      ...(spot === undefined
        ? {}
        : {
            spot: {
              interruptions: spot.interruptions,
              lostWorkHours: this.state.jobs.reduce((s, j) => s + j.lostWorkSeconds, 0) / 3600,
              spotShare: this.state.meter.spotShare,
              rebalanceRecommendations: spot.rebalanceRecommendations,
            },
          }),
    };
  }
}

/** Admission's reasons for a wait, as a stalled run names them. */
const WAIT_TEXT = {
  'class-share': "waiting for their class's share",
  caps: 'waiting for room under the caps',
  'never-fits': "over the caps or their class's ceiling alone, as sized then (never-fits)",
} as const;

/**
 * How many of `jobs` the decision kept waiting (unhostable ones too), and why, per class and reason: "class large
 * (maxShare 0.1): 14 waiting for their class's share". Undefined when it kept none of them out.
 */
function queueWaits(
  decision: QueueDecision,
  jobs: ReadonlySet<string>,
  config: WfqConfig,
): { readonly count: number; readonly why: string } | undefined {
  const counts = new Map<string, { readonly where: string; readonly what: string; n: number }>();
  const add = (classId: string, what: string): void => {
    const maxShare = config.classes.find((c) => c.id === classId)?.maxShare;
    const where = `class ${classId}${maxShare === undefined ? '' : ` (maxShare ${maxShare})`}`;
    const key = `${where} ${what}`;
    const entry = counts.get(key);
    if (entry === undefined) counts.set(key, { where, what, n: 1 });
    else entry.n += 1;
  };
  for (const q of decision.result.queued) if (jobs.has(q.jobId)) add(q.classId, WAIT_TEXT[q.reason]);
  for (const u of decision.unhostable) if (jobs.has(u.jobId)) add(u.classId, 'hosted by no instance type');
  if (counts.size === 0) return undefined;
  const all = [...counts.values()];
  return {
    count: all.reduce((a, e) => a + e.n, 0),
    why: all.map((e) => `${e.where}: ${e.n} ${e.what}`).join('; '),
  };
}
