import type { Catalog } from '../core/catalog.js';
import { Admission, type AdmissionInfo } from '../queue/admission.js';
import { runRound } from '../round/round.js';
import type { Scheduler } from '../scheduler/types.js';
import { admissionView } from './admission-view.js';
import { CommandIssuer } from './commands.js';
import { handleEffect } from './effects.js';
import { integrateProgress, type SimJob } from './entities.js';
import { memoized } from './ground-truth.js';
import { BetweenRoundsPlacer } from './between-rounds.js';
import { NetworkSteps } from './network-steps.js';
import { refreshRates, type TaskRate } from './progress.js';
import { RoundTally } from './round-tally.js';
import type { RunResult } from './run-result.js';
import { buildSnapshot, observeThroughputs } from './scheduler-view.js';
import type { ForkSetup, RunOptions } from './simulation-types.js';
import type { TraceJob } from './trace.js';
import { spotEngine } from './spot-engine.js';
import { stallCause } from './stall-cause.js';
import { SubmissionPredictions } from './submission-predictions.js';
import { HeldJobs } from './job-dependencies.js';
import { initialState } from './initial-state.js';
import { SpotWorld } from './spot-world.js';
import { importWorld } from './world-io.js';
import { worldResult } from './world-result.js';
import { RANK_ARRIVAL, RANK_ROUND, type SimEvent, type WorldState } from './world-state.js';

export const DEFAULT_ROUND_SECONDS = 300;
const DEFAULT_MAX_SERIES_POINTS = 2000;

/**
 * When a run of `jobs` from `fromSeconds` gives up unless told otherwise: 30 days and ten times its longest job
 * later. A job runs for its iterations, which its duration may understate (Eva's generators round the iterations
 * down, so a job of one long iteration runs longer than its duration says): a job counts at the longer of the two.
 */
export function defaultMaxSimulatedSeconds(
  fromSeconds: number,
  jobs: readonly { readonly spec: TraceJob }[],
): number {
  const longest = jobs.reduce(
    (m, j) => Math.max(m, j.spec.durationSeconds, j.spec.totalIterations / j.spec.fullThroughput),
    0,
  );
  return fromSeconds + 30 * 86_400 + 10 * longest;
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
 * (world-state.ts) shared with the engine's other parts: initial-state.ts builds the world a run starts from,
 * CommandIssuer (commands.ts) issues a plan's commands, effects.ts carries out their delayed effects, progress.ts keeps
 * rates and completion times, network-steps.ts ticks the network, spot-engine.ts lets the spot world act on the
 * engine, world-io.ts exports and imports the world for predictions (run-forward.ts runs one;
 * submission-predictions.ts asks for them), round-tally.ts counts the rounds, world-result.ts reads the result off
 * the world and stall-cause.ts explains a run that did not finish.
 */
export class Simulation {
  private readonly scheduler: Scheduler;
  private readonly catalog: Catalog;
  private readonly rateOf: TaskRate;
  private readonly fork: ForkSetup | undefined;
  private targetsLeft = 0;
  /** Submission-time predictions (PCS §4), when the run makes them. */
  private readonly predictions: SubmissionPredictions | undefined;
  private readonly roundSeconds: number;
  private readonly earlyRounds: boolean;
  private readonly maxSeconds: number;
  private readonly maxSeriesPoints: number;
  private readonly onProgress: RunOptions['onProgress'];
  /** The queue layer (without caps it admits every job). */
  readonly admission: Admission;
  private readonly state: WorldState;
  private readonly commands: CommandIssuer;
  /** What admission sees of a live job beyond the snapshot (admission-view.ts). */
  private readonly jobInfo: AdmissionInfo;
  /** Report network metrics (a network was configured or some job declares one). */
  private readonly reportsNetwork: boolean;
  /** The simulated network's ticks and the traffic across zones metered from step to step. */
  private readonly network: NetworkSteps;

  /** Report start skew, barrier-idle cost and wait to be placed (the run was given start options). */
  private readonly reportsStarts: boolean;
  /** Placement between rounds, when on. */
  private readonly placer: BetweenRoundsPlacer | undefined;
  private placedBetweenRounds = 0;
  /** What the rounds added up to. */
  private readonly tally = new RoundTally();
  /** The trace's jobs by id, built when first needed (a dependency's status, a prediction's targets). */
  private jobsByIdMemo: Map<string, SimJob> | undefined;
  /** The held jobs by what they wait for, built when a job is first held. */
  private heldMemo: HeldJobs | undefined;

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
    this.predictions =
      fork === undefined && options.predictor !== undefined
        ? new SubmissionPredictions(options.predictor, this.roundSeconds, this.earlyRounds)
        : undefined;
    this.state = initialState(options, fork);
    const starts = fork === undefined ? options.starts : undefined;
    this.reportsStarts = starts !== undefined;
    this.commands = new CommandIssuer(
      this.state,
      options.catalog,
      this.admission,
      starts?.coStart === true,
      options.makeBeforeBreak === true,
    );
    this.jobInfo = admissionView(this.state, this.commands);
    // Interruptions are the world's ground truth; a prediction's world has none.
    if (fork === undefined && options.spot !== undefined)
      this.state.spot = new SpotWorld(options.catalog, options.spot, spotEngine(this.state, this.commands));
    this.reportsNetwork =
      options.network !== undefined || this.state.jobs.some((j) => j.spec.network !== undefined);
    this.network = new NetworkSteps(this.state, this.reportsNetwork && fork === undefined);
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
    this.maxSeconds = options.maxSimulatedSeconds ?? defaultMaxSimulatedSeconds(lastArrival, this.state.jobs);
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

  run(): void {
    if (this.state.jobs.length === 0) return;
    this.state.spot?.start();
    if (this.fork === undefined) {
      // Arrivals are fed one at a time (the trace is sorted by arrival) to keep the queue small.
      this.pushNextArrival();
      this.scheduleRoundAtOrAfter((this.state.jobs[0] as SimJob).spec.arrivalSeconds, true);
    }
    this.state.meter.sample(this.state.now, true);
    this.network.observeCrossZone();
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
      this.network.observeCrossZone();
      if (this.state.allJobsFinished && this.state.meter.billedInstances === 0 && this.state.allTerminated())
        break;
    }
    this.state.meter.sample(this.state.now, true);
    this.network.observeCrossZone();
    if (this.fork !== undefined) return;
    if (this.state.finishedJobs < this.state.jobs.length)
      throw new Error(
        `simulation stopped with ${this.state.jobs.length - this.state.finishedJobs} jobs unfinished (engine bug)`,
      );
  }

  /** Why a run stopped at its time limit with `unfinished` jobs (stall-cause.ts). */
  private stallCause(unfinished: readonly string[]): string {
    return stallCause(
      {
        schedulerName: this.scheduler.name,
        catalog: this.catalog,
        admission: this.admission,
        jobs: this.state.jobs,
        tally: this.tally,
      },
      unfinished,
    );
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
        return this.network.onTick();
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
    this.network.scheduleTick();
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
      const fresh = this.predictions?.unpredictedJobs(this.state) ?? [];
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
        // Queued, held and hidden jobs too: out of the snapshot is not finished (the scheduler counts endings).
        liveJobIds: [...this.state.liveJobs.keys(), ...this.state.heldJobs.keys()],
        catalog: this.catalog,
        forkForPrediction: fresh.length > 0,
        carriedOut: true,
      });
      this.placer?.noteRound(round.capHoldsJobsBack);
      this.tally.count(round);
      // Predicted before the round's actions are applied: the prediction replays this round from the fork.
      if (round.fork !== undefined) this.predictions?.predict(this.state, fresh, round.fork, early);
      // A plan over a cap is not carried out (the safety rail; a scheduler that keeps the caps never trips it).
      const planned = round.planned;
      if (planned !== undefined && planned.capViolation === undefined)
        this.commands.apply(planned.diff.actions);
    }
    this.onProgress?.({
      nowSeconds: this.state.now,
      finishedJobs: this.state.finishedJobs,
      totalJobs: this.state.jobs.length,
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

  get preemptionCount(): number {
    return this.tally.preemptions;
  }

  /** When a job first made progress and when it finished in this run (null: not in this run). */
  timesOf(jobId: string): { startSeconds: number | null; endSeconds: number | null } {
    const job = this.jobsById().get(jobId);
    return { startSeconds: job?.startSeconds ?? null, endSeconds: job?.endSeconds ?? null };
  }

  // ---------------------------------------------------------------- result

  result(wallSeconds: number): RunResult {
    return worldResult(
      this.state,
      {
        schedulerName: this.scheduler.name,
        tally: this.tally,
        reportsNetwork: this.reportsNetwork,
        reportsStarts: this.reportsStarts,
        placedBetweenRounds: this.placedBetweenRounds,
        maxSeriesPoints: this.maxSeriesPoints,
        predictionOf: (jobId) => this.predictions?.of(jobId),
      },
      wallSeconds,
    );
  }
}
