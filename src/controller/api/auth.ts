import { createHash, timingSafeEqual } from 'node:crypto';
import type { StateStore } from '../state-store.js';

/** Who made a request: the operator (admin token) or a team (a team token from the state store). */
export type Principal = { readonly kind: 'admin' } | { readonly kind: 'team'; readonly team: string };

/** What a route asks of the caller. `none`: health, metrics and the API description. */
export type RouteAccess = 'none' | 'any' | 'admin';

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

/** The caller named by an `Authorization: Bearer <token>` header, or an AuthError (401) saying what is wrong. */
export function authenticate(
  authorization: string | undefined,
  adminToken: string,
  store: Pick<StateStore, 'teamForToken'>,
): Principal {
  if (authorization === undefined || authorization.trim() === '')
    throw new AuthError(401, 'missing bearer token: send "Authorization: Bearer <token>" (FLEETWISE_TOKEN)');
  const match = BEARER.exec(authorization);
  const token = match?.[1];
  if (token === undefined)
    throw new AuthError(401, 'malformed Authorization header: expected "Bearer <token>"');
  if (adminToken !== '' && tokensEqual(token, adminToken)) return { kind: 'admin' };
  const team = store.teamForToken(token);
  if (team === undefined) throw new AuthError(401, 'invalid or revoked token');
  return { kind: 'team', team };
}

/** Throw unless `principal` may use a route with `access`. */
export function authorize(principal: Principal, access: RouteAccess): void {
  if (access === 'admin' && principal.kind !== 'admin')
    throw new AuthError(403, 'this action needs the admin token (FLEETWISE_ADMIN_TOKEN)');
}

/** The team a principal is confined to, or undefined for the admin (sees every team). */
export function teamScope(principal: Principal): string | undefined {
  return principal.kind === 'team' ? principal.team : undefined;
}
