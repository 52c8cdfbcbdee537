import { StateStoreError, type TeamTokenRecord } from '../../state-store.js';
import { checkPrefixMatch, checkRawToken, checkTeamName, HASH_PREFIX_LENGTH, hashToken } from '../tokens.js';
import type { MemoryTransactions, Transact } from './transactions.js';

interface TokenRow {
  readonly hash: string;
  readonly team: string;
  readonly label?: string | undefined;
  readonly createdAtSeconds: number;
  readonly revokedAtSeconds?: number | undefined;
}

/** The memory store's team tokens for API authentication, kept as sha256 hashes. */
export class MemoryTeamTokens {
  private readonly tokens = new Map<string, TokenRow>();

  constructor(
    private readonly tx: MemoryTransactions,
    private readonly transaction: Transact,
  ) {}

  addTeamToken(team: string, rawToken: string, label?: string): TeamTokenRecord {
    checkTeamName(team);
    checkRawToken(rawToken);
    return this.transaction(() => {
      const hash = hashToken(rawToken);
      if (this.tokens.has(hash)) throw new StateStoreError('this token is already registered');
      const row: TokenRow = Object.freeze({ hash, team, label, createdAtSeconds: this.tx.now() });
      this.tx.put(this.tokens, hash, row);
      return tokenRecord(row);
    });
  }

  teamForToken(rawToken: string): string | undefined {
    const row = this.tokens.get(hashToken(rawToken));
    return row === undefined || row.revokedAtSeconds !== undefined ? undefined : row.team;
  }

  revokeTeamToken(rawToken: string): boolean {
    return this.transaction(() => {
      const hash = hashToken(rawToken);
      const row = this.tokens.get(hash);
      if (row === undefined || row.revokedAtSeconds !== undefined) return false;
      this.tx.put(this.tokens, hash, Object.freeze({ ...row, revokedAtSeconds: this.tx.now() }));
      return true;
    });
  }

  revokeTeamTokenByPrefix(hashPrefix: string): TeamTokenRecord | undefined {
    return this.transaction(() => {
      const rows = [...this.tokens.values()].filter((r) => r.hash.startsWith(hashPrefix));
      const row = rows[0];
      if (checkPrefixMatch(hashPrefix, rows.length, row?.revokedAtSeconds) === undefined || row === undefined)
        return undefined;
      const revoked: TokenRow = Object.freeze({ ...row, revokedAtSeconds: this.tx.now() });
      this.tx.put(this.tokens, row.hash, revoked);
      return tokenRecord(revoked);
    });
  }

  listTeamTokens(team?: string): TeamTokenRecord[] {
    return [...this.tokens.values()].filter((r) => team === undefined || r.team === team).map(tokenRecord);
  }
}

function tokenRecord(row: TokenRow): TeamTokenRecord {
  return {
    team: row.team,
    ...(row.label === undefined ? {} : { label: row.label }),
    hashPrefix: row.hash.slice(0, HASH_PREFIX_LENGTH),
    createdAtSeconds: row.createdAtSeconds,
    ...(row.revokedAtSeconds === undefined ? {} : { revokedAtSeconds: row.revokedAtSeconds }),
  };
}
