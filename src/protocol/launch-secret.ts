import { createHmac, randomBytes } from 'node:crypto';

/**
 * The one-time secret of a local launch (ARCHITECTURE.md "Worker identity"): what the local provider hands the worker
 * it spawns, in its environment (never its command line, which every local user can read), and what that worker
 * presents to register (`identity: { kind: 'launch-secret' }`).
 *
 * It is derived, not stored: HMAC-SHA256 of the launch's idempotency token under the cluster's worker key (the state
 * directory's `worker-token`, which never leaves the controller's machine in local mode). A launch retried after a
 * crash hands its worker the same secret, the controller verifies it from the instance's launch-token tag alone, and
 * no secret of any instance sits in the state. It is good once: the controller refuses it for an instance that
 * already has a registered worker, which thereafter re-registers with its per-instance token.
 */

export const LAUNCH_SECRET_ENV = 'FLEETWISE_LAUNCH_SECRET';

/** Domain separation: the key signs nothing else, but a future use of it must not collide with this one. */
const CONTEXT = 'fleetwise launch secret v1';

export function launchSecretFor(clusterKey: string, launchToken: string): string {
  return createHmac('sha256', clusterKey).update(`${CONTEXT}\n${launchToken}`, 'utf8').digest('base64url');
}

/** A new per-instance worker token: 32 random bytes, base64url (what `proposedToken` and the registrar expect). */
export function newWorkerToken(): string {
  return randomBytes(32).toString('base64url');
}
