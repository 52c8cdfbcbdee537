import { describe, expect, it } from 'vitest';
import { SCHEDULER_STATE_KEY } from '../../src/controller/scheduler-state.js';
import type { JsonValue } from '../../src/controller/state-store.js';
import { isFullReconfiguration } from '../../src/scheduler/decision-rule.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { catalog, CPU_SMALL, jobSpec, rig } from './controller-fixtures.js';

/**
 * The controller saves Eva's learned state after every round. Its event history is four numbers however many jobs
 * ran; a store written by a version that kept every event time loads into the same λ and p, and is saved compact.
 */
describe("the controller's saved event history", () => {
  it('loads a state that lists every event time, plans with its λ and p, and saves it in its fixed size', async () => {
    const first = rig();
    const now = first.clock.nowSeconds();
    // 10,000 events, one every 10 s, over the 100,000 s before now; one round chose a Full Reconfiguration.
    const times = Array.from({ length: 10_000 }, (_, i) => now - 100_000 + i * 10);
    const older = {
      table: new EvaScheduler(catalog).exportState().table,
      history: { times, fullCount: 1 },
      knownJobs: [],
    };
    first.store.setValue(SCHEDULER_STATE_KEY, JSON.parse(JSON.stringify(older)) as JsonValue);
    const olderSize = JSON.stringify(first.store.getValue(SCHEDULER_STATE_KEY)).length;

    first.controller.submit(jobSpec('small', CPU_SMALL), 'research');
    const round = await first.controller.runRound();
    // The job's arrival (now) is the 10,001st event: λ = 10,000 / 100,000 s, p = 1 / 10,001.
    expect(round.decision?.eventRatePerSecond).toBe(10_000 / 100_000);
    expect(round.decision?.fullFraction).toBe(1 / 10_001);
    const fulls = 1 + (isFullReconfiguration(round.decision?.chosen ?? 'baseline') ? 1 : 0);
    const saved = first.store.getValue(SCHEDULER_STATE_KEY) as { history: unknown; knownJobs: string[] };
    expect(saved.history).toEqual({
      count: 10_001,
      fullCount: fulls,
      firstSeconds: now - 100_000,
      lastSeconds: now,
    });
    const size = JSON.stringify(saved).length;
    expect(size * 20).toBeLessThan(olderSize);

    // A controller started again on the store goes on from it, and the next round's state is no larger.
    const second = rig({}, { store: first.store, cloud: first.cloud, clock: first.clock });
    await second.controller.recover();
    first.clock.advance(300);
    second.controller.submit(jobSpec('second', CPU_SMALL), 'research');
    const next = await second.controller.runRound();
    // 10,002 events over 100,300 s.
    expect(next.decision?.eventRatePerSecond).toBe(10_001 / 100_300);
    const again = second.store.getValue(SCHEDULER_STATE_KEY) as { history: { count: number } };
    expect(again.history.count).toBe(10_002);
    expect(JSON.stringify(again.history).length).toBe(JSON.stringify(saved.history).length);
  });
});
