import { describe, expect, it } from 'vitest';
import { makesBeforeBreak, moveStopGate } from '../../src/round/gates.js';

/** When a moving job's checkpoint-stop may go out (make before break), as both runtimes ask it. */
describe('moveStopGate', () => {
  const booting = { launched: true, ready: false };
  const ready = { launched: true, ready: true };
  const heldBack = { launched: false, ready: false };

  it('opens once every instance the job moves to is ready', () => {
    expect(moveStopGate([ready, ready])).toBeUndefined();
    expect(moveStopGate([ready, booting])).toBe('1 instance(s) it moves to to be ready');
    expect(moveStopGate([booting, booting])).toBe('2 instance(s) it moves to to be ready');
  });

  it('does not wait for an instance a cap holds back, even next to one booting', () => {
    // The held-back launch may wait for the very instance the job leaves: waiting for it would never end.
    expect(moveStopGate([booting, heldBack])).toBeUndefined();
    expect(moveStopGate([heldBack])).toBeUndefined();
  });

  it('is open for a job with nowhere to go (its move fell through: it goes back to the queue)', () => {
    expect(moveStopGate([])).toBeUndefined();
  });
});

describe('makesBeforeBreak', () => {
  it('holds when asked for and no cap is set; any cap turns it off', () => {
    expect(makesBeforeBreak(true, {})).toBe(true);
    expect(makesBeforeBreak(false, {})).toBe(false);
    expect(makesBeforeBreak(true, { maxCostPerHour: 100 })).toBe(false);
    expect(makesBeforeBreak(true, { maxInstances: 3 })).toBe(false);
    expect(makesBeforeBreak(true, { quotas: [{ group: 'gpu', maxGpus: 8 }] })).toBe(false);
  });
});
