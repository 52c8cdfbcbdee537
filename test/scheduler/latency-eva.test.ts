import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { curveOf } from '../../src/core/latency-curves.js';
import type { ClusterSnapshot, SchedInstance, SchedJob, SchedTask } from '../../src/core/model.js';
import type { JobNetwork, LatencySensitivity, MeasuredRtt } from '../../src/core/network.js';
import type { FamilyDemand } from '../../src/core/resources.js';
import { diffConfiguration, type LaunchInstanceAction } from '../../src/scheduler/actions.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { createScheduler, NO_INTERFERENCE } from '../../src/scheduler/registry.js';
import { PriceBook } from '../../src/scheduler/reservation-price.js';
import type { Plan } from '../../src/scheduler/types.js';

const catalog = loadCatalogFile();
const book = new PriceBook(catalog);
/** One GPU task: alone on a p3.2xlarge. */
const GPU_TASK: FamilyDemand = { any: [1, 8, 60] };
const ZONES = ['us-east-1a', 'us-east-1b', 'us-east-1c'];

function job(id: string, tasks: number, network?: JobNetwork, extra: Partial<SchedJob> = {}): SchedJob {
  return {
    id,
    taskIds: Array.from({ length: tasks }, (_, i) => `${id}/t${i}`),
    reconfigurable: true,
    arrivalSeconds: 0,
    migrationDelaySeconds: 300,
    lastCheckpointSeconds: undefined,
    expectedRemainingSeconds: 30 * 86_400,
    ...(network === undefined ? {} : { network }),
    ...extra,
  };
}

const net = (sensitivity: LatencySensitivity, gibPerHour = 0): JobNetwork => ({
  sensitivity,
  pattern: 'star',
  gibPerHour,
});

function tasksOf(j: SchedJob, where: (i: number) => string | undefined = () => undefined): SchedTask[] {
  return j.taskIds.map((id, i) => ({
    id,
    jobId: j.id,
    key: `${j.id}_t${i}`,
    demand: GPU_TASK,
    instanceId: where(i),
  }));
}

function rtt(a: string, b: string, us: number, at: number): MeasuredRtt {
  return { fromInstanceId: a, toInstanceId: b, maxMicroseconds: us, p99Microseconds: us, atSeconds: at };
}

/** A 2-task job running on two p3.2xlarge instances in two zones, measured `us` apart. */
function splitJob(sensitivity: LatencySensitivity, us: number, now: number): ClusterSnapshot {
  const j = job('J', 2, net(sensitivity));
  const instances: SchedInstance[] = ['A', 'B'].map((id, i) => ({
    id,
    typeName: 'p3.2xlarge',
    state: 'running',
    taskIds: [`J/t${i}`],
    placement: { zone: ZONES[i] },
  }));
  return {
    nowSeconds: now,
    jobs: [{ ...j, runningSinceSeconds: 0, lastCheckpointSeconds: now }],
    tasks: tasksOf(j, (i) => (i === 0 ? 'A' : 'B')),
    instances,
    measuredRtts: [rtt('A', 'B', us, now)],
  };
}

function launches(snapshot: ClusterSnapshot, plan: Plan): LaunchInstanceAction[] {
  return diffConfiguration(snapshot, plan.configuration, catalog).actions.filter(
    (a): a is LaunchInstanceAction => a.kind === 'launch-instance',
  );
}

describe('Eva with latency-aware placement', () => {
  it('launches a latency-sensitive job into one cluster placement group; the diff carries it to the launches', () => {
    const j = job('J', 4, net('memcached'));
    const snapshot: ClusterSnapshot = { nowSeconds: 0, jobs: [j], tasks: tasksOf(j), instances: [] };
    const plan = new EvaScheduler(catalog).plan(snapshot);
    const launched = launches(snapshot, plan);
    expect(launched.length).toBeGreaterThan(0);
    const groups = new Set(launched.map((l) => l.placement?.placementGroup));
    expect(groups).toEqual(new Set(['fleetwise-J-t0']));
    // Latency-blind, the same job is launched anywhere.
    const blind = createScheduler('eva-latency-blind', { catalog, interferenceProfile: NO_INTERFERENCE });
    expect(blind.name).toBe('eva-latency-blind');
    expect(launches(snapshot, blind.plan(snapshot)).every((l) => l.placement === undefined)).toBe(true);
  });

  it('launches the rest of a job next to its root: the root instance’s zone and placement group', () => {
    const j = job('J', 2, net('tensorflow'));
    const snapshot: ClusterSnapshot = {
      nowSeconds: 0,
      jobs: [j],
      tasks: tasksOf(j),
      // An idle instance in a group: the root may take it (the rest of the job can follow it into the group).
      instances: [
        {
          id: 'R',
          typeName: 'p3.2xlarge',
          state: 'running',
          taskIds: [],
          placement: { zone: 'us-east-1b', placementGroup: 'g1' },
        },
      ],
    };
    const plan = new EvaScheduler(catalog).plan(snapshot);
    const onR = plan.configuration.instances.find((i) => i.id === 'R');
    expect(onR?.taskIds).toEqual(['J/t0']);
    expect(launches(snapshot, plan).map((l) => l.placement)).toEqual([
      { zone: 'us-east-1b', placementGroup: 'g1' },
    ]);
  });

  it('puts the waiting worker on an idle instance in its root’s zone rather than launch one into that same zone', () => {
    for (const sensitivity of ['memcached', 'strads'] as const) {
      const j = job('J', 2, net(sensitivity), { lastCheckpointSeconds: 100, runningSinceSeconds: 0 });
      const zoneA = { zone: 'us-east-1a' };
      const snapshot: ClusterSnapshot = {
        nowSeconds: 100,
        jobs: [j],
        tasks: tasksOf(j, (i) => (i === 0 ? 'R' : undefined)),
        instances: [
          { id: 'R', typeName: 'p3.2xlarge', state: 'running', taskIds: ['J/t0'], placement: zoneA },
          { id: 'F', typeName: 'p3.2xlarge', state: 'running', taskIds: [], placement: zoneA },
        ],
      };
      const plan = new EvaScheduler(catalog).plan(snapshot);
      // A new instance next to the root would be in us-east-1a without a group: no nearer than F, only later.
      expect(plan.configuration.instances.find((i) => i.id === 'F')?.taskIds).toEqual(['J/t1']);
      expect(launches(snapshot, plan)).toEqual([]);
    }
  });

  it('moves a job measured slow for two rounds by the decision rule; never a `none` job or a fast one', () => {
    const eva = new EvaScheduler(catalog);
    // Memcached at 400 µs: P_job = 0.3618 (below 0.9). The first round only counts.
    const first = eva.plan(splitJob('memcached', 400, 36_000));
    expect(first.decision.candidates.some((c) => c.name === 'latency')).toBe(false);
    const second = eva.plan(splitJob('memcached', 400, 36_300));
    const latency = second.decision.candidates.find((c) => c.name === 'latency');
    expect(latency?.movedJobs).toEqual(['J']);
    expect(second.decision.chosen).toBe('latency');
    // Both tasks now share a new placement group (or an instance): the link is no longer across zones.
    const placed = second.configuration.instances.filter((i) => i.taskIds.some((t) => t.startsWith('J/')));
    expect(placed.every((i) => i.isNew)).toBe(true);
    expect(new Set(placed.map((i) => i.placement?.placementGroup)).size).toBe(1);

    for (const [sensitivity, us] of [
      ['none', 800],
      ['memcached', 30],
    ] as const) {
      const other = new EvaScheduler(catalog);
      for (let round = 0; round < 4; round++) {
        const plan = other.plan(splitJob(sensitivity, us, 36_000 + 300 * round));
        expect(plan.decision.candidates.some((c) => c.name === 'latency')).toBe(false);
      }
    }
    const still = createScheduler('eva-latency-no-migration', {
      catalog,
      interferenceProfile: NO_INTERFERENCE,
    });
    for (let round = 0; round < 4; round++)
      expect(
        still.plan(splitJob('memcached', 400, 36_000 + 300 * round)).decision.candidates.map((c) => c.name),
      ).not.toContain('latency');
  });

  it('moves a job slowed by congestion where it should be fast only once the congestion has lasted', () => {
    // Both tasks in one placement group (50 µs by default: P = 0.92), measured at 150 µs (P = 0.69).
    const congested = (now: number): ClusterSnapshot => {
      const s = splitJob('memcached', 150, now);
      return {
        ...s,
        instances: s.instances.map((i) => ({ ...i, placement: { zone: ZONES[0], placementGroup: 'g' } })),
      };
    };
    const movesJ = (plan: Plan): boolean =>
      !plan.configuration.instances.some((i) => i.id === 'A' && i.taskIds.includes('J/t0')) ||
      !plan.configuration.instances.some((i) => i.id === 'B' && i.taskIds.includes('J/t1'));
    const eva = new EvaScheduler(catalog);
    // Minutes into the congestion the job is expected back at its placement's P_job soon: no candidate moving it pays.
    expect(movesJ(eva.plan(congested(36_000)))).toBe(false);
    const early = eva.plan(congested(36_300));
    expect(early.decision.candidates.some((c) => c.name === 'latency')).toBe(true);
    expect(movesJ(early)).toBe(false);
    let movedAt: number | undefined;
    for (let now = 36_600; now <= 36_000 + 24 * 3600 && movedAt === undefined; now += 300)
      if (movesJ(eva.plan(congested(now)))) movedAt = now;
    // A congestion that lasts does get the job moved, after hours rather than minutes.
    expect(movedAt).toBeDefined();
    expect((movedAt as number) - 36_000).toBeGreaterThan(3600);
  });

  it('learns co-location from what is left of a throughput once the network took its share (P_job)', () => {
    const snapshot = splitJob('memcached', 400, 1000);
    // A single-task job X shares A with J's root.
    const x = job('X', 1);
    const withX: ClusterSnapshot = {
      ...snapshot,
      jobs: [...snapshot.jobs, x],
      tasks: [...snapshot.tasks, ...tasksOf(x, () => 'A')],
      instances: snapshot.instances.map((i) =>
        i.id === 'A' ? { ...i, taskIds: [...i.taskIds, 'X/t0'] } : i,
      ),
    };
    const p = curveOf('memcached').at(400);
    const observations = [
      { taskId: 'J/t0', normalizedThroughput: 0.9 * p },
      { taskId: 'J/t1', normalizedThroughput: 0.9 * p },
      { taskId: 'X/t0', normalizedThroughput: 0.95 },
    ];
    const aware = new EvaScheduler(catalog);
    aware.observe(withX, observations);
    const blind = new EvaScheduler(catalog, { latencyAware: false });
    blind.observe(withX, observations);
    const learned = (e: EvaScheduler) => e.table.recorded('J_t0', ['X_t0']);
    expect(learned(aware)).toBeCloseTo(0.9, 12);
    expect(learned(blind)).toBeCloseTo(0.9 * p, 12);
  });
});

// ---------------------------------------------------------------- properties

const DEMANDS: FamilyDemand[] = [
  { any: [1, 8, 60] },
  { any: [1, 4, 15] },
  { any: [0, 4, 8] },
  { any: [2, 16, 64] },
];
const SENSITIVITIES: LatencySensitivity[] = ['none', 'memcached', 'strads', 'tensorflow', 'spark'];

const jobArb = fc.record({
  demand: fc.integer({ min: 0, max: DEMANDS.length - 1 }),
  tasks: fc.constantFrom(1, 2, 2, 4),
  sensitivity: fc.integer({ min: 0, max: SENSITIVITIES.length - 1 }),
  gib: fc.constantFrom(0, 0, 5),
  declared: fc.boolean(),
});
type JobArb = { demand: number; tasks: number; sensitivity: number; gib: number; declared: boolean };

/**
 * A cluster in use: old jobs placed by a latency-blind plan on instances put in random zones and groups, round trips
 * measured between the instances of each placed multi-task job, and new jobs waiting.
 */
function cluster(
  old: readonly JobArb[],
  fresh: readonly JobArb[],
  zones: readonly number[],
  rtts: readonly number[],
  onlyNone: boolean,
): ClusterSnapshot {
  const build = (drafts: readonly JobArb[], prefix: string) =>
    drafts.map((d, i) => {
      const sensitivity = onlyNone ? 'none' : (SENSITIVITIES[d.sensitivity] as LatencySensitivity);
      const network = d.declared ? net(sensitivity, onlyNone ? 0 : d.gib) : undefined;
      const j = job(`${prefix}${i}`, d.tasks, network, { lastCheckpointSeconds: 5000 });
      return {
        job: j,
        tasks: j.taskIds.map((id, k) => ({
          id,
          jobId: j.id,
          key: `w${d.demand}_t${k}`,
          demand: DEMANDS[d.demand] as FamilyDemand,
        })),
      };
    });
  const first = build(old, 'o');
  const s0: ClusterSnapshot = {
    nowSeconds: 1000,
    jobs: first.map((f) => f.job),
    tasks: first.flatMap((f) => f.tasks),
    instances: [],
  };
  const plan = new EvaScheduler(catalog, { latencyAware: false }).plan(s0);
  const where = new Map<string, string>();
  const instances: SchedInstance[] = plan.configuration.instances.map((inst, k) => {
    inst.taskIds.forEach((id) => where.set(id, `i-${k}`));
    const z = zones[k % Math.max(1, zones.length)] ?? 0;
    return {
      id: `i-${k}`,
      typeName: inst.typeName,
      state: 'running',
      taskIds: inst.taskIds,
      placement: { zone: ZONES[z % 3], ...(z >= 3 ? { placementGroup: `g${z % 3}` } : {}) },
    };
  });
  const measuredRtts: MeasuredRtt[] = [];
  let r = 0;
  for (const f of first) {
    const ids = [...new Set(f.tasks.map((t) => where.get(t.id) as string))];
    for (let a = 0; a < ids.length; a++)
      for (let b = a + 1; b < ids.length; b++)
        measuredRtts.push(
          rtt(ids[a] as string, ids[b] as string, rtts[r++ % Math.max(1, rtts.length)] ?? 150, 5000),
        );
  }
  const second = build(fresh, 'n');
  return {
    nowSeconds: 5000,
    jobs: [...first.map((f) => f.job), ...second.map((f) => f.job)],
    tasks: [
      ...first.flatMap((f) => f.tasks.map((t) => ({ ...t, instanceId: where.get(t.id) }))),
      ...second.flatMap((f) => f.tasks),
    ],
    instances,
    measuredRtts,
  };
}

const clusterArgs = [
  fc.array(jobArb, { minLength: 1, maxLength: 12 }),
  fc.array(jobArb, { maxLength: 6 }),
  fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 20 }),
  fc.array(fc.integer({ min: 10, max: 1500 }), { maxLength: 20 }),
] as const;

describe('latency-aware Eva (properties)', () => {
  it('leaves a cluster of `none` jobs planned exactly as latency-blind Eva plans it, whatever the network', () => {
    fc.assert(
      fc.property(...clusterArgs, (old, fresh, zones, rtts) => {
        const snapshot = cluster(old, fresh, zones, rtts, true);
        const aware = new EvaScheduler(catalog);
        const blind = new EvaScheduler(catalog, { latencyAware: false });
        for (let round = 0; round < 3; round++) {
          const s = { ...snapshot, nowSeconds: snapshot.nowSeconds + 300 * round };
          expect(aware.plan(s).configuration).toEqual(blind.plan(s).configuration);
        }
      }),
      { numRuns: 60, seed: 17 },
    );
  });

  it('asks for a zone or placement group only for instances holding tasks of network-aware jobs', () => {
    fc.assert(
      fc.property(...clusterArgs, (old, fresh, zones, rtts) => {
        const snapshot = cluster(old, fresh, zones, rtts, false);
        const aware = new Set(
          snapshot.jobs
            .filter((j) => j.taskIds.length > 1 && j.network !== undefined)
            .filter((j) => j.network?.sensitivity !== 'none' || (j.network?.gibPerHour ?? 0) > 0)
            .map((j) => j.id),
        );
        const jobOf = new Map(snapshot.tasks.map((t) => [t.id, t.jobId]));
        const plan = new EvaScheduler(catalog).plan(snapshot);
        for (const inst of plan.configuration.instances)
          if (inst.placement !== undefined)
            expect(inst.taskIds.some((t) => aware.has(jobOf.get(t) as string))).toBe(true);
      }),
      { numRuns: 60, seed: 19 },
    );
  });

  it('never exceeds the $/hour, instance and migration caps, latency moves included', () => {
    let latencyCandidates = 0;
    fc.assert(
      fc.property(
        ...clusterArgs,
        fc.double({ min: 1, max: 80, noNaN: true }),
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 0, max: 3 }),
        (old, fresh, zones, rtts, maxCostPerHour, maxInstances, maxMigrationsPerRound) => {
          const snapshot = cluster(old, fresh, zones, rtts, false);
          const eva = new EvaScheduler(catalog, {
            caps: { maxCostPerHour, maxInstances, maxMigrationsPerRound },
          });
          // Rounds in a row, so that slow jobs become due for a latency move.
          for (let round = 0; round < 3; round++) {
            const s = { ...snapshot, nowSeconds: snapshot.nowSeconds + 300 * round };
            const plan = eva.plan(s);
            const cost = plan.configuration.instances.reduce(
              (c, i) => c + book.type(i.typeName).costPerHour,
              0,
            );
            expect(cost).toBeLessThanOrEqual(maxCostPerHour + 1e-9);
            expect(plan.configuration.instances.length).toBeLessThanOrEqual(maxInstances);
            const chosen = plan.decision.candidates.find((c) => c.name === plan.decision.chosen);
            if (chosen?.rejectedBecause === undefined)
              expect(chosen?.movedJobs.length ?? 0).toBeLessThanOrEqual(maxMigrationsPerRound);
            if (plan.decision.candidates.some((c) => c.name === 'latency')) latencyCandidates += 1;
            // Every plan is one the runtimes can carry out.
            expect(() => diffConfiguration(s, plan.configuration, catalog)).not.toThrow();
          }
        },
      ),
      { numRuns: 60, seed: 23 },
    );
    // The runs did exercise latency moves.
    expect(latencyCandidates).toBeGreaterThan(0);
  });
});
