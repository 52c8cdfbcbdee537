import type { RoundInput, RoundRecord, RoundWindow } from '../../state-store.js';
import type { SqlConnection } from './connection.js';
import { roundFromRow } from './rows.js';
import { isRecordNumber, rowLimit } from './query-bounds.js';

/** One plan-and-decision record per scheduling round (the `plans` table). */
export class RoundQueries {
  constructor(private readonly connection: SqlConnection) {}

  recordRound(input: RoundInput): RoundRecord {
    return this.connection.transaction(() => {
      const round = this.connection.nextNumber('plans');
      this.connection.run(
        `INSERT INTO plans (round, at_seconds, scheduler, chosen, configuration_json, decision_json) VALUES (?, ?, ?, ?, ?, ?)`,
        round,
        this.connection.now(),
        input.decision.scheduler,
        input.decision.chosen,
        JSON.stringify(input.configuration),
        JSON.stringify(input.decision),
      );
      return this.getRound(round) as RoundRecord;
    });
  }

  getRound(round: number): RoundRecord | undefined {
    if (!isRecordNumber(round)) return undefined;
    const row = this.connection.get('SELECT * FROM plans WHERE round = ?', round);
    return row === undefined ? undefined : roundFromRow(row);
  }

  latestRound(): RoundRecord | undefined {
    return this.listRounds(1)[0];
  }

  listRounds(limit = Number.MAX_SAFE_INTEGER, window: RoundWindow = {}): RoundRecord[] {
    // Only the ends given are bound: an infinite bound is not a number every driver passes on.
    const where: string[] = [];
    const params: number[] = [];
    if (window.sinceSeconds !== undefined) {
      where.push('at_seconds >= ?');
      params.push(window.sinceSeconds);
    }
    if (window.untilSeconds !== undefined) {
      where.push('at_seconds <= ?');
      params.push(window.untilSeconds);
    }
    const filter = where.length === 0 ? '' : ` WHERE ${where.join(' AND ')}`;
    return this.connection
      .all(`SELECT * FROM plans${filter} ORDER BY round DESC LIMIT ?`, ...params, rowLimit(limit))
      .map(roundFromRow);
  }

  pruneRounds(keep: number): number {
    return this.connection.transaction(() =>
      this.connection.run(
        'DELETE FROM plans WHERE round NOT IN (SELECT round FROM plans ORDER BY round DESC LIMIT ?)',
        rowLimit(keep),
      ),
    );
  }
}
