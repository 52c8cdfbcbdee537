import { createHash } from 'node:crypto';
import { isValidName } from '../job-spec/schema.js';
import { StateStoreError } from '../state-store.js';

/** Tokens are stored only as sha256 hex digests; a leaked database does not leak credentials. */
export function hashToken(rawToken: string): string {
  return createHash('sha256').update(rawToken, 'utf8').digest('hex');
}

export const MIN_TOKEN_LENGTH = 16;
const MAX_TOKEN_LENGTH = 512;

export function checkRawToken(rawToken: string): void {
  if (rawToken.length < MIN_TOKEN_LENGTH || rawToken.length > MAX_TOKEN_LENGTH)
    throw new StateStoreError(
      `a token must have ${MIN_TOKEN_LENGTH}–${MAX_TOKEN_LENGTH} characters (got ${rawToken.length})`,
    );
}

export function checkTeamName(team: string): void {
  if (!isValidName(team)) throw new StateStoreError(`invalid team name "${team}"`);
}

export const HASH_PREFIX_LENGTH = 12;

/**
 * What revoking by a hash prefix finds: `true` for one unrevoked token, undefined for none; throws for a prefix
 * shorter than a listing shows (it could name several tokens) or a token already revoked.
 */
export function checkPrefixMatch(hashPrefix: string, matches: number, revokedAt: unknown): true | undefined {
  if (!new RegExp(`^[0-9a-f]{${HASH_PREFIX_LENGTH}}$`).test(hashPrefix))
    throw new StateStoreError(
      `a token id is ${HASH_PREFIX_LENGTH} hex digits (as the listing shows), got "${hashPrefix}"`,
    );
  if (matches === 0) return undefined;
  if (matches > 1) throw new StateStoreError(`token id ${hashPrefix} names ${matches} tokens`);
  if (revokedAt !== null && revokedAt !== undefined)
    throw new StateStoreError(`token ${hashPrefix} is already revoked`);
  return true;
}
