import type { Market } from '../../core/market.js';
import type { DecisionRecord } from '../../scheduler/types.js';
import type { JobQueueView } from '../../queue/admission-views.js';
import { storedCoStart, storedCoStartTotals } from '../co-start-records.js';
import { jobRestarts, type JobRestart } from '../job-runs.js';
import { hostFaultRuns } from '../reconcile/effects/host-faults.js';
import { readJobWarnings } from '../execution-check.js';
import { TASK_STOPPED_OUTSIDE_EVENT } from '../outside-stop-records.js';
import {
  dependencyViews,
  earliestStartSeconds,
  unmetDependencies,
  type DependencyView,
} from '../job-dependencies.js';
import {
  predictedCompletionIn,
  readQueueRecord,
  type EtaRecord,
  type PredictionError,
} from '../queue-records.js';
import type { ClusterView, CostReport, WhyRecord } from '../service.js';
import type { LaunchErrorRecord } from '../launch-error-records.js';
import type { MonthReportSource } from '../stored-month-report.js';
import { isFinalJobState } from '../state/lifecycle.js';
import { writtenJobSpec } from '../job-spec/written-form.js';
import type {
  AttemptFailure,
  InstanceRecord,
  JobRecord,
  JobState,
  StateStore,
  TaskRecord,
} from '../state-store.js';

/**
 * The JSON documents the API returns, built from store records. Team callers get views restricted to their own
 * jobs: another team's job ids never appear in what they read (its existence does not leak).
 */

export interface JobSummary {
  readonly id: string;
  readonly name: string;
  readonly team: string;
  readonly state: JobState;
  readonly reason?: string;
  readonly submittedAtSeconds: number;
  readonly startedAtSeconds?: number;
  readonly finishedAtSeconds?: number;
  readonly updatedAtSeconds: number;
  readonly migrations: number;
  /** The attempt running, or the last one made (from 1; `retryStrategy`). */
  readonly attempts: number;
  /** Attempts the job may make in all. */
  readonly maxAttempts: number;
  readonly progress: { readonly completed: number; readonly total: number | null };
  readonly taskCount: number;
  /** Its place in the queue (class, position, why it waits); null once it ended or before its first round. */
  readonly queue: JobQueueView | null;
  /** The latest completion-time prediction (PCS §4), with its basis; null before the first one. */
  readonly eta: EtaRecord | null;
  /** True while the job's first prediction is being computed (predictions run apart from submissions). */
  readonly etaPending: boolean;
  /** What the submitter should know about how the job runs here (e.g. an image the process executor ignores). */
  readonly warnings: readonly string[];
  /** One job of an array: its index and the array's size (absent for a job submitted alone). */
  readonly array?: { readonly index: number; readonly size: number };
  /** Answering an array's submission: every job it made, in index order (this summary is the first's). */
  readonly arrayJobIds?: readonly string[];
  /** Answering an array's submission, when one of its jobs waits: what each waits for, in index order. */
  readonly arrayWaitingFor?: readonly (readonly string[])[];
  /** A queued job held for its dependencies: those that have not succeeded yet (absent when none). */
  readonly waitingFor?: readonly string[];
}

export interface JobInstanceView {
  readonly id: string;
  readonly cloudId?: string;
  readonly typeName: string;
  readonly state: InstanceRecord['state'];
  readonly availabilityZone?: string;
  readonly taskIds: readonly string[];
}

export interface JobDocument extends JobSummary {
  /** The spec as the job was accepted, in the form a submission takes: submitted again, it makes the same job. */
  readonly spec: unknown;
  readonly instances: readonly JobInstanceView[];
  readonly tasks: readonly TaskRecord[];
  /** Seconds from the latest prediction to the predicted completion; null without one. */
  readonly etaSeconds: number | null;
  /** The prediction made when the job was submitted (never overwritten: its error is measured at the end). */
  readonly submissionEta: EtaRecord | null;
  /** How far the submission prediction was off, once the job ended. */
  readonly predictionError: PredictionError | null;
  /** How each retried attempt failed, oldest first (the last attempt's failure is the job's reason). */
  readonly attemptFailures: readonly AttemptFailure[];
  /**
   * Runs its instance or worker ended (lost, stopped with the controller), and its tasks' stops from outside their
   * worker (a host shutdown, `docker stop`) that the worker resumed them from, oldest first: it started again.
   */
  readonly restarts: readonly JobRestart[];
  /**
   * A multi-task job's start in this attempt, with its starts over all attempts (co-start-records.ts); null for one
   * task, or before it was held or started.
   */
  readonly coStart: CoStartView | null;
  /** The jobs it depends on (`dependsOn`) with their states; it starts once every one has succeeded. */
  readonly dependencies: readonly DependencyView[];
  /**
   * While it is held for its dependencies: the earliest it can start, from their predictions (the latest predicted
   * completion among them); null when it waits for none, or when one of them has no prediction.
   */
  readonly startsNoEarlierThanSeconds: number | null;
}

export interface CoStartView {
  /** Tasks prepared and held, waiting for the others (empty once released). */
  readonly readyTaskIds: readonly string[];
  readonly releasedAtSeconds?: number;
  /** Of the start numbered `start`: the job's latest measured one. */
  readonly startSkewSeconds?: number;
  /** Of the start numbered `start`; without one, of the holds that ended without a start since the latest. */
  readonly barrierIdleCost?: number;
  /** Which of the job's starts (1: its first, over all its attempts) the start skew and barrier-idle cost are of. */
  readonly start?: number;
  /** The job's measured starts, over all its attempts. */
  readonly starts: number;
  /** Barrier-idle cost of all its starts and of every hold that ended without one, $: what /metrics counted for it. */
  readonly totalBarrierIdleCost: number;
}

function coStartView(store: StateStore, job: JobRecord): CoStartView | null {
  const totals = storedCoStartTotals(store, job.id);
  if (totals === undefined) return null;
  const record = storedCoStart(store, job);
  const whole = { starts: totals.starts, totalBarrierIdleCost: totals.barrierIdleCost };
  // Only an earlier attempt's record: nothing of this attempt yet, but what the earlier ones cost.
  if (record === undefined)
    return totals.starts > 0 || totals.barrierIdleCost > 0 ? { readyTaskIds: [], ...whole } : null;
  const held = new Set(
    store
      .listTasks({ jobId: job.id })
      .filter((t) => t.state === 'starting')
      .map((t) => t.id),
  );
  return defined({
    readyTaskIds: Object.keys(record.ready).filter((id) => held.has(id)),
    releasedAtSeconds: record.releasedAtSeconds,
    startSkewSeconds: record.startSkewSeconds,
    barrierIdleCost: record.barrierIdleCost,
    start: record.startSkewSeconds === undefined ? undefined : totals.starts,
    ...whole,
  });
}

function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/**
 * The summary; with a store, the job's queue place and latest prediction are read from it. With predictions on, a
 * live job without an ETA is waiting for its first one (`etaPending`).
 */
export function jobSummary(
  job: JobRecord,
  taskCount: number,
  store?: StateStore,
  predictionsEnabled = false,
): JobSummary {
  const record = store === undefined ? undefined : readQueueRecord(store, job.id);
  const final = isFinalJobState(job.state);
  const waitingFor = store === undefined || job.state !== 'queued' ? [] : unmetDependencies(job, store);
  return defined({
    id: job.id,
    name: job.name,
    team: job.team,
    state: job.state,
    reason: job.reason,
    submittedAtSeconds: job.submittedAtSeconds,
    startedAtSeconds: job.startedAtSeconds,
    finishedAtSeconds: job.finishedAtSeconds,
    updatedAtSeconds: job.updatedAtSeconds,
    migrations: job.migrations,
    attempts: job.attempts,
    // Runs a host fault ended come on top of the retryStrategy's (reconcile/effects/host-faults.ts).
    maxAttempts:
      (job.spec.retryStrategy?.attempts ?? 1) +
      // Each such run is one more attempt number: a job on its first has none, and listings read no events for it.
      (store === undefined || job.attempts <= 1 ? 0 : hostFaultRuns(store, job.id)),
    progress: { completed: job.completedIterations, total: job.totalIterations ?? null },
    taskCount,
    queue: final ? null : (record?.queue ?? null),
    // An ended job's last prediction is no ETA (one that never started would show a start to come), as text views say.
    eta: final ? null : (record?.eta ?? null),
    // A job waiting for its dependencies is predicted too: held until they are predicted to have succeeded.
    etaPending: predictionsEnabled && !final && record?.eta === undefined,
    warnings: store === undefined ? [] : readJobWarnings(store, job.id),
    waitingFor: waitingFor.length === 0 ? undefined : waitingFor,
    array: arrayOf(job),
  });
}

function arrayOf(job: JobRecord): JobSummary['array'] {
  const a = job.spec.arrayProperties;
  return a?.index === undefined ? undefined : { index: a.index, size: a.size };
}

/** The job's restarts (JobDocument.restarts): those of its runs, and those its workers made, by time. */
function restartsOf(store: StateStore, job: JobRecord): JobRestart[] {
  const outside = store.listEvents({ jobId: job.id, kind: TASK_STOPPED_OUTSIDE_EVENT }).map((e) => ({
    atSeconds: e.atSeconds,
    cause: `${e.taskId ?? 'a task'} was stopped from outside its worker on ${e.instanceId ?? 'its instance'}`,
  }));
  const runs = jobRestarts(store, job);
  if (outside.length === 0) return runs;
  return [...runs, ...outside].sort((a, b) => a.atSeconds - b.atSeconds);
}

export function jobDocument(store: StateStore, job: JobRecord, predictionsEnabled = false): JobDocument {
  const tasks = store.listTasks({ jobId: job.id });
  const byInstance = new Map<string, string[]>();
  for (const t of tasks)
    if (t.instanceId !== undefined)
      byInstance.set(t.instanceId, [...(byInstance.get(t.instanceId) ?? []), t.id]);
  const instances = [...byInstance].flatMap(([id, taskIds]): JobInstanceView[] => {
    const instance = store.getInstance(id);
    return instance === undefined
      ? []
      : [
          defined({
            id: instance.id,
            cloudId: instance.cloudId,
            typeName: instance.typeName,
            state: instance.state,
            availabilityZone: instance.availabilityZone,
            taskIds,
          }),
        ];
  });
  const record = readQueueRecord(store, job.id);
  const completion = record?.eta?.completionSeconds;
  const predicted = predictedCompletionIn(store);
  return {
    ...jobSummary(job, tasks.length, store, predictionsEnabled),
    spec: writtenJobSpec(job.spec),
    instances,
    tasks,
    etaSeconds:
      completion === undefined || completion === null || record?.eta === undefined
        ? null
        : Math.max(0, completion - record.eta.computedAtSeconds),
    submissionEta: record?.submissionEta ?? null,
    predictionError: record?.predictionError ?? null,
    attemptFailures: job.attemptFailures ?? [],
    restarts: restartsOf(store, job),
    coStart: coStartView(store, job),
    dependencies: dependencyViews(job, store, predicted),
    startsNoEarlierThanSeconds:
      job.state === 'queued' ? (earliestStartSeconds(job.spec.dependsOn, store, predicted) ?? null) : null,
  };
}

/** Which job ids a caller may see; `undefined` for the admin, who sees them all. */
export interface VisibleJobs {
  has(jobId: string): boolean;
}

/**
 * The job ids a team may see, each looked up when asked (and remembered): a view names a few jobs, while the team may
 * have run tens of thousands, and reading them all to build a set cost a team's `/v1/cluster` 200 ms.
 */
export function visibleJobIds(store: StateStore, team: string | undefined): VisibleJobs | undefined {
  if (team === undefined) return undefined;
  const seen = new Map<string, boolean>();
  return {
    has(jobId) {
      let visible = seen.get(jobId);
      if (visible === undefined) {
        visible = store.getJob(jobId)?.team === team;
        seen.set(jobId, visible);
      }
      return visible;
    },
  };
}

function jobOfTask(taskId: string): string {
  const dot = taskId.lastIndexOf('.');
  return dot === -1 ? taskId : taskId.slice(0, dot);
}

/**
 * An instance as the API shows it. The launch token is EC2's idempotency key for the launch (whoever knows it can
 * make a second RunInstances call look like the first) and the worker token hash identifies a worker's credential:
 * both are the controller's internals, so no caller reads them, the admin included.
 */
export type PublicInstance<T extends InstanceRecord = InstanceRecord> = Omit<
  T,
  'launchToken' | 'workerTokenHash'
>;

export function publicInstance<T extends InstanceRecord>(instance: T): PublicInstance<T> {
  const { launchToken: _launchToken, workerTokenHash: _workerTokenHash, ...rest } = instance;
  return rest;
}

/**
 * An instance's last launch error as a caller sees it. The cloud's message may name the account's resources and roles
 * (an UnauthorizedOperation names the controller's role and account): the operator's business, so a team reads the
 * code, the attempts and when, not the message.
 */
export type LaunchErrorView = Omit<LaunchErrorRecord, 'message'> & { readonly message?: string };

function withoutMessage(error: LaunchErrorRecord): LaunchErrorView {
  const { message: _message, ...rest } = error;
  return rest;
}

/** An instance of the cluster view with the market it was bought in, and its last launch error while it has one. */
type ClusterInstance = ClusterView['instances'][number] & {
  readonly market: Market;
  readonly launchError?: LaunchErrorView;
};

export interface ClusterDocument {
  readonly scope: 'all' | 'team';
  readonly instances: readonly PublicInstance<ClusterInstance>[];
  readonly tasks: ClusterView['tasks'];
  readonly costPerHour: number;
  readonly orphans: ClusterView['orphans'];
}

/**
 * A team sees every instance (the fleet is shared and priced) but only its own tasks on them. Each instance says its
 * market (`marketOf`), so a price below its type's list price reads as spot, not as an error; one not launched yet
 * says why, while its launches fail (`launchErrorOf`: launch-error-records.ts `readLaunchError`).
 */
export function clusterForScope(
  view: ClusterView,
  visible: VisibleJobs | undefined,
  marketOf: (instanceId: string) => Market,
  launchErrorOf: (instanceId: string) => LaunchErrorRecord | undefined = () => undefined,
): ClusterDocument {
  const instances = view.instances.map((i): PublicInstance<ClusterInstance> => {
    // Only while it waits for its launch: a record an adoption by launch token left behind says nothing now.
    const failed = i.state === 'requested' ? launchErrorOf(i.id) : undefined;
    return {
      ...publicInstance(i),
      market: marketOf(i.id),
      ...(failed === undefined
        ? {}
        : { launchError: visible === undefined ? failed : withoutMessage(failed) }),
    };
  });
  if (visible === undefined)
    return {
      scope: 'all',
      costPerHour: view.costPerHour,
      instances,
      tasks: view.tasks,
      orphans: view.orphans,
    };
  return {
    scope: 'team',
    costPerHour: view.costPerHour,
    instances: instances.map((i) => ({ ...i, taskIds: i.taskIds.filter((t) => visible.has(jobOfTask(t))) })),
    tasks: view.tasks.filter((t) => visible.has(t.jobId)),
    // Orphans belong to no team: every caller sees them, as every caller sees the fleet.
    orphans: view.orphans,
  };
}

/** Decision records name other jobs (moved, waiting, pinned); a team sees only its own among them. */
export function decisionForScope(decision: DecisionRecord, visible: VisibleJobs | undefined): DecisionRecord {
  if (visible === undefined) return decision;
  return {
    ...decision,
    candidates: decision.candidates.map((c) => ({
      ...c,
      movedJobs: c.movedJobs.filter((j) => visible.has(j)),
    })),
    waiting: decision.waiting.filter((w) => visible.has(w.jobId)),
    pinned: decision.pinned.filter((p) => visible.has(p.jobId)),
  };
}

export function whyForScope(records: readonly WhyRecord[], visible: VisibleJobs | undefined): WhyRecord[] {
  return records.map((r) => ({ ...r, decision: decisionForScope(r.decision, visible) }));
}

export type CostView =
  | (CostReport & { readonly scope: 'all'; readonly monthReport?: MonthReportSource })
  | (Omit<CostReport, 'idleCost' | 'migrationOverheadCost'> & {
      readonly scope: 'team';
      readonly monthReport?: MonthReportSource;
      readonly idleCost: null;
      readonly migrationOverheadCost: null;
    });

/**
 * A team sees its own jobs and team line; per-instance lines and cluster-wide overheads mix teams, so they are
 * withheld (empty, null) rather than shown with other teams' shares in them.
 */
export function costsForScope(
  report: CostReport & { readonly monthReport?: MonthReportSource },
  team: string | undefined,
): CostView {
  if (team === undefined) return { ...report, scope: 'all' };
  const byJob = report.byJob.filter((j) => j.team === team);
  return {
    scope: 'team',
    generatedAtSeconds: report.generatedAtSeconds,
    sinceSeconds: report.sinceSeconds,
    ...(report.monthReport === undefined ? {} : { monthReport: report.monthReport }),
    totalCost: byJob.reduce((sum, j) => sum + j.cost, 0),
    byJob,
    byTeam: report.byTeam.filter((t) => t.id === team),
    byInstance: [],
    idleCost: null,
    migrationOverheadCost: null,
  };
}
