import { describe, expect, it } from 'vitest';
import { coStartLines } from '../../src/cli/commands/job.js';

describe('fleetwise job: co-start lines', () => {
  it('shows the barrier-idle cost of holds that ended without a start, which have no start skew', () => {
    // What the job view holds after a re-plan, a drained instance or the job's end while tasks were held.
    expect(coStartLines({ readyTaskIds: [], barrierIdleCost: 1.25 }, 4)).toEqual([
      'barrier-idle $1.2500, held without a start',
    ]);
    // Held again after such a hold: both the wait now and what the earlier one cost.
    expect(coStartLines({ readyTaskIds: ['job-1.0'], barrierIdleCost: 0.5 }, 2)).toEqual([
      'co-start   1 of 2 tasks ready, held for the others',
      'barrier-idle $0.5000, held without a start',
    ]);
  });

  it('shows a measured start’s skew beside its barrier-idle cost, once', () => {
    expect(
      coStartLines(
        { readyTaskIds: [], startSkewSeconds: 2, barrierIdleCost: 0.125, releasedAtSeconds: 0 },
        2,
      ),
    ).toEqual([
      expect.stringMatching(/^co-start {3}released together /),
      'start skew 2.0 s, barrier-idle $0.1250',
    ]);
    expect(coStartLines({ readyTaskIds: [] }, 2)).toEqual([]);
    expect(coStartLines(null, 2)).toEqual([]);
  });
});
