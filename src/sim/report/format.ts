import type { RunResult } from '../../world/run-result.js';
import { timeWeightedUtilization } from './series-metrics.js';

/** One column of the human-readable summary (terminal table and HTML table). */
export interface SummaryColumn {
  readonly header: string;
  /** What the column means, for a reader who has not read the code: the HTML table's header tooltip and footnote. */
  readonly description: string;
  /** Numeric columns are right-aligned. */
  readonly numeric: boolean;
  readonly cell: (r: RunResult) => string;
}

const fixed = (digits: number) => {
  const f = new Intl.NumberFormat('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  return (v: number): string => (Number.isFinite(v) ? f.format(v) : '–');
};
/** $ amounts and ratios as the summary tables print them (en-US grouping). */
export const money = fixed(2);
export const three = fixed(3);
export const one = fixed(1);
export const integer = fixed(0);

/**
 * Dollars to the cent from $1 up, as `money` prints them, and to three significant digits below, so small amounts
 * (tenths of a cent) read as what they are, not 0.00.
 */
export function smallMoney(x: number): string {
  if (!Number.isFinite(x)) return '–';
  if (x === 0 || Math.abs(x) >= 1) return money(x);
  const digits = Math.min(8, 2 - Math.floor(Math.log10(Math.abs(x))));
  // Zeros past the cents that only the third significant digit put there (0.00410 → 0.0041, 0.0900 → 0.09).
  return x.toFixed(digits).replace(/(\.\d{2}\d*?)0+$/, '$1');
}

const percent = (v: number | null): string => (v === null ? '–' : `${one(100 * v)}%`);

/** Utilization columns are extras of the report (not in RunSummary): time-weighted allocated ÷ provisioned. */
function utilization(dim: 'Gpus' | 'Vcpus' | 'MemoryGiB') {
  const exact = { Gpus: 'gpus', Vcpus: 'vcpus', MemoryGiB: 'memoryGiB' } as const;
  // The run's own (every sample); a result without it (an older report.json) from its downsampled series.
  return (r: RunResult): string =>
    percent(
      r.utilization !== undefined
        ? r.utilization[exact[dim]]
        : timeWeightedUtilization(
            r.series.timeSeconds,
            r.series[`allocated${dim}`],
            r.series[`capacity${dim}`],
          ),
    );
}

/** The first column of every summary table: the key to its rows. */
export const SCHEDULER_COLUMN: SummaryColumn = {
  header: 'scheduler',
  description: 'The scheduling policy simulated.',
  numeric: false,
  cell: (r) => r.summary.scheduler,
};

/** The run every other is compared with: one instance per job. */
export const BASELINE = 'no-packing';

/**
 * How the baseline is named where runs are compared with it: "no-packing (on demand)" when spot was open and it
 * bought none (under `--spot on` it stays on demand), since most of a spot run's saving against it is then the spot
 * discount, not packing; plain "no-packing" otherwise.
 */
export function baselineLabel(results: readonly RunResult[]): string {
  const base = results.find((r) => r.summary.scheduler === BASELINE);
  return base?.spot !== undefined && base.spot.spotShare === 0 ? `${BASELINE} (on demand)` : BASELINE;
}

const NORMALIZED_COST: SummaryColumn = {
  header: 'norm. cost',
  description:
    "Total cost as a share of no-packing's (one instance per job), when no-packing ran; lower is better.",
  numeric: true,
  cell: (r) => percent(r.summary.normalizedCost),
};

/** The same figures, headed by what they are against when the baseline ran on demand beside spot runs. */
const NORMALIZED_COST_ON_DEMAND: SummaryColumn = {
  ...NORMALIZED_COST,
  header: `÷ ${BASELINE} (on demand)`,
  description:
    "Total cost as a share of no-packing's (one instance per job), which bought no spot: it ran on demand, so most " +
    "of a spot run's share below 100% is the spot discount, not packing; lower is better.",
};

/** What a run cost and how long its jobs took: the figures every comparison starts from. */
export const COST_AND_TIME_COLUMNS: readonly SummaryColumn[] = [
  {
    header: 'jobs',
    description: 'Jobs in the trace the run simulated.',
    numeric: true,
    cell: (r) => integer(r.summary.jobs),
  },
  {
    header: 'total cost $',
    description:
      "What the run cost in all: its instances, billed per second from launch to termination, and its jobs' traffic across zones when it reports the network.",
    numeric: true,
    cell: (r) => money(r.summary.totalCost),
  },
  NORMALIZED_COST,
  {
    header: 'mean JCT h',
    description: 'Mean job completion time (end − arrival, queueing included), in hours.',
    numeric: true,
    cell: (r) => three(r.summary.meanJctHours),
  },
  {
    header: 'median JCT h',
    description: 'Median job completion time, in hours.',
    numeric: true,
    cell: (r) => three(r.summary.medianJctHours),
  },
  {
    header: 'p95 JCT h',
    description: '95th percentile of job completion time: 95% of jobs finished within it, in hours.',
    numeric: true,
    cell: (r) => three(r.summary.p95JctHours),
  },
  {
    header: 'peak $/h',
    description: 'Highest cost rate of the fleet at any moment, in dollars per hour.',
    numeric: true,
    cell: (r) => money(r.summary.peakCostPerHour),
  },
];

/** How the run used its fleet: moves, launches, reconfigurations, utilization, and the simulation's own time. */
export const FLEET_COLUMNS: readonly SummaryColumn[] = [
  {
    header: 'migr./job',
    description: 'Job migrations (a started job moved to other instances) per job.',
    numeric: true,
    cell: (r) => three(r.summary.migrationsPerJob),
  },
  {
    header: 'instances',
    description: 'Instances launched over the whole run (each counted once, however long it ran).',
    numeric: true,
    cell: (r) => integer(r.summary.instancesLaunched),
  },
  {
    header: 'full-reconf.',
    description:
      'Share of planned rounds (every round with an admitted job or an instance to plan, whatever Eva chose there) in which Eva chose a full reconfiguration (repacking every job); 0 for schedulers without it.',
    numeric: true,
    cell: (r) => three(r.summary.fullReconfigFraction),
  },
  {
    header: 'GPU util.',
    description:
      'Time-weighted GPU utilization: Σ GPUs requested by placed tasks ÷ Σ GPUs provisioned, over the run.',
    numeric: true,
    cell: utilization('Gpus'),
  },
  {
    header: 'vCPU util.',
    description: 'Time-weighted vCPU utilization: requested by placed tasks ÷ provisioned, over the run.',
    numeric: true,
    cell: utilization('Vcpus'),
  },
  {
    header: 'RAM util.',
    description: 'Time-weighted memory utilization: requested by placed tasks ÷ provisioned, over the run.',
    numeric: true,
    cell: utilization('MemoryGiB'),
  },
  {
    header: 'wall s',
    description: 'Wall-clock seconds the simulation of this run took (not simulated time).',
    numeric: true,
    cell: (r) => one(r.summary.wallSeconds),
  },
];

const orDash =
  (format: (v: number) => string) =>
  (v: number | null | undefined): string =>
    v === null || v === undefined ? '–' : format(v);

/** Columns of the queue layer's metrics, shown when some run had a queue. */
export const QUEUE_COLUMNS: readonly SummaryColumn[] = [
  {
    header: 'p99 JCT h',
    description: '99th percentile of job completion time, in hours.',
    numeric: true,
    cell: (r) => orDash(three)(r.queue?.p99JctHours),
  },
  {
    header: 'unfair. %',
    description:
      'Mean unfairness in percent: how much longer a job took than with a fair share of the capped capacity, 100 × max(0, JCT ÷ fair-share time − 1), averaged over jobs (0 = fair); – without caps.',
    numeric: true,
    cell: (r) => orDash(one)(r.queue?.unfairness),
  },
  {
    header: 'pred. err %',
    description:
      'Mean error of the completion times predicted at submission: |actual − predicted| ÷ predicted, in percent; – without predictions.',
    numeric: true,
    cell: (r) => orDash(one)(r.queue?.predErrAvg),
  },
  {
    header: 'p99 pred. err %',
    description: '99th percentile of that prediction error, in percent.',
    numeric: true,
    cell: (r) => orDash(one)(r.queue?.predErrP99),
  },
  {
    header: 'succ. sojourn h',
    description: 'Mean completion time of the jobs that ended successfully, in hours.',
    numeric: true,
    cell: (r) => orDash(three)(r.queue?.successfulSojournMeanHours),
  },
  {
    header: 'preempt.',
    description: 'Jobs checkpointed back to the queue so a class could reclaim its guaranteed share.',
    numeric: true,
    cell: (r) => orDash(integer)(r.queue?.preemptions),
  },
];

/** Columns of how multi-task jobs started (co-start, placement between rounds), shown when some run reports them. */
export const START_COLUMNS: readonly SummaryColumn[] = [
  {
    header: 'start skew s',
    description:
      'Mean over starts of multi-task jobs of the latest minus the earliest task ready time, in seconds.',
    numeric: true,
    cell: (r) => orDash(one)(r.starts?.startSkewSecondsMean),
  },
  {
    header: 'barrier-idle $',
    description:
      "Σ over multi-task starts and tasks of (job start − task ready) × the task's share of its instance's $/h: paid capacity idling at the barrier.",
    numeric: true,
    cell: (r) => orDash(smallMoney)(r.starts?.barrierIdleCost),
  },
  {
    header: 'wait to place s',
    description: 'Mean seconds from a job’s arrival to its first placement (a plan’s or one between rounds).',
    numeric: true,
    cell: (r) => orDash(one)(r.starts?.waitToPlaceSecondsMean),
  },
];

/** Columns of the spot metrics, shown when some run simulated spot interruptions. */
export const SPOT_COLUMNS: readonly SummaryColumn[] = [
  {
    header: 'interrupt.',
    description:
      'Spot instances EC2 took back (the simulated spot market; each counted once): one drained on its ' +
      'interruption notice and ended by its owner before the reclaim is not one.',
    numeric: true,
    cell: (r) => orDash(integer)(r.spot?.interruptions),
  },
  {
    header: 'lost work h',
    description:
      'Work that spot interruptions cost: progress past the last checkpoint, in job-hours at full throughput, lost ' +
      'at the notice by a runtime that evicts its jobs then (karpenter-spot), else at the reclaim.',
    numeric: true,
    cell: (r) => orDash(three)(r.spot?.lostWorkHours),
  },
  {
    header: 'spot share',
    description: 'Share of the billed instance-hours bought on spot.',
    numeric: true,
    cell: (r) => orDash(percent)(r.spot?.spotShare),
  },
];

/** Columns of the network metrics, shown when some run reports the network (jobs declare one, or it was configured). */
export const NETWORK_COLUMNS: readonly SummaryColumn[] = [
  {
    header: 'cross-zone $',
    description:
      "What the jobs' traffic across zones cost (priced per GiB each way), in dollars: part of the total cost.",
    numeric: true,
    cell: (r) => orDash(money)(r.network?.crossZoneCost),
  },
  {
    header: 'app perf.',
    description:
      'Mean application performance of the latency-sensitive multi-task jobs: the time-average of the share of their speed the network left them (1 = unslowed); – when none ran.',
    numeric: true,
    cell: (r) => orDash(three)(r.network?.appPerformanceMean),
  },
  {
    header: 'lat.-sens. jobs',
    description: 'Latency-sensitive multi-task jobs in the trace.',
    numeric: true,
    cell: (r) => orDash(integer)(r.network?.latencySensitiveJobs),
  },
  {
    header: 'lat.-sens. JCT h',
    description: 'Mean completion time of the latency-sensitive jobs that finished, in hours.',
    numeric: true,
    cell: (r) => orDash(three)(r.network?.latencySensitiveMeanJctHours),
  },
  {
    header: 'lat.-sens. migr./job',
    description: 'Migrations of latency-sensitive jobs per latency-sensitive job.',
    numeric: true,
    cell: (r) => orDash(three)(r.network?.latencySensitiveMigrationsPerJob),
  },
  {
    header: 'latency moves/job',
    description: 'Job moves made by plans chosen for the network’s sake, per job of the trace.',
    numeric: true,
    cell: (r) => orDash(three)(r.network?.latencyMovesPerJob),
  },
];

/** One table of the summary: a title, and the columns after the scheduler's. */
export interface SummaryGroup {
  readonly id: string;
  readonly title: string;
  readonly columns: readonly SummaryColumn[];
}

/**
 * The summary as tables of a few columns each, every one keyed by the scheduler: cost and completion time first, then
 * what the runs were about (spot, the queue, multi-task starts, the network, each when some run reports it), then the fleet. One
 * table of every column was wider than a page or a terminal, and the figures a run was made for sat at its far end.
 */
export function summaryGroups(results: readonly RunResult[]): readonly SummaryGroup[] {
  const costColumns =
    baselineLabel(results) === BASELINE
      ? COST_AND_TIME_COLUMNS
      : COST_AND_TIME_COLUMNS.map((c) => (c === NORMALIZED_COST ? NORMALIZED_COST_ON_DEMAND : c));
  const groups: SummaryGroup[] = [
    { id: 'cost-and-time', title: 'Cost and completion time', columns: costColumns },
  ];
  if (results.some((r) => r.spot !== undefined))
    groups.push({ id: 'spot', title: 'Spot', columns: SPOT_COLUMNS });
  if (results.some((r) => r.queue !== undefined))
    groups.push({ id: 'queue', title: 'Queue', columns: QUEUE_COLUMNS });
  if (results.some((r) => r.starts !== undefined))
    groups.push({ id: 'starts', title: 'Multi-task starts', columns: START_COLUMNS });
  if (results.some((r) => r.network !== undefined))
    groups.push({ id: 'network', title: 'Network', columns: NETWORK_COLUMNS });
  groups.push({ id: 'fleet', title: 'Fleet', columns: FLEET_COLUMNS });
  return groups;
}

/** The summary as plain-text tables for the terminal (what `simulate` prints without --json), one per group. */
export function summaryTextTable(results: readonly RunResult[]): string {
  return summaryGroups(results)
    .map((g) => `${g.title}\n${textTable([SCHEDULER_COLUMN, ...g.columns], results)}`)
    .join('\n');
}

function textTable(columns: readonly SummaryColumn[], results: readonly RunResult[]): string {
  const rows = results.map((r) => columns.map((c) => c.cell(r)));
  const widths = columns.map((c, i) => Math.max(c.header.length, ...rows.map((row) => row[i]?.length ?? 0)));
  const render = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => {
        const w = widths[i] ?? 0;
        return columns[i]?.numeric ? cell.padStart(w) : cell.padEnd(w);
      })
      .join('  ')
      .trimEnd();
  const header = render(columns.map((c) => c.header));
  const rule = widths.map((w) => '-'.repeat(w)).join('  ');
  return [header, rule, ...rows.map(render)].join('\n') + '\n';
}
