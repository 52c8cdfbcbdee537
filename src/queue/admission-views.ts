import { addUsage, capViolations, dominantShare, usageOf, type CapUsage, type QueueCaps } from './caps.js';
import type { Admission, QueueDecision } from './admission.js';
import type { AdmissionResult, QueuedJob, QueuedPosition, WaitReason } from './admit.js';
import type { WfqConfig } from './wfq.js';

/**
 * Admission decisions in words, for the job views the API and `fleetwise job` show: each live job's class, whether
 * it is admitted, its place in its class queue, and one line saying why it waits (class share, a cap, never fits).
 */

export type QueueStatus = 'admitted' | 'waiting';

/** What a job's view says about its place in the queue. */
export interface JobQueueView {
  readonly classId: string;
  /** `admitted`: in this round's plan (or holding capacity); `waiting`: queued. */
  readonly status: QueueStatus;
  /** 1 = head of its class queue; null when admitted (or admitted but left out by the plan). */
  readonly position: number | null;
  readonly reason: WaitReason | null;
  /** One line, e.g. "class small is at its share of the capped capacity (95.0% used of 95.0%)". */
  readonly detail: string;
  /** When this view was computed; a runtime that keeps views keeps the time an unchanged view was first shown. */
  readonly sinceSeconds: number;
}

/** Every live job's view after `decision`. */
export function queueViews(decision: QueueDecision, admission: Admission): Map<string, JobQueueView> {
  const now = decision.nowSeconds;
  const { result } = decision;
  const config = admission.config;
  const caps = admission.caps;
  const views = new Map<string, JobQueueView>();
  for (const j of decision.running)
    views.set(j.id, {
      classId: admission.classOf(j.sizeSeconds, j.team),
      status: 'admitted',
      position: null,
      reason: null,
      detail: 'holds capacity',
      sinceSeconds: now,
    });
  for (const id of result.admitted) {
    const job = decision.waiting.get(id) as QueuedJob;
    views.set(id, {
      classId: admission.classOf(job.sizeSeconds, job.team),
      status: 'admitted',
      position: null,
      reason: null,
      detail: 'admitted under the caps this round',
      sinceSeconds: now,
    });
  }
  for (const q of result.queued) {
    const job = decision.waiting.get(q.jobId) as QueuedJob;
    if (q.reason === 'never-fits') {
      views.set(q.jobId, {
        classId: q.classId,
        status: 'waiting',
        position: null,
        reason: 'never-fits',
        detail: waitDetail('never-fits', q.classId, 0, job, result, config, caps),
        sinceSeconds: now,
      });
      continue;
    }
    const reason = shownWaitReason(q, result);
    views.set(q.jobId, {
      classId: q.classId,
      status: 'waiting',
      position: q.position + 1,
      reason,
      detail: waitDetail(reason, q.classId, q.position, job, result, config, caps),
      sinceSeconds: now,
    });
  }
  for (const { jobId, classId } of decision.unhostable)
    views.set(jobId, {
      classId,
      status: 'waiting',
      position: null,
      reason: 'never-fits',
      detail: 'no instance type of the current catalog can host one of its tasks',
      sinceSeconds: now,
    });
  return views;
}

/** A class holding the whole capped capacity (one class, or the others idle) waits for the caps, not its share. */
export function shownWaitReason(q: QueuedPosition, result: AdmissionResult): WaitReason {
  const whole = (result.classes.find((c) => c.classId === q.classId)?.fluidShare ?? 0) >= 1 - 1e-9;
  return q.reason === 'class-share' && whole ? 'caps' : q.reason;
}

/** The cap name of a job no instance type of the catalog can host (it waits for the catalog, not for a cap). */
export const NO_INSTANCE_TYPE = 'no instance type';

/**
 * The name of what keeps a queued job waiting, one of few whatever the queue holds: a cap as `capViolations` names
 * it (`maxInstances`, `quota p maxGpus`), or `class <id> share` / `class <id> maxShare`, so that what is counted by it
 * (metrics) has a series per cap, not per job or queue position. A job that would fit the caps but waits behind its
 * class's head waits for what the head waits for.
 */
export function waitCapName(q: QueuedPosition, decision: QueueDecision, caps: QueueCaps): string {
  const { result } = decision;
  const reason = shownWaitReason(q, result);
  if (reason === 'class-share') return `class ${q.classId} share`;
  if (reason === 'never-fits') return capsBrokenAlone(q, decision, caps)[0] ?? `class ${q.classId} maxShare`;
  // Neither breaks one: held back behind another class's reservation of a cap, which one is not recorded.
  return brokenCap(q.jobId, decision, caps) ?? headCaps(decision, caps).get(q.classId) ?? 'caps';
}

/**
 * Every cap a job breaks on its own (none when only its class's maxShare keeps it out), judged as admission judges
 * never-fits: on the footprint unscaled by the packing factor.
 */
export function capsBrokenAlone(q: QueuedPosition, decision: QueueDecision, caps: QueueCaps): string[] {
  const job = decision.waiting.get(q.jobId);
  return job === undefined ? [] : capViolations(usageOf([job.fitFootprint ?? job.footprint], caps), caps);
}

/** The first cap `jobId`'s footprint breaks on top of what admission admitted, if any. */
function brokenCap(jobId: string, decision: QueueDecision, caps: QueueCaps): string | undefined {
  const waiting = decision.waiting.get(jobId);
  return waiting === undefined
    ? undefined
    : capViolations(addUsage(decision.result.usage, waiting.footprint, caps), caps)[0];
}

const headCapsByDecision = new WeakMap<QueueDecision, Map<string, string | undefined>>();

/**
 * Per class, the cap its head (first queued job that could ever fit) breaks: worked out once per decision, as every
 * job behind a head asks for it (a queue of thousands would otherwise cost a round quadratic time).
 */
function headCaps(decision: QueueDecision, caps: QueueCaps): Map<string, string | undefined> {
  let heads = headCapsByDecision.get(decision);
  if (heads === undefined) {
    heads = new Map();
    for (const x of decision.result.queued)
      if (x.reason !== 'never-fits' && !heads.has(x.classId))
        heads.set(x.classId, brokenCap(x.jobId, decision, caps));
    headCapsByDecision.set(decision, heads);
  }
  return heads;
}

function waitDetail(
  reason: WaitReason,
  classId: string,
  position: number,
  job: QueuedJob,
  result: AdmissionResult,
  config: WfqConfig,
  caps: QueueCaps,
): string {
  const ahead = position === 0 ? '' : `; ${position} job(s) ahead of it in class ${classId}`;
  if (reason === 'never-fits') {
    const footprint = job.fitFootprint ?? job.footprint;
    const broken = capViolations(usageOf([footprint], caps), caps);
    if (broken.length > 0) return `it can never run under the caps: alone it breaks ${broken.join(', ')}`;
    const ceiling = config.classes.find((c) => c.id === classId)?.maxShare ?? 1;
    return (
      `it can never run in class ${classId}: it needs ${pct(dominantShare(footprint, caps))} of the ` +
      `capped capacity, over the class's maxShare of ${pct(ceiling)}`
    );
  }
  if (reason === 'class-share') {
    const k = result.classes.find((c) => c.classId === classId);
    const used = k === undefined ? 0 : k.usedShare;
    const fluid = k === undefined ? 0 : k.fluidShare;
    return (
      `class ${classId} is at its share of the capped capacity (${pct(used)} used of ${pct(fluid)}; ` +
      `this job needs ${pct(dominantShare(job.footprint, caps))})${ahead}`
    );
  }
  const broken = capViolations(addUsage(result.usage, job.footprint, caps), caps);
  if (broken.length === 0) return `waiting behind the head of class ${classId}${ahead}`;
  return `admitting it now would break ${broken.join(', ')} (${describeUsage(result.usage, caps)})${ahead}`;
}

function pct(share: number): string {
  return `${(100 * share).toFixed(1)}%`;
}

/**
 * "$3.20/h, 4 instances, standard 48 vCPUs": the capped dimensions as the admitted jobs are sized against the caps,
 * which is not the live fleet: admission counts an instance for each admitted task (packing may share one), so the
 * text says what was counted rather than calling it "in use".
 */
export function describeUsage(usage: CapUsage, caps: QueueCaps): string {
  const parts: string[] = [];
  if (caps.maxCostPerHour !== undefined)
    parts.push(`$${usage.costPerHour.toFixed(2)}/h of $${caps.maxCostPerHour}/h`);
  if (caps.maxInstances !== undefined)
    parts.push(`${usage.instances} of ${caps.maxInstances} instances, one counted per task`);
  for (const q of caps.quotas ?? []) {
    const u = usage.byGroup.get(q.group) ?? { vcpus: 0, gpus: 0 };
    if (q.maxVcpus !== undefined) parts.push(`${q.group} ${u.vcpus} of ${q.maxVcpus} vCPUs`);
    if (q.maxGpus !== undefined) parts.push(`${q.group} ${u.gpus} of ${q.maxGpus} GPUs`);
  }
  return parts.length === 0 ? 'nothing capped' : `admitted jobs sized at ${parts.join(', ')}`;
}

/**
 * The queue layer in one line, for the controller's startup log: "2 classes by size: small ≤ 3600 s (weight 0.95,
 * srpt), large (weight 0.05, fifo); preemption off; caps: $20/h, quota p 8 GPUs".
 */
export function describeQueue(config: WfqConfig, caps: QueueCaps): string {
  const classes = config.classes
    .map((c) => {
      const what =
        config.classifyBy === 'size'
          ? c.maxSizeSeconds === undefined
            ? ''
            : ` ≤ ${c.maxSizeSeconds} s`
          : c.teams === undefined
            ? ' (other teams)'
            : ` (${c.teams.join(', ')})`;
      const ceiling = c.maxShare === undefined ? '' : `, at most ${pct(c.maxShare)}`;
      return `${c.id}${what} (weight ${c.weight}, ${c.ordering}${ceiling})`;
    })
    .join(', ');
  const capped: string[] = [];
  if (caps.maxCostPerHour !== undefined) capped.push(`$${caps.maxCostPerHour}/h`);
  if (caps.maxInstances !== undefined) capped.push(`${caps.maxInstances} instances`);
  for (const q of caps.quotas ?? []) {
    if (q.maxVcpus !== undefined) capped.push(`quota ${q.group} ${q.maxVcpus} vCPUs`);
    if (q.maxGpus !== undefined) capped.push(`quota ${q.group} ${q.maxGpus} GPUs`);
  }
  return (
    `${config.classes.length} class(es) by ${config.classifyBy}: ${classes}; ` +
    `preemption ${config.preemption.enabled ? `on (margin ${config.preemption.marginShare} of the capacity, after ${config.preemption.minShortRounds} short round(s))` : 'off'}; ` +
    `caps: ${capped.length === 0 ? 'none (every job is admitted)' : capped.join(', ')}`
  );
}
