import type { Catalog } from '../core/catalog.js';
import type { FamilyDemand } from '../core/resources.js';
import type { SpotPreference } from '../core/spot.js';
import { ValidationError } from '../core/validation.js';
import { UNKNOWN_DURATION_SECONDS, type AdmitBy } from '../queue/admission.js';
import {
  capViolations,
  dominantShare,
  FootprintPrices,
  hasAnyCap,
  usageOf,
  type JobFootprint,
  type QueueCaps,
} from '../queue/caps.js';
import { classify } from '../queue/class-shares.js';
import type { WfqConfig } from '../queue/wfq.js';

/**
 * Jobs the queue layer can never admit under the caps (admit.ts `never-fits`): alone, their standalone footprint
 * (the cheapest instance hosting each task, as admission sizes them) breaks a cap, or needs more of the capped capacity
 * than their class's ceiling (`maxShare`) lets the class hold. Such a job waits for ever, so a run with one would go
 * on until its time limit and fail there; it is refused before it starts instead.
 *
 * Judged as the round's admission judges a job alone: plan-cost admission scales footprints by the fleet's packing
 * only while other jobs hold capacity, so alone (factor 1) the job needs its whole standalone footprint, and a plan
 * holding it pays for its instances whole (packing shares an instance, it never makes one cheaper). Priced on demand,
 * unless the run buys spot (`spot`) and the job may go on spot: then at spot prices, as admission sizes it.
 */

export interface NeverAdmittedJob {
  readonly jobId: string;
  readonly footprint: JobFootprint;
  /** The caps it breaks alone, named as `capViolations` names them (`maxCostPerHour`, `quota p maxGpus`). */
  readonly caps: readonly string[];
  /**
   * The class ceiling it is over alone, when it breaks no cap: its class, the class's `maxShare`, and the share of the
   * capped capacity it needs at least (admission's most favourable sizing).
   */
  readonly overClass?:
    { readonly classId: string; readonly maxShare: number; readonly share: number } | undefined;
}

interface JobDemands {
  readonly id: string;
  readonly tasks: readonly { readonly demand: FamilyDemand }[];
  /** Whether it may run on spot capacity (absent: allowed). */
  readonly spot?: SpotPreference | undefined;
  /** Per task, as declared: with the task count, its size for its class (`UNKNOWN_DURATION_SECONDS` if absent). */
  readonly durationSeconds?: number | undefined;
  readonly team?: string | undefined;
}

/** The job's class as admission classifies it: by its declared size (duration × tasks) or its team. */
function classOf(job: JobDemands, config: WfqConfig): string {
  const sizeSeconds = (job.durationSeconds ?? UNKNOWN_DURATION_SECONDS) * job.tasks.length;
  return classify(config, { sizeSeconds, team: job.team });
}

/** Job ids named in a message; the rest are counted. */
const NAMED_JOBS = 3;

/**
 * The jobs of `jobs` that can never be admitted under `caps` and the classes of `config` (their `maxShare`), each
 * sized alone as admission sizes it (its standalone footprint, under either `admitBy`), at spot prices where the run buys
 * spot (`spot`, AdmissionSettings.spot) and the job may go on spot. A job no instance type can host is left to the
 * trace's own checks.
 */
export function neverAdmittedJobs(
  jobs: readonly JobDemands[],
  catalog: Catalog,
  caps: QueueCaps,
  config?: WfqConfig,
  spot = false,
): NeverAdmittedJob[] {
  const ceilings = new Map(
    (config?.classes ?? []).flatMap((c) =>
      c.maxShare === undefined || c.maxShare >= 1 ? [] : [[c.id, c.maxShare] as const],
    ),
  );
  const prices = new FootprintPrices(catalog, spot);
  const out: NeverAdmittedJob[] = [];
  for (const job of jobs) {
    let footprint: JobFootprint;
    try {
      footprint = prices.footprint(
        job.id,
        job.tasks.map((t) => t.demand),
        job.spot,
        caps,
      );
    } catch {
      continue;
    }
    const broken = capViolations(usageOf([footprint], caps), caps);
    if (broken.length > 0) {
      out.push({ jobId: job.id, footprint, caps: broken });
      continue;
    }
    // Without caps a class's share of them is nothing: ceilings hold nobody back.
    if (config === undefined || ceilings.size === 0 || !hasAnyCap(caps)) continue;
    const classId = classOf(job, config);
    const maxShare = ceilings.get(classId);
    const share = dominantShare(footprint, caps);
    if (maxShare !== undefined && share > maxShare + 1e-9)
      out.push({ jobId: job.id, footprint, caps: [], overClass: { classId, maxShare, share } });
  }
  return out;
}

/**
 * Where a cap was set, when the caps say (`QueueCaps.sources`, `FamilyGroupQuota.source`: a file's field, or the flag
 * as typed), else how `simulate`'s command line sets it (a controller config's caps set the same ones).
 */
export function capFlag(cap: string, caps: QueueCaps): string {
  if (cap === 'maxCostPerHour')
    return caps.sources?.maxCostPerHour ?? `--cap-dollars-per-hour ${caps.maxCostPerHour}`;
  if (cap === 'maxInstances') return caps.sources?.maxInstances ?? `--cap-instances ${caps.maxInstances}`;
  const m = /^quota (.+) (maxVcpus|maxGpus)$/.exec(cap);
  if (m === null) return cap;
  const group = m[1] as string;
  const quota = (caps.quotas ?? []).find((q) => q.group === group);
  if (quota?.source !== undefined) return quota.source;
  return m[2] === 'maxGpus'
    ? `--quota ${group}:gpus=${quota?.maxGpus}`
    : `--quota ${group}:vcpus=${quota?.maxVcpus}`;
}

/** What a job's standalone footprint uses of one cap, e.g. `$12.24/h`, `2 instances`, `1 GPU in group p`. */
/** What `footprint` needs of `cap` (`$4.23/h`, `3 instances`, `1 GPU in group p`): messages and ETAs name it. */
export function footprintOn(cap: string, footprint: JobFootprint, caps: QueueCaps): string {
  const usage = usageOf([footprint], caps);
  if (cap === 'maxCostPerHour') return `$${usage.costPerHour.toFixed(2)}/h`;
  if (cap === 'maxInstances') return `${usage.instances} instances`;
  const m = /^quota (.+) (maxVcpus|maxGpus)$/.exec(cap);
  if (m === null) return cap;
  const group = usage.byGroup.get(m[1] as string) ?? { vcpus: 0, gpus: 0 };
  return m[2] === 'maxGpus'
    ? `${group.gpus} GPU${group.gpus === 1 ? '' : 's'} in group ${m[1]}`
    : `${group.vcpus} vCPUs in group ${m[1]}`;
}

/** A share of the capped capacity, as the queue views write it (`62.5%`). */
export function sharePercent(share: number): string {
  return `${(100 * share).toFixed(1)}%`;
}

/** How jobs were sized against the $/hour cap, and where that was set: the flag, or the file that said it. */
function admitByText(admitBy: AdmitBy, caps: QueueCaps): string {
  const source = caps.sources?.admitBy;
  return source === undefined ? `--admit-by ${admitBy}` : `admitBy ${admitBy} (from ${source})`;
}

/** Where a problem comes from (where its cap was set, a queue class) and what it is. */
interface Problem {
  readonly source: string;
  readonly text: string;
}

/**
 * One problem per broken cap, then one per class whose ceiling some job is over alone: how many jobs, and a few of them
 * with what they need.
 */
function problemsOf(
  never: readonly NeverAdmittedJob[],
  totalJobs: number,
  caps: QueueCaps,
  admitBy: AdmitBy,
): Problem[] {
  const named = (jobs: readonly NeverAdmittedJob[], need: (j: NeverAdmittedJob) => string): string => {
    const examples = jobs
      .slice(0, NAMED_JOBS)
      .map((j) => `${j.jobId} (${need(j)})`)
      .join(', ');
    return `${examples}${jobs.length > NAMED_JOBS ? `, and ${jobs.length - NAMED_JOBS} more` : ''}`;
  };
  const byCap = new Map<string, NeverAdmittedJob[]>();
  const byClass = new Map<string, NeverAdmittedJob[]>();
  for (const job of never) {
    for (const cap of job.caps) byCap.set(cap, [...(byCap.get(cap) ?? []), job]);
    if (job.overClass !== undefined)
      byClass.set(job.overClass.classId, [...(byClass.get(job.overClass.classId) ?? []), job]);
  }
  const capProblems = [...byCap].map(([cap, jobs]): Problem => {
    const onSpot = jobs.some((j) => j.footprint.instances.some((i) => i.market === 'spot'));
    const packed =
      cap === 'maxCostPerHour' && admitBy === 'plan-cost'
        ? `; under ${admitByText(admitBy, caps)} too: packing shares an instance, it never makes one cheaper`
        : '';
    return {
      source: capFlag(cap, caps),
      text:
        `${jobs.length} of ${totalJobs} jobs can never be admitted: alone, each needs more than the cap ` +
        `(its standalone footprint, the cheapest instance for each of its tasks` +
        `${onSpot ? ', at spot prices where it may use spot' : ''}${packed}): ` +
        `${named(jobs, (j) => footprintOn(cap, j.footprint, caps))}; raise the cap or leave those jobs out of the trace`,
    };
  });
  const classProblems = [...byClass].map(([classId, jobs]): Problem => {
    const maxShare = jobs[0]?.overClass?.maxShare ?? 1;
    return {
      source: `queue class ${classId} (maxShare ${maxShare})`,
      text:
        `${jobs.length} of ${totalJobs} jobs can never be admitted: alone, each needs more of the capped capacity ` +
        `than the class may hold (${sharePercent(maxShare)}): ` +
        `${named(jobs, (j) => sharePercent(j.overClass?.share ?? 0))}; ` +
        "raise the class's maxShare or the caps, or leave those jobs out of the trace",
    };
  });
  return [...capProblems, ...classProblems];
}

/** One line per broken cap or class ceiling: how many jobs are over it alone, and a few of them with what they need. */
export function neverAdmittedProblems(
  never: readonly NeverAdmittedJob[],
  totalJobs: number,
  caps: QueueCaps,
  admitBy: AdmitBy,
): string[] {
  return problemsOf(never, totalJobs, caps, admitBy).map((p) => `${p.source}: ${p.text}`);
}

/**
 * Refuse a run whose caps (or a class's ceiling, `config`'s `maxShare`) can never admit some job of the trace, naming
 * where the cap was set (`capFlag`) or the class, and a few of the jobs. `spot`: the run buys spot (`neverAdmittedJobs`).
 */
export function checkEveryJobAdmissible(
  trace: { readonly jobs: readonly JobDemands[] },
  catalog: Catalog,
  caps: QueueCaps,
  admitBy: AdmitBy,
  config?: WfqConfig,
  spot = false,
): void {
  const never = neverAdmittedJobs(trace.jobs, catalog, caps, config, spot);
  if (never.length === 0) return;
  const problems = problemsOf(never, trace.jobs.length, caps, admitBy);
  const only = problems.length === 1 ? problems[0] : undefined;
  // A single problem names its source (the flag, the class) as the error's: it says what kind of problem it is.
  if (only !== undefined) throw new ValidationError(only.source, [only.text]);
  throw new ValidationError(
    'caps',
    problems.map((p) => `${p.source}: ${p.text}`),
  );
}
