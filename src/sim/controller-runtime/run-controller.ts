import { isFullReconfiguration } from '../../scheduler/decision-rule.js';
import type { Catalog } from '../../core/catalog.js';
import { Controller } from '../../controller/controller.js';
import type { ControllerSettings } from '../../controller/settings.js';
import { MemoryStateStore } from '../../controller/memory-state-store.js';
import type { ControllerLogger } from '../../controller/seams.js';
import type { Scheduler } from '../../scheduler/types.js';
import { integrateProgress, type SimJob } from '../../world/entities.js';
import type { SimLogEntry, SimulationProgress } from '../../world/simulation-types.js';
import { predictionErrors, successfulSojournMeanHours } from '../run-simulation.js';
import { p99JctHours } from '../queue-options.js';
import { CostLedger } from '../../world/cost-ledger.js';
import { FleetMeter } from '../../world/fleet-meter.js';
import type { GroundTruth } from '../../world/ground-truth.js';
import { jobOutcome, mean, summarize } from '../../world/metrics.js';
import { buildSimJobs } from '../../world/trace-jobs.js';
import { defaultMaxSimulatedSeconds } from '../../world/simulation.js';
import { jobStallCause } from '../../world/stall-cause.js';
import { waitsToPlace } from '../../world/job-dependencies.js';
import type { SpotSimulation } from '../../world/spot-world.js';
import { DEFAULT_TRACE_TEAM, type Trace } from '../../world/trace.js';
import type { JobOutcome, RunResult } from '../../world/run-result.js';
import { SimulatedCloud, type SimulatedInstance } from './simulated-cloud.js';
import { SimulatedSpotMarket } from './simulated-spot-market.js';
import { SimulatedWorkers } from './simulated-workers.js';
import { Timeline } from './timeline.js';
import { traceJobSpec } from './trace-specs.js';
import { VirtualClock } from './virtual-clock.js';

/**
 * `simulate --runtime controller`: the real Controller (its loop, rounds, admission, reconciler and the memory state
 * store) driven through a trace on a virtual clock, against the simulated cloud and worker fleet. The driver only
 * moves time: to the next of (a world event, an arrival, the controller's next wake-up), lets the world act, submits
 * the arrivals through ControllerService.submit, wakes the controller's loop and waits until it sleeps again.
 *
 * Alignment with the engine (src/world/simulation.ts), so both runtimes measure the same thing:
 * - rounds are periodic on multiples of `roundSeconds`, the first at the first arrival rounded up (the controller
 *   starts then); early rounds are off (`earlyRounds: false`), as the engine runs them by default. With early rounds
 *   the controller starts at the first arrival and plans as it does in production: at a submission or completion
 *   (at least its minimum gap after the last round), its period counted from its last round of any kind, where the
 *   engine plans one second after the event and keeps its periodic rounds on the grid (README);
 * - at one time, the world's effects come first, then arrivals, then the controller (its round), then completions,
 *   then the controller again (engine ranks: effect, arrival, round, completion);
 * - a simulated worker's report (a worker registered, a checkpoint uploaded, a job finished) and an instance gone (a
 *   launch a cap held back may go out then) wake the loop at once, as the engine carries out gated commands right
 *   after each event; between them the loop polls every `pollSeconds`;
 * - before each round the workers report progress (completed iterations) and a current checkpoint for every placed
 *   task (the engine's tasks checkpoint when killed, so a move loses no work);
 * - the rounds a run reports are those planned while a job of the trace was unfinished: once the last one ends, the
 *   engine's next round drains the fleet without asking the scheduler, where the controller plans that drain.
 * Cost, peak and series come from the FleetMeter fed by the simulated cloud's billing, JCT from the world's jobs.
 *
 * With `spot`, the simulated cloud sells the catalog's spot pools and its market (simulated-spot-market.ts) takes spot
 * instances back as the engine's spot world does, telling the controller as the interruption queue would.
 */

export interface ControllerRunOptions {
  readonly trace: Trace;
  readonly catalog: Catalog;
  readonly groundTruth: GroundTruth;
  /** The scheduler the controller plans with (src/scheduler/registry.ts createScheduler). */
  readonly scheduler: Scheduler;
  /** The run's name in reports (default: the scheduler's). */
  readonly name?: string | undefined;
  readonly roundSeconds?: number | undefined;
  /** Safety stop, as the engine's: default the last arrival + 30 days + 10 × the longest job. */
  readonly maxSimulatedSeconds?: number | undefined;
  /** Seconds between the loop's reconcile passes when nothing wakes it (default: the round period). */
  readonly pollSeconds?: number | undefined;
  /**
   * Let the controller plan early on submissions and completions, as it does in production (default false: rounds
   * stay periodic, as the engine runs them without `earlyRounds`).
   */
  readonly earlyRounds?: boolean | undefined;
  /** Simulated workers' reports wake the loop at once (default true). */
  readonly wakeOnReports?: boolean | undefined;
  /** Caps, queue classes and Eva tunables of the controller (a user's config via settingsFromConfig). */
  readonly settings?: Partial<ControllerSettings> | undefined;
  readonly maxSeriesPoints?: number | undefined;
  /**
   * Types the simulated cloud has no capacity for: their launches fail with InsufficientCapacityError and the
   * controller falls back to another type (round/replacement.ts), as on EC2.
   */
  readonly refusedTypes?: Iterable<string> | undefined;
  /**
   * The controller's co-start barrier (its `coStart`): the simulated workers hold a multi-task job's prepared tasks
   * until the reconciler releases them (default false: each task runs once prepared).
   */
  readonly coStart?: boolean | undefined;
  /** Report start skew, barrier-idle cost and waits to be placed (the engine's `starts` metrics). */
  readonly reportStarts?: boolean | undefined;
  /**
   * Spot interruptions at the catalog's rates (the engine's RunOptions.spot). The scheduler must plan with the spot
   * market open for any instance to be bought on spot.
   */
  readonly spot?: SpotSimulation | undefined;
  /** Every job checkpoints on its own this often (default: the trace's, else 30 minutes). */
  readonly checkpointIntervalSeconds?: number | undefined;
  /** Called for every lifecycle step of the simulated world, in simulated-time order (engine RunOptions.onEvent). */
  readonly onEvent?: ((entry: SimLogEntry) => void) | undefined;
  readonly onProgress?: ((progress: SimulationProgress) => void) | undefined;
  /** Called with the controller's state store once the run is over (what it recorded: events, rounds, jobs). */
  readonly inspectStore?: ((store: MemoryStateStore) => void) | undefined;
}

const DEFAULT_ROUND_SECONDS = 300;
/** What the controller's round recorder logs for a plan over a cap it did not carry out (round-recorder.ts). */
const CAP_REFUSED_ROUND = /^round \d+: plan breaks a cap: (.*)$/s;
const DEFAULT_MAX_SERIES_POINTS = 2000;
/** Microtask flushes allowed for the loop to park again after a wake (a pass never needs more than a few). */
const MAX_SETTLE_TURNS = 10_000;

export async function runControllerSimulation(o: ControllerRunOptions): Promise<RunResult> {
  const startedMs = performance.now(); // the one wall-clock read: the run's own duration
  const roundSeconds = o.settings?.roundSeconds ?? o.roundSeconds ?? DEFAULT_ROUND_SECONDS;
  const wakeOnReports = o.wakeOnReports ?? true;
  const jobs = buildSimJobs(o.trace, o.catalog);
  if (o.checkpointIntervalSeconds !== undefined)
    for (const job of jobs) job.checkpointIntervalSeconds = o.checkpointIntervalSeconds;
  const clock = new VirtualClock(0);
  const timeline = new Timeline();
  const meter = new FleetMeter();
  // Where the money went, as the engine keeps it: every billed instance charged as the clock moves.
  const ledger = new CostLedger();
  const billed = new Set<SimulatedInstance>();
  let reported = false;
  let spotMarket: SimulatedSpotMarket | undefined;
  const cloud = new SimulatedCloud({
    catalog: o.catalog,
    clock,
    timeline,
    refusedTypes: o.refusedTypes,
    // The cloud's zones are those of the catalog's spot pools, so a spot launch lands in the pool the plan priced.
    ...(o.spot === undefined ? {} : { spot: true, availabilityZones: spotZonesOf(o.catalog) }),
    hooks: {
      launched: (inst) =>
        o.onEvent?.({
          timeSeconds: clock.nowSeconds(),
          kind: 'instance-launch',
          instanceId: inst.instanceId,
          typeName: inst.type.name,
        }),
      terminating: (inst) =>
        o.onEvent?.({
          timeSeconds: clock.nowSeconds(),
          kind: 'terminate-issued',
          instanceId: inst.instanceId,
        }),
      billingStarted: (inst) => {
        billed.add(inst);
        meter.startBilling(inst.type, inst.pricePerHour);
        spotMarket?.onBilled(inst);
      },
      billingStopped: (inst, seconds) => {
        billed.delete(inst);
        const free = inst.billedNothing === true;
        meter.stopBilling(inst.type, inst.pricePerHour, seconds, inst.market === 'spot', free);
        if (free) ledger.forgive(inst);
      },
      registered: () => (reported = true),
      terminated: () => (reported = true),
    },
  });
  if (o.spot !== undefined) {
    spotMarket = new SimulatedSpotMarket({
      options: o.spot,
      catalog: o.catalog,
      clock,
      timeline,
      cloud,
      evacuate: (cloudId) => workers.evacuate(cloudId),
      evict: (cloudId, zone) => workers.evict(cloudId, zone),
      reclaimed: (cloudId, zone) => {
        workers.reclaimed(cloudId, zone);
        reported = true;
      },
      tell: (cloudId, report) => {
        controller.interruptionFromQueue(cloudId, report);
        reported = true;
      },
    });
    spotMarket.start();
  }
  const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds(), storeId: 'sim' });
  let completions = 0;
  /** The newest round recorded while a job was unfinished; a later one drains the fleet, unplanned in the engine. */
  let lastWorkingRound = Number.POSITIVE_INFINITY;
  const workers = new SimulatedWorkers({
    clock,
    timeline,
    cloud,
    groundTruth: o.groundTruth,
    allocate: (d, sign) => meter.allocate(d, sign),
    countMigration: () => meter.countMigration(),
    nextInstanceOf: (taskId) => nextStartOf(store, taskId),
    onReport: () => (reported = true),
    ...(o.coStart === true ? { holdStarts: { store } } : {}),
    log: (kind, task, job) => {
      if (kind === 'completion' && ++completions === jobs.length)
        lastWorkingRound = store.listRounds(1)[0]?.round ?? 0;
      o.onEvent?.({
        timeSeconds: clock.nowSeconds(),
        kind,
        jobId: job.spec.id,
        ...(task === undefined ? {} : { taskId: task.id }),
      });
    },
  });
  const errors: string[] = [];
  /** Rounds whose plan broke a cap and was not carried out, and the last breach (the engine's capRefusedRounds). */
  const capRefused = { rounds: 0, last: undefined as string | undefined };
  const logger: ControllerLogger = {
    info() {},
    warn() {},
    error: (message, data) => {
      // A plan over a cap is the controller's safety rail at work, not a failure: the round is recorded
      // (`round.rejected`) and nothing is carried out, as the engine skips such plans. The baselines plan without the
      // caps, so under one they trip it now and then; a run stalls only if they trip it for good.
      const breach = CAP_REFUSED_ROUND.exec(message);
      if (breach !== null) {
        capRefused.rounds += 1;
        capRefused.last = breach[1];
        return;
      }
      errors.push(`${message} ${JSON.stringify(data ?? {})}`);
    },
  };
  const settings: ControllerSettings = {
    clusterName: 'fleetwise-sim',
    pollSeconds: o.pollSeconds ?? roundSeconds,
    caps: {},
    dryRun: false,
    orphanPolicy: 'adopt',
    vanishGraceSeconds: 120,
    registrationTimeoutSeconds: 900,
    registrationBackoffBaseSeconds: 60,
    registrationBackoffMaxSeconds: 3600,
    reportEverySeconds: Number.POSITIVE_INFINITY, // no object store: no reports
    roundsKept: Number.MAX_SAFE_INTEGER,
    checkpointEventDays: 0, // the run's whole history stays
    ...o.settings,
    roundSeconds,
    earlyRounds: o.earlyRounds ?? false,
  };
  const controller = new Controller({
    store,
    catalog: o.catalog,
    provider: cloud,
    tasks: workers,
    workers,
    clock,
    settings,
    scheduler: o.scheduler,
    // Its scheduler buys spot when the run opens the market: admission sizes jobs as it buys them.
    spotMarket: o.spot !== undefined,
    predict: false,
    // Never started again on this store: its learned state would never be read back.
    saveSchedulerState: false,
    logger,
  });

  const firstArrival = jobs.length === 0 ? 0 : (jobs[0] as SimJob).spec.arrivalSeconds;
  const firstRound = gridCeil(firstArrival, roundSeconds);
  // With early rounds the controller runs from the first arrival, so that arrival gets its early round as the engine
  // gives it one; otherwise from the first round of the grid, as nothing before it would plan.
  const startAt = o.earlyRounds === true ? firstArrival : firstRound;
  const lastArrival = jobs.reduce((m, j) => Math.max(m, j.spec.arrivalSeconds), 0);
  const maxSeconds = o.maxSimulatedSeconds ?? defaultMaxSimulatedSeconds(lastArrival, jobs);
  let nextArrival = 0;
  // Trace id → the id the controller gave the job, for the dependencies of later jobs.
  const controllerIds = new Map<string, string>();
  let started = false;
  let finished = 0;
  const finishedNow = (): number => jobs.filter((j) => j.status === 'finished').length;

  /**
   * Let the controller's loop run until it sleeps again (everything it awaits resolves without timers); then the
   * workers hear what it decided (releases, withdrawn starts, placements).
   */
  const settle = async (): Promise<void> => {
    for (let turn = 0; turn < MAX_SETTLE_TURNS; turn++) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (clock.sleeping > 0) {
        workers.heartbeat();
        if (o.reportStarts === true) workers.notePlaced(store);
        return;
      }
    }
    throw new Error(
      'the controller loop did not go back to sleep (a pass awaits something that never resolves)',
    );
  };

  /** Progress and a current checkpoint per placed task, as workers report them, for the round's snapshot. */
  const reportProgress = (): void => {
    const now = clock.nowSeconds();
    store.transaction(() => {
      for (const job of workers.liveJobs()) {
        const jobId = workers.controllerJobId(job) as string;
        integrateProgress(job, now);
        if (
          job.completedIterations > 0 &&
          store.getJob(jobId)?.completedIterations !== job.completedIterations
        )
          store.recordJobProgress(jobId, Math.min(job.completedIterations, job.spec.totalIterations));
        // Engine: a job that never ran has no checkpoint and loses nothing either; so `now` for every placed job.
        if (!job.tasks.some((t) => workers.isPlaced(t))) continue;
        for (const task of job.tasks) {
          const taskId = workers.controllerTaskId(task) as string;
          store.recordCheckpoint(taskId, `checkpoints/${taskId}`, now);
        }
      }
    });
  };

  const wake = async (): Promise<void> => {
    const t = clock.nowSeconds();
    const due = clock.nextWakeSeconds() !== undefined && (clock.nextWakeSeconds() as number) <= t;
    if (!due && !(wakeOnReports && reported)) return;
    if (due && (o.earlyRounds === true || onGrid(t, firstRound, roundSeconds))) reportProgress();
    reported = false;
    if (wakeOnReports) clock.wakeAll();
    else clock.wakeDue();
    await settle();
    workers.refreshRates();
    if (errors.length > 0) throw new Error(`the controller failed at ${t} s: ${errors.join('; ')}`);
  };

  meter.sample(0, true);
  for (;;) {
    const arrival = jobs[nextArrival]?.spec.arrivalSeconds;
    const candidates = [timeline.nextTime(), arrival, started ? clock.nextWakeSeconds() : startAt].filter(
      (x): x is number => x !== undefined,
    );
    if (candidates.length === 0) break;
    const t = Math.max(clock.nowSeconds(), Math.min(...candidates));
    if (t > maxSeconds) {
      const left = jobs.filter((j) => j.status !== 'finished').map((j) => j.spec.id);
      // Why, as the engine explains it from what this runtime knows too (stall-cause.ts).
      const cause = jobStallCause(
        {
          catalog: o.catalog,
          caps: settings.caps,
          admitBy: settings.admitBy,
          config: settings.queue,
          spot: o.spot !== undefined,
          jobs,
        },
        left,
        {
          rounds: capRefused.rounds,
          of: store.listRounds().length,
          last: capRefused.last,
          schedulerName: o.scheduler.name,
        },
      );
      throw new Error(
        `controller simulation with ${o.scheduler.name} did not finish by ${maxSeconds} s: ${left.length} jobs unfinished (e.g. ${left.slice(0, 5).join(', ')}); ${cause}`,
      );
    }
    for (const inst of billed)
      ledger.accrue(
        inst.type,
        inst.pricePerHour,
        inst.registered && inst.state === 'running',
        workers.occupantsOf(inst.instanceId),
        t - clock.nowSeconds(),
        inst.market === 'spot' ? inst : undefined,
      );
    clock.advanceTo(t);
    meter.advanceTo(t);
    do {
      timeline.runUntil(t, 'effect');
      workers.refreshRates();
      while (nextArrival < jobs.length && (jobs[nextArrival] as SimJob).spec.arrivalSeconds <= t) {
        const job = jobs[nextArrival] as SimJob;
        nextArrival += 1;
        const record = controller.submit(
          traceJobSpec(job.spec, controllerIds, job.checkpointIntervalSeconds),
          job.spec.team ?? DEFAULT_TRACE_TEAM,
        );
        controllerIds.set(job.spec.id, record.id);
        const taskIds = store
          .listTasks({ jobId: record.id })
          .sort((a, b) => a.index - b.index)
          .map((task) => task.id);
        workers.addJob(record.id, job, taskIds);
      }
      // An early round asked for by a submission has woken the loop already (the abort signal ends its sleep).
      if (started && clock.sleeping === 0) {
        reportProgress();
        await settle();
        workers.refreshRates();
      }
      if (!started && t >= startAt) {
        started = true;
        await controller.start();
        await settle();
        workers.refreshRates();
      } else if (started) await wake();
      timeline.runUntil(t, 'completion');
      workers.refreshRates();
      if (started) await wake();
    } while (timeline.nextTime() === t);
    meter.sample(t, false);
    const nowFinished = finishedNow();
    if (nowFinished !== finished) {
      finished = nowFinished;
      o.onProgress?.({
        nowSeconds: t,
        finishedJobs: finished,
        totalJobs: jobs.length,
        costSoFar: meter.costSoFar,
      });
    }
    if (finished === jobs.length && nextArrival === jobs.length && cloud.liveCount === 0) break;
  }
  meter.sample(clock.nowSeconds(), true);
  await controller.stop();
  o.inspectStore?.(store);
  if (finishedNow() < jobs.length)
    throw new Error(`controller simulation stopped with ${jobs.length - finishedNow()} jobs unfinished`);
  const run = result(
    o,
    jobs,
    meter,
    ledger,
    store,
    lastWorkingRound,
    cloud,
    workers,
    (performance.now() - startedMs) / 1000,
  );
  if (spotMarket === undefined) return run;
  return {
    ...run,
    spot: {
      interruptions: spotMarket.interruptions,
      lostWorkHours: jobs.reduce((s, j) => s + j.lostWorkSeconds, 0) / 3600,
      spotShare: meter.spotShare,
      rebalanceRecommendations: spotMarket.rebalanceRecommendations,
    },
  };
}

function result(
  o: ControllerRunOptions,
  jobs: readonly SimJob[],
  meter: FleetMeter,
  ledger: CostLedger,
  store: MemoryStateStore,
  lastWorkingRound: number,
  cloud: SimulatedCloud,
  workers: SimulatedWorkers,
  wallSeconds: number,
): RunResult {
  const outcomes: JobOutcome[] = jobs.map((j) => jobOutcome(j, undefined));
  const rounds = store.listRounds().filter((r) => r.round <= lastWorkingRound);
  const summary = summarize(
    {
      scheduler: o.name ?? o.scheduler.name,
      totalCost: meter.totalCost,
      peakCostPerHour: meter.peakCostPerHour,
      instancesLaunched: cloud.launchCount,
      plannedRounds: rounds.length,
      fullRounds: rounds.filter((r) => isFullReconfiguration(r.decision.chosen)).length,
      wallSeconds,
    },
    outcomes,
  );
  const starts = workers.starts;
  const waits = waitsToPlace(jobs);
  const base: RunResult = {
    summary,
    series: meter.series(o.maxSeriesPoints ?? DEFAULT_MAX_SERIES_POINTS),
    utilization: meter.utilization(),
    costBreakdown: ledger.breakdown(),
    jobs: outcomes,
    ...(o.reportStarts === true
      ? {
          starts: {
            startSkewSecondsMean: mean(starts.skews),
            barrierIdleCost: starts.barrierIdleCost,
            waitToPlaceSecondsMean: mean(waits),
            placedBetweenRounds: store.listEvents({ kind: 'job.placed-between-rounds' }).length,
          },
        }
      : {}),
  };
  const caps = o.settings?.caps;
  const queued = o.settings?.queue !== undefined || (caps !== undefined && Object.keys(caps).length > 0);
  if (!queued) return base;
  return {
    ...base,
    queue: {
      p99JctHours: p99JctHours(outcomes),
      unfairness: null, // the controller's admission keeps no per-round live counts to measure it with
      ...predictionErrors(outcomes),
      successfulSojournMeanHours: successfulSojournMeanHours(outcomes),
      preemptions: store.listEvents({ kind: 'queue.preempted' }).length,
    },
  };
}

/** The first multiple of `period` at or after `t` (engine scheduleRoundAtOrAfter). */
function gridCeil(t: number, period: number): number {
  return Math.ceil(t / period - 1e-12) * period;
}

function onGrid(t: number, first: number, period: number): boolean {
  if (t < first) return false;
  const k = Math.round((t - first) / period);
  return Math.abs(first + k * period - t) < 1e-6;
}

function spotZonesOf(catalog: Catalog): string[] {
  return [...new Set((catalog.spot?.offerings ?? []).map((p) => p.zone))].sort();
}

/** The controller's instance id where the task starts next (its pending start-task intent), if anywhere. */
function nextStartOf(store: MemoryStateStore, taskId: string): string | undefined {
  for (const intent of store.listIntents({ states: ['pending'], kind: 'start-task' }))
    if (intent.kind === 'start-task' && intent.payload.taskId === taskId) return intent.payload.instanceId;
  return undefined;
}
