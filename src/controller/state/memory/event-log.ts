import type { EventFilter, EventRecord } from '../../state-store.js';

/**
 * The memory store's event log: every event in sequence order, and indexed by job, instance, kind, and job or instance
 * with kind, as SQL's indexes serve the other stores. A round asks per job when it last entered `running` and per live
 * instance for its market fallback and rebalance recommendation; scanning the whole log for each grows quadratic over
 * a long run (the simulator's controller runtime).
 */
export class MemoryEventLog {
  private all: EventRecord[] = [];
  /** Index key (see `indexKeys`) → events under it, in sequence order. */
  private readonly index = new Map<string, EventRecord[]>();

  /** Append an event; the returned function takes it out again (the store's undo journal). */
  append(record: EventRecord): () => void {
    this.all.push(record);
    const lists = indexKeys(record).map((key) => {
      const list = this.index.get(key) ?? [];
      list.push(record);
      this.index.set(key, list);
      return list;
    });
    return () => {
      this.all.pop();
      for (const list of lists) list.pop();
    };
  }

  /**
   * Take out the oldest events of `kind` recorded before `beforeSeconds`, at most `limit`; `undo` puts them back (the
   * store's undo journal). The lists are rebuilt without them, in order.
   */
  prune(kind: string, beforeSeconds: number, limit: number): { removed: number; undo: () => void } {
    const doomed = new Set<EventRecord>();
    const most = wholeLimit(limit);
    for (const e of this.index.get(indexKey(undefined, kind)) ?? []) {
      if (doomed.size >= most) break;
      if (e.atSeconds < beforeSeconds) doomed.add(e);
    }
    if (doomed.size === 0) return { removed: 0, undo: () => undefined };
    const all = this.all;
    // Only the lists that hold a pruned event change.
    const lists = new Map<string, EventRecord[]>();
    for (const e of doomed) for (const k of indexKeys(e)) lists.set(k, this.index.get(k) ?? []);
    this.all = all.filter((e) => !doomed.has(e));
    for (const [k, list] of lists)
      this.index.set(
        k,
        list.filter((e) => !doomed.has(e)),
      );
    return {
      removed: doomed.size,
      undo: () => {
        this.all = all;
        for (const [k, list] of lists) this.index.set(k, list);
      },
    };
  }

  list(filter: EventFilter): EventRecord[] {
    const out: EventRecord[] = [];
    const limit = wholeLimit(filter.limit ?? Number.MAX_SAFE_INTEGER);
    // The narrowest list the filter allows; the loop checks every condition anyway.
    const key = lookupKey(filter);
    // A kind named twice is one list, not two: each event is listed once, as SQL's `IN` does.
    const kinds = filter.kinds === undefined ? undefined : [...new Set(filter.kinds)];
    // Lists are in sequence order: what comes after `afterSeq` is a tail (the incremental cost report reads only that).
    const tailOf = (list: readonly EventRecord[]): number =>
      filter.afterSeq === undefined ? 0 : firstAfter(list, filter.afterSeq);
    const list =
      key !== undefined
        ? (this.index.get(key) ?? [])
        : kinds !== undefined
          ? // Several kinds: their lists' tails, merged in sequence order.
            kinds
              .flatMap((k) => {
                const byKind = this.index.get(indexKey(undefined, k)) ?? [];
                return byKind.slice(tailOf(byKind));
              })
              .sort((a, b) => a.seq - b.seq)
          : this.all;
    const from = key === undefined && kinds !== undefined ? 0 : tailOf(list);
    for (const e of filter.newestFirst === true ? newestFirst(list, from) : tail(list, from)) {
      if (out.length >= limit) break;
      if (kinds !== undefined && !kinds.includes(e.kind)) continue;
      if (filter.jobId !== undefined && e.jobId !== filter.jobId) continue;
      if (filter.taskId !== undefined && e.taskId !== filter.taskId) continue;
      if (filter.instanceId !== undefined && e.instanceId !== filter.instanceId) continue;
      if (filter.kind !== undefined && e.kind !== filter.kind) continue;
      out.push(e);
    }
    return out;
  }
}

/** A limit as SQL's LIMIT takes it: a whole number of rows, none for a negative one. */
function wholeLimit(limit: number): number {
  return Math.max(0, Math.floor(limit));
}

function* newestFirst(list: readonly EventRecord[], from: number): Generator<EventRecord> {
  for (let i = list.length - 1; i >= from; i -= 1) yield list[i] as EventRecord;
}

function* tail(list: readonly EventRecord[], from: number): Generator<EventRecord> {
  for (let i = from; i < list.length; i += 1) yield list[i] as EventRecord;
}

/** The index of the first event with a sequence number above `seq` (binary search). */
function firstAfter(list: readonly EventRecord[], seq: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((list[mid] as EventRecord).seq <= seq) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

interface IndexedFields {
  readonly jobId?: string | undefined;
  readonly instanceId?: string | undefined;
  readonly kind?: string | undefined;
}

/** The key of one index list: an owner (job or instance) and a kind, either of which may be left out. */
function indexKey(owner: ['job' | 'instance', string] | undefined, kind: string | undefined): string {
  return `${owner?.[0] ?? ''}\u0000${owner?.[1] ?? ''}\u0000${kind ?? ''}`;
}

/** Every list an event belongs to. */
function indexKeys(e: IndexedFields & { readonly kind: string }): string[] {
  const keys = [indexKey(undefined, e.kind)];
  if (e.jobId !== undefined)
    keys.push(indexKey(['job', e.jobId], undefined), indexKey(['job', e.jobId], e.kind));
  if (e.instanceId !== undefined)
    keys.push(indexKey(['instance', e.instanceId], undefined), indexKey(['instance', e.instanceId], e.kind));
  return keys;
}

/** The list that holds every event a filter can match (a job first, then an instance, then a kind); none: all. */
function lookupKey(f: IndexedFields): string | undefined {
  if (f.jobId !== undefined) return indexKey(['job', f.jobId], f.kind);
  if (f.instanceId !== undefined) return indexKey(['instance', f.instanceId], f.kind);
  if (f.kind !== undefined) return indexKey(undefined, f.kind);
  return undefined;
}
