import {
  IllegalTransitionError,
  UnknownRecordError,
  type IntentFilter,
  type IntentInput,
  type IntentRecord,
} from '../../state-store.js';
import { checkIntent, frozenCopy } from '../lifecycle.js';
import { checkStorable, type MemoryTransactions, type Transact } from './transactions.js';

/** The memory store's intents: side effects written before they happen, completed by their outcome. */
export class MemoryIntents {
  private readonly intents = new Map<number, IntentRecord>();
  private readonly intentByKey = new Map<string, number>();
  /**
   * The pending intents (a subset of `intents`): every reconcile pass lists them several times, while done and failed
   * intents pile up for as long as the controller runs (the SQL stores have a partial index for the same reason).
   */
  private readonly pendingIntents = new Map<number, IntentRecord>();

  constructor(
    private readonly tx: MemoryTransactions,
    private readonly transaction: Transact,
  ) {}

  recordIntent(
    intent: IntentInput,
    options: { readonly key?: string; readonly round?: number } = {},
  ): IntentRecord {
    return this.transaction(() => {
      const existing = options.key === undefined ? undefined : this.intentByKey.get(options.key);
      if (existing !== undefined) return this.intents.get(existing) as IntentRecord;
      checkIntent(intent);
      // Before the copy, which would write a NaN as null.
      if (options.round !== undefined) checkStorable(options.round, 'the round of an intent');
      const now = this.tx.now();
      const record = frozenCopy({
        ...intent,
        id: this.tx.next('intent'),
        state: 'pending',
        ...(options.key === undefined ? {} : { key: options.key }),
        ...(options.round === undefined ? {} : { round: options.round }),
        createdAtSeconds: now,
        updatedAtSeconds: now,
      } as IntentRecord);
      this.tx.put(this.intents, record.id, record);
      this.tx.put(this.pendingIntents, record.id, record);
      if (options.key !== undefined) this.tx.put(this.intentByKey, options.key, record.id);
      return record;
    });
  }

  completeIntent(id: number): IntentRecord {
    return this.finishIntent(id, 'done', undefined);
  }

  failIntent(id: number, error: string): IntentRecord {
    return this.finishIntent(id, 'failed', error);
  }

  getIntent(id: number): IntentRecord | undefined {
    return this.intents.get(id);
  }

  getIntentByKey(key: string): IntentRecord | undefined {
    const id = this.intentByKey.get(key);
    return id === undefined ? undefined : this.intents.get(id);
  }

  listIntents(filter: IntentFilter = {}): IntentRecord[] {
    const matches = (i: IntentRecord): boolean =>
      (filter.states === undefined || filter.states.includes(i.state)) &&
      (filter.kind === undefined || i.kind === filter.kind);
    if (filter.states?.length === 1 && filter.states[0] === 'pending')
      // A rolled-back completion puts an intent back at the end of the map: sorted, oldest first as ever.
      return [...this.pendingIntents.values()].filter(matches).sort((a, b) => a.id - b.id);
    // A rolled-back prune puts intents back at the end of the map too.
    return [...this.intents.values()].filter(matches).sort((a, b) => a.id - b.id);
  }

  pruneFinishedIntents(beforeSeconds: number, limit: number): number {
    const most = Math.max(0, Math.floor(limit));
    return this.transaction(() => {
      let removed = 0;
      for (const intent of [...this.intents.values()].sort((a, b) => a.id - b.id)) {
        if (removed >= most) break;
        if (
          intent.state === 'pending' ||
          intent.kind === 'launch' ||
          intent.updatedAtSeconds >= beforeSeconds
        )
          continue;
        this.tx.put(this.intents, intent.id, undefined);
        removed += 1;
      }
      return removed;
    });
  }

  private finishIntent(id: number, state: 'done' | 'failed', error: string | undefined): IntentRecord {
    return this.transaction(() => {
      const intent = this.intents.get(id);
      if (intent === undefined) throw new UnknownRecordError('intent', id);
      if (intent.state === state) return intent;
      if (intent.state !== 'pending') throw new IllegalTransitionError('intent', id, intent.state, state);
      const record = Object.freeze({
        ...intent,
        state,
        error,
        updatedAtSeconds: this.tx.now(),
      }) as IntentRecord;
      this.tx.put(this.intents, id, record);
      this.tx.put(this.pendingIntents, id, undefined);
      return record;
    });
  }
}
