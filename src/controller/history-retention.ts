import type { Clock } from './clock.js';
import type { ControllerLogger } from './seams.js';
import type { ControllerSettings } from './settings.js';
import type { StateStore } from './state-store.js';

/** Round records kept when the settings do not say (`roundsKept`). */
export const DEFAULT_ROUNDS_KEPT = 5000;
/** Days of `task.checkpoint` events kept when the settings do not say (`checkpointEventDays`). */
export const DEFAULT_CHECKPOINT_EVENT_DAYS = 30;
/**
 * Days a finished intent is kept. An intent is the controller's record of a side effect it is about to make, read back
 * only while pending (a restart finishes it); a week leaves the recent ones to look at by hand.
 */
export const FINISHED_INTENT_DAYS = 7;
/** At most this many events (or intents) are deleted in one pass, so that no pass holds the loop long; the next round goes on. */
const PRUNE_SLICE = 20_000;
/** Rounds between two prunes of the round records. */
const ROUND_PRUNE_EVERY = 100;
/** Seconds between two looks for old checkpoint events, once none were left over. */
const EVENT_PRUNE_EVERY_SECONDS = 3600;

/**
 * What the state keeps of its history: the newest `roundsKept` round records (plans and decisions) and the
 * `round.applied` events since the round `roundsKept` back (`fleetwise why` reads the newest of both, at most a few
 * hundred), and `task.checkpoint` events for `checkpointEventDays`. A checkpoint event is the bulk of a long-running controller's
 * event log (one per task per checkpoint: a job checkpointing every 10 minutes leaves 4,000 a month) and nothing reads
 * an old one back: a task's newest checkpoint is on its record, the cost report reads task states and instances.
 * Finished intents other than launches go after `FINISHED_INTENT_DAYS` (a few per task move, kept for ever before).
 * Pruned after rounds, a slice at a time.
 */
export class HistoryRetention {
  private nextEventPruneSeconds = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly deps: {
      readonly store: StateStore;
      readonly clock: Clock;
      readonly log: ControllerLogger;
      readonly settings: Pick<ControllerSettings, 'roundsKept' | 'checkpointEventDays'>;
    },
  ) {}

  /** After a round (`round`: its number, when one was recorded). A store that fails it fails no round. */
  afterRound(round: number | undefined): void {
    try {
      this.prune(round);
    } catch (e) {
      this.deps.log.warn('cannot prune old history', { error: (e as Error).message });
    }
  }

  private prune(round: number | undefined): void {
    const { store, settings } = this.deps;
    if (round !== undefined && round % ROUND_PRUNE_EVERY === 0) {
      const kept = settings.roundsKept ?? DEFAULT_ROUNDS_KEPT;
      store.pruneRounds(kept);
      // The round `kept` back: a number skipped by a rolled-back round makes it a little newer than the oldest record
      // kept, which costs little (`why` on a job of those few oldest rounds goes by the plan's moves, without what forced them).
      const oldestKept = store.getRound(round - kept + 1);
      if (oldestKept !== undefined) store.pruneEvents('round.applied', oldestKept.atSeconds, PRUNE_SLICE);
    }
    const days = settings.checkpointEventDays ?? DEFAULT_CHECKPOINT_EVENT_DAYS;
    const now = this.deps.clock.nowSeconds();
    if (now < this.nextEventPruneSeconds) return;
    const pruned = days <= 0 ? 0 : store.pruneEvents('task.checkpoint', now - days * 86_400, PRUNE_SLICE);
    const intents = store.pruneFinishedIntents(now - FINISHED_INTENT_DAYS * 86_400, PRUNE_SLICE);
    // A full slice may have left more: look again after the next round rather than in an hour.
    const more = pruned >= PRUNE_SLICE || intents >= PRUNE_SLICE;
    this.nextEventPruneSeconds = more ? now : now + EVENT_PRUNE_EVERY_SECONDS;
    if (pruned > 0)
      this.deps.log.info('pruned old checkpoint events', { events: pruned, olderThanDays: days });
    if (intents > 0)
      this.deps.log.info('pruned finished intents', { intents, olderThanDays: FINISHED_INTENT_DAYS });
  }
}
