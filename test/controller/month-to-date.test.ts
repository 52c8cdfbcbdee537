import { describe, expect, it } from 'vitest';
import { coStartReadinessEvent } from '../../src/controller/co-start-records.js';
import { IncrementalCostReport } from '../../src/controller/incremental-cost-report.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { MonthToDate } from '../../src/controller/month-to-date.js';
import { instancePricePerHour } from '../../src/core/catalog.js';
import { utcMonthBounds } from '../../src/core/utc-month.js';
import { catalog, CPU_SMALL, gangStartingOnOneInstance, jobSpec } from './controller-fixtures.js';

/**
 * The month so far is the whole history's bill less the bill at the month's start, kept between scrapes: a record made
 * this month that changes what was billed before it must have that start replayed, or a team's share drifts.
 */
describe('month to date', () => {
  it('replays the start of the month when a readiness from before it is withdrawn: a team never costs more than the fleet', () => {
    const month = utcMonthBounds('2026-12');
    const clock = { now: month.startSeconds - 7200 };
    const store = new MemoryStateStore({ nowSeconds: () => clock.now });
    const { job, inst, tasks } = gangStartingOnOneInstance(store);
    const whole = new IncrementalCostReport();
    const kept = new MonthToDate();
    // Prepared, then held from an hour before the month (idle time, no team's).
    clock.now = month.startSeconds - 3600;
    for (const t of tasks) store.appendEvent(coStartReadinessEvent(job.id, t.id, inst.id, true));
    clock.now = month.startSeconds + 600;
    kept.costs(store, catalog, whole.totals(store, catalog, clock.now));
    // Its worker no longer reports one ready: that task's whole start is its job's again, before the month too.
    store.appendEvent(coStartReadinessEvent(job.id, tasks[0]!.id, inst.id, false));
    clock.now = month.startSeconds + 1200;
    const now = kept.costs(store, catalog, whole.totals(store, catalog, clock.now));
    const fresh = new MonthToDate().costs(store, catalog, whole.totals(store, catalog, clock.now));
    expect(now).toEqual(fresh);
    for (const team of now.byTeam) expect(team.cost).toBeLessThanOrEqual(now.totalCost + 1e-12);
  });

  it('replays the start of the month when an exit heard after it is dated before it', () => {
    const month = utcMonthBounds('2026-12');
    const clock = { now: month.startSeconds - 7200 };
    const store = new MemoryStateStore({ nowSeconds: () => clock.now });
    const whole = new IncrementalCostReport();
    const kept = new MonthToDate();
    // Two jobs of one team, each on an instance of its own, from two hours before the month.
    const jobs = ['early', 'late'].map((name) => store.submitJob(jobSpec(name, CPU_SMALL)));
    for (const [i, job] of jobs.entries()) {
      const inst = store.createInstance({ typeName: 'c7i.2xlarge' });
      store.setInstanceState(inst.id, 'launching', { cloudId: `c-${i}` });
      store.setInstanceState(inst.id, 'running');
      for (const t of store.listTasks({ jobId: job.id })) {
        store.setTaskState(t.id, 'starting', inst.id);
        store.setTaskState(t.id, 'running', inst.id);
      }
      store.setJobState(job.id, 'starting');
      store.setJobState(job.id, 'running');
    }
    clock.now = month.startSeconds + 600;
    kept.costs(store, catalog, whole.totals(store, catalog, clock.now));
    // The first job's task exited an hour before the month; its worker's report is heard only now (the controller
    // was down): its time from then on is the instance's idle time, before the month too.
    clock.now = month.startSeconds + 1200;
    const [early] = jobs as [(typeof jobs)[number]];
    const exitedAt = month.startSeconds - 3600;
    for (const t of store.listTasks({ jobId: early.id }))
      store.setTaskState(t.id, 'succeeded', undefined, { atSeconds: exitedAt });
    store.setJobState(early.id, 'succeeded', undefined, { atSeconds: exitedAt });
    const now = kept.costs(store, catalog, whole.totals(store, catalog, clock.now));
    const fresh = new MonthToDate().costs(store, catalog, whole.totals(store, catalog, clock.now));
    expect(now).toEqual(fresh);
    // The team's share of the month so far: the second job's 20 minutes on its instance, the fleet's both instances'.
    const dollarsPerHour = instancePricePerHour(catalog, 'c7i.2xlarge', 'on-demand');
    expect(now.totalCost).toBeCloseTo((2 * dollarsPerHour) / 3, 9);
    expect(now.byTeam).toEqual([{ id: 'research', cost: expect.closeTo(dollarsPerHour / 3, 9) }]);
  });
});
