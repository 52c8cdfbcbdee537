import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { startApiServer } from '../../src/controller/api/server.js';
import { ManualClock } from '../../src/controller/clock.js';
import {
  computeClosedPeriodReport,
  computeCostReport,
  SPOT_RECLAIMED_EVENT,
} from '../../src/controller/cost-accounting.js';
import { ADOPTED_SPOT_EVENT } from '../../src/controller/instance-market.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { repriceCatalog } from '../../src/controller/price-refresh.js';
import { pruneCostReports } from '../../src/controller/report-retention.js';
import { firstReportedMonth, MONTHS_REPORTED_KEY, ReportWriter } from '../../src/controller/report-writer.js';
import { readStoredMonthReport, type MonthRecords } from '../../src/controller/stored-month-report.js';
import { parseReportDocument } from '../../src/controller/reports.js';
import { silentLogger } from '../../src/controller/seams.js';
import { nextUtcMonth, utcMonthBounds, utcMonthOf } from '../../src/core/utc-month.js';
import { LATEST_REPORT_KEY, monthlyReportKeys } from '../../src/protocol/object-keys.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { openObjectStore } from '../../src/storage/open-object-store.js';
import { coStartReleaseEvent } from '../../src/controller/co-start-records.js';
import { catalog, CPU_SMALL, jobSpec, priceOf, rig } from './controller-fixtures.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-months-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const ADMIN = 'months-admin-token-0123456789abcdef';
const NOV_1 = Date.UTC(2026, 10, 1) / 1000;
const DEC_1 = Date.UTC(2026, 11, 1) / 1000;
/** An hour before November. */
const T = NOV_1 - 3600;

describe('UTC months', () => {
  it('names, bounds and steps months, across a year and a leap February', () => {
    expect(utcMonthOf(NOV_1 - 1)).toBe('2026-10');
    expect(utcMonthOf(NOV_1)).toBe('2026-11');
    expect(utcMonthBounds('2026-11')).toEqual({ startSeconds: NOV_1, endSeconds: DEC_1 });
    expect(nextUtcMonth('2026-12')).toBe('2027-01');
    const feb = utcMonthBounds('2028-02');
    expect((feb.endSeconds - feb.startSeconds) / 86400).toBe(29);
    expect(() => utcMonthBounds('2026-13')).toThrow('"2026-13" is not a month (YYYY-MM)');
    expect(() => utcMonthBounds('November')).toThrow('is not a month');
  });
});

/** A one-task job on a c7i.xlarge launched at T, its task running from T + 100 s. */
function oneJobAcrossTheMonthEnd(): { clock: ManualClock; store: MemoryStateStore; instanceId: string } {
  const clock = new ManualClock(T);
  const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
  const job = store.submitJob(jobSpec('small', CPU_SMALL));
  const inst = store.createInstance({ typeName: 'c7i.xlarge' });
  store.setInstanceState(inst.id, 'launching', { cloudId: 'c-1' });
  clock.advance(100);
  store.setInstanceState(inst.id, 'running');
  store.setTaskState(`${job.id}.0`, 'running', inst.id);
  return { clock, store, instanceId: inst.id };
}

describe('the report of a month that has ended', () => {
  it('bills what fell in the month, as at its end, whatever came after', () => {
    const { clock, store, instanceId } = oneJobAcrossTheMonthEnd();
    // Two hours into November the instance ends, and a second job starts on a new one.
    clock.advance(3600 + 7200 - 100);
    store.setInstanceState(instanceId, 'terminated');
    const later = store.createInstance({ typeName: 'c7i.xlarge' });
    store.setInstanceState(later.id, 'launching', { cloudId: 'c-2' });
    const hour = priceOf('c7i.xlarge');
    const october = computeClosedPeriodReport(store, catalog, utcMonthBounds('2026-10').startSeconds, NOV_1);
    // The last hour of October: 100 s idle (the boot), 3,500 s the job's. The instance ran on into November.
    expect(october.totalCost).toBeCloseTo(hour, 9);
    expect(october.idleCost).toBeCloseTo((hour * 100) / 3600, 9);
    expect(october.byJob.map((j) => [j.id, Number(j.cost.toFixed(9))])).toEqual([
      ['job-1', Number(((hour * 3500) / 3600).toFixed(9))],
    ]);
    expect(october.byInstance.map((i) => [i.id, i.billedSeconds])).toEqual([[instanceId, 3600]]);
    expect(october.costPerHourNow).toBeCloseTo(hour, 9);
    // November so far: the first instance's two hours, the second's launch not yet billed into a month's end.
    const november = computeClosedPeriodReport(store, catalog, NOV_1, NOV_1 + 7200);
    expect(november.byInstance.map((i) => [i.id, i.billedSeconds])).toEqual([[instanceId, 7200]]);
    // October and November add up to the whole history's bill of that instance.
    const whole = computeCostReport(store, catalog, NOV_1 + 7200);
    const first = whole.byInstance.find((i) => i.id === instanceId)?.cost ?? 0;
    expect(october.totalCost + november.totalCost).toBeCloseTo(first, 9);
  });

  it('the controller answers a period that has ended as its month report does, and an open one up to now', () => {
    const { clock, store, instanceId } = oneJobAcrossTheMonthEnd();
    clock.advance(3600 + 7200 - 100);
    store.setInstanceState(instanceId, 'terminated');
    const { controller } = rig({}, { clock, store });
    const hour = priceOf('c7i.xlarge');
    const october = controller.costs(utcMonthBounds('2026-10').startSeconds, NOV_1);
    expect(october).toEqual(
      computeClosedPeriodReport(store, catalog, utcMonthBounds('2026-10').startSeconds, NOV_1),
    );
    // Billed as at October's end: the hour before it, not the two after.
    expect(october.generatedAtSeconds).toBe(NOV_1);
    expect(october.totalCost).toBeCloseTo(hour, 9);
    // November so far: the end lies ahead, so the report runs to now, as `since` alone does.
    const now = clock.nowSeconds();
    expect(controller.costs(NOV_1, now + 3600)).toEqual(controller.costs(NOV_1));
    expect(controller.costs(NOV_1).totalCost).toBeCloseTo(hour * 2, 9);
    expect(controller.costs(NOV_1).generatedAtSeconds).toBe(now);
  });

  it("splits an instance's minimum minute between the months it falls in", () => {
    const clock = new ManualClock(NOV_1 - 30);
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const inst = store.createInstance({ typeName: 'c7i.xlarge' });
    store.setInstanceState(inst.id, 'launching', { cloudId: 'c-1' });
    clock.advance(40);
    store.setInstanceState(inst.id, 'terminated');
    clock.advance(3600);
    const october = computeClosedPeriodReport(store, catalog, NOV_1 - 86400, NOV_1);
    const november = computeClosedPeriodReport(store, catalog, NOV_1, DEC_1);
    expect(october.byInstance.map((i) => i.billedSeconds)).toEqual([30]);
    expect(november.byInstance.map((i) => i.billedSeconds)).toEqual([30]);
    expect(october.costPerHourNow).toBeCloseTo(priceOf('c7i.xlarge'), 9);
    expect(november.costPerHourNow).toBe(0);
  });
});

function writerFor(
  store: MemoryStateStore,
  clock: ManualClock,
  objects: ObjectStore,
  lateRecordsWithinSeconds?: number,
): ReportWriter {
  return new ReportWriter({
    ...(lateRecordsWithinSeconds === undefined ? {} : { lateRecordsWithinSeconds }),
    store,
    clock,
    log: silentLogger,
    objectStore: objects,
    clusterName: 'demo',
    everySeconds: 3600,
    keep: 1,
    costs: () => computeCostReport(store, catalog, clock.nowSeconds()),
    catalog: () => catalog,
    safeEvent: () => undefined,
  });
}

async function keysUnder(objects: ObjectStore, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const info of objects.list(prefix)) keys.push(info.key);
  return keys.sort();
}

describe('the month so far, for /metrics', () => {
  it("is the whole history's bill less the bill at the month's start: what a report over the month so far bills", async () => {
    const { clock, store } = oneJobAcrossTheMonthEnd();
    // An hour into November a second team's job starts on a second instance (100 s of boot first).
    clock.advance(3600 + 3600 - 100);
    const vision = store.submitJob(jobSpec('vision-job', CPU_SMALL, { team: 'vision' }));
    const second = store.createInstance({ typeName: 'c7i.xlarge' });
    store.setInstanceState(second.id, 'launching', { cloudId: 'c-2' });
    clock.advance(100);
    store.setInstanceState(second.id, 'running');
    store.setTaskState(`${vision.id}.0`, 'running', second.id);
    clock.advance(3500);
    const { controller } = rig({}, { clock, store });
    const hour = priceOf('c7i.xlarge');

    // By hand: November's two hours of the first instance (all the research job's) and the second's hour, of which
    // 3,500 s are the vision job's.
    const november = controller.monthToDateCosts();
    expect(november.month).toBe('2026-11');
    expect(november.totalCost).toBeCloseTo(3 * hour, 9);
    expect(november.byTeam.map((t) => [t.id, Number(t.cost.toFixed(9))])).toEqual([
      ['research', Number((2 * hour).toFixed(9))],
      ['vision', Number(((hour * 3500) / 3600).toFixed(9))],
    ]);
    const report = computeClosedPeriodReport(store, catalog, NOV_1, clock.nowSeconds());
    expect(november.totalCost).toBeCloseTo(report.totalCost, 9);
    for (const team of report.byTeam)
      expect(november.byTeam.find((t) => t.id === team.id)?.cost).toBeCloseTo(team.cost, 9);

    // Through /metrics.
    const server = await startApiServer(controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
    try {
      const text = await (await fetch(`${server.url}/metrics`)).text();
      const gauge = (pattern: RegExp): number => Number(pattern.exec(text)?.[1]);
      expect(gauge(/^fleetwise_month_cost_dollars (\S+)$/m)).toBeCloseTo(3 * hour, 9);
      expect(gauge(/^fleetwise_month_team_cost_dollars\{team="research"\} (\S+)$/m)).toBeCloseTo(2 * hour, 9);
      expect(gauge(/^fleetwise_month_team_cost_dollars\{team="vision"\} (\S+)$/m)).toBeCloseTo(
        (hour * 3500) / 3600,
        9,
      );

      // A new month starts from nothing: December's first hour, both instances still running.
      clock.advance(DEC_1 + 3600 - clock.nowSeconds());
      const december = controller.monthToDateCosts();
      expect(december.month).toBe('2026-12');
      expect(december.totalCost).toBeCloseTo(2 * hour, 9);
      expect(december.byTeam.map((t) => Number(t.cost.toFixed(9)))).toEqual([
        Number(hour.toFixed(9)),
        Number(hour.toFixed(9)),
      ]);
      const later = await (await fetch(`${server.url}/metrics`)).text();
      expect(Number(/^fleetwise_month_cost_dollars (\S+)$/m.exec(later)?.[1])).toBeCloseTo(2 * hour, 9);
    } finally {
      await server.close();
    }
  });
});

describe('the month so far, after records that change the time before the month', () => {
  /** Each team's share of the month so far, as a report over it bills it. */
  function expectAsReport(
    got: { totalCost: number; byTeam: readonly { id: string; cost: number }[] },
    store: MemoryStateStore,
    nowSeconds: number,
  ): void {
    const report = computeClosedPeriodReport(store, catalog, NOV_1, nowSeconds);
    expect(got.totalCost).toBeCloseTo(report.totalCost, 9);
    for (const team of report.byTeam)
      expect(got.byTeam.find((t) => t.id === team.id)?.cost).toBeCloseTo(team.cost, 9);
    // Never a team's share above the fleet's bill.
    for (const team of got.byTeam) expect(team.cost).toBeLessThanOrEqual(got.totalCost + 1e-12);
  }

  it('follows an instance found ended before the month began, recorded after the first scrape', () => {
    const clock = new ManualClock(NOV_1 - 7200);
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const job = store.submitJob(jobSpec('small', CPU_SMALL));
    const [working, lost] = ['c-1', 'c-2'].map((cloudId) => {
      const inst = store.createInstance({ typeName: 'c7i.xlarge' });
      store.setInstanceState(inst.id, 'launching', { cloudId });
      store.setInstanceState(inst.id, 'running');
      return inst.id;
    }) as [string, string];
    store.setTaskState(`${job.id}.0`, 'running', working);
    clock.advance(7200 + 600);
    const { controller } = rig({}, { clock, store });
    const hour = priceOf('c7i.xlarge');
    // Ten minutes into November: two instances, one idle.
    expect(controller.monthToDateCosts().totalCost).toBeCloseTo((2 * hour * 600) / 3600, 9);

    // Cloud sync finds the idle one had ended an hour before November (the controller did not see it go).
    store.setInstanceState(lost, 'terminated', { endedAtSeconds: NOV_1 - 3600, reason: 'gone' });
    clock.advance(600);
    const november = controller.monthToDateCosts();
    // November so far: the working instance's twenty minutes, all the job's.
    expect(november.totalCost).toBeCloseTo((hour * 1200) / 3600, 9);
    expectAsReport(november, store, clock.nowSeconds());
    // As a restarted controller has it.
    expect(rig({}, { clock, store }).controller.monthToDateCosts().totalCost).toBeCloseTo(
      november.totalCost,
      12,
    );

    // What happens in the month leaves the bill at its start be: no replay of the history (a read of every job).
    const replays = vi.spyOn(store, 'listJobs');
    store.setInstanceState(working, 'terminated');
    const next = store.createInstance({ typeName: 'c7i.xlarge' });
    store.setInstanceState(next.id, 'launching', { cloudId: 'c-3' });
    clock.advance(600);
    const later = controller.monthToDateCosts();
    expect(replays).not.toHaveBeenCalled();
    expectAsReport(later, store, clock.nowSeconds());
  });

  it('follows a co-start release after the first scrape that makes a start held across the month idle', () => {
    const clock = new ManualClock(NOV_1 - 3600);
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const job = store.submitJob(jobSpec('pair', CPU_SMALL, { team: 'vision', replicas: 2 }));
    const inst = store.createInstance({ typeName: 'c7i.2xlarge' });
    store.setInstanceState(inst.id, 'launching', { cloudId: 'c-1' });
    store.setInstanceState(inst.id, 'running');
    const tasks = [`${job.id}.0`, `${job.id}.1`];
    for (const t of tasks) store.setTaskState(t, 'starting', inst.id);
    clock.advance(3600 + 60);
    const { controller } = rig({}, { clock, store });
    // Before the release the starts count as the job's work.
    controller.monthToDateCosts();

    // Two minutes into November the tasks are released together: their starts were held, idle time.
    clock.advance(60);
    store.transaction(() => {
      for (const t of tasks) store.setTaskState(t, 'running', inst.id);
      store.appendEvent(coStartReleaseEvent(job.id, tasks));
    });
    clock.advance(480);
    const november = controller.monthToDateCosts();
    const hour = priceOf('c7i.2xlarge');
    // Ten minutes of the instance; the job's share is its eight minutes since the release.
    expect(november.totalCost).toBeCloseTo((hour * 600) / 3600, 9);
    expect(november.byTeam.find((t) => t.id === 'vision')?.cost).toBeCloseTo((hour * 480) / 3600, 9);
    expectAsReport(november, store, clock.nowSeconds());
    expect(rig({}, { clock, store }).controller.monthToDateCosts()).toEqual(november);
  });

  it('drops a spot instance EC2 reclaimed in its first hour, across the month start, from the start’s bill too', () => {
    const clock = new ManualClock(NOV_1 - 1800);
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const launch = (cloudId: string, spot: boolean): string => {
      const inst = store.createInstance({ typeName: 'c7i.xlarge' });
      if (spot) store.appendEvent({ kind: ADOPTED_SPOT_EVENT, instanceId: inst.id, message: 'spot' });
      store.setInstanceState(inst.id, 'launching', { cloudId });
      store.setInstanceState(inst.id, 'running');
      return inst.id;
    };
    // A spot instance from half an hour before November, an on-demand one from a minute into it.
    const spot = launch('c-spot', true);
    clock.advance(1800 + 60);
    launch('c-od', false);
    clock.advance(1140);
    const { controller } = rig({}, { clock, store });
    expectAsReport(controller.monthToDateCosts(), store, clock.nowSeconds());

    // Twenty minutes into November, fifty minutes after its launch, EC2 reclaims it: it is billed nothing at all.
    store.transaction(() => {
      store.setInstanceState(spot, 'terminated', { reason: 'reclaimed' });
      store.appendEvent({ kind: SPOT_RECLAIMED_EVENT, instanceId: spot, message: 'reclaimed' });
    });
    clock.advance(2400);
    const november = controller.monthToDateCosts();
    expect(november.totalCost).toBeCloseTo((priceOf('c7i.xlarge') * 3540) / 3600, 9);
    expectAsReport(november, store, clock.nowSeconds());
    expect(rig({}, { clock, store }).controller.monthToDateCosts().totalCost).toBeCloseTo(
      november.totalCost,
      12,
    );
  });
});

describe('the month so far after a price refresh', () => {
  it.each([
    ['rise', 1.5],
    ['drop', 0.25],
  ])('is still what a report over the month so far bills at the new prices (a %s)', async (_, factor) => {
    // October: a month of the first instance, idle (the history a repricing weighs most on); it ends as November
    // begins and the small job's instance (from an hour before) runs on.
    const clock = new ManualClock(utcMonthBounds('2026-10').startSeconds);
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const idle = store.createInstance({ typeName: 'c7i.xlarge' });
    store.setInstanceState(idle.id, 'launching', { cloudId: 'c-0' });
    store.setInstanceState(idle.id, 'running');
    clock.advance(T - clock.nowSeconds());
    const job = store.submitJob(jobSpec('small', CPU_SMALL));
    const inst = store.createInstance({ typeName: 'c7i.xlarge' });
    store.setInstanceState(inst.id, 'launching', { cloudId: 'c-1' });
    store.setInstanceState(inst.id, 'running');
    store.setTaskState(`${job.id}.0`, 'running', inst.id);
    clock.advance(3600);
    store.setInstanceState(idle.id, 'terminated');
    clock.advance(2 * 3600);
    const { controller } = rig({}, { clock, store });
    const hour = priceOf('c7i.xlarge');
    expect(controller.monthToDateCosts().totalCost).toBeCloseTo(2 * hour, 9);

    const { catalog: repriced } = repriceCatalog(catalog, new Map([['c7i.xlarge', hour * factor]]));
    await controller.applyCatalog(repriced);
    const november = controller.monthToDateCosts();
    // November's two hours of the job's instance, at the new price: never October's bill at the old one taken
    // from the whole history at the new one.
    expect(november.totalCost).toBeCloseTo(2 * hour * factor, 9);
    const report = computeClosedPeriodReport(store, repriced, NOV_1, clock.nowSeconds());
    expect(november.totalCost).toBeCloseTo(report.totalCost, 9);
    expect(november.byTeam.map((t) => [t.id, Number(t.cost.toFixed(9))])).toEqual(
      report.byTeam.map((t) => [t.id, Number(t.cost.toFixed(9))]),
    );
    // And as the month goes on at the new prices.
    clock.advance(3600);
    expect(controller.monthToDateCosts().totalCost).toBeCloseTo(3 * hour * factor, 9);
  });
});

describe('monthly reports in the object store', () => {
  it('writes each ended month once, under its own keys, kept when the rolling reports are pruned', async () => {
    const objects = await openObjectStore(join(scratch, 'objects'));
    const { clock, store } = oneJobAcrossTheMonthEnd();
    const writer = writerFor(store, clock, objects);
    await writer.writeDue();
    // October has not ended: nothing yet.
    expect(await keysUnder(objects, 'reports/months/')).toEqual([]);

    clock.advance(3600);
    await writer.writeDue();
    const october = monthlyReportKeys('2026-10');
    expect(await keysUnder(objects, 'reports/months/')).toEqual(
      [october.csv, october.html, october.json].sort(),
    );
    const doc = parseReportDocument((await objects.getBuffer(october.json)).toString('utf8'), october.json);
    expect(doc.reason).toBe('month 2026-10');
    expect(doc.closed).toBe(true);
    const page = (await objects.getBuffer(october.html)).toString('utf8');
    expect(page).toContain('the fleet cost $0.1785/hour at the period&#39;s end.');
    expect(page).toContain(
      // October began for this controller with its first record, an hour before its end.
      'From 2026-10-31T23:00:00.000Z to 2026-11-01T00:00:00.000Z; written because: month 2026-10.',
    );
    expect(doc.generatedAtSeconds).toBe(NOV_1);
    expect(doc.totalCost).toBeCloseTo(priceOf('c7i.xlarge'), 9);
    expect(store.getValue(MONTHS_REPORTED_KEY)).toBe('2026-10');
    // The rolling report (hourly, due too) is the newest; a month's report never replaces it.
    const latest = parseReportDocument(
      (await objects.getBuffer(LATEST_REPORT_KEY)).toString('utf8'),
      LATEST_REPORT_KEY,
    );
    expect(latest.reason).toBe('hourly');

    // Again, and from a restarted controller: October is not written twice.
    await writer.writeDue();
    await writerFor(store, clock, objects).writeDue();
    const written = store
      .listEvents({ kind: 'report.written' })
      .filter((e) => (e.message ?? '').includes('2026-10'));
    expect(written).toHaveLength(1);

    // Pruning the rolling reports leaves the months alone.
    await pruneCostReports(objects, 1);
    expect(await keysUnder(objects, 'reports/months/')).toHaveLength(3);

    // A controller down over two month ends catches up a month a pass.
    clock.advance(DEC_1 + 86400 * 31 - clock.nowSeconds());
    await writer.writeDue();
    expect(store.getValue(MONTHS_REPORTED_KEY)).toBe('2026-11');
    await writer.writeDue();
    expect(store.getValue(MONTHS_REPORTED_KEY)).toBe('2026-12');
    await writer.writeDue();
    expect(store.getValue(MONTHS_REPORTED_KEY)).toBe('2026-12');
    const december = parseReportDocument(
      (await objects.getBuffer(monthlyReportKeys('2026-12').json)).toString('utf8'),
      'december',
    );
    // The instance never ended: the whole of December, 31 days.
    expect(december.totalCost).toBeCloseTo(priceOf('c7i.xlarge') * 24 * 31, 6);
  });

  it("waits a heartbeat timeout past the month's end and its own start, so an exit heard late is in it", async () => {
    const objects = await openObjectStore(join(scratch, 'late-exit'));
    const { clock, store } = oneJobAcrossTheMonthEnd();
    const hour = priceOf('c7i.xlarge');
    // The task exits ten minutes before October ends, while the controller is down; it is back 30 s into November.
    clock.advance(NOV_1 + 30 - clock.nowSeconds());
    const writer = writerFor(store, clock, objects, 60);
    await writer.writeDue();
    expect(await keysUnder(objects, 'reports/months/')).toEqual([]);
    // The worker's next heartbeat says the task exited 645 s ago.
    clock.advance(15);
    store.setTaskState('job-1.0', 'succeeded', undefined, { atSeconds: NOV_1 - 600 });
    clock.advance(30);
    await writer.writeDue();
    // 75 s after the month's end, but 45 s after the start: a worker may not have been heard yet.
    expect(await keysUnder(objects, 'reports/months/')).toEqual([]);
    clock.advance(15);
    await writer.writeDue();
    const october = parseReportDocument(
      (await objects.getBuffer(monthlyReportKeys('2026-10').json)).toString('utf8'),
      'october',
    );
    // The job's time ends at its exit; the instance's last ten minutes of October are idle.
    expect(october.totalCost).toBeCloseTo(hour, 9);
    expect(october.byJob.map((j) => [j.id, Number(j.cost.toFixed(9))])).toEqual([
      ['job-1', Number(((hour * 2900) / 3600).toFixed(9))],
    ]);
    expect(october.idleCost).toBeCloseTo((hour * 700) / 3600, 9);
  });

  it('answers an ended month from its stored report, at the prices of then, and says when it has none', async () => {
    const objects = await openObjectStore(join(scratch, 'answered'));
    const { clock, store } = oneJobAcrossTheMonthEnd();
    clock.advance(3600);
    const OCT_1 = utcMonthBounds('2026-10').startSeconds;
    const { controller } = rig({}, { clock, store, objectStore: objects });
    // October has ended, its report not written yet: recomputed, and the answer says so.
    const before = await controller.periodCosts(OCT_1, NOV_1);
    expect(before.monthReport).toEqual({
      from: 'recomputed',
      detail: `no report of 2026-10 at ${join(scratch, 'answered')}/reports/months/2026-10.json yet (written once the month has ended)`,
    });
    expect(before.totalCost).toBeCloseTo(priceOf('c7i.xlarge'), 9);

    await writerFor(store, clock, objects).writeDue();
    // Prices change after the month's end: the month stays what was billed then.
    const { catalog: repriced } = repriceCatalog(
      catalog,
      new Map([['c7i.xlarge', 2 * priceOf('c7i.xlarge')]]),
    );
    await controller.applyCatalog(repriced);
    const { monthReport: source, ...october } = await controller.periodCosts(OCT_1, NOV_1);
    expect(source).toEqual({
      from: 'stored',
      detail: `${join(scratch, 'answered')}/reports/months/2026-10.json`,
    });
    expect(october).toEqual(computeClosedPeriodReport(store, catalog, OCT_1, NOV_1));
    // The API answers the same (`fleetwise report --month 2026-10`), saying where the figures come from.
    const server = await startApiServer(controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
    try {
      const answer = (await (
        await fetch(`${server.url}/v1/costs?since=${OCT_1}&until=${NOV_1}`, {
          headers: { authorization: `Bearer ${ADMIN}` },
        })
      ).json()) as { totalCost: number; monthReport?: unknown };
      expect(answer.monthReport).toEqual(source);
      expect(answer.totalCost).toBeCloseTo(october.totalCost, 9);
    } finally {
      await server.close();
    }
    // A replay now would bill it at the new prices; so does any period that is not a whole ended month.
    expect(controller.costs(OCT_1, NOV_1).totalCost).toBeCloseTo(2 * priceOf('c7i.xlarge'), 9);
    const part = await controller.periodCosts(OCT_1 + 1, NOV_1);
    expect(part.monthReport).toBeUndefined();
    expect(part.totalCost).toBeCloseTo(2 * priceOf('c7i.xlarge'), 9);
    // The month so far is the month so far.
    expect(await controller.periodCosts(NOV_1)).toEqual(controller.costs(NOV_1));

    // Without an object store it can only recompute, and says why.
    const bare = rig({}, { clock, store }).controller;
    expect((await bare.periodCosts(OCT_1, NOV_1)).monthReport).toEqual({
      from: 'recomputed',
      detail: 'no object store is configured for reports',
    });
  });

  it('says nothing ran in an ended month before the state’s first record, not that its report is yet to come', async () => {
    const objects = await openObjectStore(join(scratch, 'before-anything'));
    const where = (month: string): string =>
      `${join(scratch, 'before-anything')}/reports/months/${month}.json`;
    const why = async (month: string, state?: MonthRecords): Promise<string | undefined> => {
      const read = await readStoredMonthReport(objects, month, state);
      return read.report === undefined ? read.why : undefined;
    };
    // Nothing at all yet: no month that has ended will ever have a report.
    let now = T;
    const store = new MemoryStateStore({ nowSeconds: () => now });
    expect(await why('2026-09', store)).toBe('nothing ran in 2026-09');
    // An instance adopted before the first job ran in September; the first job came in October.
    now = utcMonthBounds('2026-09').startSeconds + 3600;
    const adopted = store.createInstance({ typeName: 'c7i.xlarge' });
    store.setInstanceState(adopted.id, 'launching', { cloudId: 'c-adopted' });
    now = T;
    store.submitJob(jobSpec('small', CPU_SMALL));
    expect(await why('2026-08', store)).toBe('nothing ran in 2026-08');
    expect(await why('2026-09', store)).toBe(
      "no report of 2026-09 is written: months are reported from the first job's, 2026-10",
    );
    // From the first job's month on, a missing report is one not written yet.
    expect(await why('2026-10', store)).toBe(
      `no report of 2026-10 at ${where('2026-10')} yet (written once the month has ended)`,
    );
    // Without the state, it cannot tell.
    expect(await why('2026-08')).toBe(
      `no report of 2026-08 at ${where('2026-08')} yet (written once the month has ended)`,
    );
    expect(firstReportedMonth(store)).toBe('2026-10');
  });

  it('tries a month again an hour after its report failed, not at every pass', async () => {
    const { clock, store } = oneJobAcrossTheMonthEnd();
    let puts = 0;
    const failing = await openObjectStore(join(scratch, 'failing'));
    const refusing: ObjectStore = Object.assign(Object.create(failing) as ObjectStore, {
      put: async (): Promise<void> => {
        puts += 1;
        throw new Error('store down');
      },
    });
    const writer = writerFor(store, clock, refusing);
    clock.advance(3600);
    await writer.writeDue();
    const afterFirst = puts;
    expect(afterFirst).toBeGreaterThan(0);
    await writer.writeDue();
    expect(puts).toBe(afterFirst);
    expect(store.getValue(MONTHS_REPORTED_KEY)).toBeUndefined();
    clock.advance(3600);
    await writer.writeDue();
    expect(puts).toBeGreaterThan(afterFirst);
  });
});
