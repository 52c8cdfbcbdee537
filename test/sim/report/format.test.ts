import { describe, expect, it } from 'vitest';
import { FLEET_COLUMNS, smallMoney, SPOT_COLUMNS, summaryTextTable } from '../../../src/sim/report/format.js';
import { withNormalizedCosts } from '../../../src/sim/report/normalize.js';
import {
  jctCdf,
  timeWeightedUtilization,
  utilizationPercent,
} from '../../../src/sim/report/series-metrics.js';
import { summarize } from '../../../src/world/metrics.js';
import { fakeRun, twoRuns } from './run-fixtures.js';

describe('series metrics', () => {
  it('weights utilization by how long each sample holds', () => {
    // (1·1 s + 2·2 s) / (2·1 s + 4·2 s) = 5 / 10; the last sample has no duration.
    expect(timeWeightedUtilization([0, 1, 3], [1, 2, 9], [2, 4, 9])).toBe(0.5);
    expect(timeWeightedUtilization([0, 5], [0, 0], [0, 0])).toBeNull();
  });

  it('marks samples with nothing provisioned as gaps', () => {
    expect(utilizationPercent([1, 0], [4, 0])).toEqual([25, Number.NaN]);
  });

  it('builds the JCT CDF from finished jobs only', () => {
    const cdf = jctCdf(fakeRun('eva', 1, 1, 1, [3, null, 1, 2]).jobs);
    expect(cdf.hours).toEqual([1, 2, 3]);
    expect(cdf.percent).toEqual([100 / 3, 200 / 3, 100]);
  });
});

describe('terminal summary tables', () => {
  /** The table under a title, as lines: title, header, rule, rows. */
  const table = (text: string, title: string): string[] => {
    const blocks = text.trimEnd().split('\n\n');
    const block = blocks.find((b) => b.startsWith(`${title}\n`));
    if (block === undefined) throw new Error(`no table ${title} in:\n${text}`);
    return block.split('\n');
  };

  it('adds the queue metrics as a table when a run had a queue; – where a metric does not apply', () => {
    const [a, b] = withNormalizedCosts(twoRuns());
    const queued = {
      ...(b as NonNullable<typeof b>),
      queue: {
        p99JctHours: 4.25,
        unfairness: 12.5,
        predErrAvg: 7.25,
        predErrP99: 80,
        successfulSojournMeanHours: null,
        preemptions: 3,
      },
    };
    const text = summaryTextTable([a as NonNullable<typeof a>, queued]);
    const lines = table(text, 'Queue');
    expect(lines[1]).toMatch(
      /^scheduler\s+p99 JCT h\s+unfair\. %\s+pred\. err %\s+p99 pred\. err %\s+succ\. sojourn h\s+preempt\.$/,
    );
    expect(lines[4]).toMatch(/^eva\s+4\.250\s+12\.5\s+7\.3\s+80\.0\s+–\s+3$/);
    expect(lines[3]).toMatch(/^no-packing\s+–\s+–\s+–\s+–\s+–\s+–$/); // the run without a queue
    expect(text.split('\n').filter((l) => /^[A-Z]/.test(l))).toEqual([
      'Cost and completion time',
      'Queue',
      'Fleet',
    ]);
    expect(summaryTextTable(withNormalizedCosts(twoRuns()))).not.toContain('pred. err');
  });

  it('puts what the runs were about (spot, then multi-task starts) between cost and the fleet', () => {
    const [a, b] = withNormalizedCosts(twoRuns());
    const spot = {
      ...(a as NonNullable<typeof a>),
      spot: { interruptions: 4, lostWorkHours: 1.5, spotShare: 0.75, rebalanceRecommendations: 0 },
      starts: {
        startSkewSecondsMean: 12,
        barrierIdleCost: 3.25,
        waitToPlaceSecondsMean: 90,
        placedBetweenRounds: 2,
      },
    };
    const text = summaryTextTable([spot, b as NonNullable<typeof b>]);
    expect(text.split('\n').filter((l) => /^[A-Z]/.test(l))).toEqual([
      'Cost and completion time',
      'Spot',
      'Multi-task starts',
      'Fleet',
    ]);
    expect(table(text, 'Spot')[3]).toMatch(/^no-packing\s+4\s+1\.500\s+75\.0%$/);
    // Barrier-idle dollars to the cent, as every money column prints them.
    expect(table(text, 'Multi-task starts')[3]).toMatch(/^no-packing\s+12\.0\s+3\.25\s+90\.0$/);
    // A small run's barrier-idle cost is a fraction of a cent, not 0.0 beside a non-zero start skew.
    const small = { ...spot, starts: { ...spot.starts, barrierIdleCost: 0.004553275 } };
    expect(table(summaryTextTable([small]), 'Multi-task starts')[3]).toMatch(
      /^no-packing\s+12\.0\s+0\.00455\s+90\.0$/,
    );
  });

  it('prints small dollar amounts to three significant digits and larger ones to the cent', () => {
    expect([0, 0.004553275, 0.09, 0.5, 1, 1234.567, -0.0041].map(smallMoney)).toEqual([
      '0.00',
      '0.00455',
      '0.09',
      '0.50',
      '1.00',
      '1,234.57',
      '-0.0041',
    ]);
    expect(smallMoney(Number.NaN)).toBe('–');
  });

  it('prints cost and completion time first, then the fleet: a title, a header, a rule and one aligned row per scheduler', () => {
    const text = summaryTextTable(withNormalizedCosts(twoRuns()));
    const lines = table(text, 'Cost and completion time');
    expect(lines).toHaveLength(5);
    expect(lines[1]).toMatch(
      /^scheduler\s+jobs\s+total cost \$\s+norm\. cost\s+mean JCT h\s+median JCT h\s+p95 JCT h\s+peak \$\/h$/,
    );
    expect(lines[2]).toMatch(/^-+ +-+/);
    expect(lines[3]).toMatch(/^no-packing\s+2\s+9\.00\s+100\.0%\s+2\.500/);
    expect(lines[4]).toMatch(/^eva\s+3\s+6\.00\s+66\.7%/);
    // Numeric columns are right-aligned: each row's "norm. cost" cell ends where the header does.
    const end = (lines[1] ?? '').indexOf('norm. cost') + 'norm. cost'.length;
    expect(lines[3]?.slice(end - 6, end)).toBe('100.0%');
    expect(lines[4]?.slice(end - 5, end)).toBe('66.7%');
    const fleet = table(text, 'Fleet');
    expect(fleet[1]).toMatch(
      /^scheduler\s+migr\.\/job\s+instances\s+full-reconf\.\s+GPU util\.\s+vCPU util\.\s+RAM util\.\s+wall s$/,
    );
    // Every table fits a terminal of 120 columns.
    for (const line of text.split('\n')) expect(line.length).toBeLessThanOrEqual(120);
  });

  it('with spot open, is headed by no-packing on demand in the terminal: the same figures, within 120 columns', () => {
    const spot = (spotShare: number) => ({
      interruptions: 0,
      lostWorkHours: 0,
      spotShare,
      rebalanceRecommendations: 0,
    });
    const [noPacking, eva] = twoRuns();
    if (noPacking === undefined || eva === undefined) throw new Error('fixture');
    const names = ['eva-latency-no-migration', 'karpenter-spot', 'skypilot-spot'];
    const runs = withNormalizedCosts([
      { ...noPacking, spot: spot(0) },
      { ...eva, spot: spot(1) },
      ...names.map((n) => ({ ...fakeRun(n, 2, 3, 1, [2]), spot: spot(1) })),
    ]);
    const lines = table(summaryTextTable(runs), 'Cost and completion time');
    expect(lines[1]).toMatch(/^scheduler\s+jobs\s+total cost \$\s+÷ no-packing \(on demand\)\s+mean JCT h/);
    expect(lines[3]).toMatch(/^no-packing\s+2\s+9\.00\s+100\.0%\s+2\.500/);
    expect(lines[4]).toMatch(/^eva\s+3\s+6\.00\s+66\.7%/);
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(120);
    // No-packing on spot (not what --spot on does), or spot closed: the plain header.
    const onSpot = withNormalizedCosts([{ ...noPacking, spot: spot(0.5) }, eva]);
    expect(table(summaryTextTable(onSpot), 'Cost and completion time')[1]).toMatch(
      /total cost \$\s+norm\. cost\s/,
    );
  });
});

describe('the full-reconfiguration column', () => {
  it('says what its figure counts: full reconfigurations among every planned round, stays included', () => {
    const column = FLEET_COLUMNS.find((c) => c.header === 'full-reconf.');
    if (column === undefined) throw new Error('no full-reconf. column');
    // Four planned rounds, one full: the three others (stays, partial moves) count in the whole.
    const summary = summarize(
      {
        scheduler: 'eva',
        totalCost: 1,
        peakCostPerHour: 1,
        instancesLaunched: 1,
        plannedRounds: 4,
        fullRounds: 1,
        wallSeconds: 0,
      },
      [],
    );
    expect(column.cell({ ...fakeRun('eva', 1, 1, 1, [1]), summary })).toBe('0.250');
    expect(column.description).toContain('every round with an admitted job or an instance to plan');
    expect(column.description).not.toContain('over a partial one');
  });
});

describe('the spot columns', () => {
  it('say what they count for every runtime, evictions at the notice included', () => {
    const meaning = (header: string): string => {
      const column = SPOT_COLUMNS.find((c) => c.header === header);
      if (column === undefined) throw new Error(`no ${header} column`);
      return column.description;
    };
    // karpenter-spot may end a drained instance itself before EC2 takes it: the count is of EC2's reclaims only.
    expect(meaning('interrupt.')).toContain('EC2 took back');
    expect(meaning('interrupt.')).toContain('ended by its owner before the reclaim is not one');
    // Its lost work is lost at the notice, when no instance may be reclaimed at all.
    expect(meaning('lost work h')).toContain('Work that spot interruptions cost');
    expect(meaning('lost work h')).toContain('at the notice by a runtime that evicts its jobs then');
    expect(meaning('lost work h')).not.toContain('reclaimed spot instances');
    // The figures are as the run reported them: a run with no reclaim may still have lost work.
    const run = {
      ...fakeRun('karpenter-spot', 2, 3, 1, [2]),
      spot: { interruptions: 0, lostWorkHours: 11.29, spotShare: 1, rebalanceRecommendations: 0 },
    };
    expect(SPOT_COLUMNS.map((c) => c.cell(run))).toEqual(['0', '11.290', '100.0%']);
  });
});
