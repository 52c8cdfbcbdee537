import type { ClusterSnapshot } from '../core/model.js';
import type { SlowJobTracker } from './latency-migration.js';
import type { LatencyView } from './latency-view.js';
import type { Configuration, Plan } from './types.js';

/** When Eva reuses its last plan: the fingerprint of a round's inputs, and the plan reused when it did not change. */

/**
 * A round's inputs as a string: the co-location table's version, the horizon, the slow-job counts and P_job of
 * network-aware jobs, the jobs (reconfigurable, pinned), the tasks' placements and the instances' states.
 */
export function planFingerprint(
  tableVersion: number,
  valueOfTime: number,
  slowJobs: SlowJobTracker,
  snapshot: ClusterSnapshot,
  pinned: ReadonlySet<string>,
  horizon: number,
  view: LatencyView | undefined,
): string {
  const parts: string[] = [String(tableVersion), String(valueOfTime), horizon.toFixed(3)];
  // Round trips change the plan of network-aware jobs only: their P_job now and how long they have been slow.
  if (view !== undefined) {
    parts.push(slowJobs.signature());
    for (const job of view.jobs.values()) parts.push(`${job.id}~${view.current(job.id)?.performance ?? ''}`);
  }
  for (const j of snapshot.jobs)
    parts.push(`${j.id}${j.reconfigurable ? '' : '!'}${pinned.has(j.taskIds[0] ?? '') ? '^' : ''}`);
  for (const t of snapshot.tasks) parts.push(`${t.id}@${t.instanceId ?? ''}`);
  for (const i of snapshot.instances)
    parts.push(
      `${i.id}:${i.typeName}:${i.state}:${i.taskIds.join(',')}${i.rebalanceRecommended === true ? ':rebalance' : ''}`,
    );
  return parts.join('|');
}

/**
 * A round whose inputs did not change (same jobs, placements, instance states, pins, learned means and horizon)
 * would compute the same plan: reuse it. Only the work lost since the last checkpoint grows meanwhile, which can
 * only make a move less attractive, so reusing a "stay" decision is safe and a move decision stays the same plan.
 * A plan the cluster already is (carried out last round) is recorded as `stay`: this round moves nothing. One not
 * carried out (a dry run, a round refused for a cap) keeps its name, since it still moves what it moved.
 */
export function unchangedPlan(plan: Plan, snapshot: ClusterSnapshot): Plan {
  return {
    configuration: plan.configuration,
    decision: {
      ...plan.decision,
      nowSeconds: snapshot.nowSeconds,
      chosen: isCurrent(plan.configuration, snapshot) ? 'stay' : plan.decision.chosen,
      reason: `inputs unchanged since t=${plan.decision.nowSeconds} s: same plan (${plan.decision.reason})`,
    },
  };
}

/** Whether the configuration launches nothing and leaves every task it places where the snapshot has it. */
function isCurrent(configuration: Configuration, snapshot: ClusterSnapshot): boolean {
  const committed = new Map(snapshot.tasks.map((t) => [t.id, t.instanceId]));
  return configuration.instances.every(
    (i) => !i.isNew && i.taskIds.every((id) => committed.get(id) === i.id),
  );
}
