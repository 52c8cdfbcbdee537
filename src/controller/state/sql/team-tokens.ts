import { StateStoreError, type TeamTokenRecord } from '../../state-store.js';
import { checkPrefixMatch, checkRawToken, checkTeamName, hashToken } from '../tokens.js';
import { Where, type Row, type SqlConnection } from './connection.js';
import { tokenFromRow } from './rows.js';

/** Team tokens for API authentication, stored as sha256 hashes. */
export class TeamTokenQueries {
  constructor(private readonly connection: SqlConnection) {}

  addTeamToken(team: string, rawToken: string, label?: string): TeamTokenRecord {
    checkTeamName(team);
    checkRawToken(rawToken);
    return this.connection.transaction(() => {
      const hash = hashToken(rawToken);
      if (this.connection.get('SELECT 1 FROM team_tokens WHERE token_hash = ?', hash) !== undefined)
        throw new StateStoreError('this token is already registered');
      this.connection.run(
        'INSERT INTO team_tokens (token_hash, team, label, created_at) VALUES (?, ?, ?, ?)',
        hash,
        team,
        label ?? null,
        this.connection.now(),
      );
      return tokenFromRow(this.connection.get('SELECT * FROM team_tokens WHERE token_hash = ?', hash) as Row);
    });
  }

  teamForToken(rawToken: string): string | undefined {
    const row = this.connection.get(
      'SELECT team FROM team_tokens WHERE token_hash = ? AND revoked_at IS NULL',
      hashToken(rawToken),
    );
    return row === undefined ? undefined : String(row['team']);
  }

  revokeTeamToken(rawToken: string): boolean {
    return this.connection.transaction(
      () =>
        this.connection.run(
          'UPDATE team_tokens SET revoked_at = ? WHERE token_hash = ? AND revoked_at IS NULL',
          this.connection.now(),
          hashToken(rawToken),
        ) > 0,
    );
  }

  revokeTeamTokenByPrefix(hashPrefix: string): TeamTokenRecord | undefined {
    return this.connection.transaction(() => {
      const rows = this.connection.all(
        'SELECT token_hash, revoked_at FROM team_tokens WHERE substr(token_hash, 1, ?) = ?',
        hashPrefix.length,
        hashPrefix,
      );
      const found = checkPrefixMatch(hashPrefix, rows.length, rows[0]?.['revoked_at'] ?? null);
      if (found === undefined) return undefined;
      const hash = String(rows[0]?.['token_hash']);
      this.connection.run(
        'UPDATE team_tokens SET revoked_at = ? WHERE token_hash = ?',
        this.connection.now(),
        hash,
      );
      return tokenFromRow(this.connection.get('SELECT * FROM team_tokens WHERE token_hash = ?', hash) as Row);
    });
  }

  listTeamTokens(team?: string): TeamTokenRecord[] {
    const where = new Where();
    where.eq('team', team);
    return this.connection
      .all(`SELECT * FROM team_tokens ${where.sql()} ORDER BY rowid`, ...where.params)
      .map(tokenFromRow);
  }
}
