import type { Catalog } from '../core/catalog.js';
import type { Scheduler } from '../scheduler/types.js';
import type { SerializedColocationTable } from '../scheduler/colocation-table.js';
import type { ControllerLogger } from './seams.js';
import type { JsonValue, StateStore } from './state-store.js';

/** KV key of the scheduler's learned state (co-location table, event history), saved after every round. */
export const SCHEDULER_STATE_KEY = 'scheduler.eva';

/** A scheduler whose learned state survives restarts (Eva: co-location table, event history). */
export type ControllerScheduler = Scheduler & {
  exportState?(): unknown;
  importState?(state: never): void;
};

/**
 * The scheduler the controller plans with and its learned state: loaded from the store once before it first plans,
 * saved after every round, and carried over to a new scheduler when a repriced catalog replaces it.
 */
export class SchedulerState {
  /** Replaced only by `replaceFor` (price refresh), between rounds. */
  scheduler: ControllerScheduler;
  private loaded = false;

  constructor(
    private readonly deps: {
      readonly store: StateStore;
      readonly log: ControllerLogger;
      readonly scheduler: ControllerScheduler;
      /** Builds the scheduler for a repriced catalog; undefined: an injected scheduler keeps its prices. */
      readonly schedulerFor: ((catalog: Catalog) => ControllerScheduler) | undefined;
      /** False: `save` writes nothing (ControllerDeps.saveSchedulerState). */
      readonly save: boolean;
    },
  ) {
    this.scheduler = deps.scheduler;
  }

  /** Import the saved state once (the first round, or a prediction before it). */
  load(): void {
    if (this.loaded) return;
    this.loaded = true;
    const saved = this.deps.store.getValue(SCHEDULER_STATE_KEY);
    const importState = this.scheduler.importState;
    if (saved === undefined || importState === undefined) return;
    try {
      importState.call(this.scheduler, saved as never);
    } catch (e) {
      this.deps.log.warn('saved scheduler state is unreadable; starting from defaults', {
        error: (e as Error).message,
      });
    }
  }

  /** What the scheduler learned of co-location, saved state included; undefined for one that learns none. */
  learnedColocation(): SerializedColocationTable | undefined {
    this.load();
    return this.scheduler.learnedColocation?.();
  }

  save(): void {
    if (!this.deps.save) return;
    const exported = this.scheduler.exportState?.();
    if (exported === undefined) return;
    // Plain data (exportState's contract); the store serializes what it keeps (as JSON text, in every store).
    this.deps.store.setValue(SCHEDULER_STATE_KEY, exported as JsonValue);
  }

  /**
   * Eva's PriceBook is built from the catalog at construction, so a repriced catalog needs a new scheduler instance;
   * the learned state (co-location table, event history, known jobs) is carried over with exportState/importState.
   * Its plan cache is not, so the next round plans afresh at the new prices.
   */
  replaceFor(catalog: Catalog): void {
    if (this.deps.schedulerFor === undefined) {
      this.deps.log.warn('new catalog prices do not reach the injected scheduler (no schedulerFor factory)');
      return;
    }
    const next = this.deps.schedulerFor(catalog);
    // Before the first round the saved state is still in the store: the new scheduler loads it then.
    const learned = this.loaded ? this.scheduler.exportState?.() : undefined;
    if (learned !== undefined && next.importState !== undefined)
      next.importState.call(next, JSON.parse(JSON.stringify(learned)) as never);
    this.scheduler = next;
  }
}
