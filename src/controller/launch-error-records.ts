import { z } from 'zod';
import type { InstanceRecord, StateStore } from './state-store.js';

/**
 * The last failure of an instance's launch, kept in the state store until a launch of it succeeds: the cluster view
 * shows it beside the instance (which otherwise only waits, `requested`), and a restarted controller shows it too and
 * counts its attempts on from it. Failures the launch falls back from (no capacity, a quota) are not kept here: the
 * instance is replaced by another type's at once.
 */

const PREFIX = 'controller.launchError.';

const launchErrorSchema = z.object({
  message: z.string(),
  /** The cloud's error code, when it gave one (EC2's, e.g. InvalidGroup.NotFound). */
  code: z.string().optional(),
  /** Failed launches of the instance so far. */
  attempts: z.number().int().positive(),
  /** When the last one failed (controller clock). */
  atSeconds: z.number(),
  /** When the launch is tried again (by this controller; one started again tries at once). */
  nextAttemptAtSeconds: z.number(),
  /**
   * The cloud refused what the launch asks for (cloud/launch-refusal-kinds.ts): it is tried again at the longest
   * backoff, and will fail until an operator fixes the cause.
   */
  permanent: z.boolean(),
});

export type LaunchErrorRecord = z.output<typeof launchErrorSchema>;

function keyOf(instanceId: string): string {
  return `${PREFIX}${instanceId}`;
}

/** The instance's last launch error, or undefined (none, or a value this release cannot read). */
export function readLaunchError(store: StateStore, instanceId: string): LaunchErrorRecord | undefined {
  const value = store.getValue(keyOf(instanceId));
  if (value === undefined) return undefined;
  const parsed = launchErrorSchema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}

/** Keep a failed launch of `instance` as its last launch error, with the `instance.launch-error` event, in one commit. */
export function recordLaunchError(
  store: StateStore,
  instance: InstanceRecord,
  error: LaunchErrorRecord,
): void {
  const delay = error.nextAttemptAtSeconds - error.atSeconds;
  store.transaction(() => {
    store.setValue(keyOf(instance.id), {
      message: error.message,
      ...(error.code === undefined ? {} : { code: error.code }),
      attempts: error.attempts,
      atSeconds: error.atSeconds,
      nextAttemptAtSeconds: error.nextAttemptAtSeconds,
      permanent: error.permanent,
    });
    store.appendEvent({
      kind: 'instance.launch-error',
      instanceId: instance.id,
      message:
        `launch of ${instance.typeName} failed (attempt ${error.attempts}, retry in ${delay} s` +
        `${error.permanent ? `; ${error.code ?? 'refused'} will be refused until its cause is fixed` : ''}): ` +
        error.message,
      data: {
        attempts: error.attempts,
        retryInSeconds: delay,
        error: error.message,
        permanent: error.permanent,
        ...(error.code === undefined ? {} : { code: error.code }),
      },
    });
  });
}

/** Forget the instance's launch error: launched, or no longer to be launched. Inside the caller's transaction. */
export function clearLaunchError(store: StateStore, instanceId: string): void {
  store.deleteValue(keyOf(instanceId));
}
