import { describe, expect, it } from 'vitest';
import type { Market } from '../../src/core/market.js';
import type { PlannedInstance, Scheduler } from '../../src/scheduler/types.js';
import { CPU_SMALL, jobSpec, rig } from './controller-fixtures.js';

/**
 * A plan's purchase option reaches the cloud: a new instance the planner buys as spot is launched with the spot
 * market (its launch intent keeps it across a restart); one without a market is launched on demand.
 */
function marketScheduler(market: (jobName: string) => Market | undefined): Scheduler {
  let n = 0;
  return {
    name: 'market',
    observe() {},
    plan(snapshot) {
      const instances: PlannedInstance[] = snapshot.instances
        .filter((i) => i.taskIds.length > 0)
        .map((i) => ({ id: i.id, typeName: i.typeName, isNew: false, taskIds: [...i.taskIds] }));
      for (const t of snapshot.tasks)
        if (t.instanceId === undefined) {
          const chosen = market(t.jobId);
          // The planner's instance as spot planning gives it (PlannedInstance with a market).
          const planned: PlannedInstance & { readonly market?: Market } = {
            id: `new-${++n}`,
            typeName: 'c7i.xlarge',
            isNew: true,
            taskIds: [t.id],
            ...(chosen === undefined ? {} : { market: chosen }),
          };
          instances.push(planned);
        }
      return {
        configuration: { instances },
        decision: {
          scheduler: 'market',
          nowSeconds: snapshot.nowSeconds,
          candidates: [],
          chosen: 'full',
          reason: 'test',
          waiting: [],
          pinned: [],
        },
      };
    },
  };
}

describe('the market from the plan to the cloud', () => {
  it('launches a planned spot instance as spot and one without a market on demand', async () => {
    let spotJob = '';
    const scheduler = marketScheduler((jobId) => (jobId === spotJob ? 'spot' : undefined));
    const { controller, store, cloud } = rig({}, { scheduler });
    spotJob = controller.submit(jobSpec('cheap', CPU_SMALL), 'research').id;
    controller.submit(jobSpec('plain', CPU_SMALL), 'research');
    await controller.runRound();
    expect(cloud.requests.map((r) => r.market).sort()).toEqual(['on-demand', 'spot']);
    const intents = store.listIntents({ kind: 'launch' }).map((i) => i.payload as { market?: Market });
    expect(intents.map((p) => p.market ?? 'on-demand').sort()).toEqual(['on-demand', 'spot']);
  });

  it('a spot instance whose type has no capacity is replaced by another type, still asked for on spot', async () => {
    const scheduler = marketScheduler(() => 'spot');
    const { controller, store, cloud } = rig({}, { scheduler });
    cloud.noCapacity.add('c7i.xlarge');
    controller.submit(jobSpec('cheap', CPU_SMALL), 'research');
    await controller.runRound();
    const requests = cloud.requests.map((r) => [r.typeName, r.market]);
    expect(requests[0]).toEqual(['c7i.xlarge', 'spot']);
    expect(requests.length).toBeGreaterThan(1);
    const replacement = requests.at(-1) as [string, Market];
    expect(replacement[0]).not.toBe('c7i.xlarge');
    expect(replacement[1]).toBe('spot');
    const launched = store
      .listIntents({ kind: 'launch' })
      .filter((i) => i.state !== 'failed')
      .map((i) => (i.payload as { market?: Market }).market);
    expect(launched).toEqual(['spot']);
  });
});
