import { setImmediate as nextTurn } from 'node:timers/promises';
import type { StateStore } from '../state-store.js';

/** Work a pass does before it lets the event loop in. */
const SLICE_MS = 10;

/** A write a pass defers to the end of its slice, and what to do once it is committed. */
export type DeferredWrite = () => (() => void) | undefined;

/**
 * A long reconciliation pass cut into slices. Between slices the pass lets the rest of the controller in: a pass over
 * hundreds of intents would otherwise hold the event loop for seconds, and the API (submissions, heartbeats, /healthz)
 * with it. Between two items a pass awaits anyway (cloud and worker calls are asynchronous), and every item re-reads
 * what it changes, so an API write landing in between is already provided for.
 *
 * The store writes of a slice's items are committed together at its end, in one transaction: one sync of the store
 * (an fsync of SQLite's WAL) for the slice rather than one per item, as a database's group commit does. A crash before
 * that commit leaves the slice's intents pending, as a crash right after each item's call did: they are carried out
 * again, as every intent may be.
 */
export class Slices {
  private sliceStartMs = performance.now();
  private readonly writes: DeferredWrite[] = [];

  constructor(private readonly store?: StateStore) {}

  /** Commit `write` with the rest of this slice; what it returns runs after the commit. */
  defer(write: DeferredWrite): void {
    if (this.store === undefined) throw new Error('these slices have no store to commit to');
    this.writes.push(write);
  }

  /** Once the current slice took SLICE_MS: commit its writes and yield to the event loop. */
  async next(): Promise<void> {
    if (performance.now() - this.sliceStartMs < SLICE_MS) return;
    this.commit();
    await nextTurn();
    this.sliceStartMs = performance.now();
  }

  /** Commit the writes deferred so far (a pass ends with this), then run what follows each. */
  commit(): void {
    if (this.writes.length === 0 || this.store === undefined) return;
    const writes = this.writes.splice(0);
    const store = this.store;
    const then = store.transaction(() => writes.map((write) => write()));
    const follow = then.filter((f): f is () => void => f !== undefined);
    if (follow.length > 0) store.transaction(() => follow.forEach((f) => f()));
  }
}
