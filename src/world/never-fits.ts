import type { Catalog } from '../core/catalog.js';
import type { FamilyDemand } from '../core/resources.js';
import { ValidationError } from '../core/validation.js';
import { MIN_PACKING_FACTOR, type AdmitBy } from '../queue/admission.js';
import {
  capViolations,
  reservationFootprint,
  usageOf,
  type JobFootprint,
  type QueueCaps,
} from '../queue/caps.js';
import { PriceBook } from '../scheduler/reservation-price.js';

/**
 * Jobs the queue layer can never admit under the caps (admit.ts `never-fits`): alone, their standalone footprint
 * (the cheapest instance hosting each task, as admission sizes them) breaks a cap. Such a job waits for ever, so a
 * run with one would go on until its time limit and fail there; it is refused before it starts instead.
 */

export interface NeverAdmittedJob {
  readonly jobId: string;
  readonly footprint: JobFootprint;
  /** The caps it breaks alone, named as `capViolations` names them (`maxCostPerHour`, `quota p maxGpus`). */
  readonly caps: readonly string[];
}

interface JobDemands {
  readonly id: string;
  readonly tasks: readonly { readonly demand: FamilyDemand }[];
}

/** Job ids named in a message; the rest are counted. */
const NAMED_JOBS = 3;

/**
 * The jobs of `jobs` that can never be admitted under `caps`. With `plan-cost`, admission scales a footprint's $/hour
 * by the fleet's packing, never below MIN_PACKING_FACTOR: only a job over the $ cap even then is certain never to
 * fit. A job no instance type can host is left to the trace's own checks.
 */
export function neverAdmittedJobs(
  jobs: readonly JobDemands[],
  catalog: Catalog,
  caps: QueueCaps,
  admitBy: AdmitBy,
): NeverAdmittedJob[] {
  const prices = new PriceBook(catalog);
  const factor = admitBy === 'plan-cost' ? MIN_PACKING_FACTOR : 1;
  const out: NeverAdmittedJob[] = [];
  for (const job of jobs) {
    let footprint: JobFootprint;
    try {
      footprint = reservationFootprint(
        job.id,
        job.tasks.map((t) => t.demand),
        prices,
      );
    } catch {
      continue;
    }
    const sized = {
      jobId: job.id,
      instances: footprint.instances.map((i) => ({ ...i, costPerHour: i.costPerHour * factor })),
    };
    const broken = capViolations(usageOf([sized], caps), caps);
    // Packing shares an instance, it never makes one cheaper: a task whose cheapest host alone costs more than the $
    // cap can never run, whatever plan-cost admission's packing factor lets in (its plan is cut to the cap). Only
    // without spot, where that host's price is its on-demand one.
    const priciestHost = Math.max(...footprint.instances.map((i) => i.costPerHour));
    if (
      catalog.spot === undefined &&
      caps.maxCostPerHour !== undefined &&
      priciestHost > caps.maxCostPerHour &&
      !broken.includes('maxCostPerHour')
    )
      broken.push('maxCostPerHour');
    if (broken.length > 0) out.push({ jobId: job.id, footprint, caps: broken });
  }
  return out;
}

/** How a cap is set on `simulate`'s command line (a controller config's caps set the same ones). */
export function capFlag(cap: string, caps: QueueCaps): string {
  if (cap === 'maxCostPerHour') return `--cap-dollars-per-hour ${caps.maxCostPerHour}`;
  if (cap === 'maxInstances') return `--cap-instances ${caps.maxInstances}`;
  const m = /^quota (.+) (maxVcpus|maxGpus)$/.exec(cap);
  if (m === null) return cap;
  const group = m[1] as string;
  const quota = (caps.quotas ?? []).find((q) => q.group === group);
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

/** One line per broken cap: how many jobs break it alone, and a few of them with what they need of it. */
export function neverAdmittedProblems(
  never: readonly NeverAdmittedJob[],
  totalJobs: number,
  caps: QueueCaps,
  admitBy: AdmitBy,
): string[] {
  const byCap = new Map<string, NeverAdmittedJob[]>();
  for (const job of never) for (const cap of job.caps) byCap.set(cap, [...(byCap.get(cap) ?? []), job]);
  return [...byCap].map(([cap, jobs]) => {
    const examples = jobs
      .slice(0, NAMED_JOBS)
      .map((j) => `${j.jobId} (${footprintOn(cap, j.footprint, caps)})`)
      .join(', ');
    const more = jobs.length > NAMED_JOBS ? `, and ${jobs.length - NAMED_JOBS} more` : '';
    const packed =
      cap === 'maxCostPerHour' && admitBy === 'plan-cost'
        ? ` even at ${MIN_PACKING_FACTOR} of it (admission's most favourable packing under --admit-by plan-cost), or ` +
          'has a task whose cheapest instance alone costs more (packing shares an instance, it never makes one cheaper)'
        : '';
    return (
      `${capFlag(cap, caps)}: ${jobs.length} of ${totalJobs} jobs can never be admitted: alone, each needs more than ` +
      `the cap${packed} (its standalone footprint, the cheapest instance for each of its tasks): ${examples}${more}; ` +
      'raise the cap or leave those jobs out of the trace'
    );
  });
}

/** Refuse a run whose caps can never admit some job of the trace, naming the cap's flag and a few of the jobs. */
export function checkEveryJobAdmissible(
  trace: { readonly jobs: readonly JobDemands[] },
  catalog: Catalog,
  caps: QueueCaps,
  admitBy: AdmitBy,
): void {
  const never = neverAdmittedJobs(trace.jobs, catalog, caps, admitBy);
  if (never.length === 0) return;
  const problems = neverAdmittedProblems(never, trace.jobs.length, caps, admitBy);
  const flags = [...new Set(never.flatMap((j) => j.caps))].map((cap) => capFlag(cap, caps));
  if (problems.length === 1) {
    // The problem starts with the flag already: the source says what kind of problem it is.
    const only = problems[0] as string;
    throw new ValidationError(flags[0] as string, [only.slice((flags[0] as string).length + 2)]);
  }
  throw new ValidationError('caps', problems);
}
