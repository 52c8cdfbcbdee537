import type { GLPK } from 'glpk.js/node';
import { beforeAll, describe, expect, it } from 'vitest';
import { costBounds } from '../../../src/bench/cost-bound.js';
import type { Catalog } from '../../../src/core/catalog.js';
import { SpotBaseline } from '../../../src/scheduler/baselines/spot-baseline.js';
import { loadIlpSolver } from '../../../src/scheduler/ilp.js';
import { reportHtml } from '../../../src/sim/report/html.js';
import type { ReportBounds } from '../../../src/sim/report/json.js';
import { withNormalizedCosts } from '../../../src/sim/report/normalize.js';
import { noticeHandlingOf } from '../../../src/sim/run-request.js';
import { runSimulation } from '../../../src/sim/run-simulation.js';
import { constantPairwise } from '../../../src/world/ground-truth.js';
import type { RunResult } from '../../../src/world/run-result.js';
import { testCatalog, testSpotMarket, trace, traceJob } from '../sim-fixtures.js';
import { fakeRun } from './run-fixtures.js';

/**
 * The report's lower bounds at spot prices price every instance-second a schedule needs, but AWS charges nothing for a
 * spot instance EC2 reclaims in its first hour, so a run with such reclaims may be billed below them. The report then
 * says how far below, and why, never a negative distance "above" a bound that claims no schedule can go lower.
 */

const text = (html: string): string => html.replace(/<[^>]+>/g, '');
const lead = (page: string): string =>
  text(/<p class="lead" id="lead">([\s\S]*?)<\/p>/.exec(page)?.[1] ?? '');
const boundsNote = (page: string): string =>
  text(/<p id="bounds"[^>]*>([\s\S]*?)<\/p>/.exec(page)?.[1] ?? '');
const costCaption = (page: string): string =>
  /id="chart-cumulative-cost"[\s\S]*?<figcaption>([\s\S]*?)<\/figcaption>/.exec(page)?.[1] ?? '';

const spotMetrics = (interruptions: number) => ({
  interruptions,
  lostWorkHours: 0,
  spotShare: 1,
  rebalanceRecommendations: 0,
});

describe('report.html: a spot run billed below the bounds at spot prices', () => {
  // eva: $2/h for 3 h = $6, reclaimed 3 times; no-packing $9 on demand.
  const runs = (): RunResult[] =>
    withNormalizedCosts([
      { ...fakeRun('no-packing', 3, 3, 2, [2, 3]), spot: spotMetrics(0) },
      { ...fakeRun('eva', 2, 3, 1, [2.5, 3]), spot: spotMetrics(3) },
    ]);
  const bounds: ReportBounds = {
    workBound: 7,
    timedBound: 7.5,
    atSpotPrices: true,
    timedSeries: { timeSeconds: [0, 3600, 10_800], cumulativeCost: [0, 2.5, 7.5] },
  };

  it('says how far below each bound the bill is, and that first-hour refunds took it there', () => {
    const page = reportHtml(runs(), {}, bounds);
    const l = lead(page);
    expect(l).toContain(
      'That is $1.50 (20.0%) below the lower bound of $7.50 for this trace without delays, and $1.00 (14.3%) ' +
        'below the work bound ($7.00), below which a bill goes only by refunds no bound counts (AWS charges ' +
        'nothing for a spot instance EC2 reclaims in its first hour).',
    );
    expect(l).not.toContain('$-');
    expect(l).not.toContain('-14.3%');
    expect(l).not.toContain('below which no schedule can go');
    // The summary's note says the same of both bounds.
    expect(boundsNote(page)).toContain("no schedule's instances can cost less than $7.00");
    expect(boundsNote(page)).toContain(
      'Both are before refunds: AWS charges nothing for a spot instance EC2 reclaims in its first hour, so a run ' +
        'with such reclaims may be billed less than the bounds.',
    );
  });

  it('under a cap: the work bound alone, below it, and the cost chart’s mark says why a total may go lower', () => {
    const page = reportHtml(runs(), { capDollarsPerHour: 40 }, bounds);
    const l = lead(page);
    expect(l).toContain(
      'That is $1.00 (14.3%) below the work bound ($7.00), below which a bill goes only by refunds no bound counts',
    );
    expect(l).not.toContain('$-');
    expect(costCaption(page)).toContain(
      'below which no schedule’s total can go but by refunds no bound counts (AWS charges nothing for a spot ' +
        'instance EC2 reclaims in its first hour)',
    );
  });

  it('on demand the bounds hold for the bill, and the report says so as before', () => {
    const onDemand = { ...bounds, atSpotPrices: undefined, workBound: 4.5, timedBound: 4.75 };
    const l = lead(reportHtml(runs(), {}, onDemand));
    expect(l).toContain('That is $1.25 (26.3%) above the lower bound of $4.75');
    expect(l).toContain('$1.50 (33.3%) above the work bound ($4.50), below which no schedule can go.');
    expect(l).not.toContain('refunds');
  });
});

describe('a real spot run billed below the work bound at spot prices (engine, karpenter-spot)', () => {
  let solver: GLPK;
  beforeAll(async () => {
    solver = await loadIlpSolver();
  });

  /**
   * One 20,000 s job on a small.x of its own (one GPU: the whole instance), in pools testa ($1.08/h) and testb
   * ($1.10/h). Seed 101 at 60 bursts per pool per 30 days empties testa at ≈ 2,409 s, in i-1's first hour: the job
   * saves its progress on the eviction and goes on on i-2 in testb, and EC2 takes i-1 free. i-1's 2,337 s of work cost
   * nothing, so the bill (i-2's ≈ 17,800 s at $1.10/h) is below the work bound, 20,000 s at $1.08/h = $6.00.
   */
  const catalog: Catalog = {
    ...testCatalog(),
    spot: testSpotMarket(
      { typeName: 'small.x', zone: 'testa', pricePerHour: 1.08, interruption: '<5%' },
      { typeName: 'small.x', zone: 'testb', pricePerHour: 1.1, interruption: '<5%' },
    ),
  };
  const jobs = trace(traceJob('J', { iterations: 20_000 }));

  it('the lead says it is below the bounds by first-hour refunds; bill plus refunds stays above them', () => {
    const result = runSimulation({
      trace: jobs,
      scheduler: new SpotBaseline(catalog, 'karpenter-spot'),
      catalog,
      groundTruth: constantPairwise(1),
      checkpointIntervalSeconds: 1800,
      spot: { seed: 101, burstsPerPoolPerMonth: 60, noticeHandling: noticeHandlingOf('karpenter-spot') },
      maxSeriesPoints: Number.MAX_SAFE_INTEGER,
    });
    const b = costBounds(solver, catalog, jobs.jobs, { spot: catalog.spot });
    expect(b.workBound).toBeCloseTo((20_000 / 3600) * 1.08, 9);
    expect(result.spot?.interruptions).toBe(1);
    // The premise: the bill is below the bound, and only by what EC2's first-hour reclaim refunded (what i-1 had
    // accrued leaves the cumulative cost at the reclaim: the series' one fall).
    const cost = result.summary.totalCost;
    expect(cost).toBeLessThan(b.workBound);
    const c = result.series.cumulativeCost;
    const refunded = c.reduce((sum, v, i) => sum + Math.max(0, (c[i - 1] ?? v) - v), 0);
    expect(refunded).toBeGreaterThan(0);
    expect(cost + refunded).toBeGreaterThanOrEqual(b.workBound);
    const page = reportHtml(withNormalizedCosts([result]), {}, { ...b, atSpotPrices: true });
    const l = lead(page);
    expect(l).not.toMatch(/\$-|-\d/);
    expect(l).toMatch(/That is \$\d+\.\d\d \(\d+\.\d%\) below the lower bound of \$/);
    expect(l).toContain(
      'below the work bound ($6.00), below which a bill goes only by refunds no bound counts',
    );
  });
});
