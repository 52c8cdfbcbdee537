import { FencedWriteError, type LeaseRecord, type LeaseTable, type LeaseTerm } from '../../ha/lease.js';
import type { PostgresConnection } from './connection.js';

/**
 * The lease is at the writer's epoch but not in its term: given up (no holder), or held by another controller, which
 * happens when the database lost the writer's acquisition (a failover to a replica that had not received it).
 */
class TermOverError extends FencedWriteError {
  constructor(epoch: number, currentEpoch: number | undefined, why: string) {
    super(epoch, currentEpoch);
    this.message = `write refused: this controller's lease epoch ${epoch} is over: ${why}`;
  }
}

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
   * In a write transaction, before it commits: the lease is still in `term`, the same epoch and the same holder. An
   * epoch alone does not name a term: a failover to a replica that never received an acquisition gives the same epoch
   * to the next controller, and the holder (which carries a random part) tells the two apart. FOR SHARE holds the row
   * until the commit, so a takeover (an UPDATE of the row) waits for this transaction, or this check sees the new term.
   */
  checkTerm(term: LeaseTerm): void {
    const row = this.connection.query('SELECT epoch, holder FROM leases WHERE name = $1 FOR SHARE', [
      this.name,
    ])[0];
    const current = row === undefined ? undefined : Number(row['epoch']);
    if (current !== term.epoch) throw new FencedWriteError(term.epoch, current);
    const holder = row?.['holder'];
    if (holder === null || holder === undefined)
      throw new TermOverError(term.epoch, current, 'the lease was given up');
    if (holder !== term.holder)
      throw new TermOverError(
        term.epoch,
        current,
        `the lease is at epoch ${current} again, held by ${String(holder)} (the database lost this controller's ` +
          'acquisition, as after a failover to a replica that had not received it); another controller is active',
      );
  }
}
