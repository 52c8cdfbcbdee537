import { describe, expect, it } from 'vitest';
import { runInLanes, settleInLanes } from '../../src/sim/run-pool.js';

/** The two ways a batch of runs goes: stopped by its first failure, or every run to its end whatever others do. */
describe('run lanes', () => {
  const failOn =
    (bad: number, started: number[]) =>
    async (index: number): Promise<number> => {
      started.push(index);
      await new Promise((resolve) => setImmediate(resolve));
      if (index === bad) throw new Error(`run ${index} failed`);
      return 10 * index;
    };

  it('settling, a failure stops no other run: every outcome, in order of index', async () => {
    const started: number[] = [];
    const outcomes = await settleInLanes(5, 2, failOn(1, started));
    expect(started.sort()).toEqual([0, 1, 2, 3, 4]);
    expect(outcomes.map((o) => (o.ok ? o.value : o.error.message))).toEqual([0, 'run 1 failed', 20, 30, 40]);
    expect(await settleInLanes(0, 2, failOn(1, []))).toEqual([]);
  });

  it('otherwise the first failure starts no further run and rejects, after stopping those under way', async () => {
    const started: number[] = [];
    let stopped = 0;
    await expect(
      runInLanes(
        5,
        2,
        async (index) => {
          await failOn(1, started)(index);
        },
        () => {
          stopped++;
        },
      ),
    ).rejects.toThrow('run 1 failed');
    expect(stopped).toBe(1);
    expect(started).not.toContain(4);
  });
});
