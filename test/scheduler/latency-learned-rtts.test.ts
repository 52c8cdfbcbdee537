import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { curveOf } from '../../src/core/latency-curves.js';
import { DEFAULT_DOMAIN_RTT_MICROSECONDS, type PlacedInstance } from '../../src/core/latency-model.js';
import type { ClusterSnapshot, SchedInstance, SchedJob, SchedTask } from '../../src/core/model.js';
import type { InstancePlacement, MeasuredRtt } from '../../src/core/network.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { LatencyView, learnedDomainRtts, resolveLatencyOptions } from '../../src/scheduler/latency-view.js';

const catalog = loadCatalogFile();
const GROUP: InstancePlacement = { zone: 'us-east-1a', placementGroup: 'g' };

function rtt(a: string, b: string, us: number, at: number): MeasuredRtt {
  return { fromInstanceId: a, toInstanceId: b, maxMicroseconds: us, p99Microseconds: us, atSeconds: at };
}

function placed(entries: Record<string, InstancePlacement>): Map<string, PlacedInstance> {
  return new Map(Object.entries(entries).map(([id, placement]) => [id, { id, placement }]));
}

describe("each latency domain's round trip, learned from the round's measurements", () => {
  it('is the median of the measured pairs of the domain, each pair once at its larger direction', () => {
    const instances = placed({
      A: GROUP,
      B: GROUP,
      C: GROUP,
      D: GROUP,
      Z1: { zone: 'us-east-1a' },
      Z2: { zone: 'us-east-1a' },
    });
    const learned = learnedDomainRtts(
      instances,
      [
        rtt('A', 'B', 100, 10),
        rtt('B', 'A', 130, 10),
        rtt('A', 'C', 120, 10),
        rtt('A', 'D', 300, 10),
        // Two pairs in the zone, outside the group: the mean of the middle two.
        rtt('Z1', 'Z2', 200, 10),
        rtt('A', 'Z1', 260, 10),
        // An instance the snapshot does not place says nothing of any domain.
        rtt('A', 'gone', 5, 10),
      ],
      DEFAULT_DOMAIN_RTT_MICROSECONDS,
    );
    // Group pairs A–B (130, its larger direction), A–C 120, A–D 300: median 130. Cross-zone: none measured.
    expect(learned).toEqual({ 'same-instance': 20, 'placement-group': 130, zone: 230, 'cross-zone': 800 });
  });

  it('keeps the configured value of a domain nobody measured, never below a nearer domain’s', () => {
    const instances = placed({ A: GROUP, B: GROUP });
    // A probe floor of 400 µs in the group: the zone's placeholder (150) cannot be faster than that.
    expect(learnedDomainRtts(instances, [rtt('A', 'B', 400, 10)], DEFAULT_DOMAIN_RTT_MICROSECONDS)).toEqual({
      'same-instance': 20,
      'placement-group': 400,
      zone: 400,
      'cross-zone': 800,
    });
    expect(learnedDomainRtts(instances, [], DEFAULT_DOMAIN_RTT_MICROSECONDS)).toEqual(
      DEFAULT_DOMAIN_RTT_MICROSECONDS,
    );
  });
});

/** Job J (memcached, 2 tasks on A and B in group g) measured at `us`; job K's pairs in the group at `others` µs. */
function grouped(us: number, others: number | undefined, now = 1000): ClusterSnapshot {
  const job = (id: string, n: number): SchedJob => ({
    id,
    taskIds: Array.from({ length: n }, (_, i) => `${id}/t${i}`),
    reconfigurable: true,
    arrivalSeconds: 0,
    migrationDelaySeconds: 300,
    lastCheckpointSeconds: now,
    runningSinceSeconds: 0,
    expectedRemainingSeconds: 30 * 86_400,
    network: { sensitivity: 'memcached', pattern: 'star', gibPerHour: 0 },
  });
  const jobs = others === undefined ? [job('J', 2)] : [job('J', 2), job('K', 3)];
  const hosts: Record<string, string> = { 'J/t0': 'A', 'J/t1': 'B', 'K/t0': 'C', 'K/t1': 'D', 'K/t2': 'E' };
  const tasks: SchedTask[] = jobs.flatMap((j) =>
    j.taskIds.map((id, i) => ({
      id,
      jobId: j.id,
      key: `${j.id}_t${i}`,
      demand: { any: [1, 8, 60] },
      instanceId: hosts[id],
    })),
  );
  const instances: SchedInstance[] = tasks.map((t) => ({
    id: t.instanceId as string,
    typeName: 'p3.2xlarge',
    state: 'running',
    taskIds: [t.id],
    placement: GROUP,
  }));
  return {
    nowSeconds: now,
    jobs,
    tasks,
    instances,
    measuredRtts: [
      rtt('A', 'B', us, now),
      ...(others === undefined ? [] : [rtt('C', 'D', others, now), rtt('C', 'E', others, now)]),
    ],
  };
}

describe('a latency move, valued with what the domain really gives', () => {
  it('is offered a job slower than its placement group measures, not one as slow as the group itself', () => {
    const view = (s: ClusterSnapshot) => new LatencyView(s, resolveLatencyOptions());
    // Congestion: J at 500 µs where the group's other pairs measure 40.
    const congested = view(grouped(500, 40));
    expect(congested.domainRtts['placement-group']).toBe(40);
    expect(congested.latencyMoveGains('J')).toBe(true);
    expect(congested.latencyMoveGains('K')).toBe(false);
    // A floor: every pair of the group measures 120 µs (above the 50 µs placeholder), so a new instance there would.
    const floor = view(grouped(120, 120));
    expect(floor.domainRtts['placement-group']).toBe(120);
    const j = floor.jobs.get('J');
    if (j === undefined) throw new Error('J is a network-aware job');
    expect(floor.domainPerformance(j, 'placement-group')).toBe(curveOf('memcached').at(120));
    expect(floor.latencyMoveGains('J')).toBe(false);
    // J alone in its group: its own pair is all that is known of the group.
    expect(view(grouped(120, undefined)).latencyMoveGains('J')).toBe(false);
  });

  it('is not planned for a job every pair of whose group measures the same slow floor', () => {
    const eva = new EvaScheduler(catalog);
    for (let round = 0; round < 6; round++) {
      const plan = eva.plan(grouped(120, 120, 36_000 + 300 * round));
      expect(plan.decision.candidates.map((c) => c.name)).not.toContain('latency');
    }
  });

  it('leaves a job measured at a constant probe floor where it is instead of moving it for ever', () => {
    // The controller's loop, a round every 5 minutes for 3 days: each plan is applied (new instances get ids and the
    // placement asked for) and the job, once moved, is measured again at the same floor between its instances.
    const FLOOR = 120;
    const eva = new EvaScheduler(catalog);
    let instances: SchedInstance[] = ['A', 'B'].map((id, i) => ({
      id,
      typeName: 'p3.2xlarge',
      state: 'running',
      taskIds: [`J/t${i}`],
      placement: GROUP,
    }));
    let runningSince = 0;
    let lastCheckpoint = 0;
    let migrating = false;
    let launched = 0;
    const moves: number[] = [];
    const start = 36_000;
    for (let now = start; now <= start + 3 * 86_400; now += 300) {
      const job: SchedJob = {
        id: 'J',
        taskIds: ['J/t0', 'J/t1'],
        reconfigurable: !migrating,
        arrivalSeconds: 0,
        migrationDelaySeconds: 300,
        lastCheckpointSeconds: Math.max(lastCheckpoint, now - 600),
        runningSinceSeconds: runningSince,
        expectedRemainingSeconds: 30 * 86_400,
        network: { sensitivity: 'memcached', pattern: 'star', gibPerHour: 0 },
      };
      const where = (task: string) => instances.find((i) => i.taskIds.includes(task))?.id;
      const tasks: SchedTask[] = job.taskIds.map((id, i) => ({
        id,
        jobId: 'J',
        key: `J_t${i}`,
        demand: { any: [1, 8, 60] },
        instanceId: where(id),
      }));
      const a = where('J/t0') as string;
      const b = where('J/t1') as string;
      const measuredRtts = a === b || migrating ? [] : [rtt(a, b, FLOOR, now)];
      const plan = eva.plan({ nowSeconds: now, jobs: [job], tasks, instances, measuredRtts });
      const next: SchedInstance[] = plan.configuration.instances
        .filter((p) => p.taskIds.length > 0)
        .map((p) => ({
          id: p.isNew ? `I${++launched}` : p.id,
          typeName: p.typeName,
          state: 'running',
          taskIds: [...p.taskIds],
          placement: p.isNew
            ? { zone: p.placement?.zone ?? GROUP.zone, ...p.placement }
            : instances.find((i) => i.id === p.id)?.placement,
        }));
      migrating = job.taskIds.some((t) => next.find((i) => i.taskIds.includes(t))?.id !== where(t));
      if (migrating) {
        moves.push((now - start) / 3600);
        runningSince = now + 300;
        lastCheckpoint = now;
      }
      instances = next;
    }
    expect(moves.length).toBeLessThanOrEqual(1);
  });
});
