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
