import { setTimeout as sleep } from 'node:timers/promises';
import { silentLogger, type ControllerLogger } from '../seams.js';
import { LeaseNotHeldError, type LeaseSettings, type LeaseTable, type LeaseTerm } from './lease.js';

/** What /healthz and `fleetwise cluster` show of a controller's place among those sharing its database. */
export interface LeadershipView {
  /** `active` runs the cluster; a `standby` waits for the lease. A controller on its own database is active. */
  readonly role: 'active' | 'standby';
  /** The fencing token of the active controller's lease (null without a lease: SQLite). */
  readonly epoch: number | null;
  /** Who holds the lease, when someone does. */
  readonly holder: string | null;
  /** The API of the lease's holder, as it announced it. */
  readonly activeUrl: string | null;
}

export interface LeaderElectorOptions {
  readonly table: LeaseTable;
  /** This controller's identity in the lease (host, pid and a random part: unique across restarts). */
  readonly holder: string;
  /** Where this controller serves its API, recorded with the lease for standbys and clients to see. */
  readonly holderUrl?: string | undefined;
  readonly settings: LeaseSettings;
  /** Milliseconds on a monotonic clock: only this controller's own intervals are measured with it. */
  readonly monotonicMs?: () => number;
  readonly logger?: ControllerLogger;
}

/**
 * Leader election over a lease (lease.ts): a standby polls for the lease every retry period; the holder renews it
 * every retry period and gives up leading once no renewal succeeded for the renew deadline (measured from the start
 * of the last successful renewal, so the time the database took is counted against it). Whoever gives up is told
 * (`onLost`) and must stop acting: the controller exits, as client-go's leader election has a controller do, and a
 * supervisor starts it again as a standby.
 */
export class LeaderElector {
  private readonly monotonicMs: () => number;
  private readonly log: ControllerLogger;
  private current: LeaseTerm | undefined;
  /** Monotonic time after which this controller may no longer act on the term (the renew deadline). */
  private actUntilMs = 0;
  private lostBecause: string | undefined;
  private renewTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: LeaderElectorOptions) {
    this.monotonicMs = options.monotonicMs ?? (() => performance.now());
    this.log = options.logger ?? silentLogger;
  }

  get settings(): LeaseSettings {
    return this.options.settings;
  }

  /** The term this controller holds, while it may act on it. */
  get term(): LeaseTerm | undefined {
    return this.lostBecause === undefined ? this.current : undefined;
  }

  /** Seconds of lease that must be left for a cloud call to go out: what follows the renew deadline. */
  get safetyMarginSeconds(): number {
    return this.options.settings.durationSeconds - this.options.settings.renewDeadlineSeconds;
  }

  /**
   * One attempt to take the lease: the new term, or undefined while another controller holds it (or when the database
   * answered too slowly to act on the term it gave, which is then given back).
   */
  tryAcquire(): LeaseTerm | undefined {
    const started = this.monotonicMs();
    const term = this.options.table.tryAcquire(
      this.options.holder,
      this.options.holderUrl,
      this.options.settings.durationSeconds,
    );
    if (term === undefined) return undefined;
    this.current = term;
    this.lostBecause = undefined;
    this.actUntilMs = started + this.options.settings.renewDeadlineSeconds * 1000;
    if (this.leftToActMs() >= this.retryMs()) return term;
    // The statement was held up (a database that froze, then answered): the deadline, counted from before it, is
    // (nearly) over on arrival, and the first cloud call or renewal would find the term lost. Renewed now, the term
    // counts from a statement that answered at once.
    const renewing = this.monotonicMs();
    let renewed = false;
    try {
      renewed = this.options.table.renew(term, this.options.settings.durationSeconds);
    } catch (e) {
      this.log.warn('could not renew the lease just taken', {
        epoch: term.epoch,
        error: (e as Error).message,
      });
    }
    if (renewed) {
      this.actUntilMs = renewing + this.options.settings.renewDeadlineSeconds * 1000;
      if (this.leftToActMs() >= this.retryMs()) return term;
    }
    // Still too slow to lead on: given back, so the lease is free for whoever polls next (this controller included).
    this.log.warn('took the lease, but the database answered too slowly to act on it; giving it back', {
      epoch: term.epoch,
    });
    this.release();
    this.current = undefined;
    this.lostBecause = undefined;
    return undefined;
  }

  /** Poll until the lease is this controller's (a standby waits here); rejects when `signal` aborts. */
  async acquire(signal?: AbortSignal): Promise<LeaseTerm> {
    let reported = false;
    for (;;) {
      signal?.throwIfAborted();
      try {
        const term = this.tryAcquire();
        if (term !== undefined) return term;
        if (!reported) {
          const lease = this.options.table.read();
          this.log.info('standby: another controller holds the lease', {
            holder: lease?.holder,
            epoch: lease?.epoch,
            activeUrl: lease?.holderUrl,
          });
          reported = true;
        }
      } catch (e) {
        this.log.warn('standby: could not reach the lease; retrying', { error: (e as Error).message });
      }
      await sleep(this.options.settings.retrySeconds * 1000, undefined, { signal });
    }
  }

  /** Renew every retry period until the lease is lost or released; `onLost` is called once, with the reason. */
  startRenewing(onLost: (reason: string) => void): void {
    this.stopRenewing();
    this.renewTimer = setInterval(() => {
      const reason = this.renewOnce();
      if (reason !== undefined) {
        this.stopRenewing();
        onLost(reason);
      }
    }, this.options.settings.retrySeconds * 1000);
  }

  /** One renewal: undefined while the lease is held, else why it is lost (then this controller must stop acting). */
  renewOnce(): string | undefined {
    const term = this.current;
    if (term === undefined) return 'no lease was acquired';
    if (this.lostBecause !== undefined) return this.lostBecause;
    const started = this.monotonicMs();
    if (started >= this.actUntilMs) return this.lose(this.overdue());
    let renewed: boolean;
    try {
      renewed = this.options.table.renew(term, this.options.settings.durationSeconds);
    } catch (e) {
      this.log.warn('could not renew the lease; retrying', {
        epoch: term.epoch,
        error: (e as Error).message,
      });
      return this.monotonicMs() >= this.actUntilMs ? this.lose(this.overdue()) : undefined;
    }
    if (!renewed)
      return this.lose(`the lease of epoch ${term.epoch} expired or passed to another controller`);
    this.actUntilMs = started + this.options.settings.renewDeadlineSeconds * 1000;
    return undefined;
  }

  /**
   * Throws LeaseNotHeldError unless this controller surely leads: within its renew deadline, and the database says
   * its term holds the lease with at least the safety margin left. Called before every cloud call (fenced-provider.ts).
   */
  assertLeading(): void {
    const term = this.current;
    if (term === undefined) throw new LeaseNotHeldError('this controller holds no lease');
    if (this.lostBecause !== undefined) throw new LeaseNotHeldError(this.lostBecause);
    if (this.monotonicMs() >= this.actUntilMs) throw new LeaseNotHeldError(this.lose(this.overdue()));
    let holds: boolean;
    try {
      holds = this.options.table.holds(term, this.safetyMarginSeconds);
    } catch (e) {
      throw new LeaseNotHeldError(`the lease could not be checked: ${(e as Error).message}`);
    }
    if (!holds)
      throw new LeaseNotHeldError(
        `the lease of epoch ${term.epoch} has less than ${this.safetyMarginSeconds} s left or passed to another controller`,
      );
  }

  /** Stop renewing and give the lease up (a clean stop), so a standby takes over without waiting for it to expire. */
  release(): void {
    this.stopRenewing();
    const term = this.current;
    if (term === undefined || this.lostBecause !== undefined) return;
    this.lostBecause = 'released';
    try {
      this.options.table.release(term);
    } catch (e) {
      this.log.warn('could not release the lease; it expires by itself', { error: (e as Error).message });
    }
  }

  view(): LeadershipView {
    const term = this.term;
    if (term !== undefined)
      return {
        role: 'active',
        epoch: term.epoch,
        holder: term.holder,
        activeUrl: this.options.holderUrl ?? null,
      };
    const lease = this.options.table.read();
    const held = lease?.holder !== undefined && lease.expiresInSeconds > 0;
    return {
      role: 'standby',
      epoch: lease === undefined || lease.epoch === 0 ? null : lease.epoch,
      holder: held ? (lease.holder ?? null) : null,
      activeUrl: held ? (lease.holderUrl ?? null) : null,
    };
  }

  private leftToActMs(): number {
    return this.actUntilMs - this.monotonicMs();
  }

  private retryMs(): number {
    return this.options.settings.retrySeconds * 1000;
  }

  private overdue(): string {
    return `the lease could not be renewed for ${this.options.settings.renewDeadlineSeconds} s (its renew deadline)`;
  }

  private lose(reason: string): string {
    this.lostBecause ??= reason;
    return this.lostBecause;
  }

  private stopRenewing(): void {
    if (this.renewTimer !== undefined) clearInterval(this.renewTimer);
    this.renewTimer = undefined;
  }
}
