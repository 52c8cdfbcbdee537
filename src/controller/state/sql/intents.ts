import {
  IllegalTransitionError,
  UnknownRecordError,
  type IntentFilter,
  type IntentInput,
  type IntentRecord,
} from '../../state-store.js';
import { checkIntent } from '../lifecycle.js';
import { Where, type SqlConnection } from './connection.js';
import { intentFromRow } from './rows.js';
import { isRecordNumber, rowLimit } from './query-bounds.js';

/** Intents: written before a side effect, completed or failed after it. */
export class IntentQueries {
  constructor(private readonly connection: SqlConnection) {}

  recordIntent(
    intent: IntentInput,
    options: { readonly key?: string; readonly round?: number } = {},
  ): IntentRecord {
    return this.connection.transaction(() => {
      if (options.key !== undefined) {
        const existing = this.getIntentByKey(options.key);
        if (existing !== undefined) return existing;
      }
      checkIntent(intent);
      const now = this.connection.now();
      const id = this.connection.nextNumber('intents');
      this.connection.run(
        `INSERT INTO intents (id, kind, idempotency_key, round, payload_json, state, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)`,
        id,
        intent.kind,
        options.key ?? null,
        options.round ?? null,
        JSON.stringify(intent.payload),
        now,
        now,
      );
      return this.existing(id);
    });
  }

  completeIntent(id: number): IntentRecord {
    return this.finishIntent(id, 'done', undefined);
  }

  failIntent(id: number, error: string): IntentRecord {
    return this.finishIntent(id, 'failed', error);
  }

  private finishIntent(id: number, state: 'done' | 'failed', error: string | undefined): IntentRecord {
    return this.connection.transaction(() => {
      const intent = this.existing(id);
      if (intent.state === state) return intent;
      if (intent.state !== 'pending') throw new IllegalTransitionError('intent', id, intent.state, state);
      this.connection.run(
        'UPDATE intents SET state = ?, error = ?, updated_at = ? WHERE id = ?',
        state,
        error ?? null,
        this.connection.now(),
        id,
      );
      return this.existing(id);
    });
  }

  pruneFinishedIntents(beforeSeconds: number, limit: number): number {
    return this.connection.transaction(() =>
      this.connection.run(
        `DELETE FROM intents WHERE id IN (SELECT id FROM intents
           WHERE state <> 'pending' AND kind <> 'launch' AND updated_at < ? ORDER BY id LIMIT ?)`,
        beforeSeconds,
        rowLimit(limit),
      ),
    );
  }

  getIntent(id: number): IntentRecord | undefined {
    if (!isRecordNumber(id)) return undefined;
    const row = this.connection.get('SELECT * FROM intents WHERE id = ?', id);
    return row === undefined ? undefined : intentFromRow(row);
  }

  getIntentByKey(key: string): IntentRecord | undefined {
    const row = this.connection.get('SELECT * FROM intents WHERE idempotency_key = ?', key);
    return row === undefined ? undefined : intentFromRow(row);
  }

  listIntents(filter: IntentFilter = {}): IntentRecord[] {
    const where = new Where();
    // The pending intents, asked for many times a pass, are read through the partial index `intents_pending`; SQLite
    // uses it only for the literal condition (a bound `state IN (?)` walked every intent ever recorded: 30–37 ms at
    // 300,000 intents, against 0.04 ms).
    if (filter.states?.length === 1 && filter.states[0] === 'pending') where.raw(`state = 'pending'`);
    else where.in('state', filter.states);
    where.eq('kind', filter.kind);
    return this.connection
      .all(`SELECT * FROM intents ${where.sql()} ORDER BY id`, ...where.params)
      .map(intentFromRow);
  }

  private existing(id: number): IntentRecord {
    const intent = this.getIntent(id);
    if (intent === undefined) throw new UnknownRecordError('intent', id);
    return intent;
  }
}
