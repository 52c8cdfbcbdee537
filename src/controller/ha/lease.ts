import { z } from 'zod';
import { CloudProviderError } from '../../cloud/provider.js';
import { StateStoreError } from '../state-store.js';

/**
 * The controller's lease: which of several controllers sharing one database is active, and its fencing token. The
 * design is Chubby's lock with a sequencer (Burrows, OSDI 2006, §2.4) as Kleppmann states it ("How to do distributed
 * locking", 2016; Designing Data-Intensive Applications §8.4 "Fencing tokens"): a lease expires, so a holder that
 * stalled (a pause, a partition) may go on acting after another took over; each acquisition therefore carries a token
 * one greater than the last (the epoch), and the resource refuses an older token. The resource here is the state
 * database itself: every write transaction checks the epoch in that same transaction. The timing is Kubernetes'
 * leader election (client-go `leaderelection`: lease duration, renew deadline, retry period): the holder renews every
 * retry period and stops acting once it could not renew for the renew deadline, which is shorter than the lease, so
 * it has stopped before anyone else may start. Expiry is judged by the database's clock only; a controller's clock
 * measures nothing but its own intervals (monotonic), so no two clocks are ever compared.
 */

/**
 * The least room the timings must leave (state/postgres/conninfo.ts derives the database timeouts from them): between
 * renew deadline and retry period, for a statement (half of it) to end before the renewal it holds up is overdue; and
 * between lease and renew deadline, for a paused holder's open transaction (ended after half of it) to be gone before
 * the lease passes on.
 */
export const MIN_STATEMENT_ROOM_SECONDS = 1;
export const MIN_FENCING_MARGIN_SECONDS = 1;

/**
 * The most any lease timing may be (a day, far beyond any useful lease): the database timeouts derived from them are
 * at most half a timing in milliseconds and the renewal timer is the retry period in milliseconds, and PostgreSQL's
 * timeouts and Node's timers both take at most 2^31 − 1 ms (about 24.8 days).
 */
export const MAX_LEASE_TIMING_SECONDS = 86_400;

const timing = (defaultSeconds: number): z.ZodDefault<z.ZodNumber> =>
  z
    .number()
    .finite()
    .positive('must be > 0')
    .max(
      MAX_LEASE_TIMING_SECONDS,
      `must be at most ${MAX_LEASE_TIMING_SECONDS} (a day): the database timeouts and timers derived from it take at most 2^31 − 1 ms`,
    )
    .default(defaultSeconds);

export const leaseSettingsSchema = z
  .strictObject({
    /** A lease not renewed this long expires, and a standby may take over (client-go LeaseDuration, 15 s). */
    durationSeconds: timing(15),
    /**
     * The holder stops acting when it could not renew for this long (client-go RenewDeadline, 10 s); the rest of the
     * lease, duration − renew deadline, is the safety margin within which no other controller can yet have started.
     */
    renewDeadlineSeconds: timing(10),
    /** The holder renews, and a standby tries to take over, this often (client-go RetryPeriod, 2 s). */
    retrySeconds: timing(2),
  })
  .superRefine((s, ctx) => {
    if (s.renewDeadlineSeconds >= s.durationSeconds)
      ctx.addIssue({
        code: 'custom',
        path: ['renewDeadlineSeconds'],
        message: `must be less than durationSeconds (${s.durationSeconds}): the holder stops before its lease can pass to another`,
      });
    else if (s.durationSeconds - s.renewDeadlineSeconds < MIN_FENCING_MARGIN_SECONDS)
      ctx.addIssue({
        code: 'custom',
        path: ['renewDeadlineSeconds'],
        message: `must be at least ${MIN_FENCING_MARGIN_SECONDS} s less than durationSeconds (${s.durationSeconds}): a transaction left open by a paused holder is ended within half that margin`,
      });
    if (s.retrySeconds >= s.renewDeadlineSeconds)
      ctx.addIssue({
        code: 'custom',
        path: ['retrySeconds'],
        message: `must be less than renewDeadlineSeconds (${s.renewDeadlineSeconds}): a renewal needs more than one try before the deadline`,
      });
    else if (s.renewDeadlineSeconds - s.retrySeconds < MIN_STATEMENT_ROOM_SECONDS)
      ctx.addIssue({
        code: 'custom',
        path: ['retrySeconds'],
        message: `must be at least ${MIN_STATEMENT_ROOM_SECONDS} s less than renewDeadlineSeconds (${s.renewDeadlineSeconds}): each database statement may take half the difference, and blocks the renewal meanwhile`,
      });
  });

export type LeaseSettings = z.output<typeof leaseSettingsSchema>;
export const DEFAULT_LEASE_SETTINGS: LeaseSettings = leaseSettingsSchema.parse({});

/** One tenure of the lease: who holds it, and the fencing token of this acquisition. */
export interface LeaseTerm {
  readonly holder: string;
  readonly epoch: number;
}

/** The lease as the database has it now. */
export interface LeaseRecord {
  readonly holder: string | undefined;
  /** Where the holder serves its API, as it said when it took the lease. */
  readonly holderUrl: string | undefined;
  readonly epoch: number;
  /** Seconds until it expires by the database's clock; ≤ 0 once expired. */
  readonly expiresInSeconds: number;
}

/** The lease row of a database; every comparison of times in it uses the database's clock. */
export interface LeaseTable {
  /** Take the lease if it is free or expired: the new term, with the epoch one above the last; undefined if held. */
  tryAcquire(holder: string, holderUrl: string | undefined, durationSeconds: number): LeaseTerm | undefined;
  /** Extend an unexpired lease this term still holds; false when it expired or passed to another term. */
  renew(term: LeaseTerm, durationSeconds: number): boolean;
  /** Give the lease up now (a clean stop), so a standby need not wait for it to expire. */
  release(term: LeaseTerm): void;
  read(): LeaseRecord | undefined;
  /** This term holds the lease with at least `marginSeconds` left before it expires. */
  holds(term: LeaseTerm, marginSeconds: number): boolean;
}

/** A write transaction refused because the lease passed to a newer epoch than the writer's. */
export class FencedWriteError extends StateStoreError {
  override name = 'FencedWriteError';
  constructor(
    readonly epoch: number,
    readonly currentEpoch: number | undefined,
  ) {
    super(
      `write refused: this controller's lease epoch ${epoch} is over (the lease is at epoch ${currentEpoch ?? 'none'}); another controller is active`,
    );
  }
}

/** A cloud call refused because this controller no longer surely holds the lease. */
export class LeaseNotHeldError extends CloudProviderError {
  constructor(reason: string) {
    super(`cloud call refused: ${reason}`, 'LeaseNotHeld');
    this.name = 'LeaseNotHeldError';
  }
}
