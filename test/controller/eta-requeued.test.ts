import { describe, expect, it } from 'vitest';
import type { PredictFn } from '../../src/controller/eta-predictions.js';
import { controllerWorld } from '../../src/controller/eta-world.js';
import {
  NEVER_UNDER_CAPS_BASIS,
  readQueueRecord,
  writeQueueRecord,
} from '../../src/controller/queue-records.js';
import { ManualClock } from '../../src/controller/clock.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { readSnapshotInputs } from '../../src/controller/snapshot.js';
import type { WfqConfig } from '../../src/queue/wfq.js';
import { catalog, CPU_SMALL, jobSpec, rig } from './controller-fixtures.js';

/**
 * A stand-in for the simulator that keeps the world's start of a job that has one, and starts every other job 100 s
 * after the first round; running jobs end a day later, so only a start can be overdue.
 */
function startsSoon(calls: { n: number }): PredictFn {
  return ({ world }) => {
    calls.n += 1;
    const round = world.events.find((e) => e.kind === 'round')?.timeSeconds ?? world.nowSeconds;
    return new Map(
      world.jobs.map((j) => {
        const start = j.startSeconds ?? round + 100;
        return [j.spec.id, { startSeconds: start, endSeconds: Math.max(start, round) + 86_400 }];
      }),
    );
  };
}

const TEAMS: WfqConfig = {
  classifyBy: 'team',
  classes: [
    { id: 'vision', weight: 1, teams: ['vision'], ordering: 'fifo' },
    { id: 'rest', weight: 1, ordering: 'fifo' },
  ],
  preemption: { enabled: true, marginShare: 0.05, minShortRounds: 2 },
};

describe('the ETA of a job back in the queue', () => {
  it('predicts its start anew, not its first start, and predicts again once that start is overdue', async () => {
    const calls = { n: 0 };
    const { controller, store, clock } = rig(
      { caps: { quotas: [{ group: 'standard', maxVcpus: 8 }] }, queue: TEAMS },
      { predict: startsSoon(calls) },
    );
    const day = { expectedDurationSeconds: 86_400 };
    const research = ['r1', 'r2'].map((n) => {
      clock.advance(1);
      return controller.submit(jobSpec(n, CPU_SMALL, day), 'research');
    });
    await controller.runRound('research');
    const r2 = research[1]?.id as string;
    const firstStart = store.getJob(r2)?.startedAtSeconds as number;
    expect(firstStart).toBeDefined();
    clock.advance(600);
    controller.submit(jobSpec('v1', CPU_SMALL, { ...day, team: 'vision' }), 'vision');
    // Vision reclaims its share: r2, admitted last, is checkpointed back to the queue and waits there.
    for (let i = 0; i < 5; i++) {
      clock.advance(30);
      await controller.runRound('period');
    }
    await controller.predictionsSettled();
    expect(store.getJob(r2)).toMatchObject({ state: 'queued', migrations: 1, startedAtSeconds: firstStart });

    const now = clock.nowSeconds();
    const world = controllerWorld(readSnapshotInputs(store, now), { catalog, firstRoundSeconds: now });
    expect(world.world.jobs.find((j) => j.spec.id === r2)?.startSeconds).toBeNull();
    const eta = readQueueRecord(store, r2)?.eta;
    expect(eta?.startSeconds as number).toBeGreaterThan(now);

    // Nothing changes while it waits: no new prediction until its predicted start has passed with it still queued.
    clock.advance(30);
    await controller.runRound('period');
    await controller.predictionsSettled();
    const before = calls.n;
    clock.advance((eta?.startSeconds as number) - clock.nowSeconds() + 1);
    await controller.runRound('period');
    await controller.predictionsSettled();
    expect(store.getJob(r2)?.state).toBe('queued');
    expect(calls.n).toBe(before + 1);
    expect(readQueueRecord(store, r2)?.eta?.startSeconds as number).toBeGreaterThan(clock.nowSeconds());
  });
});

describe('the ETA of a job the caps no longer admit', () => {
  it('is predicted again at a round that has nothing to plan, and says never', async () => {
    const clock = new ManualClock();
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    // A two-task job queued under an older configuration, with the ETA it was given there.
    const job = store.submitJob(jobSpec('gang', CPU_SMALL, { replicas: 2, expectedDurationSeconds: 3600 }));
    const stale = {
      startSeconds: clock.nowSeconds() - 60,
      completionSeconds: clock.nowSeconds() + 3540,
      computedAtSeconds: clock.nowSeconds() - 120,
      basis: 'admitted in class all',
    };
    writeQueueRecord(store, job.id, { eta: stale });
    // Started again with one instance at most: the job never fits, nothing is admitted, no instance is left.
    const { controller } = rig({ caps: { maxInstances: 1 } }, { clock, store });
    await controller.runRound('period');
    await controller.predictionsSettled();
    const eta = readQueueRecord(store, job.id)?.eta;
    expect(eta).toMatchObject({ startSeconds: null, completionSeconds: null });
    expect(eta?.basis).toMatch(new RegExp(`^${NEVER_UNDER_CAPS_BASIS}`));
  });
});
