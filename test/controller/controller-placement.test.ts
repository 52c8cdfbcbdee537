import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot } from '../../src/core/model.js';
import type { InstancePlacement, MeasuredRtt } from '../../src/core/network.js';
import { PLACEMENT_GROUP_CLEANUP_SECONDS } from '../../src/controller/reconcile/effects/placement-groups.js';
import type { WorkerFleet } from '../../src/controller/worker-liveness.js';
import type { PlannedInstance, Scheduler } from '../../src/scheduler/types.js';
import { CPU_SMALL, jobSpec, liveRecords, rig } from './controller-fixtures.js';

/**
 * Latency-aware placement in the controller: where a plan puts a new instance (zone, cluster placement group) reaches
 * the cloud's launch, the store keeps what the cloud really gave (the group, or none after a fallback), the next
 * round's snapshot shows it with the round trips the workers measured, and groups no instance uses are deleted.
 */

/**
 * A scheduler that keeps every occupied instance, drops empty ones and gives each unplaced task a new c7i.xlarge
 * where `place` says; it keeps the snapshots it planned from.
 */
function placingScheduler(
  place: (jobId: string) => InstancePlacement,
): Scheduler & { seen: ClusterSnapshot[] } {
  let n = 0;
  const seen: ClusterSnapshot[] = [];
  return {
    name: 'placing',
    seen,
    observe() {},
    plan(snapshot) {
      seen.push(snapshot);
      const instances: PlannedInstance[] = snapshot.instances
        .filter((i) => i.taskIds.length > 0)
        .map((i) => ({ id: i.id, typeName: i.typeName, isNew: false, taskIds: [...i.taskIds] }));
      for (const t of snapshot.tasks)
        if (t.instanceId === undefined)
          instances.push({
            id: `new-${++n}`,
            typeName: 'c7i.xlarge',
            isNew: true,
            taskIds: [t.id],
            placement: place(t.jobId),
          });
      return {
        configuration: { instances },
        decision: {
          scheduler: 'placing',
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

const nearRoot = (jobId: string): InstancePlacement => ({
  zone: 'us-east-1b',
  placementGroup: `pg-${jobId}`,
});

describe('placement from the plan to the cloud and back', () => {
  it('launches each new instance in the zone and placement group the plan gives, and records them', async () => {
    const scheduler = placingScheduler(nearRoot);
    const { controller, store, cloud } = rig({}, { scheduler });
    const job = controller.submit(jobSpec('ring', CPU_SMALL, { replicas: 2 }), 'research');
    await controller.runRound();
    expect(cloud.requests.map((r) => [r.typeName, r.availabilityZones, r.placementGroup])).toEqual([
      ['c7i.xlarge', ['us-east-1b'], `pg-${job.id}`],
      ['c7i.xlarge', ['us-east-1b'], `pg-${job.id}`],
    ]);
    expect(liveRecords(store).map((i) => [i.availabilityZone, i.placementGroup])).toEqual([
      ['us-east-1b', `pg-${job.id}`],
      ['us-east-1b', `pg-${job.id}`],
    ]);
    expect(store.listEvents({ kind: 'instance.placement-fallback' })).toEqual([]);
    // The next round plans knowing where its instances are.
    await controller.runRound();
    expect(scheduler.seen[1]?.instances.map((i) => i.placement)).toEqual([
      { zone: 'us-east-1b', placementGroup: `pg-${job.id}` },
      { zone: 'us-east-1b', placementGroup: `pg-${job.id}` },
    ]);
    expect(cloud.requests).toHaveLength(2);
  });

  it('records an instance launched without its group as outside it, with an event saying why', async () => {
    const scheduler = placingScheduler(nearRoot);
    const { controller, store, cloud } = rig({}, { scheduler });
    cloud.fullGroups.add('pg-job-1');
    const job = controller.submit(jobSpec('ring', CPU_SMALL, { replicas: 2 }), 'research');
    expect(job.id).toBe('job-1');
    await controller.runRound();
    expect(liveRecords(store).map((i) => [i.availabilityZone, i.placementGroup])).toEqual([
      ['us-east-1b', undefined],
      ['us-east-1b', undefined],
    ]);
    const events = store.listEvents({ kind: 'instance.placement-fallback' });
    expect(events).toHaveLength(2);
    expect(events[0]?.message).toBe(
      'launched without placement group pg-job-1: placement group pg-job-1 is full',
    );
    expect(events[0]?.data).toMatchObject({ asked: 'pg-job-1', zone: 'us-east-1b' });
    await controller.runRound();
    expect(scheduler.seen[1]?.instances.map((i) => i.placement)).toEqual([
      { zone: 'us-east-1b' },
      { zone: 'us-east-1b' },
    ]);
  });

  it('gives the round the round trips its workers measured, between the instances it may use only', async () => {
    const scheduler = placingScheduler(nearRoot);
    const measured = (from: string, to: string, us: number): MeasuredRtt => ({
      fromInstanceId: from,
      toInstanceId: to,
      maxMicroseconds: us,
      p99Microseconds: us,
      atSeconds: 0,
    });
    const workers: WorkerFleet = {
      takeObservations: () => [],
      staleInstances: () => [],
      markLost: () => {},
      roundRtts: () => [measured('inst-1', 'inst-2', 5000), measured('inst-1', 'inst-9', 70)],
    };
    const { controller } = rig({}, { scheduler, workers });
    controller.submit(jobSpec('ring', CPU_SMALL, { replicas: 2 }), 'research');
    await controller.runRound();
    // No instances yet in the first round: nothing to plan with.
    expect(scheduler.seen[0]?.measuredRtts).toBeUndefined();
    await controller.runRound();
    expect(scheduler.seen[1]?.measuredRtts).toEqual([measured('inst-1', 'inst-2', 5000)]);
  });

  it('deletes the placement groups no live instance uses, keeping those in use, at most every few minutes', async () => {
    const scheduler = placingScheduler(nearRoot);
    const { controller, cloud, clock } = rig({}, { scheduler });
    const job = controller.submit(jobSpec('ring', CPU_SMALL, { replicas: 2 }), 'research');
    await controller.runRound();
    expect([...cloud.groups]).toEqual([`pg-${job.id}`]);
    const cleanups = cloud.groupCleanups.length;
    await controller.runRound();
    expect(cloud.groupCleanups).toHaveLength(cleanups); // too soon
    clock.advance(PLACEMENT_GROUP_CLEANUP_SECONDS);
    await controller.reconcile();
    expect(cloud.groupCleanups.at(-1)).toEqual(new Set([`pg-${job.id}`]));
    expect([...cloud.groups]).toEqual([`pg-${job.id}`]);

    controller.cancel(job.id);
    await controller.runRound('cancel');
    await controller.runRound('period');
    expect(cloud.live()).toEqual([]);
    clock.advance(PLACEMENT_GROUP_CLEANUP_SECONDS);
    const { progress } = await controller.reconcile();
    expect(cloud.groupCleanups.at(-1)).toEqual(new Set());
    expect(progress?.deletedPlacementGroups).toEqual([`pg-${job.id}`]);
    expect([...cloud.groups]).toEqual([]);
  });
});
