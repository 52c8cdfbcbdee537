import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { clusterView } from '../../src/controller/explain.js';
import {
  billedPricePerHour,
  launchedOnSpot,
  withBillingTypes,
} from '../../src/controller/instance-market.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import {
  attributeCosts,
  computeClosedPeriodReport,
  computeCostReport,
  MINIMUM_BILLED_SECONDS,
  heldRunSeqs,
  placementsFromEvents,
  type AttributionInput,
  type BilledInstance,
  type Placement,
} from '../../src/controller/cost-accounting.js';
import { launchIntentKey, type EventRecord } from '../../src/controller/state-store.js';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import { coStartReleaseEvent } from '../../src/controller/co-start-records.js';

// Catalog prices: c7i.xlarge $0.1785/h, c7i.2xlarge $0.357/h (the reservation prices of [0,4,8] and [0,8,16]).
const C7I_XL = 0.1785;
const C7I_2XL = 0.357;

const jobs = new Map([
  ['job-1', { id: 'job-1', name: 'small', team: 'red' }],
  ['job-2', { id: 'job-2', name: 'large', team: 'blue' }],
]);
const rp = new Map([
  ['job-1.0', C7I_XL],
  ['job-2.0', C7I_2XL],
]);

function input(
  instances: BilledInstance[],
  placements: Placement[],
  since = 0,
  now = 3600,
): AttributionInput {
  return {
    instances,
    placements,
    reservationPrice: (id) => rp.get(id) ?? 0,
    jobs,
    sinceSeconds: since,
    nowSeconds: now,
  };
}

const box = (terminatedAtSeconds: number | undefined, fromSeconds = 0): BilledInstance => ({
  id: 'inst-1',
  typeName: 'c7i.2xlarge',
  costPerHour: C7I_2XL,
  fromSeconds,
  terminatedAtSeconds,
});

const on = (taskId: string, from: number, to: number, kind: Placement['kind'] = 'work'): Placement => ({
  taskId,
  jobId: taskId.split('.')[0] as string,
  instanceId: 'inst-1',
  fromSeconds: from,
  toSeconds: to,
  kind,
});

describe('cost attribution', () => {
  it('shares an instance hour between its tasks by reservation price', () => {
    const report = attributeCosts(input([box(3600)], [on('job-1.0', 0, 3600), on('job-2.0', 0, 3600)]));
    expect(report.totalCost).toBeCloseTo(0.357, 10);
    // 0.357 × 0.1785 / (0.1785 + 0.357) = 0.119 and 0.357 × 0.357 / 0.5355 = 0.238.
    expect(report.byJob.map((j) => [j.id, Number(j.cost.toFixed(6))])).toEqual([
      ['job-2', 0.238],
      ['job-1', 0.119],
    ]);
    expect(report.byTeam.map((t) => t.id)).toEqual(['blue', 'red']);
    expect(report.idleCost).toBeCloseTo(0, 12);
    expect(report.costPerHourNow).toBe(0);
  });

  it('charges time with no task to idle, and a still-running instance until now', () => {
    const report = attributeCosts(input([box(undefined)], [on('job-1.0', 0, 1800)], 0, 3600));
    expect(report.totalCost).toBeCloseTo(0.357, 10);
    expect(report.idleCost).toBeCloseTo(0.1785, 10);
    expect(report.byJob[0]?.cost).toBeCloseTo(0.1785, 10);
    expect(report.costPerHourNow).toBe(C7I_2XL);
    expect(report.byInstance[0]).toMatchObject({ billedSeconds: 3600 });
  });

  it('bills a short-lived instance the one-minute minimum, the unused part as idle', () => {
    const report = attributeCosts(input([box(20)], [on('job-1.0', 0, 20)]));
    const perSecond = C7I_2XL / 3600;
    expect(report.totalCost).toBeCloseTo(MINIMUM_BILLED_SECONDS * perSecond, 12);
    expect(report.byJob[0]?.cost).toBeCloseTo(20 * perSecond, 12);
    expect(report.idleCost).toBeCloseTo(40 * perSecond, 12);
  });

  it('counts only the time since the start of the period', () => {
    const report = attributeCosts(input([box(3600)], [on('job-1.0', 0, 3600)], 2700, 3600));
    expect(report.totalCost).toBeCloseTo(0.357 / 4, 10);
    expect(report.byJob[0]?.cost).toBeCloseTo(0.357 / 4, 10);
  });

  it('with no record before its end, a period is the one asked for, not an empty moment at its end', () => {
    const catalog = loadCatalogFile();
    let now = 1000;
    const store = new MemoryStateStore({ nowSeconds: () => now });
    // Nothing recorded at all: the period asked for; from the beginning, the empty moment now.
    expect(computeClosedPeriodReport(store, catalog, 100, 500)).toMatchObject({
      sinceSeconds: 100,
      generatedAtSeconds: 500,
      totalCost: 0,
    });
    expect(computeCostReport(store, catalog, now).sinceSeconds).toBe(now);
    // The cluster's first records come after the period (a month before it was started).
    now = 5000;
    store.submitJob(
      validateJobSpec(
        {
          name: 'later',
          team: 'red',
          tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 4, 8] } }],
        },
        'later',
        catalog,
      ),
    );
    store.createInstance({ typeName: 'c7i.xlarge' });
    expect(computeClosedPeriodReport(store, catalog, 100, 500)).toMatchObject({
      sinceSeconds: 100,
      generatedAtSeconds: 500,
      totalCost: 0,
    });
    // A period the records begin in still starts at the first of them.
    expect(computeClosedPeriodReport(store, catalog, 100, 6000).sinceSeconds).toBe(5000);
  });

  it('lists only the instances billed in the period', () => {
    const gone = { ...box(1800), id: 'inst-0' };
    const report = attributeCosts(input([gone, box(3600)], [on('job-1.0', 0, 3600)], 2700, 3600));
    // inst-0 ended before the period began: no line, nothing in the totals.
    expect(report.byInstance.map((l) => l.id)).toEqual(['inst-1']);
    expect(report.totalCost).toBeCloseTo(0.357 / 4, 10);
    // The same instance, one second into the period, has its line.
    const overlapping = attributeCosts(input([{ ...gone, terminatedAtSeconds: 2701 }], [], 2700, 3600));
    expect(overlapping.byInstance.map((l) => [l.id, l.billedSeconds])).toEqual([['inst-0', 1]]);
  });

  it('reports checkpointing and restore time as migration overhead, inside the job cost', () => {
    const report = attributeCosts(
      input([box(3600)], [on('job-1.0', 0, 3000), on('job-1.0', 3000, 3600, 'migration')]),
    );
    expect(report.migrationOverheadCost).toBeCloseTo(0.357 / 6, 10);
    expect(report.byJob[0]).toMatchObject({ id: 'job-1' });
    expect(report.byJob[0]?.cost).toBeCloseTo(0.357, 10);
    expect(report.byJob[0]?.migrationCost).toBeCloseTo(0.357 / 6, 10);
  });

  it("attributes a co-started task from its job's release: the time it was held is its instance's idle time", () => {
    const events: EventRecord[] = [
      ['job-1.0', 'starting', 'inst-1', 0],
      ['job-1.1', 'starting', 'inst-2', 0],
      // Both held until the release at 300 s; then run.
      ['job-1.0', 'running', 'inst-1', 300],
      ['job-1.1', 'running', 'inst-2', 300],
      // Another job's task, not held: attributed from its start as before.
      ['job-2.0', 'starting', 'inst-3', 0],
      ['job-2.0', 'running', 'inst-3', 60],
    ].map(([taskId, to, instanceId, at], i) => ({
      seq: i + 1,
      atSeconds: at as number,
      kind: 'task.state',
      jobId: (taskId as string).replace(/\.\d+$/, ''),
      taskId: taskId as string,
      data: { to: to as string, instanceId: instanceId as string },
    }));
    // The release, recorded in the transaction that set job-1's tasks running (after their states here).
    const release: EventRecord = {
      seq: 3.5,
      atSeconds: 300,
      kind: 'job.co-start',
      jobId: 'job-1',
      data: { decision: 'release', tasks: ['job-1.0', 'job-1.1'] },
    };
    const withRelease = [...events.slice(0, 4), release, ...events.slice(4)];
    expect(
      placementsFromEvents(withRelease, 1000).map((p) => [p.taskId, p.fromSeconds, p.toSeconds, p.kind]),
    ).toEqual([
      ['job-1.0', 0, 300, 'held'],
      ['job-1.1', 0, 300, 'held'],
      ['job-2.0', 0, 60, 'work'],
      ['job-1.0', 300, 1000, 'work'],
      ['job-1.1', 300, 1000, 'work'],
      ['job-2.0', 60, 1000, 'work'],
    ]);
    // Without the release, the held time is the job's, as for every other start.
    expect(placementsFromEvents(events, 1000).filter((p) => p.taskId === 'job-1.0')[0]?.fromSeconds).toBe(0);
  });

  it('counts a co-started start that a re-plan or the job’s end leaves unreleased as held, whichever side names it', () => {
    const state = (seq: number, taskId: string, from: string, to: string, at: number): EventRecord => ({
      seq,
      atSeconds: at,
      kind: 'task.state',
      jobId: taskId.replace(/\.\d+$/, ''),
      taskId,
      data: { from, to, instanceId: 'inst-1' },
    });
    const decision = (
      seq: number,
      jobId: string,
      at: number,
      data: Record<string, unknown>,
    ): EventRecord => ({
      seq,
      atSeconds: at,
      kind: 'job.co-start',
      jobId,
      data: data as EventRecord['data'],
    });
    const events: EventRecord[] = [
      state(1, 'job-1.0', 'pending', 'starting', 0),
      state(2, 'job-2.0', 'pending', 'starting', 0),
      state(3, 'job-3.0', 'pending', 'starting', 0),
      // A re-plan as this controller records it (its tasks named, before their states)…
      decision(4, 'job-1', 600, { decision: 'replan', tasks: ['job-1.0'] }),
      state(5, 'job-1.0', 'starting', 'pending', 600),
      // …and as an older one did (after the states, naming none).
      state(6, 'job-2.0', 'starting', 'pending', 600),
      decision(7, 'job-2', 600, { decision: 'replan' }),
      // A job cancelled while its task was held.
      decision(8, 'job-3', 700, { decision: 'ended', tasks: ['job-3.0'] }),
      state(9, 'job-3.0', 'starting', 'stopped', 700),
    ];
    expect([...heldRunSeqs(events)].sort((a, b) => a - b)).toEqual([5, 6, 9]);
    expect(placementsFromEvents(events, 1000).map((p) => [p.taskId, p.toSeconds, p.kind])).toEqual([
      ['job-1.0', 600, 'held'],
      ['job-2.0', 600, 'held'],
      ['job-3.0', 700, 'held'],
    ]);
  });

  it('bills a co-started start as its job’s until its readiness, held from then, alike before and after the release', () => {
    let seq = 0;
    const event = (at: number, kind: string, data: Record<string, unknown>, taskId?: string): EventRecord => {
      seq += 1;
      return {
        seq,
        atSeconds: at,
        kind,
        jobId: 'job-1',
        ...(taskId === undefined ? {} : { taskId }),
        // A readiness names the instance its task was prepared on.
        ...(kind === 'job.co-start' && taskId !== undefined ? { instanceId: 'inst-1' } : {}),
        data: data as EventRecord['data'],
      };
    };
    const state = (at: number, taskId: string, to: string) =>
      event(at, 'task.state', { to, instanceId: 'inst-1' }, taskId);
    const shown = (events: EventRecord[], now: number) =>
      placementsFromEvents(events, now).map((p) => [p.taskId, p.fromSeconds, p.toSeconds, p.kind]);
    // Placed at 0; prepared (image pulled, checkpoint restored) and reported ready at 200; released at 300.
    const placed = [state(0, 'job-1.0', 'starting')];
    const ready = event(200, 'job.co-start', { decision: 'ready', tasks: ['job-1.0'] }, 'job-1.0');
    expect(shown(placed, 150)).toEqual([['job-1.0', 0, 150, 'work']]);
    expect(shown([...placed, ready], 250)).toEqual([
      ['job-1.0', 0, 200, 'work'],
      ['job-1.0', 200, 250, 'held'],
    ]);
    const released = [
      ...placed,
      ready,
      state(300, 'job-1.0', 'running'),
      event(300, 'job.co-start', { decision: 'release', tasks: ['job-1.0'] }),
    ];
    // At the release the hold ends where it was: what the job was billed so far stays its own.
    expect(shown(released, 300)).toEqual([
      ['job-1.0', 0, 200, 'work'],
      ['job-1.0', 200, 300, 'held'],
    ]);
    expect(shown(released, 400)).toEqual([
      ['job-1.0', 0, 200, 'work'],
      ['job-1.0', 200, 300, 'held'],
      ['job-1.0', 300, 400, 'work'],
    ]);
    // A readiness its worker withdrew holds nothing (the barrier-idle cost counts none of it either).
    const unready = event(220, 'job.co-start', { decision: 'unready', tasks: ['job-1.0'] }, 'job-1.0');
    expect(shown([...placed, ready, unready], 250)).toEqual([['job-1.0', 0, 250, 'work']]);
  });

  it('bills a start a re-plan ends unreleased as held from its readiness, and none of one never ready', () => {
    let seq = 0;
    const event = (at: number, kind: string, data: Record<string, unknown>, taskId?: string): EventRecord => {
      seq += 1;
      return {
        seq,
        atSeconds: at,
        kind,
        jobId: 'job-1',
        ...(taskId === undefined ? {} : { taskId }),
        instanceId: 'inst-1',
        data: data as EventRecord['data'],
      };
    };
    const events = [
      event(0, 'task.state', { to: 'starting', instanceId: 'inst-1' }, 'job-1.0'),
      event(0, 'task.state', { to: 'starting', instanceId: 'inst-1' }, 'job-1.1'),
      event(100, 'job.co-start', { decision: 'ready', tasks: ['job-1.0'] }, 'job-1.0'),
      // The timeout: the re-plan as this controller records it, before the states it explains.
      event(700, 'job.co-start', { decision: 'replan', tasks: ['job-1.0', 'job-1.1'], heldFrom: 'ready' }),
      event(700, 'task.state', { from: 'starting', to: 'pending' }, 'job-1.0'),
      event(700, 'task.state', { from: 'starting', to: 'pending' }, 'job-1.1'),
    ];
    const shown = placementsFromEvents(events, 1000).map((p) => [
      p.taskId,
      p.fromSeconds,
      p.toSeconds,
      p.kind,
    ]);
    expect(shown).toEqual([
      ['job-1.0', 0, 100, 'work'],
      ['job-1.0', 100, 700, 'held'],
      ['job-1.1', 0, 700, 'work'],
    ]);
    // Open, they were billed the same way.
    expect(
      placementsFromEvents(events.slice(0, 3), 700).map((p) => [
        p.taskId,
        p.fromSeconds,
        p.toSeconds,
        p.kind,
      ]),
    ).toEqual(shown);
  });

  it("charges a held task's share of its instance to idle, not to the task beside it", () => {
    // job-2.0 held on inst-1 for its first 960 s next to job-1.0, which runs the whole hour; then it runs too.
    const report = attributeCosts(
      input([box(3600)], [on('job-1.0', 0, 3600), on('job-2.0', 0, 960, 'held'), on('job-2.0', 960, 3600)]),
    );
    const perSecond = C7I_2XL / 3600;
    // The split by reservation price holds for the whole hour: job-1 a third (0.1785 of 0.5355), job-2 two thirds.
    const job1 = (3600 * perSecond) / 3;
    expect(report.byJob.find((j) => j.id === 'job-1')?.cost).toBeCloseTo(job1, 12);
    expect(report.byJob.find((j) => j.id === 'job-2')?.cost).toBeCloseTo((2 / 3) * 2640 * perSecond, 12);
    // Job-2's share of the held 960 s is the instance's idle time.
    expect(report.idleCost).toBeCloseTo((2 / 3) * 960 * perSecond, 12);
    expect(report.byInstance[0]?.idleCost).toBeCloseTo((2 / 3) * 960 * perSecond, 12);
    expect(report.migrationOverheadCost).toBe(0);
    expect(report.totalCost).toBeCloseTo(C7I_2XL, 12);
  });

  it("bills a held task's time on an instance it shares with another job's task as idle (from the store)", () => {
    const catalog = loadCatalogFile();
    let now = 1000;
    const store = new MemoryStateStore({ nowSeconds: () => now });
    const spec = (name: string, team: string, replicas: number) =>
      validateJobSpec(
        {
          name,
          team,
          tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 4, 8] }, replicas }],
        },
        name,
        catalog,
      );
    const solo = store.submitJob(spec('solo', 'alpha', 1));
    const gang = store.submitJob(spec('gang', 'beta', 2));
    const up = (cloudId: string) => {
      const inst = store.createInstance({ typeName: 'c7i.2xlarge' });
      store.setInstanceState(inst.id, 'launching', { cloudId });
      store.setInstanceState(inst.id, 'running');
      return inst.id;
    };
    const shared = up('i-1');
    const other = up('i-2');
    store.setTaskState(`${solo.id}.0`, 'starting', shared);
    store.setTaskState(`${solo.id}.0`, 'running');
    // The gang's first task prepared and held on the shared instance from 1000 s, its sibling starts at 1900 s,
    // both released at 1960 s.
    store.setTaskState(`${gang.id}.0`, 'starting', shared);
    now = 1900;
    store.setTaskState(`${gang.id}.1`, 'starting', other);
    now = 1960;
    store.transaction(() => {
      store.appendEvent(coStartReleaseEvent(gang.id, [`${gang.id}.0`, `${gang.id}.1`]));
      store.setTaskState(`${gang.id}.0`, 'running');
      store.setTaskState(`${gang.id}.1`, 'running');
    });
    now = 1960 + 3600;
    const report = computeCostReport(store, catalog, now);
    const perSecond = C7I_2XL / 3600;
    const line = (id: string) => report.byInstance.find((l) => l.id === id);
    // Equal reservation prices: each task on the shared instance takes half of it, held or not; the held half of
    // the 960 s is idle, never the solo job's.
    expect(line(shared)?.idleCost).toBeCloseTo((960 / 2) * perSecond, 9);
    expect(report.byJob.find((j) => j.id === solo.id)?.cost).toBeCloseTo(((960 + 3600) / 2) * perSecond, 9);
    // On the other instance the held 60 s had no other task: all of it idle, as before.
    expect(line(other)?.idleCost).toBeCloseTo((900 + 60) * perSecond, 9);
  });

  it('a release explains the start in its own transaction, not an earlier one of the same task', () => {
    // job-1.0 started at 1000 and ran at 1001 unheld; went back to starting at 1001 and was released then.
    const events: EventRecord[] = (
      [
        [1, 'task.state', 1000, { to: 'starting', instanceId: 'inst-1' }],
        [2, 'task.state', 1001, { to: 'running', instanceId: 'inst-1' }],
        [3, 'task.state', 1001, { to: 'starting', instanceId: 'inst-1' }],
        [4, 'task.state', 1001, { to: 'running', instanceId: 'inst-1' }],
        [5, 'job.co-start', 1001, { decision: 'release', tasks: ['job-1.0'] }],
      ] as const
    ).map(([seq, kind, at, data]) => ({
      seq,
      atSeconds: at,
      kind,
      jobId: 'job-1',
      ...(kind === 'task.state' ? { taskId: 'job-1.0' } : {}),
      data,
    }));
    expect([...heldRunSeqs(events)]).toEqual([4]);
    // The first second is the job's; the held start took no time.
    expect(placementsFromEvents(events, 1001).map((p) => [p.fromSeconds, p.toSeconds])).toEqual([
      [1000, 1001],
    ]);
    // Released first (the release before the states in its transaction): the same.
    const first = [events[0], events[1], events[2], { ...events[4], seq: 3.5 }, events[3]] as EventRecord[];
    expect([...heldRunSeqs(first)]).toEqual([4]);
  });

  it('replays placements from task state events', () => {
    const events: EventRecord[] = [
      ['starting', 'inst-1', 0],
      ['running', 'inst-1', 60],
      ['checkpointing', 'inst-1', 1000],
      ['stopped', undefined, 1030],
      ['starting', 'inst-2', 1030],
      ['running', 'inst-2', 1100],
    ].map(([to, instanceId, at], i) => ({
      seq: i + 1,
      atSeconds: at as number,
      kind: 'task.state',
      jobId: 'job-1',
      taskId: 'job-1.0',
      data: { to: to as string, ...(instanceId === undefined ? {} : { instanceId: instanceId as string }) },
    }));
    expect(
      placementsFromEvents(events, 2000).map((p) => [p.instanceId, p.fromSeconds, p.toSeconds, p.kind]),
    ).toEqual([
      ['inst-1', 0, 60, 'work'],
      ['inst-1', 60, 1000, 'work'],
      ['inst-1', 1000, 1030, 'migration'],
      ['inst-2', 1030, 1100, 'migration'],
      ['inst-2', 1100, 2000, 'work'],
    ]);
  });

  it('always adds up: instances = jobs + idle, nothing negative (property)', () => {
    const instanceArb = fc.record({
      from: fc.integer({ min: 0, max: 5000 }),
      length: fc.integer({ min: 1, max: 5000 }),
      running: fc.boolean(),
      price: fc.constantFrom(0.1785, 0.357, 3.06, 12.24),
    });
    const placementArb = fc.record({
      instance: fc.nat(3),
      task: fc.constantFrom('job-1.0', 'job-2.0', 'job-3.0'),
      from: fc.integer({ min: 0, max: 10_000 }),
      length: fc.integer({ min: 1, max: 3000 }),
      kind: fc.constantFrom<Placement['kind']>('work', 'migration', 'held'),
    });
    fc.assert(
      fc.property(
        fc.array(instanceArb, { minLength: 1, maxLength: 4 }),
        fc.array(placementArb, { maxLength: 12 }),
        fc.integer({ min: 0, max: 8000 }),
        (insts, places, since) => {
          const now = 12_000;
          const instances: BilledInstance[] = insts.map((i, k) => ({
            id: `inst-${k}`,
            typeName: 'x.y',
            costPerHour: i.price,
            fromSeconds: i.from,
            terminatedAtSeconds: i.running ? undefined : i.from + i.length,
          }));
          const placements: Placement[] = places
            .filter((p) => p.instance < instances.length)
            .map((p) => ({
              taskId: p.task,
              jobId: p.task.split('.')[0] as string,
              instanceId: `inst-${p.instance}`,
              fromSeconds: p.from,
              toSeconds: p.from + p.length,
              kind: p.kind,
            }));
          const report = attributeCosts({
            instances,
            placements,
            reservationPrice: (id) => (id === 'job-3.0' ? 0 : (rp.get(id) ?? 0)),
            jobs,
            sinceSeconds: since,
            nowSeconds: now,
          });
          const jobsSum = report.byJob.reduce((s, j) => s + j.cost, 0);
          const instSum = report.byInstance.reduce((s, i) => s + i.cost, 0);
          expect(instSum).toBeCloseTo(report.totalCost, 9);
          expect(jobsSum + report.idleCost).toBeCloseTo(report.totalCost, 9);
          expect(report.byTeam.reduce((s, t) => s + t.cost, 0)).toBeCloseTo(jobsSum, 9);
          expect(report.migrationOverheadCost).toBeLessThanOrEqual(jobsSum + 1e-9);
          for (const line of [...report.byJob, ...report.byInstance])
            expect(line.cost).toBeGreaterThanOrEqual(0);
          for (const i of report.byInstance) expect(i.idleCost).toBeLessThanOrEqual(i.cost + 1e-12);
          // Never more than each instance's rate over its billed window (with the one-minute minimum).
          const bound = instances.reduce((s, i) => {
            const end =
              i.terminatedAtSeconds === undefined ? now : Math.max(i.terminatedAtSeconds, i.fromSeconds + 60);
            return s + (Math.max(0, end - Math.max(i.fromSeconds, since)) * i.costPerHour) / 3600;
          }, 0);
          expect(report.totalCost).toBeCloseTo(bound, 9);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('what instances are billed at', () => {
  it('a spot instance at its pool’s spot price, in the cost report and the cluster view; on demand at the list price', () => {
    const catalog = loadCatalogFile();
    let now = 1000;
    const store = new MemoryStateStore({ nowSeconds: () => now });
    const launch = (market: 'spot' | 'on-demand') => {
      const inst = store.createInstance({ typeName: 'p3.2xlarge', availabilityZone: 'us-east-1a' });
      store.recordIntent(
        {
          kind: 'launch',
          payload: {
            instanceId: inst.id,
            typeName: inst.typeName,
            launchToken: inst.launchToken,
            availabilityZone: 'us-east-1a',
            market,
          },
        },
        { key: launchIntentKey(inst.id) },
      );
      store.setInstanceState(inst.id, 'launching', {
        cloudId: `i-${inst.id}`,
        availabilityZone: 'us-east-1a',
      });
      store.setInstanceState(inst.id, 'running');
      return inst.id;
    };
    const spot = launch('spot');
    const onDemand = launch('on-demand');
    now += 7200;
    const report = computeCostReport(store, catalog, now);
    const line = (id: string) => report.byInstance.find((l) => l.id === id)?.cost;
    // Two hours each: p3.2xlarge at its us-east-1a spot price ($0.9486/h) and at its list price ($3.06/h).
    expect(line(spot)).toBeCloseTo(2 * 0.9486, 9);
    expect(line(onDemand)).toBeCloseTo(2 * 3.06, 9);
    expect(report.totalCost).toBeCloseTo(2 * (0.9486 + 3.06), 9);
    const view = clusterView(store, (i) => billedPricePerHour(catalog, i, launchedOnSpot(store, i.id)));
    expect(view.costPerHour).toBeCloseTo(0.9486 + 3.06, 9);
  });

  it('an instance of a type the catalog lacks is billed at the bundled price the start passes, else at $0', () => {
    const full = loadCatalogFile();
    const catalog = { ...full, types: full.types.filter((t) => t.name !== 'c7i.large') };
    let now = 1000;
    const store = new MemoryStateStore({ nowSeconds: () => now });
    const inst = store.createInstance({ typeName: 'c7i.large' });
    store.setInstanceState(inst.id, 'launching', { cloudId: `i-${inst.id}` });
    now += 3600;
    store.setInstanceState(inst.id, 'terminated');
    // An orphan of a type no catalog prices: nothing to bill it at (the start says so), and the report still answers.
    expect(billedPricePerHour(catalog, inst, false)).toBe(0);
    expect(computeCostReport(store, catalog, now).totalCost).toBe(0);
    const large = full.types.filter((t) => t.name === 'c7i.large');
    const billing = withBillingTypes(catalog, { types: large, spotOfferings: [] });
    expect(billing.types.map((t) => t.name)).toContain('c7i.large');
    expect(computeCostReport(store, billing, now).totalCost).toBeCloseTo(0.08925, 9);
    // A type the catalog has keeps its own price.
    expect(
      withBillingTypes(full, { types: large.map((t) => ({ ...t, costPerHour: 9 })), spotOfferings: [] }),
    ).toBe(full);
  });
});
