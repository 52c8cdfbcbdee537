import type { Catalog } from '../core/catalog.js';
import type { Admission, AdmitBy, QueueDecision } from '../queue/admission.js';
import type { QueueCaps } from '../queue/caps.js';
import type { WfqConfig } from '../queue/wfq.js';
import type { SimJob } from './entities.js';
import { neverAdmittedJobs, neverAdmittedProblems } from './never-fits.js';
import type { RoundTally } from './round-tally.js';

/** What the engine knows, when a run reaches its time limit, of why its jobs did not finish. */
export interface StallFacts {
  readonly schedulerName: string;
  readonly catalog: Catalog;
  readonly admission: Admission;
  /** Every job of the run. */
  readonly jobs: readonly SimJob[];
  /** The plans made and refused, and the last round's admission. */
  readonly tally: RoundTally;
}

/**
 * What either runtime knows of a stalled run from its jobs, caps and catalog alone (the controller runtime has no
 * engine admission or round tally to add).
 */
export interface JobStallFacts {
  readonly catalog: Catalog;
  readonly caps: QueueCaps;
  /** How admission sized waiting jobs (default `standalone`, as Admission's). */
  readonly admitBy?: AdmitBy | undefined;
  readonly config?: WfqConfig | undefined;
  /** The run buys spot (jobs are sized at spot prices). */
  readonly spot?: boolean | undefined;
  /** Every job of the run. */
  readonly jobs: readonly SimJob[];
}

/** Why a run stopped at its time limit with `unfinished` jobs, as far as the engine can tell. */
export function stallCause(facts: StallFacts, unfinished: readonly string[]): string {
  const { caps, admitBy, config, spot } = facts.admission;
  const { rounds, capRefusedRounds, lastCapViolation, lastQueue } = facts.tally;
  return jobStallCause(
    { catalog: facts.catalog, caps, admitBy, config, spot, jobs: facts.jobs },
    unfinished,
    { rounds: capRefusedRounds, of: rounds, last: lastCapViolation, schedulerName: facts.schedulerName },
    lastQueue,
  );
}

/**
 * Why a run stalled, from what any runtime knows (jobs the caps never admit, spot interruptions outpacing the work),
 * from the plans its caps refused when it counted them, and from the last round's admission when it has one (the
 * engine's; the controller runtime's is inside its controller).
 */
export function jobStallCause(
  facts: JobStallFacts,
  unfinished: readonly string[],
  refused?: {
    readonly rounds: number;
    readonly of: number;
    readonly last?: string | undefined;
    readonly schedulerName: string;
  },
  lastQueue?: QueueDecision,
): string {
  const never = neverAdmittedJobs(
    facts.jobs.filter((j) => j.status !== 'finished').map((j) => j.spec),
    facts.catalog,
    facts.caps,
    facts.config,
    facts.spot,
  );
  if (never.length > 0)
    return `among them jobs the caps can never admit (never-fits): ${neverAdmittedProblems(never, unfinished.length, facts.caps, facts.admitBy ?? 'standalone').join('; ')}`;
  // Plans the cap check refused leave the fleet as it was: a scheduler that plans without the caps (the baselines)
  // can stall under them for good.
  if (refused !== undefined && refused.rounds > 0)
    return (
      `${refused.rounds} of its ${refused.of} plans broke a cap and were not carried out (the last: ` +
      `${refused.last ?? '?'}); only Eva plans within the caps: run ${refused.schedulerName} without them`
    );
  // Jobs the last round's admission kept out never reached the scheduler: the queue holds them back.
  const waiting =
    lastQueue === undefined || facts.config === undefined
      ? undefined
      : queueWaits(lastQueue, new Set(unfinished), facts.config);
  if (waiting !== undefined)
    return (
      `${waiting.count} of them still waited for admission at the last round (${waiting.why}): the queue layer ` +
      'held them back, not the scheduler; check the caps and the classes (weights, maxShare) against these jobs'
    );
  return interruptionCause(facts.jobs, unfinished) ?? 'does the scheduler place them?';
}

/** Placed, and sent back by spot interruptions faster than they finish: the spot market, not the scheduler. */
function interruptionCause(jobs: readonly SimJob[], unfinished: readonly string[]): string | undefined {
  const unfinishedIds = new Set(unfinished);
  const interrupted = jobs.filter((j) => unfinishedIds.has(j.spec.id) && j.interruptions > 0);
  if (interrupted.length === 0) return undefined;
  const times = interrupted.reduce((n, j) => n + j.interruptions, 0);
  const hours = interrupted.reduce((s, j) => s + j.lostWorkSeconds, 0) / 3600;
  const unsaved = interrupted.filter((j) => j.checkpointIntervalSeconds === 0).length;
  return (
    `${interrupted.length} of them ran and lost their work to spot interruptions ${times} times ` +
    `(${hours.toFixed(2)} job-hours)` +
    (unsaved > 0
      ? `; ${unsaved} never checkpoint (--checkpoint-minutes 0), so each interruption sends them back to the start`
      : '') +
    ': interruptions come faster than they finish; checkpoint more often, or lower --spot-bursts'
  );
}

/** Admission's reasons for a wait, as a stalled run names them. */
const WAIT_TEXT = {
  'class-share': "waiting for their class's share",
  caps: 'waiting for room under the caps',
  'never-fits': "over the caps or their class's ceiling alone, as sized then (never-fits)",
} as const;

/**
 * How many of `jobs` the decision kept waiting (unhostable ones too), and why, per class and reason: "class large
 * (maxShare 0.1): 14 waiting for their class's share". Undefined when it kept none of them out.
 */
function queueWaits(
  decision: QueueDecision,
  jobs: ReadonlySet<string>,
  config: WfqConfig,
): { readonly count: number; readonly why: string } | undefined {
  const counts = new Map<string, { readonly where: string; readonly what: string; n: number }>();
  const add = (classId: string, what: string): void => {
    const maxShare = config.classes.find((c) => c.id === classId)?.maxShare;
    const where = `class ${classId}${maxShare === undefined ? '' : ` (maxShare ${maxShare})`}`;
    const key = `${where} ${what}`;
    const entry = counts.get(key);
    if (entry === undefined) counts.set(key, { where, what, n: 1 });
    else entry.n += 1;
  };
  for (const q of decision.result.queued) if (jobs.has(q.jobId)) add(q.classId, WAIT_TEXT[q.reason]);
  for (const u of decision.unhostable) if (jobs.has(u.jobId)) add(u.classId, 'hosted by no instance type');
  if (counts.size === 0) return undefined;
  const all = [...counts.values()];
  return {
    count: all.reduce((a, e) => a + e.n, 0),
    why: all.map((e) => `${e.where}: ${e.n} ${e.what}`).join('; '),
  };
}
