import { InjectedCrash } from '../../faults.js';
import { PLACED_TASK_STATES } from '../../state/lifecycle.js';
import type { ReconcileContext } from '../context.js';
import { terminateGate } from '../../../round/gates.js';

/**
 * A `draining` instance that nothing occupies nor waits for gets a `terminate` intent, then CloudProvider.terminate;
 * an instance already `terminating` (a lost worker, a crash after the intent) is terminated again, idempotently.
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
      terminateGate(occupants.get(inst.id) ?? 0, aimedAt.get(inst.id) ?? 0) !== undefined
    )
      continue;
    const cloudId = inst.cloudId;
    const intent =
      ctx.pendingIntentsFor('terminate', inst.id)[0] ??
      ctx.store.transaction(() => {
        for (const launch of ctx.pendingIntentsFor('launch', inst.id))
          ctx.store.failIntent(launch.id, 'not needed any more');
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
