import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../src/core/catalog.js';
import { curveOf } from '../../src/core/latency-curves.js';
import type { ClusterSnapshot, SchedInstance } from '../../src/core/model.js';
import type { FamilyDemand } from '../../src/core/resources.js';
import { ColocationTable } from '../../src/scheduler/colocation-table.js';
import type { DraftInstance } from '../../src/scheduler/full-reconfiguration.js';
import { planNetwork, tagCurrent } from '../../src/scheduler/latency-placement.js';
import { LatencyView, resolveLatencyOptions } from '../../src/scheduler/latency-view.js';
import type { PackTask } from '../../src/scheduler/packing.js';
import { partialReconfiguration, type PlanningInput } from '../../src/scheduler/reconfiguration.js';
import { PriceBook } from '../../src/scheduler/reservation-price.js';

/** A type with two one-vCPU task slots (NoMora's C = 2) at $1/h. */
const catalog: Catalog = {
  provider: 'test',
  region: 'test',
  types: [
    {
      name: 'slot.x',
      family: 'slot',
      capacity: [0, 2, 8],
      costPerHour: 1,
      delays: {
        instantiateSeconds: 10,
        workerStartSeconds: 10,
        workerRegisterSeconds: 10,
        terminateSeconds: 5,
      },
    },
  ],
};
const book = new PriceBook(catalog);
const ONE_SLOT: FamilyDemand = { any: [0, 1, 1] };

/**
 * The digest's 4-machine case (§11 T4): racks R1 = {M1, M2}, R2 = {M3, M4} (here cluster placement groups r1 and r2
 * of one zone), two slots each; a Memcached job's root runs on M1; free slots M1:1, M2:2, M3:1, M4:2; round trips
 * from M1: itself 5 µs, M2 30, M3 120, M4 300; four workers wait.
 */
function fourMachines(): { snapshot: ClusterSnapshot; view: LatencyView } {
  const instance = (id: string, group: string, taskIds: string[]): SchedInstance => ({
    id,
    typeName: 'slot.x',
    state: 'running',
    taskIds,
    placement: { zone: 'z', placementGroup: group },
  });
  const workers = ['J/w1', 'J/w2', 'J/w3', 'J/w4'];
  const snapshot: ClusterSnapshot = {
    nowSeconds: 1000,
    jobs: [
      {
        id: 'J',
        taskIds: ['J/root', ...workers],
        reconfigurable: true,
        arrivalSeconds: 0,
        migrationDelaySeconds: 60,
        network: { sensitivity: 'memcached', pattern: 'star', rootTaskId: 'J/root', gibPerHour: 0 },
      },
      { id: 'O', taskIds: ['O/t'], reconfigurable: true, arrivalSeconds: 0, migrationDelaySeconds: 60 },
    ],
    tasks: [
      { id: 'J/root', jobId: 'J', key: 'memcached_root', demand: ONE_SLOT, instanceId: 'M1' },
      ...workers.map((id) => ({ id, jobId: 'J', key: 'memcached_worker', demand: ONE_SLOT })),
      { id: 'O/t', jobId: 'O', key: 'other', demand: ONE_SLOT, instanceId: 'M3' },
    ],
    instances: [
      instance('M1', 'r1', ['J/root']),
      instance('M2', 'r1', []),
      instance('M3', 'r2', ['O/t']),
      instance('M4', 'r2', []),
    ],
    measuredRtts: [
      ['M2', 30],
      ['M3', 120],
      ['M4', 300],
    ].map(([to, rtt]) => ({
      fromInstanceId: 'M1',
      toInstanceId: to as string,
      maxMicroseconds: rtt as number,
      p99Microseconds: rtt as number,
      atSeconds: 1000,
    })),
  };
  const view = new LatencyView(snapshot, resolveLatencyOptions({ domainRtts: { 'same-instance': 5 } }));
  return { snapshot, view };
}

function planningInput(snapshot: ClusterSnapshot, view: LatencyView): PlanningInput {
  const counts = new Map(snapshot.jobs.map((j) => [j.id, j.taskIds.length]));
  const tasks = new Map<string, PackTask>(
    snapshot.tasks.map((t) => [
      t.id,
      {
        id: t.id,
        jobId: t.jobId,
        key: t.key,
        demand: t.demand,
        rp: book.reservationPrice(t.demand),
        jobTaskCount: counts.get(t.jobId) ?? 1,
        currentInstanceId: t.instanceId,
      },
    ]),
  );
  return {
    book,
    // No interference: the example is about the network alone.
    model: { table: new ColocationTable(1), throughputAware: true, multiTaskAware: true },
    tasks: tagCurrent(view, tasks),
    instances: snapshot.instances.map((i) => ({ id: i.id, type: book.type(i.typeName), taskIds: i.taskIds })),
    pinnedTaskIds: new Set(),
    maxMovedJobs: Number.POSITIVE_INFINITY,
    latency: view,
  };
}

describe('NoMora placement in Eva (digest §11 T4)', () => {
  it("prefers the root's instance and M2 by cost (≤ p_m), prunes R2, and the rest follows the root into r1", () => {
    const { snapshot, view } = fourMachines();
    const job = view.jobs.get('J');
    if (job === undefined) throw new Error('J is a network-aware job');
    const m = (id: string) => view.instance(id);
    // Costs round(100/p) from M1: {M1: 100, M2: 100, M3: 133, M4: 220}.
    expect(
      ['M1', 'M2', 'M3', 'M4'].map((id) => job.curve.costAt(view.estimator.between(m('M1'), m(id)))),
    ).toEqual([100, 100, 133, 220]);
    // Preferences with p_m = 105, p_r = 110: machines M1 and M2 (R1's worst cost 108 with its default is within 110);
    // M3 and M4 only through the zone, whose worst cost (220) is not.
    expect(['M1', 'M2', 'M3', 'M4'].map((id) => view.admits(job, m('M1'), m(id)))).toEqual([
      true,
      true,
      false,
      false,
    ]);

    const drafts = partialReconfiguration(planningInput(snapshot, view), new Set());
    const on = (id: string) =>
      drafts.find((d) => d.id === id)?.taskIds.filter((t) => t.startsWith('J/')) ?? [];
    expect(on('M1')).toHaveLength(2); // the root and one worker (its free slot)
    expect(on('M2')).toHaveLength(2);
    expect(on('M3')).toHaveLength(0);
    expect(on('M4')).toHaveLength(0);
    const fresh = drafts.filter((d) => d.isNew);
    expect(fresh).toHaveLength(1);
    // NoMora sends the fourth worker through the cluster aggregator to M3 or M4 at cost 220 (total 520); launching an
    // instance next to the root, in its placement group, costs 108 by the group's default (total 408).
    expect(fresh[0]?.placement).toEqual({ zone: 'z', placementGroup: 'r1' });
    expect(fresh[0]?.taskIds).toHaveLength(1);
    const costs = drafts.flatMap((d: DraftInstance) =>
      d.taskIds
        .filter((t) => t.startsWith('J/w'))
        .map(() =>
          job.curve.costAt(
            view.estimator.between(m('M1'), d.isNew ? { id: d.id, placement: d.placement } : m(d.id)),
          ),
        ),
    );
    expect(costs.reduce((a, b) => a + b, 0)).toBe(100 + 100 + 100 + 108);
    // The plan's P_job: the worst link, the new instance in r1 at the group's default 50 µs.
    expect(planNetwork(view, drafts, 0.01).performance.get('J')).toBeCloseTo(curveOf('memcached').at(50), 12);
  });

  it('a worker waits for its root: with the root unplaced, none fills an instance outside a placement group', () => {
    const { snapshot } = fourMachines();
    const unplaced: ClusterSnapshot = {
      ...snapshot,
      tasks: snapshot.tasks.map((t) => (t.jobId === 'J' ? { ...t, instanceId: undefined } : t)),
      instances: snapshot.instances.map((i) => ({
        ...i,
        placement: { zone: 'z' },
        taskIds: i.taskIds.filter((t) => !t.startsWith('J/')),
      })),
    };
    const view = new LatencyView(unplaced, resolveLatencyOptions());
    const drafts = partialReconfiguration(planningInput(unplaced, view), new Set());
    // M3 has one free slot, but neither it nor a lone free instance out of any group can take the root with its
    // four workers: the whole job goes to new instances sharing one fresh cluster placement group.
    const holders = drafts.filter((d) => d.taskIds.some((t) => t.startsWith('J/')));
    expect(holders.every((d) => d.isNew)).toBe(true);
    const groups = new Set(holders.map((d) => d.placement?.placementGroup));
    expect(groups.size).toBe(1);
    expect([...groups][0]).toMatch(/^fleetwise-J-root$/);
    expect(planNetwork(view, drafts, 0.01).performance.get('J')).toBeCloseTo(curveOf('memcached').at(50), 12);
  });
});

describe("NoMora's fallback arc: a worker may use free capacity no worse than a new instance next to its root", () => {
  /**
   * A 2-task job whose root fills R (zone z, no placement group); its worker waits; F, a free instance, and the
   * `others` are where the test puts them. At the zone's default 150 µs a Memcached worker costs 145 on F, over p_m
   * (105) and p_r (110): but a new instance next to the root would land in zone z with no group, at the same 145.
   */
  function rootAlone(
    sensitivity: 'memcached' | 'strads' | 'tensorflow',
    others: Record<string, { zone: string; placementGroup?: string }>,
    rootGroup?: string,
    measured: readonly [string, number][] = [],
  ): { snapshot: ClusterSnapshot; view: LatencyView } {
    const WHOLE: FamilyDemand = { any: [0, 2, 2] };
    const snapshot: ClusterSnapshot = {
      nowSeconds: 1000,
      jobs: [
        {
          id: 'J',
          taskIds: ['J/t0', 'J/t1'],
          reconfigurable: true,
          arrivalSeconds: 0,
          migrationDelaySeconds: 60,
          network: { sensitivity, pattern: 'star', gibPerHour: 0 },
        },
      ],
      tasks: [
        { id: 'J/t0', jobId: 'J', key: 'J_t0', demand: WHOLE, instanceId: 'R' },
        { id: 'J/t1', jobId: 'J', key: 'J_t1', demand: WHOLE },
      ],
      instances: [
        {
          id: 'R',
          typeName: 'slot.x',
          state: 'running',
          taskIds: ['J/t0'],
          placement: rootGroup === undefined ? { zone: 'z' } : { zone: 'z', placementGroup: rootGroup },
        },
        ...Object.entries(others).map(([id, placement]) => ({
          id,
          typeName: 'slot.x',
          state: 'running' as const,
          taskIds: [],
          placement,
        })),
      ],
      measuredRtts: measured.map(([to, rtt]) => ({
        fromInstanceId: 'R',
        toInstanceId: to,
        maxMicroseconds: rtt,
        p99Microseconds: rtt,
        atSeconds: 1000,
      })),
    };
    return { snapshot, view: new LatencyView(snapshot, resolveLatencyOptions()) };
  }

  function workerHost(snapshot: ClusterSnapshot, view: LatencyView): DraftInstance | undefined {
    return partialReconfiguration(planningInput(snapshot, view), new Set()).find((d) =>
      d.taskIds.includes('J/t1'),
    );
  }

  for (const sensitivity of ['memcached', 'strads', 'tensorflow'] as const)
    it(`${sensitivity}: the worker takes the free instance in its root's zone instead of a launch into that zone`, () => {
      const { snapshot, view } = rootAlone(sensitivity, { F: { zone: 'z' } });
      const job = view.jobs.get('J');
      if (job === undefined) throw new Error('J is a network-aware job');
      expect(view.admits(job, view.instance('R'), view.instance('F'))).toBe(true);
      const host = workerHost(snapshot, view);
      expect(host?.id).toBe('F');
      expect(host?.isNew).toBe(false);
    });

  it('still refuses a free instance worse than a new one: another zone, a slower measured path, or outside the root group', () => {
    const job = (view: LatencyView) => view.jobs.get('J') as NonNullable<ReturnType<typeof view.jobs.get>>;
    // Another zone (800 µs) is worse than a new instance in the root's zone (150 µs): a launch into zone z.
    const apart = rootAlone('memcached', { F: { zone: 'y' } });
    expect(apart.view.admits(job(apart.view), apart.view.instance('R'), apart.view.instance('F'))).toBe(
      false,
    );
    const launched = workerHost(apart.snapshot, apart.view);
    expect(launched?.isNew).toBe(true);
    expect(launched?.placement).toEqual({ zone: 'z' });
    // The same zone, but measured at 400 µs: worse than the zone's 150.
    const slow = rootAlone('memcached', { F: { zone: 'z' } }, undefined, [['F', 400]]);
    expect(slow.view.admits(job(slow.view), slow.view.instance('R'), slow.view.instance('F'))).toBe(false);
    // The root is in a placement group: a new instance joins it (50 µs), so the zone's 150 µs is worse.
    const grouped = rootAlone('memcached', { F: { zone: 'z' } }, 'g');
    expect(
      grouped.view.admits(job(grouped.view), grouped.view.instance('R'), grouped.view.instance('F')),
    ).toBe(false);
    expect(workerHost(grouped.snapshot, grouped.view)?.placement).toEqual({ zone: 'z', placementGroup: 'g' });
  });
});
