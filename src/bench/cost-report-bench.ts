import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { computeCostReport, type DetailedCostReport } from '../controller/cost-accounting.js';
import { IncrementalCostReport } from '../controller/incremental-cost-report.js';
import { validateJobSpec } from '../controller/job-spec/parse.js';
import type { JobSpec } from '../controller/job-spec/spec.js';
import { SqliteStateStore } from '../controller/state/sqlite-state-store.js';
import type { Catalog } from '../core/catalog.js';
import { median } from '../world/metrics.js';

export interface CostReportBenchOptions {
  /** History sizes: finished jobs in the state. */
  readonly jobs: readonly number[];
  /** Checkpoints each job leaves (most of a long-running controller's events). */
  readonly checkpointsPerJob: number;
  /** Timed reports per figure (the median is kept); between two incremental reports one more job runs and ends. */
  readonly repeats: number;
}

export interface CostReportBenchResult {
  readonly jobs: number;
  /** The events of the history of `jobs` jobs. */
  readonly events: number;
  /** `computeCostReport` over the whole history: what every report cost before it was incremental. */
  readonly fullReplayMs: number;
  /** The incremental report's first: it reads the whole history once (a controller's first after it starts). */
  readonly incrementalFirstMs: number;
  /** The incremental report after one more job ran and ended: what each later report costs. */
  readonly incrementalNextMs: number;
  /** What the history of `jobs` jobs cost, as the full replay reports it. */
  readonly totalCost: number;
  /**
   * The incremental report's last figures (after the `repeats` more jobs) against a full replay's at that moment: the
   * largest relative difference.
   */
  readonly maxRelativeDifference: number;
}

const INSTANCE_TYPE = 'c7i.2xlarge';
const JOBS_PER_INSTANCE = 2;

/** Told each size's phases as they start: a large history takes minutes to build and replay. */
export type CostBenchProgress = (message: string) => void;

/**
 * The cost report over a history of N finished one-task jobs in a SQLite state (two jobs on each instance, each
 * instance terminated after its jobs, `checkpointsPerJob` checkpoints a job), as a full replay and as the
 * incremental report. The state is built in a temporary directory and removed, also when `signal` stops the
 * benchmark (Ctrl-C): the work is synchronous, so it gives the event loop a turn between batches and reports, where a
 * signal's handler can abort it, and then rejects with the signal's reason.
 */
export async function benchCostReport(
  catalog: Catalog,
  options: CostReportBenchOptions,
  signal?: AbortSignal,
  progress: CostBenchProgress = () => undefined,
): Promise<CostReportBenchResult[]> {
  const spec = validateJobSpec(
    {
      name: 'bench',
      team: 'bench',
      tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 4, 8] } }],
    },
    'bench job',
    catalog,
  );
  const results: CostReportBenchResult[] = [];
  for (const n of options.jobs) results.push(await benchOne(catalog, spec, n, options, signal, progress));
  return results;
}

async function benchOne(
  catalog: Catalog,
  spec: JobSpec,
  jobs: number,
  options: CostReportBenchOptions,
  signal: AbortSignal | undefined,
  progress: CostBenchProgress,
): Promise<CostReportBenchResult> {
  const say = (message: string): void => progress(`${jobs} jobs: ${message}`);
  const pause = async (): Promise<void> => {
    await nextTurn();
    signal?.throwIfAborted();
  };
  signal?.throwIfAborted();
  const dir = mkdtempSync(join(tmpdir(), 'fleetwise-cost-bench-'));
  statesBuilding.add(dir);
  removeStatesOnExit();
  const clock = { now: 1_000 };
  const store = new SqliteStateStore(join(dir, 'state.db'), {
    nowSeconds: () => clock.now,
    synchronous: 'normal',
  });
  try {
    const history = new FinishedJobs(store, spec, clock, options.checkpointsPerJob);
    say('building the history');
    // Batches of jobs in one transaction: the build is setup, not what is measured.
    for (let done = 0; done < jobs; done += 100) {
      store.transaction(() => history.add(Math.min(100, jobs - done)));
      await pause();
    }
    // The row's figures are the N-job history's: the incremental reports below add jobs.
    const events = lastEventSeq(store);
    say(`timing the full replay (${options.repeats}×)`);
    const replays: number[] = [];
    let replayed: DetailedCostReport | undefined;
    for (let r = 0; r < options.repeats; r += 1) {
      const t = timed(() => computeCostReport(store, catalog, clock.now));
      replays.push(t.ms);
      replayed = t.value;
      await pause();
    }
    const fullReplayMs = median(replays);
    say(`timing the incremental report (first, then ${options.repeats}× after one more job)`);
    const incremental = new IncrementalCostReport();
    const first = timed(() => incremental.report(store, catalog, clock.now));
    const next: number[] = [];
    let last: DetailedCostReport = first.value;
    for (let r = 0; r < options.repeats; r += 1) {
      store.transaction(() => history.add(1));
      const t = timed(() => incremental.report(store, catalog, clock.now));
      next.push(t.ms);
      last = t.value;
      await pause();
    }
    return {
      jobs,
      events,
      fullReplayMs,
      incrementalFirstMs: first.ms,
      incrementalNextMs: median(next),
      totalCost: (replayed ?? first.value).totalCost,
      maxRelativeDifference: difference(last, computeCostReport(store, catalog, clock.now)),
    };
  } finally {
    store.close();
    rmSync(dir, { recursive: true, force: true });
    statesBuilding.delete(dir);
  }
}

/** The history's events so far: the sequence number of its newest. */
function lastEventSeq(store: SqliteStateStore): number {
  return store.listEvents({ newestFirst: true, limit: 1 })[0]?.seq ?? 0;
}

/** The temporary states of the sizes being measured, removed by the 'exit' listener if the process ends first. */
const statesBuilding = new Set<string>();
let removeOnExitInstalled = false;

/**
 * However the process ends while it can still run code (an uncaught error, a `process.exit` elsewhere) rather than
 * through `benchOne`'s own cleanup, the states it was building go: hundreds of MB at the larger sizes.
 */
function removeStatesOnExit(): void {
  if (removeOnExitInstalled) return;
  removeOnExitInstalled = true;
  process.on('exit', () => {
    for (const dir of statesBuilding)
      try {
        rmSync(dir, { recursive: true, force: true });
      } catch {
        // nothing can be reported as the process exits
      }
  });
}

/** Appends finished jobs to the history, `JOBS_PER_INSTANCE` at a time on an instance that ends after them. */
class FinishedJobs {
  private added = 0;
  private instanceId: string | undefined;

  constructor(
    private readonly store: SqliteStateStore,
    private readonly spec: JobSpec,
    private readonly clock: { now: number },
    private readonly checkpoints: number,
  ) {}

  add(count: number): void {
    for (let k = 0; k < count; k += 1) {
      const store = this.store;
      if (this.instanceId === undefined) {
        const inst = store.createInstance({ typeName: INSTANCE_TYPE });
        store.setInstanceState(inst.id, 'launching', { cloudId: `i-bench-${inst.id}` });
        this.clock.now += 90;
        store.setInstanceState(inst.id, 'running');
        this.instanceId = inst.id;
      }
      const job = store.submitJob({ ...this.spec, name: `bench-${this.added}` });
      const task = `${job.id}.0`;
      store.setJobState(job.id, 'starting');
      store.setTaskState(task, 'starting', this.instanceId);
      this.clock.now += 5;
      store.setJobState(job.id, 'running');
      store.setTaskState(task, 'running');
      for (let c = 0; c < this.checkpoints; c += 1) {
        this.clock.now += 60;
        store.recordCheckpoint(task, `checkpoints/${task}/${c}`);
      }
      this.clock.now += 30;
      store.setTaskState(task, 'succeeded');
      store.setJobState(job.id, 'succeeded');
      this.added += 1;
      if (this.added % JOBS_PER_INSTANCE === 0) {
        store.setInstanceState(this.instanceId, 'terminated');
        this.instanceId = undefined;
      }
    }
  }
}

function timed<T>(f: () => T): { value: T; ms: number } {
  const started = performance.now();
  const value = f();
  return { value, ms: performance.now() - started };
}

/** The largest relative difference between the two reports' totals and per-job costs. */
function difference(a: DetailedCostReport, b: DetailedCostReport): number {
  const rel = (x: number, y: number): number => {
    const r = Math.abs(x - y) / Math.max(1e-12, Math.abs(y));
    return Number.isNaN(r) ? Number.POSITIVE_INFINITY : r;
  };
  let worst = Math.max(rel(a.totalCost, b.totalCost), rel(a.idleCost, b.idleCost));
  const mine = new Map(a.byJob.map((l) => [l.id, l.cost]));
  for (const l of b.byJob) worst = Math.max(worst, rel(mine.get(l.id) ?? Number.NaN, l.cost));
  if (a.byJob.length !== b.byJob.length) return Number.POSITIVE_INFINITY;
  return worst;
}
