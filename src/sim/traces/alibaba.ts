import { z } from 'zod';
import type { Catalog } from '../../core/catalog.js';
import { Rng } from '../../core/random.js';
import type { Resources } from '../../core/resources.js';
import { canHost } from '../../scheduler/reservation-price.js';
import { ValidationError } from '../../core/validation.js';
import { LineValidationError, noRowsReason, readCsv, type LineProblem } from './csv.js';
import {
  buildJob,
  DEFAULT_MEAN_INTERARRIVAL_SECONDS,
  drawTaskCount,
  gavelDurationSeconds,
  generationStreams,
  poissonArrivalSeconds,
  resolveGenerationOptions,
  shuffled,
  type GenerationOptions,
} from './generation.js';
import type { Trace, TraceJob } from '../../world/trace.js';
import { singleTaskWorkloads, type Workload, type WorkloadCatalog } from './workloads.js';

/**
 * The Alibaba GPU cluster trace (cluster-trace-gpu-v2023, `openb_pod_list_*.csv`) converted with Eva's
 * recipe (`pai_trace/trace_generator.py`, research digest §5.2).
 */
export interface AlibabaPod {
  /** 1-based line in the CSV. */
  readonly line: number;
  readonly name: string;
  readonly cpuMilli: number;
  readonly memoryMiB: number;
  readonly numGpu: number;
  /** One of POD_PHASES, as written there; undefined for files without the column (e.g. multigpu50). */
  readonly podPhase: PodPhase | undefined;
}

/**
 * A pod's phase: Kubernetes' pod phases, of which cluster-trace-gpu-v2023 has Running, Failed, Pending and Succeeded.
 * Read in any case; any other text is refused, since only Failed pods are dropped and a misspelled `FAILD` would
 * otherwise be simulated without a word.
 */
export const POD_PHASES = ['Pending', 'Running', 'Succeeded', 'Failed', 'Unknown'] as const;
export type PodPhase = (typeof POD_PHASES)[number];

const REQUIRED_COLUMNS = ['name', 'cpu_milli', 'memory_mib', 'num_gpu'] as const;
const PHASE_COLUMN = 'pod_phase';

const quantityCell = z
  .string()
  .trim()
  .min(1, { error: 'missing value', abort: true })
  .regex(/^\+?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/, { error: 'not a non-negative number', abort: true })
  .transform(Number)
  // 1e400 is Infinity: no instance type could host it, so it would be dropped as unhostable without a word.
  .refine((n) => Number.isFinite(n), 'too large a number (not finite)');

const phaseCell = z
  .string()
  .trim()
  .min(1, { error: 'missing value', abort: true })
  .transform((text, ctx) => {
    const phase = POD_PHASES.find((p) => p.toLowerCase() === text.toLowerCase());
    if (phase === undefined)
      ctx.addIssue({
        code: 'custom',
        message: `unknown pod phase ${JSON.stringify(text)} (expected ${POD_PHASES.join(', ')})`,
      });
    return phase ?? 'Unknown';
  });

const podRowSchema = z.object({
  name: z.string().trim().min(1, 'missing value'),
  cpu_milli: quantityCell,
  memory_mib: quantityCell,
  num_gpu: quantityCell,
  pod_phase: phaseCell.optional(),
});

/** Whether the text breaks lines with a lone CR only, which is no line break here (csv.ts noRowsReason says so). */
function linesEndInLoneCr(text: string): boolean {
  return text.includes('\r') && !text.includes('\n');
}

/**
 * Parse the pod list. Every malformed line is reported as `file:line: field: reason` (all of them, in one
 * error, the lines whose cell count is off among them). Only the columns the conversion uses are required; extra
 * columns are ignored. A file without a data row is refused.
 */
export function parseAlibabaPods(text: string, source = 'openb_pod_list.csv'): AlibabaPod[] {
  const { table, problems: structural } = readCsv(text, source);
  // An unterminated quote in the header leaves no header to check columns against: that is the problem to report.
  if (table.header.length === 0) throw new LineValidationError(source, structural);
  const noRows: LineProblem[] =
    table.rows.length === 0 && structural.length === 0
      ? [{ line: table.headerLine, field: '(rows)', reason: noRowsReason(text) }]
      : [];
  // A file whose lines end in a lone CR reads as one header line, whose columns would mislead: that comes first.
  if (noRows.length > 0 && linesEndInLoneCr(text)) throw new LineValidationError(source, noRows);
  // Then the header: a file of another kind (a JSON trace given --format alibaba) is one line with none of the
  // columns, which says more than that it has no rows.
  const headerProblems: LineProblem[] = REQUIRED_COLUMNS.filter((c) => !table.header.includes(c)).map(
    (c) => ({
      line: table.headerLine,
      field: c,
      reason: 'required column missing from the header',
    }),
  );
  // A repeated column would be read from its first copy only, whichever the file meant.
  table.header.forEach((name, i) => {
    if (name !== '' && table.header.indexOf(name) < i)
      headerProblems.push({
        line: table.headerLine,
        field: name,
        reason: `column given more than once (columns ${table.header.indexOf(name) + 1} and ${i + 1})`,
      });
  });
  if (headerProblems.length > 0) throw new LineValidationError(source, headerProblems);
  if (noRows.length > 0) throw new LineValidationError(source, noRows);
  const columns = [...REQUIRED_COLUMNS, PHASE_COLUMN] as const;
  const index = new Map(columns.map((c) => [c, table.header.indexOf(c)]));
  const problems: LineProblem[] = [...structural];
  const pods: AlibabaPod[] = [];
  for (const row of table.rows) {
    const record: Record<string, string> = {};
    for (const c of columns) {
      const i = index.get(c) ?? -1;
      if (i >= 0) record[c] = row.cells[i] ?? '';
    }
    const parsed = podRowSchema.safeParse(record);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) {
        const field = issue.path.length > 0 ? issue.path.map(String).join('.') : '(row)';
        problems.push({ line: row.line, field, reason: issue.message });
      }
      continue;
    }
    const p = parsed.data;
    pods.push({
      line: row.line,
      name: p.name,
      cpuMilli: p.cpu_milli,
      memoryMiB: p.memory_mib,
      numGpu: p.num_gpu,
      podPhase: p.pod_phase,
    });
  }
  if (problems.length > 0)
    throw new LineValidationError(
      source,
      problems.sort((a, b) => a.line - b.line), // stable: a line's fields keep their order
    );
  return pods;
}

/** Eva's demand of a pod: `[ceil(num_gpu), ceil(cpu_milli/1000) vCPU, ceil(memory_mib/1024) GiB]`. */
export function podDemand(pod: AlibabaPod): Resources {
  return [Math.ceil(pod.numGpu), Math.ceil(pod.cpuMilli / 1000), Math.ceil(pod.memoryMiB / 1024)];
}

/**
 * Whether some instance type can host the demand as it is kept, judged as the scheduler and the trace's catalog check
 * judge it. Eva's filter counts only half the vCPUs of a CPU-only pod on a CPU-only type (its phys-core view of
 * c7i/r7i), yet emits the whole demand: a pod kept so could never be placed and would fail the run. No pod of the
 * bundled file with the bundled catalog is kept by one rule and not the other.
 */
export function catalogCanHost(catalog: Catalog, demand: Resources): boolean {
  const asKept = { any: demand };
  return catalog.types.some((type) => canHost(type, asKept));
}

/** Why pods were left out of a conversion: how many of each. */
export interface DroppedPods {
  readonly failed: number;
  /** No instance type of the catalog can host the demand. */
  readonly unhostable: number;
  /** The demand rounds to [0, 0, 0]: it would hold nothing, yet a whole instance would be billed for it. */
  readonly noDemand: number;
}

/**
 * The pods Eva keeps (not Failed, hostable by the catalog) that ask for something, in file order, with their demands,
 * and how many were dropped for each reason.
 */
export function filterPods(
  pods: readonly AlibabaPod[],
  catalog: Catalog,
): {
  readonly kept: { readonly pod: AlibabaPod; readonly demand: Resources }[];
  readonly dropped: DroppedPods;
} {
  const kept: { pod: AlibabaPod; demand: Resources }[] = [];
  let failed = 0;
  let unhostable = 0;
  let noDemand = 0;
  for (const pod of pods) {
    if (pod.podPhase === 'Failed') {
      failed += 1;
      continue;
    }
    const demand = podDemand(pod);
    if (!demand.some((x) => x > 0)) noDemand += 1;
    else if (!catalogCanHost(catalog, demand)) unhostable += 1;
    else kept.push({ pod, demand });
  }
  return { kept, dropped: { failed, unhostable, noDemand } };
}

/** The pods Eva keeps (not Failed, hostable by the catalog, asking for something), in file order, with their demands. */
export function keptPodDemands(
  pods: readonly AlibabaPod[],
  catalog: Catalog,
): { readonly pod: AlibabaPod; readonly demand: Resources }[] {
  return filterPods(pods, catalog).kept;
}

function droppedText(d: DroppedPods): string {
  return `dropped ${d.failed} Failed, ${d.unhostable} no instance type can host, ${d.noDemand} asking for no GPU, vCPU or memory`;
}

export interface DemandFrequency {
  readonly demand: Resources;
  readonly count: number;
}

function demandKey(d: Resources): string {
  return `${d[0]},${d[1]},${d[2]}`;
}

/**
 * Distinct converted demand vectors with how many kept pods have each (94 vectors over 6,274 pods for the
 * bundled file and catalog), most frequent first, ties by vector. The scheduler benchmark samples from it.
 */
export function alibabaDemandFrequencies(
  text: string,
  catalog: Catalog,
  source = 'openb_pod_list.csv',
): DemandFrequency[] {
  const counts = new Map<string, DemandFrequency>();
  for (const { demand } of keptPodDemands(parseAlibabaPods(text, source), catalog)) {
    const key = demandKey(demand);
    counts.set(key, { demand, count: (counts.get(key)?.count ?? 0) + 1 });
  }
  return [...counts.values()].sort(
    (a, b) =>
      b.count - a.count ||
      a.demand[0] - b.demand[0] ||
      a.demand[1] - b.demand[1] ||
      a.demand[2] - b.demand[2],
  );
}

export interface AlibabaTraceOptions extends GenerationOptions {
  readonly instanceCatalog: Catalog;
  readonly workloadCatalog: WorkloadCatalog;
  /**
   * Shuffle the kept pods (seeded) before taking the first N, as Eva does (`random.shuffle(pai_jobs)`, then
   * `[:200]` for pai_200). False keeps file order (creation time). Default true.
   */
  readonly shuffle?: boolean;
  readonly traceName?: string;
}

/**
 * Convert the pod list into a trace with Eva's recipe (research digest §5.2):
 *  - drop Failed pods and pods no instance type can host at their demand `{any: podDemand}` (unlike Eva, not at half
 *    the vCPUs: `catalogCanHost`); also drop pods whose demand rounds to [0, 0, 0] (Eva would keep them; they would
 *    hold nothing yet be billed a whole idle instance);
 *  - map each distinct demand vector to a random single-task workload of the catalog, named `workload[k]`
 *    (k counts vectors per workload in order of first appearance); its jobs take that workload's delays,
 *    full throughput and interference identity, but keep the pod's demand;
 *  - Poisson arrivals (mean 1200 s / arrivalRateScale), Gavel-style durations,
 *    `total_iters = int(duration × full_throughput)`;
 *  - with `multiTaskShare` s, a share s of jobs get 2 or 4 identical tasks (Eva §6.7).
 * Deterministic given the seed; the first N jobs do not depend on the job count.
 */
export function convertAlibabaTrace(
  text: string,
  options: AlibabaTraceOptions,
  source = 'openb_pod_list.csv',
): Trace {
  const opts = resolveGenerationOptions({
    seed: options.seed,
    jobs: options.jobs,
    arrivalRateScale: options.arrivalRateScale,
    multiTaskShare: options.multiTaskShare,
  });
  const workloads = singleTaskWorkloads(options.workloadCatalog);
  if (workloads.length === 0)
    throw new Error('the workload catalog has no single-task workload to map pods to');

  const streams = generationStreams(new Rng(opts.seed));
  const { kept, dropped } = filterPods(parseAlibabaPods(text, source), options.instanceCatalog);
  const ordered = options.shuffle === false ? kept : shuffled(streams.order, kept);
  if (ordered.length === 0)
    throw new ValidationError(source, [`no pod remains to simulate (${droppedText(dropped)})`]);
  if (opts.jobs !== undefined && opts.jobs > ordered.length)
    throw new ValidationError(source, [
      `--jobs: asked for ${opts.jobs} jobs, but only ${ordered.length} pods remain after filtering (${droppedText(dropped)})`,
    ]);
  const selected = opts.jobs === undefined ? ordered : ordered.slice(0, opts.jobs);

  const arrivals = poissonArrivalSeconds(
    streams.arrival,
    selected.length,
    DEFAULT_MEAN_INTERARRIVAL_SECONDS / opts.arrivalRateScale,
  );
  const nameByDemand = new Map<string, { name: string; workload: Workload }>();
  const perWorkloadCounter = new Map<string, number>();
  const jobs: TraceJob[] = selected.map(({ demand }, i) => {
    const key = demandKey(demand);
    let assigned = nameByDemand.get(key);
    if (assigned === undefined) {
      const workload = streams.workload.pick(workloads);
      const k = perWorkloadCounter.get(workload.name) ?? 0;
      perWorkloadCounter.set(workload.name, k + 1);
      assigned = { name: `${workload.name}[${k}]`, workload };
      nameByDemand.set(key, assigned);
    }
    return buildJob({
      id: String(i),
      name: assigned.name,
      workload: assigned.workload,
      arrivalSeconds: arrivals[i] ?? 0,
      durationSeconds: gavelDurationSeconds(streams.duration),
      demand: { any: demand },
      taskCount: drawTaskCount(streams.taskCount, opts.multiTaskShare),
    });
  });
  return { name: options.traceName ?? `alibaba-gpu-v2023 (seed ${opts.seed})`, jobs };
}
