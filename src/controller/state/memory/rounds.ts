import type { RoundInput, RoundRecord, RoundWindow } from '../../state-store.js';
import { frozenCopy } from '../lifecycle.js';
import { checkQueryBound, checkStorable, type MemoryTransactions, type Transact } from './transactions.js';

/** The memory store's rounds: each round's configuration and decision. */
export class MemoryRounds {
  private readonly rounds = new Map<number, RoundRecord>();

  constructor(
    private readonly tx: MemoryTransactions,
    private readonly transaction: Transact,
  ) {}

  recordRound(input: RoundInput): RoundRecord {
    return this.transaction(() => {
      const atSeconds = this.tx.now();
      // Before the copy, which would write a NaN as null.
      checkStorable(atSeconds, 'a round time');
      const record = frozenCopy({
        round: this.tx.next('round'),
        atSeconds,
        configuration: input.configuration,
        decision: input.decision,
      });
      this.tx.put(this.rounds, record.round, record);
      return record;
    });
  }

  getRound(round: number): RoundRecord | undefined {
    return this.rounds.get(round);
  }

  listRounds(limit = Number.MAX_SAFE_INTEGER, window: RoundWindow = {}): RoundRecord[] {
    checkQueryBound(window.sinceSeconds, 'a round time');
    checkQueryBound(window.untilSeconds, 'a round time');
    if (Number.isNaN(limit)) checkQueryBound(limit, 'a round list limit');
    const since = window.sinceSeconds ?? Number.NEGATIVE_INFINITY;
    const until = window.untilSeconds ?? Number.POSITIVE_INFINITY;
    return [...this.rounds.values()]
      .filter((r) => r.atSeconds >= since && r.atSeconds <= until)
      .sort((a, b) => b.round - a.round)
      .slice(0, Math.max(0, limit));
  }

  pruneRounds(keep: number): number {
    return this.transaction(() => {
      const doomed = this.listRounds().slice(Math.max(0, keep));
      for (const r of doomed) this.tx.put(this.rounds, r.round, undefined);
      return doomed.length;
    });
  }
}
