import type { JsonValue } from '../../state-store.js';
import type { ReconcileContext } from '../context.js';
import { releaseTasksOn } from '../jobs.js';

/** KV key of the launch backoff after worker-registration failures (persisted so a restart does not reset it). */
export const LAUNCH_BACKOFF_KEY = 'controller.launchBackoff';

interface LaunchBackoff {
  readonly failures: number;
  readonly notBeforeSeconds: number;
}

export function launchBackoff(ctx: ReconcileContext): LaunchBackoff {
  const value = ctx.store.getValue(LAUNCH_BACKOFF_KEY) as
    { failures?: unknown; notBeforeSeconds?: unknown } | undefined;
  return {
    failures: typeof value?.failures === 'number' ? value.failures : 0,
    notBeforeSeconds: typeof value?.notBeforeSeconds === 'number' ? value.notBeforeSeconds : 0,
  };
}

/**
 * When each reconciler (one per controller) first checked registrations: a worker cannot register while no controller
 * serves, so, as heartbeats count their silence, a registration is waited for from then at the earliest. A controller
 * restarted after a crash mid-launch spawns the workers never started (startup.ts), and their instances, running
 * since before the crash, would otherwise be replaced at once.
 */
const firstCheckSeconds = new WeakMap<ReconcileContext, number>();

/**
 * An instance running in EC2 whose worker has not registered within the timeout is replaced: drained (then
 * terminated), its tasks returned to the queue, and launches paused with doubling backoff so that a broken AMI or
 * bootstrap cannot launch instances in a loop. A registration resets the backoff.
 */
export function checkRegistrations(ctx: ReconcileContext): string[] {
  const registered = ctx.deps.tasks.workerRegistered;
  if (registered === undefined) return [];
  const replaced: string[] = [];
  const now = ctx.now();
  const servingSince = firstCheckSeconds.get(ctx) ?? now;
  firstCheckSeconds.set(ctx, servingSince);
  // Read once per pass (not once per instance): only this pass writes it meanwhile, and it keeps `backoff` in step.
  let backoff = launchBackoff(ctx);
  for (const inst of ctx.store.listInstances({ states: ['running'] })) {
    if (registered.call(ctx.deps.tasks, inst)) {
      if (backoff.failures > 0) {
        backoff = { failures: 0, notBeforeSeconds: 0 };
        ctx.store.setValue(LAUNCH_BACKOFF_KEY, { ...backoff });
      }
      continue;
    }
    const since = Math.max(inst.runningAtSeconds ?? inst.updatedAtSeconds, servingSince);
    if (now - since < ctx.settings.registrationTimeoutSeconds) continue;
    const failures = backoff.failures + 1;
    const delay = Math.min(
      ctx.settings.registrationBackoffMaxSeconds,
      ctx.settings.registrationBackoffBaseSeconds * 2 ** (failures - 1),
    );
    const reason = `worker did not register within ${ctx.settings.registrationTimeoutSeconds} s`;
    ctx.store.transaction(() => {
      ctx.store.setInstanceState(inst.id, 'draining', { reason });
      releaseTasksOn(ctx, inst.id, reason);
      ctx.store.setValue(LAUNCH_BACKOFF_KEY, { failures, notBeforeSeconds: now + delay } satisfies Record<
        string,
        JsonValue
      >);
      backoff = { failures, notBeforeSeconds: now + delay };
      ctx.store.appendEvent({
        kind: 'instance.registration-timeout',
        instanceId: inst.id,
        message: `${reason}; replacing it, launches paused for ${delay} s (failure ${failures} in a row)`,
        data: { failures, backoffSeconds: delay },
      });
    });
    ctx.log.warn(`instance ${inst.id}: ${reason}; launches paused ${delay} s`, { failures });
    replaced.push(inst.id);
  }
  if (replaced.length > 0) ctx.requestRound('worker registration timeout');
  return replaced;
}
