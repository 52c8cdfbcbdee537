import { FencedWriteError, type LeaseRecord, type LeaseTable, type LeaseTerm } from '../../ha/lease.js';
import type { PostgresConnection } from './connection.js';

/**
 * The lease row in PostgreSQL (ha/lease.ts): each operation is one statement, and every time in it is
 * `clock_timestamp()`, the database's clock at that statement, never a controller's.
 */
export class PostgresLeaseTable implements LeaseTable {
  constructor(
    private readonly connection: PostgresConnection,
    readonly name: string,
  ) {
    // Expired since 1970: the first controller takes it at epoch 1.
    connection.query(
      'INSERT INTO leases (name, epoch, expires_at) VALUES ($1, 0, to_timestamp(0)) ON CONFLICT (name) DO NOTHING',
      [name],
    );
  }

  tryAcquire(holder: string, holderUrl: string | undefined, durationSeconds: number): LeaseTerm | undefined {
    const row = this.connection.query(
      `UPDATE leases SET holder = $2, holder_url = $3, epoch = epoch + 1, acquired_at = clock_timestamp(),
         renewed_at = clock_timestamp(), expires_at = clock_timestamp() + make_interval(secs => $4)
       WHERE name = $1 AND (holder IS NULL OR expires_at <= clock_timestamp())
       RETURNING epoch`,
      [this.name, holder, holderUrl ?? null, durationSeconds],
    )[0];
    return row === undefined ? undefined : { holder, epoch: Number(row['epoch']) };
  }

  renew(term: LeaseTerm, durationSeconds: number): boolean {
    return (
      this.connection.query(
        `UPDATE leases SET renewed_at = clock_timestamp(), expires_at = clock_timestamp() + make_interval(secs => $4)
         WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > clock_timestamp()
         RETURNING epoch`,
        [this.name, term.holder, term.epoch, durationSeconds],
      ).length === 1
    );
  }

  release(term: LeaseTerm): void {
    this.connection.query(
      `UPDATE leases SET holder = NULL, holder_url = NULL, expires_at = clock_timestamp()
       WHERE name = $1 AND holder = $2 AND epoch = $3`,
      [this.name, term.holder, term.epoch],
    );
  }

  read(): LeaseRecord | undefined {
    const row = this.connection.query(
      `SELECT holder, holder_url, epoch, EXTRACT(EPOCH FROM expires_at - clock_timestamp()) AS expires_in
       FROM leases WHERE name = $1`,
      [this.name],
    )[0];
    if (row === undefined) return undefined;
    return {
      holder: row['holder'] === null ? undefined : String(row['holder']),
      holderUrl: row['holder_url'] === null ? undefined : String(row['holder_url']),
      epoch: Number(row['epoch']),
      expiresInSeconds: Number(row['expires_in']),
    };
  }

  holds(term: LeaseTerm, marginSeconds: number): boolean {
    return (
      this.connection.query(
        `SELECT 1 FROM leases WHERE name = $1 AND holder = $2 AND epoch = $3
           AND expires_at > clock_timestamp() + make_interval(secs => $4)`,
        [this.name, term.holder, term.epoch, marginSeconds],
      ).length === 1
    );
  }

  /**
   * In a write transaction, before it commits: the lease is still at `epoch`. FOR SHARE holds the row until the
   * commit, so a takeover (an UPDATE of the row) waits for this transaction, or this check sees the new epoch.
   */
  checkEpoch(epoch: number): void {
    const row = this.connection.query('SELECT epoch FROM leases WHERE name = $1 FOR SHARE', [this.name])[0];
    const current = row === undefined ? undefined : Number(row['epoch']);
    if (current !== epoch) throw new FencedWriteError(epoch, current);
  }
}
