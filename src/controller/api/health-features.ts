/**
 * What this controller honours that an older one ignored, said by every /healthz answer (the active controller's,
 * a standby's, one whose state store is down) so a client can ask before relying on it: a client resends a
 * submission whose answer was lost only to a controller that takes its idempotency key.
 */
export const HEALTH_FEATURES = { idempotencyKeys: true } as const;
