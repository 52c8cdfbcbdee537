import type { JsonValue } from '../../state-store.js';
import type { ReconcileContext } from '../context.js';
import { releaseTasksOn } from '../jobs.js';
import type { CarriedSeconds } from '../../carried-seconds.js';
import { carriedRegistrationWait } from './carried-registration-wait.js';

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
 * What one reconciler (one per controller) knows of the registrations it waits for. A worker cannot register while no
 * controller serves, so, as heartbeats count their silence, this controller counts an instance's wait from its first
 * check at the earliest: a controller restarted after a crash mid-launch spawns the workers never started
 * (startup.ts), and their instances, running since before the crash (or before a long outage), would otherwise be
 * replaced at once. What earlier controllers counted is carried in the state store (carried-registration-wait.ts) and
 * added: a controller restarted more often than the timeout (a crash loop) would otherwise never replace an instance
 * whose worker never registers, which then bills forever while the launch backoff never builds up.
 */
interface RegistrationWatch {
  /** When this controller first checked registrations. */
  readonly servingSinceSeconds: number;
  readonly carried: CarriedSeconds;
  /** The last failure to save the carried waits, logged once rather than at every pass. */
  saveFailure?: string;
}

const watches = new WeakMap<ReconcileContext, RegistrationWatch>();

function watchOf(ctx: ReconcileContext, now: number): RegistrationWatch {
  let watch = watches.get(ctx);
  if (watch === undefined) {
    watch = { servingSinceSeconds: now, carried: carriedRegistrationWait(ctx.store) };
    watches.set(ctx, watch);
  }
  return watch;
}

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
  const watch = watchOf(ctx, now);
  // Each running instance still waiting for its worker: the seconds it waited, counted by all controllers so far.
  const waits = new Map<string, number>();
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
    const since = Math.max(inst.runningAtSeconds ?? inst.updatedAtSeconds, watch.servingSinceSeconds);
    const waited = (watch.carried.loaded.get(inst.id) ?? 0) + Math.max(0, now - since);
    if (waited < ctx.settings.registrationTimeoutSeconds) {
      waits.set(inst.id, waited);
      continue;
    }
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
  carryWaits(ctx, watch, waits);
  if (replaced.length > 0) ctx.requestRound('worker registration timeout');
  return replaced;
}

/**
 * Save the waits for the next controller. What this one counts after its last pass is lost if it is killed: at most
 * one pass interval per controller. A failed save leaves the last one for the next controller to count on from, so it
 * does not fail the pass.
 */
function carryWaits(
  ctx: ReconcileContext,
  watch: RegistrationWatch,
  waits: ReadonlyMap<string, number>,
): void {
  try {
    watch.carried.save(waits);
    watch.saveFailure = undefined;
  } catch (e) {
    const message = (e as Error).message;
    if (message !== watch.saveFailure) ctx.log.warn(`saving the registration waits failed: ${message}`);
    watch.saveFailure = message;
  }
}
