import { setImmediate as nextTurn } from 'node:timers/promises';

/** Work a pass does before it lets the event loop in. */
const SLICE_MS = 10;

/**
 * Lets the rest of the controller in during a long reconciliation pass: a pass over hundreds of intents (each
 * committed on its own) would otherwise hold the event loop for seconds, and the API (submissions, heartbeats,
 * /healthz) with it. Between two items a pass awaits anyway (cloud and worker calls are asynchronous), and every item
 * re-reads what it changes in its own transaction, so an API write landing in between is already provided for.
 */
export class Slices {
  private sliceStartMs = performance.now();

  /** Yield to the event loop once the current slice of work took SLICE_MS. */
  async next(): Promise<void> {
    if (performance.now() - this.sliceStartMs < SLICE_MS) return;
    await nextTurn();
    this.sliceStartMs = performance.now();
  }
}
