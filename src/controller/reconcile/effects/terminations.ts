import { noticeActionAtMs, reclaimIsFree } from '../../../core/spot.js';
import { InjectedCrash } from '../../faults.js';
import { launchedOnSpot } from '../../instance-market.js';
import { spotNotice } from '../../spot-interruptions.js';
import { PLACED_TASK_STATES } from '../../state/lifecycle.js';
import type { InstanceRecord } from '../../state-store.js';
import type { ReconcileContext } from '../context.js';
import { terminateGate } from '../../../round/gates.js';
import { clearLaunchError } from '../../launch-error-records.js';

/**
 * How long past the reclaim time of its spot interruption notice an empty spot instance is left for EC2 to take
 * (`leftForEc2`); past it, it is terminated as any, so a notice EC2 never acts on cannot keep an instance running.
 */
export const SPOT_RECLAIM_MARGIN_SECONDS = 300;

/**
 * A `draining` instance that nothing occupies nor waits for gets a `terminate` intent, then CloudProvider.terminate;
 * an instance already `terminating` (a lost worker, a crash after the intent) is terminated again, idempotently.
 * An empty spot instance that EC2 is about to reclaim within its first hour is left to it (`leftForEc2`).
 */
export async function performTerminations(ctx: ReconcileContext): Promise<string[]> {
  const terminated: string[] = [];
  const occupants = new Map<string, number>();
  const aimedAt = new Map<string, number>();
  for (const t of ctx.store.listTasks({ states: [...PLACED_TASK_STATES] }))
    if (t.instanceId !== undefined) occupants.set(t.instanceId, (occupants.get(t.instanceId) ?? 0) + 1);
  for (const i of ctx.store.listIntents({ states: ['pending'], kind: 'start-task' }))
    if (i.kind === 'start-task')
      aimedAt.set(i.payload.instanceId, (aimedAt.get(i.payload.instanceId) ?? 0) + 1);
  for (const inst of ctx.store.listInstances({ states: ['draining', 'terminating'] })) {
    if (
      inst.state === 'draining' &&
      (terminateGate(occupants.get(inst.id) ?? 0, aimedAt.get(inst.id) ?? 0) !== undefined ||
        leftForEc2(ctx, inst))
    )
      continue;
    const cloudId = inst.cloudId;
    const intent =
      ctx.pendingIntentsFor('terminate', inst.id)[0] ??
      ctx.store.transaction(() => {
        for (const launch of ctx.pendingIntentsFor('launch', inst.id))
          ctx.store.failIntent(launch.id, 'not needed any more');
        clearLaunchError(ctx.store, inst.id);
        const recorded = ctx.store.recordIntent({
          kind: 'terminate',
          payload: { instanceId: inst.id, ...(cloudId === undefined ? {} : { cloudId }) },
        });
        ctx.store.setInstanceState(inst.id, 'terminating', { reason: inst.reason });
        return recorded;
      });
    const target = intent.kind === 'terminate' ? (intent.payload.cloudId ?? cloudId) : cloudId;
    ctx.fault('terminate:before-call', inst.id);
    if (target !== undefined) {
      try {
        await ctx.provider.terminate([target]);
      } catch (e) {
        terminateFailed(ctx, inst.id, e, `terminate of ${inst.id}`);
        continue;
      }
    }
    ctx.fault('terminate:after-call', inst.id);
    ctx.store.transaction(() => {
      ctx.store.setInstanceState(inst.id, 'terminated', { reason: inst.reason });
      ctx.store.completeIntent(intent.id);
    });
    terminated.push(inst.id);
  }
  return terminated;
}

/**
 * Whether this draining spot instance, with a spot interruption notice (not a mere rebalance recommendation), is left
 * for EC2 to reclaim: EC2 charges nothing for a spot instance it interrupts within its first hour, but charges its
 * owner for one the owner terminates. So while it is in its first hour and EC2's reclaim falls in it too, it stays
 * (still `draining`: counted by the caps, nothing placed on it) until the reclaim time plus a margin. Cloud sync then
 * finds it gone and records the reclaim.
 */
function leftForEc2(ctx: ReconcileContext, inst: InstanceRecord): boolean {
  const launched = inst.launchedAtSeconds;
  if (launched === undefined || inst.cloudId === undefined) return false;
  const now = ctx.now();
  if (!reclaimIsFree(launched, now)) return false;
  const notice = spotNotice(ctx.store, inst.id);
  if (notice === undefined || !launchedOnSpot(ctx.store, inst.id)) return false;
  // Read as the checkpoint-stop's cap reads it (desired-task.ts): a notice with no time counts EC2's two minutes.
  const reclaimAt = noticeActionAtMs(notice) / 1000;
  // A reclaim after the first hour is charged: waiting for it would only add to the bill.
  if (!reclaimIsFree(launched, reclaimAt)) return false;
  return now < reclaimAt + SPOT_RECLAIM_MARGIN_SECONDS;
}

/**
 * A terminate call the cloud refused (termination protection, a permission, throttling): logged and recorded on the
 * instance, to be tried again next pass, never failing the pass. An injected crash is the test's, and goes on.
 */
export function terminateFailed(
  ctx: ReconcileContext,
  instanceId: string,
  error: unknown,
  what: string,
  data: Record<string, string> = {},
): void {
  if (error instanceof InjectedCrash) throw error;
  const message = error instanceof Error ? error.message : String(error);
  ctx.log.warn(`${what} failed; retrying next pass`, { error: message });
  ctx.store.appendEvent({
    kind: 'instance.terminate-error',
    instanceId,
    message,
    data: { error: message, ...data },
  });
}
