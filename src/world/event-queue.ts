/**
 * A binary min-heap of timed events for the simulator's virtual clock. Events at the same time are ordered
 * by `rank` (lower first), then by insertion order, so a run is deterministic (no reliance on sort stability).
 */
export interface Timed {
  readonly timeSeconds: number;
  readonly rank: number;
}

interface Entry<E> {
  readonly event: E;
  readonly timeSeconds: number;
  readonly rank: number;
  readonly seq: number;
}

function before<E>(a: Entry<E>, b: Entry<E>): boolean {
  if (a.timeSeconds !== b.timeSeconds) return a.timeSeconds < b.timeSeconds;
  if (a.rank !== b.rank) return a.rank < b.rank;
  return a.seq < b.seq;
}

export class EventQueue<E extends Timed> {
  private readonly heap: Entry<E>[] = [];
  private nextSeq = 0;

  get size(): number {
    return this.heap.length;
  }

  push(event: E): void {
    if (!Number.isFinite(event.timeSeconds))
      throw new Error(`event time must be finite, got ${event.timeSeconds}`);
    const entry: Entry<E> = { event, timeSeconds: event.timeSeconds, rank: event.rank, seq: this.nextSeq++ };
    const h = this.heap;
    h.push(entry);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = h[parent] as Entry<E>;
      if (!before(entry, p)) break;
      h[i] = p;
      i = parent;
    }
    h[i] = entry;
  }

  /** Every pending event in pop order (time, rank, insertion), without removing them. */
  pending(): E[] {
    return [...this.heap].sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0)).map((e) => e.event);
  }

  /** Time of the earliest event, or undefined when empty. */
  peekTime(): number | undefined {
    return this.heap[0]?.timeSeconds;
  }

  pop(): E | undefined {
    const h = this.heap;
    const top = h[0];
    if (top === undefined) return undefined;
    const last = h.pop() as Entry<E>;
    if (h.length > 0) {
      let i = 0;
      const n = h.length;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        const child = r < n && before(h[r] as Entry<E>, h[l] as Entry<E>) ? r : l;
        const c = h[child] as Entry<E>;
        if (!before(c, last)) break;
        h[i] = c;
        i = child;
      }
      h[i] = last;
    }
    return top.event;
  }
}
