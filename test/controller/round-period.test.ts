import { describe, expect, it } from 'vitest';
import { CPU_SMALL, jobSpec, rig, waitFor } from './controller-fixtures.js';

/**
 * When the controller's loop plans. With early rounds (the product's default) any request plans at once and the period
 * counts from the last round; without them (the simulator's runtime, as Eva's reference) submissions, completions and
 * drains wait for the period, while capacity lost or about to be is planned for at once and moves no periodic round.
 */
describe('controller loop: rounds on the period and rounds asked for', () => {
  async function loop(earlyRounds: boolean) {
    const r = rig({ earlyRounds, roundSeconds: 300, pollSeconds: 1000 });
    // A job to plan for, so that every round is recorded.
    r.controller.submit(jobSpec('a', CPU_SMALL), 'research');
    await r.controller.start();
    await waitFor(() => r.clock.pendingSleeps > 0 && r.store.listRounds().length === 1);
    const roundTimes = () =>
      r.store
        .listRounds()
        .map((x) => x.atSeconds)
        .sort((a, b) => a - b);
    /** Move the clock to `t` and let the loop run until it sleeps again. */
    const at = async (t: number) => {
      r.clock.advance(t - r.clock.nowSeconds());
      await new Promise((resolve) => setTimeout(resolve, 20));
      await waitFor(() => r.clock.pendingSleeps > 0);
    };
    return { ...r, roundTimes, at };
  }

  it('without early rounds: lost capacity is planned for at once, the period keeps its grid, a drain waits', async () => {
    const r = await loop(false);
    const t0 = r.roundTimes()[0] as number;
    await r.at(t0 + 100);
    r.controller.requestRound('inst-9 spot interruption', 'capacity');
    await waitFor(() => r.roundTimes().length === 2);
    expect(r.roundTimes()).toEqual([t0, t0 + 100]);
    await r.at(t0 + 150);
    r.controller.requestRound('inst-9 drained');
    await r.at(t0 + 299);
    expect(r.roundTimes()).toEqual([t0, t0 + 100]);
    // The periodic round comes at t0 + 300, not 300 s after the round asked for.
    await r.at(t0 + 300);
    await waitFor(() => r.roundTimes().length === 3);
    expect(r.roundTimes()).toEqual([t0, t0 + 100, t0 + 300]);
    await r.controller.stop();
  });

  it('with early rounds: any request is planned for at once and the period counts from the last round', async () => {
    const r = await loop(true);
    const t0 = r.roundTimes()[0] as number;
    await r.at(t0 + 100);
    r.controller.requestRound('inst-9 drained');
    await waitFor(() => r.roundTimes().length === 2);
    await r.at(t0 + 300);
    expect(r.roundTimes()).toEqual([t0, t0 + 100]);
    await r.at(t0 + 400);
    await waitFor(() => r.roundTimes().length === 3);
    expect(r.roundTimes()).toEqual([t0, t0 + 100, t0 + 400]);
    await r.controller.stop();
  });
});
