import { createHash, timingSafeEqual } from 'node:crypto';
import type { StateStore } from '../state-store.js';

/** Who made a request: the operator (admin token) or a team (a team token from the state store). */
export type Principal = { readonly kind: 'admin' } | { readonly kind: 'team'; readonly team: string };

/**
 * What a route asks of the caller. `none`: health and the API description; `metrics`: the metrics token when the
 * controller has one (authorizeScrape).
 */
export type RouteAccess = 'none' | 'metrics' | 'any' | 'admin';

export class AuthError extends Error {
  override name = 'AuthError';
  constructor(
    readonly statusCode: 401 | 403,
    message: string,
  ) {
    super(message);
  }
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/**
 * Compare in constant time: hashing both sides first gives equal-length inputs, so neither the content nor the
 * length of the admin token leaks through response timing.
 */
export function tokensEqual(a: string, b: string): boolean {
  return timingSafeEqual(sha256(a), sha256(b));
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** The token of an `Authorization: Bearer <token>` header, or an AuthError (401): `missing` when there is none. */
function bearerToken(authorization: string | undefined, missing: string): string {
  if (authorization === undefined || authorization.trim() === '') throw new AuthError(401, missing);
  const token = BEARER.exec(authorization)?.[1];
  if (token === undefined)
    throw new AuthError(401, 'malformed Authorization header: expected "Bearer <token>"');
  return token;
}

/** The caller named by an `Authorization: Bearer <token>` header, or an AuthError (401) saying what is wrong. */
export function authenticate(
  authorization: string | undefined,
  adminToken: string,
  store: Pick<StateStore, 'teamForToken'>,
): Principal {
  const token = bearerToken(
    authorization,
    'missing bearer token: send "Authorization: Bearer <token>" (FLEETWISE_TOKEN)',
  );
  if (adminToken !== '' && tokensEqual(token, adminToken)) return { kind: 'admin' };
  const team = store.teamForToken(token);
  if (team === undefined) throw new AuthError(401, 'invalid or revoked token');
  return { kind: 'team', team };
}

/**
 * Throw an AuthError (401) unless a scrape of `/metrics` may read it: any caller when there is no metrics token,
 * else one that sends the metrics token or the admin token. A team's token is not taken: the metrics show every team's
 * spend.
 */
export function authorizeScrape(
  authorization: string | undefined,
  metricsToken: string | undefined,
  adminToken: string,
): void {
  if (metricsToken === undefined) return;
  const token = bearerToken(
    authorization,
    'missing bearer token: /metrics needs the metrics token (FLEETWISE_METRICS_TOKEN or the metrics-token file)',
  );
  const taken = tokensEqual(token, metricsToken) || (adminToken !== '' && tokensEqual(token, adminToken));
  if (!taken) throw new AuthError(401, '/metrics takes the metrics token or the admin token only');
}

/** Throw unless `principal` may use a route with `access`. */
export function authorize(principal: Principal, access: RouteAccess): void {
  if (access === 'admin' && principal.kind !== 'admin')
    // Said as the caller gives a token: the CLI reads --token or FLEETWISE_TOKEN, never the controller's own variable.
    throw new AuthError(
      403,
      'this action needs the admin token: send it with --token or FLEETWISE_TOKEN (the controller keeps it in the ' +
        'admin-token file of its state directory, unless it was started with FLEETWISE_ADMIN_TOKEN)',
    );
}

/** The team a principal is confined to, or undefined for the admin (sees every team). */
export function teamScope(principal: Principal): string | undefined {
  return principal.kind === 'team' ? principal.team : undefined;
}
