import { isQueueWait } from '../round/round.js';
import type { ClusterView, WhyRecord } from './service.js';
import { PLACED_TASK_STATES } from './state/lifecycle.js';
import { UnknownRecordError, type RoundRecord, type StateStore } from './state-store.js';

/** Read-only views the API shows: the cluster now, and why a job is where it is (from the recorded rounds). */

/** Instances not terminated, the tasks placed on them, and what the launched ones cost per hour. */
export function clusterView(store: StateStore, priceOf: ReadonlyMap<string, number>): ClusterView {
  const instances = store.listInstances({
    states: ['requested', 'launching', 'running', 'draining', 'terminating'],
  });
  const tasks = store.listTasks({ states: [...PLACED_TASK_STATES] });
  const onInstance = new Map<string, string[]>();
  for (const t of tasks) {
    if (t.instanceId === undefined) continue;
    onInstance.set(t.instanceId, [...(onInstance.get(t.instanceId) ?? []), t.id]);
  }
  let costPerHour = 0;
  const views = instances.map((i) => {
    const price = priceOf.get(i.typeName) ?? 0;
    if (i.launchedAtSeconds !== undefined) costPerHour += price;
    return { ...i, costPerHour: price, taskIds: onInstance.get(i.id) ?? [] };
  });
  return { instances: views, tasks, costPerHour };
}

/** The latest rounds that mention a job (waiting, moved, placed), newest first, each as one line. */
export function whyJob(store: StateStore, jobId: string, limit = 10): WhyRecord[] {
  const job = store.getJob(jobId);
  if (job === undefined) throw new UnknownRecordError('job', jobId);
  const taskIds = new Set(store.listTasks({ jobId }).map((t) => t.id));
  // The rounds that moved the job, as the controller carried them out (the diff, not only the scheduler's view).
  const movedIn = new Set<number>();
  for (const e of store.listEvents({ kind: 'round.applied', afterSeq: 0 })) {
    const data = e.data as { round?: unknown; moved?: unknown } | undefined;
    if (typeof data?.round === 'number' && Array.isArray(data.moved) && data.moved.includes(jobId))
      movedIn.add(data.round);
  }
  const out: WhyRecord[] = [];
  for (const round of store.listRounds(Math.max(limit * 20, 200))) {
    if (out.length >= limit) break;
    if (round.atSeconds < job.submittedAtSeconds) break;
    if (job.finishedAtSeconds !== undefined && round.atSeconds > job.finishedAtSeconds) continue;
    const summary = summarizeForJob(round, jobId, taskIds, movedIn.has(round.round));
    if (summary !== undefined)
      out.push({ round: round.round, atSeconds: round.atSeconds, summary, decision: round.decision });
  }
  return out;
}

/** A round as one line for one job ("waiting: cap maxCostPerHour", "moved to inst-4 (c7i.xlarge, new)", …). */
export function summarizeForJob(
  round: RoundRecord,
  jobId: string,
  taskIds: ReadonlySet<string>,
  moved = false,
): string | undefined {
  const { decision, configuration } = round;
  const parts: string[] = [];
  const waiting = decision.waiting.find((w) => w.jobId === jobId);
  if (waiting !== undefined)
    parts.push(isQueueWait(waiting.cap) ? `waiting in the ${waiting.cap}` : `waiting: cap ${waiting.cap}`);
  const pinned = decision.pinned.find((p) => p.jobId === jobId);
  if (pinned !== undefined) parts.push(`kept in place: ${pinned.why}`);
  const placed = configuration.instances.filter((i) => i.taskIds.some((t) => taskIds.has(t)));
  const chosen = decision.candidates.find((c) => c.name === decision.chosen);
  if (placed.length > 0) {
    const where = placed.map((i) => `${i.id} (${i.typeName}${i.isNew ? ', new' : ''})`).join(', ');
    parts.push(
      moved || chosen?.movedJobs.includes(jobId) === true ? `moved to ${where}` : `placed on ${where}`,
    );
  } else if (waiting === undefined) parts.push('not placed by this plan');
  if (parts.length === 0) return undefined;
  return `${parts.join('; ')} — plan ${decision.chosen}: ${decision.reason}`;
}
