import { describe, expect, it } from 'vitest';
import { capNames, ControllerMetrics, storeGaugeRegistry } from '../../src/controller/api/metrics.js';
import type { MonthToDateCosts } from '../../src/controller/month-to-date.js';
import type { MarketWorkAtRisk } from '../../src/controller/work-at-risk.js';
import type { RoundInput } from '../../src/controller/state-store.js';
import type { WaitingEntry } from '../../src/scheduler/types.js';
import { FakeControllerService } from './api-fake-service.js';
import { GPU_ONE, jobSpec, MEM_BIG, rig } from './controller-fixtures.js';

/** The scrape-time gauges of /metrics, read from a fake service's store. */

/** A service whose month so far grows at every read, as the clock moves on between two reads. */
class GrowingMonth extends FakeControllerService {
  reads = 0;
  monthToDateCosts(): MonthToDateCosts {
    this.reads += 1;
    const cost = 10 * this.reads;
    return { month: '2026-12', totalCost: cost, byTeam: [{ id: 'vision', cost }] };
  }
}

/** A service whose work at risk grows at every read. */
class GrowingRisk extends FakeControllerService {
  reads = 0;
  workAtRisk(): MarketWorkAtRisk[] {
    this.reads += 1;
    const seconds = 100 * this.reads;
    return [{ market: 'spot', runningTasks: 1, totalSeconds: seconds, maxSeconds: seconds }];
  }
}

function gauge(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  if (line === undefined) throw new Error(`no ${series} in\n${text}`);
  return Number(line.slice(series.length + 1));
}

function roundWaiting(waiting: readonly WaitingEntry[]): RoundInput {
  return {
    configuration: { instances: [] },
    decision: {
      scheduler: 'eva',
      nowSeconds: 0,
      candidates: [],
      chosen: 'stay',
      reason: 'only candidate',
      waiting,
      pinned: [],
    },
  };
}

describe('/metrics gauges', () => {
  it('reads the month so far once a scrape: a team’s share never exceeds the fleet’s bill', async () => {
    const service = new GrowingMonth();
    const registry = storeGaugeRegistry(service);
    const first = await registry.metrics();
    expect(service.reads).toBe(1);
    expect(gauge(first, 'fleetwise_month_team_cost_dollars{team="vision"}')).toBe(
      gauge(first, 'fleetwise_month_cost_dollars'),
    );
    // The next scrape reads again.
    const second = await registry.metrics();
    expect(service.reads).toBe(2);
    expect(gauge(second, 'fleetwise_month_cost_dollars')).toBe(20);
  });

  it('reads the work at risk once a scrape, and never serves one scrape’s read to the next', async () => {
    const service = new GrowingRisk();
    const registry = storeGaugeRegistry(service);
    // One gauge scraped alone reads once; the other, scraped alone later, reads afresh (not the first's old figures).
    await registry.getSingleMetricAsString('fleetwise_work_at_risk_seconds');
    expect(service.reads).toBe(1);
    const max = await registry.getSingleMetricAsString('fleetwise_work_at_risk_max_seconds');
    expect(service.reads).toBe(2);
    expect(gauge(max, 'fleetwise_work_at_risk_max_seconds{market="spot"}')).toBe(200);
    // A full scrape reads once for both.
    const full = await registry.metrics();
    expect(service.reads).toBe(3);
    expect(gauge(full, 'fleetwise_work_at_risk_seconds{market="spot"}')).toBe(300);
    expect(gauge(full, 'fleetwise_work_at_risk_max_seconds{market="spot"}')).toBe(300);
  });

  it('labels the jobs waiting on a cap by the cap’s name, one series whatever their queue positions', async () => {
    const service = new FakeControllerService();
    for (let i = 1; i <= 6; i++) service.submit(jobSpec(`j${i}`, MEM_BIG), 'research');
    service.store.recordRound(
      roundWaiting([
        { jobId: 'job-2', cap: 'queue all: caps, position 1', capName: 'maxInstances' },
        { jobId: 'job-3', cap: 'queue all: caps, position 2', capName: 'maxInstances' },
        { jobId: 'job-4', cap: 'queue small: class-share, position 1', capName: 'class small share' },
        { jobId: 'job-5', cap: 'maxCostPerHour' },
        // A round recorded before entries carried the name: the queue's line without its position.
        { jobId: 'job-6', cap: 'queue large: caps, position 3' },
      ]),
    );
    const text = await storeGaugeRegistry(service).metrics();
    const series = text.split('\n').filter((l) => l.startsWith('fleetwise_jobs_waiting_on_cap{'));
    expect(series.sort()).toEqual([
      'fleetwise_jobs_waiting_on_cap{cap="class small share"} 1',
      'fleetwise_jobs_waiting_on_cap{cap="maxCostPerHour"} 1',
      'fleetwise_jobs_waiting_on_cap{cap="maxInstances"} 2',
      'fleetwise_jobs_waiting_on_cap{cap="queue large: caps"} 1',
    ]);
  });

  it('counts a job kept waiting by a round with nothing to plan, and no longer once it ended', async () => {
    const r = rig({ caps: { maxCostPerHour: 1 } });
    const registry = storeGaugeRegistry(r.controller);
    const waitingSeries = async (): Promise<string[]> =>
      (await registry.metrics()).split('\n').filter((l) => l.startsWith('fleetwise_jobs_waiting_on_cap{'));
    // A job no $/hour cap of 1 admits (a GPU instance costs more), alone: the round plans nothing and records none.
    const gpu = r.controller.submit(jobSpec('gpu', GPU_ONE), 'research');
    await r.controller.runRound('test');
    expect(r.store.latestRound()).toBeUndefined();
    expect(await waitingSeries()).toEqual(['fleetwise_jobs_waiting_on_cap{cap="maxCostPerHour"} 1']);
    // Cancelled, it waits no more: no round has run since, and none needs to for the gauge to say so.
    r.controller.cancel(gpu.id);
    expect(await waitingSeries()).toEqual([]);
  });

  it('a cap holding jobs in the queue is named in the round and counted in caps_hit_total under that name', async () => {
    const metrics = new ControllerMetrics();
    const r = rig({ caps: { maxInstances: 1 } }, { metrics });
    for (const name of ['a', 'b', 'c']) r.controller.submit(jobSpec(name, MEM_BIG), 'research');
    await r.controller.runRound('test');
    const waiting = r.store.latestRound()?.decision.waiting ?? [];
    expect(waiting.map((w) => [w.jobId, w.capName])).toEqual([
      ['job-2', 'maxInstances'],
      ['job-3', 'maxInstances'],
    ]);
    // The words stay for people.
    expect(waiting.map((w) => w.cap)).toEqual(['queue all: caps, position 1', 'queue all: caps, position 2']);
    await r.controller.runRound('again');
    const text = await metrics.registry.metrics();
    expect(text).toContain('fleetwise_caps_hit_total{cap="maxInstances"} 4');
    expect(text).not.toMatch(/fleetwise_caps_hit_total\{cap="queue/);
    // What the rounds counted under is among the names started at 0 for these caps and classes.
    const counted = series(text, 'fleetwise_caps_hit_total').map((l) => /cap="([^"]*)"/.exec(l)?.[1]);
    const classes = r.controller.admission.config.classes.map((c) => c.id);
    expect(capNames(r.controller.admission.caps, classes)).toEqual(expect.arrayContaining(counted));
  });
});

function series(text: string, name: string): string[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`))
    .sort();
}

describe('/metrics counters by label', () => {
  it('has every known label value at 0 before its first increment, so increase() sees the first event', async () => {
    const metrics = new ControllerMetrics();
    const fresh = await metrics.registry.metrics();
    expect(series(fresh, 'fleetwise_jobs_failed_by_rule_total')).toEqual([
      'fleetwise_jobs_failed_by_rule_total{rule="dependency"} 0',
      'fleetwise_jobs_failed_by_rule_total{rule="run-limit"} 0',
    ]);
    expect(series(fresh, 'fleetwise_job_archive_failures_total')).toEqual([
      'fleetwise_job_archive_failures_total{part="end"} 0',
      'fleetwise_job_archive_failures_total{part="spec"} 0',
    ]);
    expect(series(fresh, 'fleetwise_caps_hit_total')).toEqual([
      'fleetwise_caps_hit_total{cap="no instance type"} 0',
    ]);
    metrics.expectCaps(
      {
        maxCostPerHour: 10,
        maxInstances: 4,
        maxMigrationsPerRound: 2,
        quotas: [
          { group: 'p', maxGpus: 8 },
          { group: 'standard', maxVcpus: 64, maxGpus: 0 },
        ],
      },
      ['small', 'large'],
    );
    metrics.countJobsFailedByRule('run-limit', 1);
    metrics.jobArchiveFailed('end');
    metrics.countCapHit('maxInstances');
    const text = await metrics.registry.metrics();
    expect(series(text, 'fleetwise_caps_hit_total')).toEqual([
      'fleetwise_caps_hit_total{cap="caps"} 0',
      'fleetwise_caps_hit_total{cap="class large maxShare"} 0',
      'fleetwise_caps_hit_total{cap="class large share"} 0',
      'fleetwise_caps_hit_total{cap="class small maxShare"} 0',
      'fleetwise_caps_hit_total{cap="class small share"} 0',
      'fleetwise_caps_hit_total{cap="maxCostPerHour"} 0',
      'fleetwise_caps_hit_total{cap="maxInstances"} 1',
      'fleetwise_caps_hit_total{cap="maxMigrationsPerRound"} 0',
      'fleetwise_caps_hit_total{cap="no instance type"} 0',
      'fleetwise_caps_hit_total{cap="quota p maxGpus"} 0',
      'fleetwise_caps_hit_total{cap="quota standard maxGpus"} 0',
      'fleetwise_caps_hit_total{cap="quota standard maxVcpus"} 0',
    ]);
    expect(text).toContain('fleetwise_jobs_failed_by_rule_total{rule="run-limit"} 1');
    expect(text).toContain('fleetwise_job_archive_failures_total{part="end"} 1');
    // Without a $ or resource cap nothing queues for a share: only the caps that are set.
    expect(capNames({ maxMigrationsPerRound: 1 }, ['all'])).toEqual([
      'no instance type',
      'maxMigrationsPerRound',
    ]);
  });
});
