import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BenchController } from './bench-controller-process.js';
import { SimulatedFleet } from './simulated-fleet.js';

/**
 * `fleetwise bench controller`: a real controller (a `fleetwise controller --provider local` child process: SQLite, the
 * HTTP API, rounds, reconciliation, predictions) under load from a fleet of workers simulated over the real worker
 * protocol (simulated-fleet.ts). Four figures, each measured from outside as a client sees them:
 *
 * 1. submissions: `submissions` POST /v1/jobs from `concurrency` clients while rounds run (rate, p50/p99 latency);
 * 2. a round with `waiting` jobs queued and `running` running (a vCPU quota admits exactly `running` of them): the
 *    duration of the next rounds, read from the controller's own `fleetwise_last_round_duration_seconds`;
 * 3. memory: the controller's RSS once `finished` jobs have run and succeeded (tasks succeed a second after they start);
 * 4. heartbeats: `workers` registered workers (one whole c7i.48xlarge job each, on a second controller), each beating
 *    once a second for `heartbeatWindowSeconds` (rate and p50/p99 latency of the answered beats).
 */

export interface ControllerBenchOptions {
  readonly submissions: number;
  readonly waiting: number;
  readonly running: number;
  readonly workers: number;
  readonly finished: number;
  /** Clients submitting at once. */
  readonly concurrency: number;
  /** Rounds measured with `waiting` queued and `running` running. */
  readonly rounds: number;
  readonly heartbeatWindowSeconds: number;
  /** State directories of the controllers go here. */
  readonly workDir: string;
  /** Write the controllers' CPU profiles (node --cpu-prof) here. */
  readonly cpuProfileDir?: string | undefined;
}

export const CONTROLLER_BENCH_DEFAULTS = {
  submissions: 2000,
  waiting: 2000,
  running: 500,
  workers: 1000,
  finished: 10_000,
  concurrency: 4,
  rounds: 5,
  heartbeatWindowSeconds: 10,
} as const;

const D = CONTROLLER_BENCH_DEFAULTS;

/**
 * What the figures should reach (README "Benchmarks"), and the sizes each is set at (`at`): a run smaller than those
 * is not judged, as fewer workers cannot make 500 heartbeats/s and fewer finished jobs leave less in memory.
 */
export const CONTROLLER_BENCH_TARGETS = {
  submitsPerSecond: { atLeast: 200, at: { submissions: D.submissions } },
  submitP99Ms: { atMost: 100, at: { submissions: D.submissions } },
  roundSeconds: { atMost: 2, at: { waiting: D.waiting, running: D.running } },
  heartbeatsPerSecond: { atLeast: 500, at: { workers: D.workers } },
  heartbeatP99Ms: { atMost: 200, at: { workers: D.workers } },
  memoryMiB: { atMost: 500, at: { finished: D.finished } },
} as const;

export type TargetName = keyof typeof CONTROLLER_BENCH_TARGETS;

/** The sizes a target can be set at. */
export type TargetSizes = Pick<
  ControllerBenchOptions,
  'submissions' | 'waiting' | 'running' | 'workers' | 'finished'
>;

/** A target's bound and the sizes it is set at. */
export interface ControllerBenchTarget {
  readonly atLeast?: number;
  readonly atMost?: number;
  readonly at: Readonly<Partial<TargetSizes>>;
}

export interface ControllerBenchResult {
  readonly submissions: number;
  readonly submitsPerSecond: number;
  readonly submitP50Ms: number;
  readonly submitP99Ms: number;
  /** Rounds that ran while the submissions were made. */
  readonly roundsDuringSubmissions: number;
  /** The slowest of the measured rounds, and their mean. */
  readonly roundSeconds: number;
  readonly roundMeanSeconds: number;
  readonly roundsMeasured: number;
  /** Jobs queued and running while the rounds were measured. */
  readonly waitingJobs: number;
  readonly runningJobs: number;
  readonly finishedJobs: number;
  readonly memoryMiB: number;
  readonly workers: number;
  readonly heartbeats: number;
  readonly heartbeatsPerSecond: number;
  readonly heartbeatP50Ms: number;
  readonly heartbeatP99Ms: number;
  /**
   * The controller's CPU time (all its threads) per submission and per heartbeat over those phases: what each costs
   * with everything the controller did meanwhile (rounds, reconciliation, predictions), whatever else the machine
   * runs. 1000 / this is what one free core would sustain.
   */
  readonly submitCpuMs: number;
  readonly heartbeatCpuMs: number;
  /** The machine while it ran: cores, and the 1-minute load average at the end of each phase (a shared box skews wall-clock figures). */
  readonly cpus: number;
  readonly loadAverages: { readonly submit: number; readonly rounds: number; readonly heartbeats: number };
  /** Simulated-worker requests that failed (should be 0). */
  readonly fleetErrors: number;
  readonly targets: typeof CONTROLLER_BENCH_TARGETS;
  /** Whether each figure reached its target; null where the run was smaller than a size the target is set at. */
  readonly met: Readonly<Record<TargetName, boolean | null>>;
}

export type Progress = (message: string) => void;

/** The q-quantile (0–1) of `values` (nearest rank); 0 for none. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
}

const COMMON_CONFIG = [
  'pollSeconds: 1',
  'workerHeartbeatSeconds: 5',
  // Simulated workers beat on their own timers; none is lost or replaced while the benchmark loads the controller.
  'workerHeartbeatTimeoutSeconds: 600',
  'workerRegistration: { timeoutSeconds: 3600 }',
  'reportEverySeconds: 86400',
  'priceRefreshHours: 0',
];

/** A small job: [0, 2, 4] fits a c7i.large exactly, so a quota of 2·N vCPUs admits N of them. */
function smallJob(i: number): Record<string, unknown> {
  return {
    name: `bench-${i}`,
    team: 'bench',
    tasks: [{ name: 'main', command: ['true'], demand: { c7i: [0, 2, 4] } }],
    expectedDurationSeconds: 3600,
  };
}

/** A job that needs a c7i.48xlarge of its own (100 of its 192 vCPUs): one worker per job. */
function wholeInstanceJob(i: number): Record<string, unknown> {
  return {
    name: `whole-${i}`,
    team: 'bench',
    tasks: [{ name: 'main', command: ['true'], demand: { c7i: [0, 100, 8] } }],
    expectedDurationSeconds: 3600,
  };
}

/** Submit jobs `from`…`to`-1 from `concurrency` clients; each answer's latency in ms. */
async function submit(
  controller: BenchController,
  from: number,
  to: number,
  concurrency: number,
  spec: (i: number) => Record<string, unknown>,
  progress?: Progress,
): Promise<number[]> {
  const latencies: number[] = [];
  let next = from;
  let reported = Date.now();
  const lane = async (): Promise<void> => {
    while (next < to) {
      const i = next++;
      const body = spec(i);
      // Keyed as fleetwise submit keys every submission, so the figures are what its users get.
      const answer = await controller.api('POST', '/v1/jobs', body, {
        'idempotency-key': String(body['name']),
      });
      if (answer.status !== 201)
        throw new Error(`submission ${i} answered ${answer.status}: ${JSON.stringify(answer.json)}`);
      latencies.push(answer.ms);
      if (progress !== undefined && Date.now() - reported > 2000) {
        reported = Date.now();
        progress(`submitted ${latencies.length}/${to - from}`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, concurrency) }, lane));
  return latencies;
}

interface JobCounts {
  readonly queued: number;
  readonly starting: number;
  readonly running: number;
  readonly succeeded: number;
}

async function jobCounts(controller: BenchController): Promise<JobCounts & { rounds: number }> {
  const m = await controller.metrics();
  const jobs = (state: string): number => m.get(`fleetwise_jobs{state="${state}"}`) ?? 0;
  return {
    queued: jobs('queued'),
    starting: jobs('starting') + jobs('migrating'),
    running: jobs('running'),
    succeeded: jobs('succeeded'),
    rounds: m.get('fleetwise_rounds_total') ?? 0,
  };
}

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs: number,
  progress: Progress,
  status: () => Promise<string>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let reported = Date.now();
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (${await status()})`);
    if (Date.now() - reported > 5000) {
      reported = Date.now();
      progress(`waiting for ${what}: ${await status()}`);
    }
    await sleep(1000);
  }
}

/** The durations of the next `count` rounds, from the controller's gauge of its latest round. */
async function measureRounds(controller: BenchController, count: number): Promise<number[]> {
  const durations: number[] = [];
  let seen = (await controller.metrics()).get('fleetwise_rounds_total') ?? 0;
  const deadline = Date.now() + 120_000;
  while (durations.length < count && Date.now() < deadline) {
    await sleep(250);
    const m = await controller.metrics();
    const rounds = m.get('fleetwise_rounds_total') ?? 0;
    if (rounds > seen) {
      seen = rounds;
      durations.push(m.get('fleetwise_last_round_duration_seconds') ?? Number.NaN);
    }
  }
  if (durations.length === 0) throw new Error('no round ran within 120 s');
  return durations;
}

const describeCounts = (c: JobCounts): string =>
  `${c.queued} queued, ${c.starting} starting, ${c.running} running, ${c.succeeded} succeeded`;

export async function benchController(
  options: ControllerBenchOptions,
  progress: Progress = () => undefined,
): Promise<ControllerBenchResult> {
  const queueTarget = options.running + options.waiting;
  const nodeArgs =
    options.cpuProfileDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', options.cpuProfileDir];
  const a = await BenchController.start(
    join(options.workDir, 'queue'),
    [
      'cluster: bench-queue',
      'roundSeconds: 2',
      ...COMMON_CONFIG,
      `caps: { quotas: [{ group: standard, maxVcpus: ${2 * options.running} }] }`,
    ],
    nodeArgs,
  );
  const fleetA = new SimulatedFleet({
    url: a.url,
    workerToken: a.workerToken(),
    instances: () => a.instances(),
    // Workers' default period: what a real fleet adds to the controller's load while jobs are submitted.
    heartbeatMs: 5000,
    taskSeconds: Number.POSITIVE_INFINITY,
  });
  const status = async (): Promise<string> => describeCounts(await jobCounts(a));
  let submitted = 0;
  let result: Omit<
    ControllerBenchResult,
    | 'workers'
    | 'heartbeats'
    | 'heartbeatsPerSecond'
    | 'heartbeatP50Ms'
    | 'heartbeatP99Ms'
    | 'heartbeatCpuMs'
    | 'cpus'
    | 'loadAverages'
    | 'fleetErrors'
    | 'met'
    | 'targets'
  > & { readonly loads: { readonly submit: number; readonly rounds: number } };
  try {
    fleetA.start();
    // 1. Submissions while rounds run.
    progress(`submitting ${options.submissions} jobs from ${options.concurrency} clients while rounds run`);
    const roundsBefore = (await jobCounts(a)).rounds;
    const started = performance.now();
    const cpuBefore = a.cpuSeconds();
    const latencies = await submit(a, 0, options.submissions, options.concurrency, smallJob, progress);
    const submitSeconds = (performance.now() - started) / 1000;
    const submitCpuMs = ((a.cpuSeconds() - cpuBefore) * 1000) / latencies.length;
    const submitLoad = loadavg()[0] as number;
    submitted = options.submissions;
    const roundsDuringSubmissions = (await jobCounts(a)).rounds - roundsBefore;

    // 2. A round with `waiting` queued and `running` running.
    if (submitted < queueTarget) {
      progress(`submitting ${queueTarget - submitted} more jobs (${queueTarget} in the queue)`);
      await submit(a, submitted, queueTarget, options.concurrency, smallJob);
      submitted = queueTarget;
    }
    let stable = 0;
    let previous = -1;
    const steady = await until(
      `${options.running} running jobs`,
      async () => {
        const c = await jobCounts(a);
        stable = c.running === previous && c.starting === 0 && c.running > 0 ? stable + 1 : 0;
        previous = c.running;
        return stable >= 8 || c.running >= options.running ? c : undefined;
      },
      300_000,
      progress,
      status,
    );
    progress(`measuring rounds with ${describeCounts(steady)}`);
    const rounds = await measureRounds(a, options.rounds);
    const during = await jobCounts(a);
    const roundsLoad = loadavg()[0] as number;

    // 3. Memory once `finished` jobs have succeeded (heartbeats once a second: completions are seen sooner).
    progress(`running ${options.finished} jobs to completion`);
    fleetA.taskSeconds = 1;
    fleetA.setHeartbeatMs(1000);
    await until(
      `${options.finished} succeeded jobs`,
      async () => {
        const c = await jobCounts(a);
        const live = submitted - c.succeeded;
        if (submitted < options.finished && live < queueTarget) {
          const to = Math.min(options.finished, submitted + (queueTarget - live));
          await submit(a, submitted, to, options.concurrency, smallJob);
          submitted = to;
        }
        return c.succeeded >= options.finished ? c : undefined;
      },
      Math.max(600_000, options.finished * 200),
      progress,
      status,
    );
    const finished = await jobCounts(a);
    result = {
      submissions: latencies.length,
      submitsPerSecond: latencies.length / submitSeconds,
      submitP50Ms: quantile(latencies, 0.5),
      submitP99Ms: quantile(latencies, 0.99),
      roundsDuringSubmissions,
      roundSeconds: Math.max(...rounds),
      roundMeanSeconds: rounds.reduce((s, r) => s + r, 0) / rounds.length,
      roundsMeasured: rounds.length,
      waitingJobs: during.queued,
      runningJobs: during.running,
      finishedJobs: finished.succeeded,
      memoryMiB: a.rssMiB(),
      submitCpuMs,
      loads: { submit: submitLoad, rounds: roundsLoad },
    };
  } finally {
    await fleetA.stop();
    await a.stop();
  }

  // 4. Heartbeats from `workers` workers, on a controller of their own.
  const b = await BenchController.start(
    join(options.workDir, 'fleet'),
    ['cluster: bench-fleet', 'roundSeconds: 5', ...COMMON_CONFIG],
    nodeArgs,
  );
  const fleetB = new SimulatedFleet({
    url: b.url,
    workerToken: b.workerToken(),
    instances: () => b.instances(),
    heartbeatMs: 2000,
    taskSeconds: Number.POSITIVE_INFINITY,
  });
  try {
    fleetB.start();
    progress(`starting ${options.workers} workers (one job each)`);
    await submit(b, 0, options.workers, options.concurrency, wholeInstanceJob);
    await until(
      `${options.workers} registered workers running their task`,
      async () => (fleetB.runningTasks >= options.workers ? true : undefined),
      Math.max(300_000, options.workers * 600),
      progress,
      async () =>
        `${b.instances().length} instances, ${fleetB.registered} registered, ${fleetB.runningTasks} tasks running`,
    );
    progress(`${options.workers} workers heartbeating once a second for ${options.heartbeatWindowSeconds} s`);
    fleetB.setHeartbeatMs(1000);
    await sleep(1500);
    fleetB.startRecording();
    const started = performance.now();
    const cpuBefore = b.cpuSeconds();
    await sleep(options.heartbeatWindowSeconds * 1000);
    const beats = fleetB.stopRecording();
    const seconds = (performance.now() - started) / 1000;
    const heartbeatCpuMs = ((b.cpuSeconds() - cpuBefore) * 1000) / Math.max(1, beats.length);
    const { loads, ...queueFigures } = result;
    const heartbeats = {
      heartbeatCpuMs,
      cpus: availableParallelism(),
      loadAverages: { ...loads, heartbeats: loadavg()[0] as number },
      workers: fleetB.registered,
      heartbeats: beats.length,
      heartbeatsPerSecond: beats.length / seconds,
      heartbeatP50Ms: quantile(beats, 0.5),
      heartbeatP99Ms: quantile(beats, 0.99),
      fleetErrors: fleetA.errors + fleetB.errors,
    };
    const figures = { ...queueFigures, ...heartbeats };
    return { ...figures, targets: CONTROLLER_BENCH_TARGETS, met: targetsMet(figures, options) };
  } finally {
    await fleetB.stop();
    await b.stop();
  }
}

/**
 * Whether each figure reached its target: null (not judged) where the run was smaller than a size the target is set
 * at, whatever the figure.
 */
export function targetsMet(
  figures: Readonly<Record<TargetName, number>>,
  sizes: TargetSizes,
): Record<TargetName, boolean | null> {
  const met = {} as Record<TargetName, boolean | null>;
  for (const [name, target] of Object.entries(CONTROLLER_BENCH_TARGETS) as [
    TargetName,
    ControllerBenchTarget,
  ][]) {
    const value = figures[name];
    const atSize = (Object.entries(target.at) as [keyof TargetSizes, number][]).every(
      ([size, least]) => sizes[size] >= least,
    );
    met[name] = !atSize
      ? null
      : (target.atLeast === undefined || value >= target.atLeast) &&
        (target.atMost === undefined || value <= target.atMost);
  }
  return met;
}
