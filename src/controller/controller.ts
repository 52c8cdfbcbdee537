import type { Catalog } from '../core/catalog.js';
import type { Admission } from '../queue/admission.js';
import type { ObjectStore } from '../storage/object-store.js';
import { instanceBilledPricePerHour } from './instance-market.js';
import type { ArchivedSubmissionKey, JobArchive } from './backup/job-archive.js';
import { WITHDRAWN_AT_SUBMISSION } from './submission-keys.js';
import { SystemClock, type Clock } from './clock.js';
import type { BetweenRoundsPlacer } from './between-rounds-placement.js';
import type { DetailedCostReport } from './cost-accounting.js';
import type { MonthToDateCosts } from './month-to-date.js';
import type { PeriodCosts } from './stored-month-report.js';
import { readSnapshotInputs } from './snapshot.js';
import { runningTaskCheckpoints, workAtRisk, type MarketWorkAtRisk } from './work-at-risk.js';
import type { FinishedCheckpointRetention } from './finished-checkpoint-retention.js';
import { compactCoStart, type BarrierIdleHook } from './co-start-records.js';
import { clusterView, whyJob } from './explain.js';
import { submissionWarnings, type ExecutorKind } from './execution-check.js';
import type { JobControl } from './job-control.js';
import type { LoopHealth, LoopMonitor } from './loop-health.js';
import type { LatencyMatrixView } from './latency-matrix.js';
import type { KeptOrphans } from './kept-orphans.js';
import type { JobSpec } from './job-spec/spec.js';
import type { Predictions } from './predictions.js';
import type { EtaRecord } from './queue-records.js';
import type { QueueViews } from './queue-views.js';
import type { SyncSummary } from './reconcile/cloud-sync.js';
import type { SpotInterruptions, InterruptionReport } from './spot-interruptions.js';
import type { ProgressSummary } from './reconciler.js';
import type { WrittenReport } from './reports.js';
import type { ReportWriter } from './report-writer.js';
import type { RoundOutcome, RoundRecorder } from './round-recorder.js';
import type { WaitingEntry } from '../scheduler/types.js';
import type { RoundSchedule } from './round-schedule.js';
import type { SchedulerState, ControllerScheduler } from './scheduler-state.js';
import { silentLogger, type ControllerLogger } from './seams.js';
import type {
  ClusterView,
  ControllerService,
  KeepOptions,
  RoundCause,
  SubmissionCommitHook,
  WhyRecord,
} from './service.js';
import type { ControllerSettings } from './settings.js';
import type { InstanceRecord, JobRecord, StateStore } from './state-store.js';
import type { SerializedColocationTable } from '../scheduler/colocation-table.js';
import type { ControllerDeps } from './controller-deps.js';
import type { ControllerCosts } from './controller-costs.js';
import type { ControllerLoop } from './controller-loop.js';
import type { ControllerPasses } from './controller-passes.js';
import { buildControllerParts } from './controller-parts.js';
import type { StoredArtifacts } from './stored-artifacts.js';

export type { ControllerDeps } from './controller-deps.js';
import type { WorkerFleet } from './worker-liveness.js';

/**
 * The controller's master loop (ARCHITECTURE.md "The round"): snapshot the store → Eva plans → record the round and
 * its decision → diff with scheduler/actions.ts → intents → effects (reconciler.ts). Rounds run every
 * `roundSeconds` (default 300 s, Eva's period) and early on submissions, cancels, completions and drains; between
 * rounds a lighter pass every `pollSeconds` reconciles with EC2 and carries out effects whose gates opened (a task
 * starts once its instance runs, an instance terminates once empty).
 *
 * Everything the loop does happens in one sequence (no two passes overlap: controller-loop.ts), while the
 * ControllerService methods the API calls only write the store synchronously and wake the loop. Nothing in a pass
 * waits for the object store: cost reports are written beside the loop (report-writer.ts), so a hung store cannot
 * stall planning. Each pass is timed (loop-health.ts), and `/healthz` reports a pass that has run too long. The
 * scheduler's learned state (co-location table, event history) is saved in the store after every round and loaded at
 * start.
 *
 * This file holds the controller's lifecycle (start, stop), what follows a job's end or a request for a round, and the
 * ControllerService the API calls. When the passes run is controller-loop.ts, what each does (recovery, reconciliation,
 * a round) controller-passes.ts; each other job of the controller is its own module, built and wired in
 * controller-parts.ts: recording a round (round-recorder.ts), queue views (queue-views.ts), the scheduler's learned
 * state (scheduler-state.ts), ETAs (predictions.ts), job control (job-control.ts), views (explain.ts), what the cluster
 * cost (controller-costs.ts), cost reports (report-writer.ts), task logs and build contexts (stored-artifacts.ts), and
 * worker liveness (worker-liveness.ts). What it is built from is controller-deps.ts.
 */

export class Controller implements ControllerService {
  readonly store: StateStore;
  /** Replaced only by applyCatalog (price refresh), between rounds. */
  catalog: Catalog;
  readonly clock: Clock;
  readonly settings: ControllerSettings;
  /** The queue layer: admission under the caps before every plan. */
  readonly admission: Admission;
  private readonly log: ControllerLogger;
  private readonly objectStore: ObjectStore | undefined;
  private readonly jobArchive: JobArchive | undefined;
  private readonly onBarrierIdle: BarrierIdleHook | undefined;
  private readonly workers: WorkerFleet | undefined;
  private readonly schedulerState: SchedulerState;
  private readonly queueViews: QueueViews;
  private readonly predictions: Predictions;
  private readonly reports: ReportWriter;
  private readonly finishedCheckpoints: FinishedCheckpointRetention;
  /** What the cluster cost (controller-costs.ts). */
  private readonly costViews: ControllerCosts;
  private readonly artifacts: StoredArtifacts;
  private readonly jobs: JobControl;
  private readonly orphans: KeptOrphans;
  private readonly interruptions: SpotInterruptions;
  /** Placement between rounds (between-rounds-placement.ts); absent when off or in a dry run. */
  private readonly placer: BetweenRoundsPlacer | undefined;

  /** When passes run, one at a time (controller-loop.ts). */
  private readonly loop: ControllerLoop;
  /** What each pass does (controller-passes.ts). */
  private readonly passes: ControllerPasses;
  private readonly schedule: RoundSchedule;
  private readonly monitor: LoopMonitor;
  private readonly rounds: RoundRecorder;

  /** How the workers run tasks, when known (ControllerDeps.executor). */
  private readonly executor: ExecutorKind | undefined;

  /** The cloud sells spot and the scheduler buys it (ControllerDeps.spotMarket). */
  readonly spotMarket: boolean;

  constructor(deps: ControllerDeps) {
    if (!deps.settings.dryRun && deps.provider === undefined)
      throw new Error('a cloud provider is required unless in dry-run');
    this.store = deps.store;
    this.catalog = deps.catalog;
    this.clock = deps.clock ?? new SystemClock();
    this.settings = deps.settings;
    this.log = deps.logger ?? silentLogger;
    this.objectStore = deps.objectStore;
    this.executor = deps.executor;
    this.spotMarket = deps.spotMarket === true;
    this.jobArchive = deps.jobArchive;
    this.onBarrierIdle = deps.onBarrierIdle;
    this.workers = deps.workers;
    const parts = buildControllerParts(deps, this.clock, this.log, {
      catalog: () => this.catalog,
      requestRound: (...args) => this.requestRound(...args),
      requestPlacement: () => this.requestPlacement(),
      jobEnded: (job) => this.jobEnded(job),
      costs: () => this.costs(0),
      safeEvent: (kind, message) => this.safeEvent(kind, message),
      runRound: (reason) => this.runRound(reason),
      reconcile: () => this.reconcile(),
    });
    this.schedule = parts.schedule;
    this.monitor = parts.monitor;
    this.rounds = parts.rounds;

    this.schedulerState = parts.schedulerState;
    this.admission = parts.admission;
    this.orphans = parts.orphans;
    this.costViews = parts.costViews;
    this.artifacts = parts.artifacts;
    this.queueViews = parts.queueViews;
    this.predictions = parts.predictions;
    this.finishedCheckpoints = parts.finishedCheckpoints;
    this.reports = parts.reports;
    this.interruptions = parts.interruptions;
    this.placer = parts.placer;
    this.jobs = parts.jobs;
    this.loop = parts.loop;
    this.passes = parts.passes;
  }

  /** The scheduler planning the next round (a price refresh replaces it). */
  get scheduler(): ControllerScheduler {
    return this.schedulerState.scheduler;
  }

  // -------------------------------------------------------------------------------------------------------------
  // Lifecycle

  /** Load the scheduler's state, reconcile with the cloud (crash recovery), then run the loop in the background. */
  async start(): Promise<void> {
    if (this.loop.running) return;
    await this.recover();
    this.loop.begin();
  }

  /**
   * Stop after the current pass; resolves when the loop has ended (and a report being written is written). A
   * prediction still running is abandoned.
   */
  async stop(): Promise<void> {
    this.loop.halt();
    this.workers?.close?.();
    await this.predictions.close();
    await this.loop.ended();
    await this.reports.settle();
    await this.finishedCheckpoints.stop();
  }

  /** Whether the loop makes progress (`/healthz`). */
  loopHealth(): LoopHealth {
    return this.monitor.health();
  }

  /** Resolves once no completion-time prediction is running or asked for (tests, benchmarks). */
  predictionsSettled(): Promise<void> {
    return this.predictions.settled();
  }

  /** Whether completion-time predictions are on: a job without an ETA yet is then waiting for one. */
  get predictionsEnabled(): boolean {
    return this.predictions.enabled;
  }

  /** Crash recovery: pending intents are re-checked against the cloud and carried out (or found done). */
  recover(): Promise<{ sync?: SyncSummary; progress?: ProgressSummary }> {
    return this.passes.recover();
  }

  private serial<T>(pass: string, fn: () => Promise<T>): Promise<T> {
    return this.loop.serial(pass, fn);
  }

  private safeEvent(kind: string, message: string): void {
    try {
      this.store.appendEvent({ kind, message: message.slice(0, 4000) });
    } catch {
      // the store itself failing is logged already
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Passes

  /** Reconcile with the cloud and carry out effects whose gates opened (between rounds). */
  reconcile(): Promise<{ sync?: SyncSummary; progress?: ProgressSummary }> {
    return this.passes.reconcile();
  }

  /** One scheduling round (see the class comment). */
  runRound(reason = 'requested'): Promise<RoundOutcome> {
    return this.passes.runRound(reason);
  }

  /**
   * Use a repriced catalog from the next round on (price refresh, src/controller/price-refresh.ts): admission and the
   * scheduler take the new prices (scheduler-state.ts `replaceFor`); the reconciler (launch gate, capacity fallback),
   * cost reports, predictions and whatever reads `catalog` (the API's dry runs, the workers' start reports) read it
   * at each use. Runs in the loop's sequence, never inside a round.
   */
  applyCatalog(catalog: Catalog): Promise<void> {
    return this.serial('price update', () => {
      this.catalog = catalog;
      this.admission.setCatalog(catalog);
      this.schedulerState.replaceFor(catalog);
      return Promise.resolve();
    });
  }

  private jobEnded(job: JobRecord): void {
    // After the job's end was committed: a crash before this leaves an uncompacted record, which is only larger.
    compactCoStart(this.store, job, this.onBarrierIdle);
    this.jobArchive?.keepEnded(job);
    this.admission.forget(job.id);
    this.queueViews.forget(job.id);
    this.predictions.recordError(job);
    this.reports.due(`${job.id} ${job.state}`);
    this.requestPlacement();
    this.requestRound(`${job.id} ${job.state}`);
  }

  // -------------------------------------------------------------------------------------------------------------
  // Object store: reports, task logs, build contexts

  /** Write the cost report (JSON, CSV, HTML) to the object store now. */
  writeCostReport(reason = 'on demand'): Promise<WrittenReport> {
    return this.reports.writeCostReport(reason);
  }

  /**
   * API: write a report now; answers where the JSON went (`s3://bucket/reports/costs-….json`). Absent without an
   * object store (a dry run): the route answers 501.
   */
  get writeReport(): (() => Promise<string>) | undefined {
    return this.objectStore === undefined ? undefined : () => this.reports.writeReport();
  }

  /** API: task logs and build contexts in the object store (stored-artifacts.ts); absent without one. */
  get jobLogs(): StoredArtifacts['jobLogs'] {
    return this.artifacts.jobLogs;
  }

  get jobLogReader(): StoredArtifacts['jobLogReader'] {
    return this.artifacts.jobLogReader;
  }

  get storeContext(): StoredArtifacts['storeContext'] {
    return this.artifacts.storeContext;
  }

  get buildContextProblem(): StoredArtifacts['buildContextProblem'] {
    return this.artifacts.buildContextProblem;
  }

  // -------------------------------------------------------------------------------------------------------------
  // ControllerService

  submit(spec: JobSpec, team: string, inCommit?: SubmissionCommitHook): JobRecord {
    return this.jobs.submit(spec, team, inCommit);
  }

  submitArray(spec: JobSpec, team: string, inCommit?: SubmissionCommitHook): JobRecord[] {
    return this.jobs.submitArray(spec, team, inCommit);
  }

  /** API: a submission committed with the others of the same moment (group commit, job-control.ts). */
  submitBatched(spec: JobSpec, team: string, inCommit?: SubmissionCommitHook): Promise<JobRecord> {
    return this.jobs.submitBatched(spec, team, inCommit);
  }

  cancel(jobId: string, reason?: string): JobRecord {
    return this.jobs.cancel(jobId, reason);
  }

  cancelMany(jobIds: readonly string[], reason: string): JobRecord[] {
    return this.jobs.cancelMany(jobIds, reason);
  }

  /**
   * API: make a submitted job durable beyond this machine before it is answered (its spec in the job archive, with
   * the idempotency key it came with). When the object store does not take it, the job is withdrawn (cancelled,
   * saying why) and the error thrown, so the client is told to retry and no job runs that a restore could drop; with
   * `withdraw: false` (a resend's jobs, made before and perhaps running) the error is thrown and the job left be.
   */
  async keepSubmission(
    job: JobRecord,
    key?: ArchivedSubmissionKey,
    options: KeepOptions = { withdraw: true, ofArray: false },
  ): Promise<void> {
    if (this.jobArchive === undefined) return;
    try {
      await this.jobArchive.keepSubmitted(job, key, { ofArray: options.ofArray });
    } catch (e) {
      if (!options.withdraw) throw e;
      const why = e instanceof Error ? e.message : String(e);
      this.log.error(`${job.id} withdrawn: its spec could not be stored in the job archive`, { error: why });
      this.jobs.cancel(job.id, `${WITHDRAWN_AT_SUBMISSION}: the object store did not take its spec (${why})`);
      throw e;
    }
  }

  /** API (`submit --dry-run`): the ETA a job with this spec would get if submitted now; nothing is stored. */
  /** API: what a submission of `spec` would be told here, or refused for (a dry run asks; execution-check.ts). */
  submissionWarnings(spec: JobSpec): string[] {
    return submissionWarnings(spec, this.executor);
  }

  estimate(spec: JobSpec): Promise<EtaRecord | null> {
    return this.predictions.estimate(spec);
  }

  /** End a job as unsuccessful at a stage (job-control.ts). */
  markUnsuccessful(
    jobId: string,
    options: { readonly stage?: number; readonly reason?: string } = {},
  ): JobRecord {
    return this.jobs.markUnsuccessful(jobId, options);
  }

  drain(instanceId: string): InstanceRecord {
    return this.jobs.drain(instanceId);
  }

  cluster(): ClusterView {
    // What each instance is billed at: its spot price on spot.
    return clusterView(
      this.store,
      (i) => instanceBilledPricePerHour(this.catalog, this.store, i),
      this.orphans.list(),
    );
  }

  /** The round trips the workers measured between instances (none without workers that probe). */
  latency(): LatencyMatrixView {
    return this.workers?.latencyView?.() ?? { pairs: [], probes: [] };
  }

  /**
   * The jobs the latest round kept waiting (a cap, a class share): this process's latest round, planned or idle, or
   * after a restart the latest recorded one.
   */
  latestWaiting(): readonly WaitingEntry[] {
    return this.rounds.latestWaiting() ?? this.store.latestRound()?.decision.waiting ?? [];
  }

  /** What the scheduler learned of co-location (Eva §4.4); undefined when it learns none (a baseline). */
  colocation(): SerializedColocationTable | undefined {
    return this.schedulerState.learnedColocation();
  }

  why(jobId: string, limit = 10): WhyRecord[] {
    return whyJob(this.store, jobId, limit);
  }

  costs(sinceSeconds = 0, untilSeconds?: number): DetailedCostReport {
    return this.costViews.costs(sinceSeconds, untilSeconds);
  }

  periodCosts(sinceSeconds = 0, untilSeconds?: number): Promise<PeriodCosts> {
    return this.costViews.periodCosts(sinceSeconds, untilSeconds);
  }

  costsOfJobs(jobIds: readonly string[]): Map<string, number> {
    return this.costViews.costsOfJobs(jobIds);
  }

  monthToDateCosts(): MonthToDateCosts {
    return this.costViews.monthToDateCosts();
  }

  workAtRisk(): MarketWorkAtRisk[] {
    const now = this.clock.nowSeconds();
    return workAtRisk(now, runningTaskCheckpoints(readSnapshotInputs(this.store, now)));
  }

  /**
   * EC2 warned that it reclaims (or may soon reclaim) the instance with this cloud id (the interruption queue):
   * spot-interruptions.ts. False when nothing changed: already acted on, or not one of this cluster's instances.
   */
  interruptionFromQueue(cloudId: string, report: Omit<InterruptionReport, 'source'>): boolean {
    const inst = this.store.findInstanceByCloudId(cloudId);
    if (inst === undefined) {
      // The queue is the cluster's own: a warning for an instance it never had means a rule shared with others.
      this.log.warn(
        `interruption queue: ${report.kind} for ${cloudId} ignored: not an instance of this cluster ` +
          "(is the queue's EventBridge rule shared with another cluster?)",
      );
      return false;
    }
    return this.interruptions.handle(inst.id, { ...report, source: 'interruption-queue' });
  }

  /** A job arrived or capacity was freed: place between rounds at the next pass, when a cap holds jobs back. */
  private requestPlacement(): void {
    if (this.placer?.request() === true) this.loop.wakeUp();
  }

  requestRound(reason: string, cause: RoundCause = 'event'): void {
    if (this.schedule.request(reason, cause)) this.loop.wakeUp();
  }
}
