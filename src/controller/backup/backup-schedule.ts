import type { Clock } from '../clock.js';
import type { ControllerLogger } from '../seams.js';
import type { BackupManifest } from './backup-documents.js';

/** What the schedule reports (ControllerMetrics implements it for /metrics). */
export interface BackupMetrics {
  /** A backup was stored; `coveredAtSeconds` is when its snapshot was taken. */
  backupStored(manifest: BackupManifest, durationSeconds: number): void;
  /** The state has not changed since the newest backup: it still covers everything up to now. */
  backupStillCurrent(atSeconds: number): void;
  backupFailed(): void;
}

export interface BackupScheduleOptions {
  /** Takes one backup (StateBackup.run). */
  readonly backup: () => Promise<BackupManifest>;
  /** Changes whenever the state does (BackupSource.changeMark): an unchanged state is not backed up again. */
  readonly changeMark: () => string;
  /** At most this many seconds between one backup's snapshot and the next one's start. */
  readonly everySeconds: number;
  readonly clock: Clock;
  readonly log: ControllerLogger;
  readonly metrics?: BackupMetrics | undefined;
}

/** What one run of a backup came to. */
type RunOutcome =
  | { readonly kind: 'stored'; readonly manifest: BackupManifest }
  | { readonly kind: 'unchanged' }
  | { readonly kind: 'failed'; readonly reason: string };

/**
 * Backups of the state every `everySeconds`, off the control loop and the API: a backup runs in the background (its
 * snapshot is copied in steps between event-loop turns, compression runs in libuv's thread pool, uploads are I/O),
 * one at a time; a period whose backup is still running waits for it instead of starting a second. A failure is
 * logged and counted, and the next period tries again.
 */
export class BackupSchedule {
  private running = false;
  private wake = new AbortController();
  private loopDone: Promise<void> | undefined;
  private inFlight: Promise<RunOutcome> | undefined;
  private lastStoredMark: string | undefined;
  private consecutiveFailures = 0;

  constructor(private readonly options: BackupScheduleOptions) {
    if (!(options.everySeconds > 0))
      throw new Error(`backup period must be > 0 s, got ${options.everySeconds}`);
  }

  /** Back up now, then every period. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.loopDone = this.loop();
  }

  /**
   * Stop the schedule; with `finalBackup`, store what changed since the last backup first (a planned stop then loses
   * nothing), giving up after `timeoutSeconds` so a stuck object store cannot hold the stop.
   */
  async stop(
    options: { readonly finalBackup?: boolean; readonly timeoutSeconds?: number } = {},
  ): Promise<void> {
    this.running = false;
    this.wake.abort();
    await this.loopDone;
    if (options.finalBackup !== true) {
      await this.inFlight;
      return;
    }
    const timeout = new AbortController();
    await Promise.race([
      this.backupNow(),
      this.options.clock.sleep(options.timeoutSeconds ?? 30, timeout.signal).then(() => {
        if (!timeout.signal.aborted)
          this.options.log.error('the final state backup did not finish in time; stopping without it');
      }),
    ]);
    timeout.abort();
  }

  /**
   * One backup unless the state is unchanged since the last one stored; joins the one in flight rather than
   * starting a second. Answers the manifest stored, or undefined (unchanged, or failed: logged and counted).
   */
  async backupNow(): Promise<BackupManifest | undefined> {
    const outcome = await this.run();
    return outcome.kind === 'stored' ? outcome.manifest : undefined;
  }

  /**
   * Make sure a backup holds the state as it is now, every change made before the call included: a change the state
   * alone keeps (a team token) is lost to a restore until then. A backup in flight may have taken its snapshot before
   * that change, so it is waited for and another one run unless it covered the state. Rejects, saying why, when that
   * backup fails (logged and counted as any other; the next period tries again) or is not stored within
   * `timeoutSeconds` (it goes on in the background), so a stuck object store cannot hold the caller.
   */
  async backupCurrentState(options: { readonly timeoutSeconds?: number } = {}): Promise<void> {
    const mark = this.options.changeMark();
    const covering = (async (): Promise<RunOutcome> => {
      const earlier = this.inFlight;
      if (earlier !== undefined) {
        const outcome = await earlier;
        if (outcome.kind !== 'failed' && this.lastStoredMark === mark) return outcome;
      }
      // Any run from here on reads the mark after the change, so its snapshot holds it.
      return this.run();
    })();
    const timeoutSeconds = options.timeoutSeconds ?? 30;
    const timeout = new AbortController();
    const outcome = await Promise.race([
      covering,
      this.options.clock.sleep(timeoutSeconds, timeout.signal).then(() => 'late' as const),
    ]);
    timeout.abort();
    if (outcome === 'late')
      throw new Error(`the state backup was not stored within ${timeoutSeconds} s (it goes on)`);
    if (outcome.kind === 'failed') throw new Error(`the state backup failed: ${outcome.reason}`);
  }

  private run(): Promise<RunOutcome> {
    this.inFlight ??= this.runOnce().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  private async loop(): Promise<void> {
    while (this.running) {
      const startedAt = this.options.clock.nowSeconds();
      await this.backupNow();
      if (!this.running) break;
      const wait = startedAt + this.options.everySeconds - this.options.clock.nowSeconds();
      if (wait > 0) await this.options.clock.sleep(wait, this.wake.signal);
    }
  }

  private async runOnce(): Promise<RunOutcome> {
    const { clock, log, metrics } = this.options;
    const mark = this.options.changeMark();
    if (mark === this.lastStoredMark) {
      metrics?.backupStillCurrent(clock.nowSeconds());
      return { kind: 'unchanged' };
    }
    const startedAt = clock.nowSeconds();
    try {
      const manifest = await this.options.backup();
      this.lastStoredMark = mark;
      metrics?.backupStored(manifest, clock.nowSeconds() - startedAt);
      if (this.consecutiveFailures > 0)
        log.info(`state backup ${manifest.seq} stored after ${this.consecutiveFailures} failure(s)`, {
          key: manifest.key,
        });
      this.consecutiveFailures = 0;
      return { kind: 'stored', manifest };
    } catch (e) {
      const reason = e instanceof Error ? e.message : String(e);
      this.consecutiveFailures += 1;
      metrics?.backupFailed();
      log.error('state backup failed; the next period tries again', {
        error: reason,
        consecutiveFailures: this.consecutiveFailures,
      });
      return { kind: 'failed', reason };
    }
  }
}
