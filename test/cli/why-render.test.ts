import { describe, expect, it } from 'vitest';
import { renderWhy } from '../../src/cli/commands/why.js';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot } from '../../src/core/model.js';
import { chooseCandidate } from '../../src/scheduler/eva-choice.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import type { CandidateSummary } from '../../src/scheduler/types.js';

/** `renderWhy` on its own (no controller, no built CLI): the figures it prints against the rule Eva chooses by. */

const HOUR = 3600;

function rendered(decision: Record<string, unknown>): string {
  return renderWhy({
    jobId: 'job-9',
    state: 'running',
    records: [{ round: 4, atSeconds: 1_796_439_000, summary: 'placed on inst-2 (c7i.large)', decision }],
  });
}

/** The table's rows by candidate name: [saving/h, migration, (time,) net]. */
function tableRows(out: string): Map<string, string[]> {
  const rows = new Map<string, string[]>();
  for (const line of out.split('\n')) {
    const m = /^ {4}(→| ) {2}(\S+(?:, \S+)*) {2,}(.*)$/.exec(line);
    if (m === null) continue;
    rows.set(m[2] as string, (m[3] as string).trim().split(/\s+/));
  }
  return rows;
}

describe('why: the net is the decision rule’s', () => {
  // A plan that saves no dollars but slows jobs down ($0.20/h of their time) against staying at a $0.10/h loss:
  // in dollars alone the former looks better, but Eva weighs the time too and stays.
  const summaries: CandidateSummary[] = [
    {
      name: 'stay',
      costPerHour: 0.2,
      instances: 2,
      newInstances: 0,
      savingPerSecond: -0.1 / HOUR,
      migrationCost: 0,
      movedJobs: [],
      timeCostPerHour: 0,
      migrationTimeCost: 0,
    },
    {
      name: 'full-standalone',
      costPerHour: 0.1,
      instances: 1,
      newInstances: 0,
      savingPerSecond: 0,
      migrationCost: 0,
      movedJobs: [],
      timeCostPerHour: 0.2,
      migrationTimeCost: 0.05,
    },
  ];
  const { chosen, reason } = chooseCandidate(
    summaries.map((summary) => ({ summary, drafts: [] })),
    HOUR,
    8,
  );
  const out = rendered({
    scheduler: 'eva',
    chosen: chosen.summary.name,
    reason,
    horizonSeconds: HOUR,
    paybackMargin: 8,
    valueOfTimePerJobHour: 1,
    candidates: summaries,
  });

  it('shows the time the plan costs as a column, and the chosen plan with the best net', () => {
    expect(chosen.summary.name).toBe('stay');
    expect(out).toMatch(/^ {7}candidates\s+saving\/h\s+migration\s+time\s+net$/m);
    const rows = tableRows(out);
    // Time: $0.20/h × 1 h + 8 × $0.05 = $0.60; net: 0 × T − 8 × 0 − $0.60.
    expect(rows.get('full-standalone')).toEqual(['$0.00', '$0.00', '$0.60', '-$0.60']);
    expect(rows.get('stay')).toEqual(['-$0.10', '$0.00', '$0.00', '-$0.10']);
    expect(out).toMatch(/^ {4}→ {2}stay /m);
    expect(out).toMatch(/^ {2}plan stay \(of 2 candidates\): .*time \$0\.00, net -\$0\.10 over T = /m);
  });

  it('time not weighed: no time column, the net in dollars', () => {
    const dollars = summaries.map(({ timeCostPerHour: _t, migrationTimeCost: _m, ...rest }) => rest);
    const plain = rendered({
      scheduler: 'eva',
      chosen: 'full-standalone',
      reason: 'chose full-standalone',
      horizonSeconds: HOUR,
      paybackMargin: 8,
      prices: 'standalone',
      candidates: dollars,
    });
    expect(plain).toMatch(/^ {7}candidates\s+saving\/h\s+migration\s+net$/m);
    expect(tableRows(plain).get('full-standalone')).toEqual(['$0.00', '$0.00', '$0.00']);
    expect(plain).toMatch(/^net: saving × T − 8 × migration; /m);
    // Standalone prices: each job on its own cheapest instance.
    expect(plain).toMatch(
      /^saving\/h: .* with each job on its own cheapest instance, minus the plan’s cost$/m,
    );
  });

  it('says what the time column is and that the net subtracts it', () => {
    expect(out).toMatch(/^time: what the plan costs in jobs’ completion time/m);
    expect(out).toMatch(/^net: saving × T − 8 × migration − time; /m);
  });
});

describe('why: which prices the saving is figured at', () => {
  const decision = (extra: Record<string, unknown>) => ({
    scheduler: 'eva',
    chosen: 'stay',
    reason: 'only candidate',
    horizonSeconds: HOUR,
    paybackMargin: 8,
    candidates: [
      { name: 'stay', costPerHour: 0.09, savingPerSecond: -0.06 / HOUR, migrationCost: 0, movedJobs: [] },
    ],
    ...extra,
  });

  it('packed prices: says so, with θ, and that a lone job shows a loss', () => {
    const out = rendered(decision({ prices: 'packed', packingEfficiency: 0.7 }));
    expect(out).toMatch(/^saving\/h: .* at packed prices \(each task its dominant share .*θ = 0\.7/m);
    expect(out).toMatch(/alone on an instance it does not fill shows a loss$/m);
    expect(out).not.toMatch(/^saving\/h: .*own cheapest instance, minus/m);
  });

  it('a round that did not record its prices says it cannot tell', () => {
    const out = rendered(decision({}));
    expect(out).toMatch(/^saving\/h: .*these rounds did not record which/m);
  });

  it('Eva records the prices it figured the round at', () => {
    const catalog = loadCatalogFile();
    const snapshot: ClusterSnapshot = {
      nowSeconds: 100,
      jobs: [
        {
          id: 'a',
          taskIds: ['a-t0'],
          reconfigurable: true,
          arrivalSeconds: 0,
          migrationDelaySeconds: 60,
          expectedRemainingSeconds: HOUR,
        },
      ],
      tasks: [{ id: 'a-t0', jobId: 'a', key: 'a', demand: { any: [0, 1, 2] } }],
      instances: [],
    };
    const packed = new EvaScheduler(catalog).plan(snapshot).decision;
    expect(packed).toMatchObject({ prices: 'packed', packingEfficiency: 0.7 });
    const standalone = new EvaScheduler(catalog, { reservationPrice: 'standalone' }).plan(snapshot).decision;
    expect(standalone.prices).toBe('standalone');
    expect(standalone.packingEfficiency).toBeUndefined();
    const theta = new EvaScheduler(catalog, { packingEfficiency: 0.5 }).plan(snapshot).decision;
    expect(theta.packingEfficiency).toBe(0.5);
  });

  it('with no recorded decision, says why the queue keeps the job waiting, when it does', () => {
    const place = {
      classId: 'all',
      status: 'waiting',
      position: null,
      reason: 'never-fits',
      detail: 'it can never run under the caps: alone it breaks maxCostPerHour',
    };
    expect(renderWhy({ jobId: 'job-1', state: 'queued', records: [], queue: place })).toBe(
      'job-1: queued\nno recorded round decided about it yet; the queue keeps it waiting: class all, waiting ' +
        '(never-fits): it can never run under the caps: alone it breaks maxCostPerHour\n',
    );
    // Admitted, or from a controller that does not say: nothing to add.
    for (const queue of [{ ...place, status: 'admitted' }, undefined])
      expect(renderWhy({ jobId: 'job-1', state: 'queued', records: [], queue })).toBe(
        'job-1: queued\nno scheduling decision mentions this job yet\n',
      );
  });
});
