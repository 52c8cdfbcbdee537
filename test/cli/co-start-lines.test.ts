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

  it('says which start the figures are of, and the total over all the starts when there is more than one', () => {
    const once = { readyTaskIds: [], startSkewSeconds: 2, barrierIdleCost: 0.125, releasedAtSeconds: 0 };
    expect(coStartLines({ ...once, start: 1, starts: 1, totalBarrierIdleCost: 0.125 }, 2).slice(1)).toEqual([
      'start skew 2.0 s, barrier-idle $0.1250 (start 1 of 1)',
    ]);
    expect(coStartLines({ ...once, start: 3, starts: 3, totalBarrierIdleCost: 0.5 }, 2).slice(1)).toEqual([
      'start skew 2.0 s, barrier-idle $0.1250 (start 3 of 3)',
      'barrier-idle $0.5000 in all (3 starts and any holds that ended without one)',
    ]);
    // One start, and holds that ended without one since: what they all cost.
    expect(coStartLines({ ...once, start: 1, starts: 1, totalBarrierIdleCost: 0.25 }, 2).slice(1)).toEqual([
      'start skew 2.0 s, barrier-idle $0.1250 (start 1 of 1)',
      'barrier-idle $0.2500 in all (1 start and any holds that ended without one)',
    ]);
    // Retried before its next start: the earlier attempt's cost.
    expect(coStartLines({ readyTaskIds: [], starts: 2, totalBarrierIdleCost: 0.75 }, 2)).toEqual([
      'barrier-idle $0.7500 in all (2 starts and any holds that ended without one)',
    ]);
  });
});
