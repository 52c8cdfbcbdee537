import { Readable } from 'node:stream';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/core/validation.js';
import {
  attributeCosts,
  billedInstancesIn,
  computeClosedPeriodReport,
  computeCostReport,
  type BilledInstance,
} from '../../src/controller/cost-accounting.js';
import { ManualClock } from '../../src/controller/clock.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import {
  barChart,
  buildReportDocument,
  costPerHourSeries,
  listReports,
  type CostPoint,
  parseReportDocument,
  reportCsv,
  reportHtml,
  reportStamp,
  writeReportFiles,
} from '../../src/controller/reports.js';
import { LATEST_REPORT_KEY } from '../../src/protocol/object-keys.js';
import { pruneCostReports } from '../../src/controller/report-retention.js';
import { openObjectStore } from '../../src/storage/open-object-store.js';
import { catalog, CPU_SMALL, jobSpec, rig } from './controller-fixtures.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-reports-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const T0 = 1_700_000_000;
const instances: BilledInstance[] = [
  {
    id: 'inst-1',
    typeName: 'c7i.xlarge',
    costPerHour: 0.1785,
    fromSeconds: T0,
    terminatedAtSeconds: T0 + 3600,
  },
  {
    id: 'inst-2',
    typeName: 'p3.2xlarge',
    costPerHour: 3.06,
    fromSeconds: T0 + 1800,
    terminatedAtSeconds: undefined,
  },
];

function sampleDocument(reason = 'test') {
  const report = attributeCosts({
    instances,
    placements: [
      {
        taskId: 'job-1.0',
        jobId: 'job-1',
        instanceId: 'inst-1',
        fromSeconds: T0,
        toSeconds: T0 + 3600,
        kind: 'work',
      },
      {
        taskId: 'job-2.0',
        jobId: 'job-2',
        instanceId: 'inst-2',
        fromSeconds: T0 + 1800,
        toSeconds: T0 + 5400,
        kind: 'work',
      },
    ],
    reservationPrice: () => 1,
    jobs: new Map([
      ['job-1', { id: 'job-1', name: 'cifar, "quoted"', team: 'red' }],
      ['job-2', { id: 'job-2', name: 'gpt2', team: 'blue' }],
    ]),
    sinceSeconds: T0,
    nowSeconds: T0 + 5400,
  });
  return buildReportDocument({ cluster: 'bars', reason, report, instances });
}

const area = (points: readonly CostPoint[]): number =>
  points.slice(1).reduce((sum, p, i) => {
    const prev = points[i] as CostPoint;
    return sum + ((p.atSeconds - prev.atSeconds) * prev.costPerHour) / 3600;
  }, 0);

/** The option of the page's chart `id`, as its script reads it. */
function chartOption(html: string, id: string): unknown {
  const json = html.split(`data-chart="${id}">`)[1]?.split('</script>')[0];
  if (json === undefined) throw new Error(`no chart ${id}`);
  return JSON.parse(json);
}

/** The x-axis labels of the static SVG of chart `id`: their text and where they are centred. */
function xAxisLabels(html: string, id: string): { text: string; x: number }[] {
  const svg = html.split(`<div class="chart" id="${id}"`)[1]?.split('</svg>')[0] ?? '';
  return [
    ...svg.matchAll(
      /<text [^>]*text-anchor="middle"[^>]* y="6" transform="translate\(([\d.]+) [\d.]+\)"[^>]*>([^<]*)<\/text>/g,
    ),
  ]
    .filter((m) => !(m[2] as string).includes(' '))
    .map((m) => ({ text: m[2] as string, x: Number(m[1]) }));
}

describe('cost reports', () => {
  it('traces the fleet $/hour as a step function', () => {
    expect(costPerHourSeries(instances, T0, T0 + 5400)).toEqual([
      { atSeconds: T0, costPerHour: 0.1785 },
      { atSeconds: T0 + 1800, costPerHour: 0.1785 + 3.06 },
      { atSeconds: T0 + 3600, costPerHour: 3.06 },
      { atSeconds: T0 + 5400, costPerHour: 3.06 },
    ]);
    // The period starts before the first launch: the series starts at the period's start, at $0/h, so the chart's
    // hours since the start of the period place the launch at its hour (a month's report: hour 240 for the 11th).
    expect(costPerHourSeries(instances, T0 - 36_000, T0 + 5400).slice(0, 2)).toEqual([
      { atSeconds: T0 - 36_000, costPerHour: 0 },
      { atSeconds: T0, costPerHour: 0.1785 },
    ]);
    // An empty fleet is exactly zero, not a float residue.
    expect(costPerHourSeries([instances[0] as BilledInstance], T0, T0 + 7200).at(-1)).toEqual({
      atSeconds: T0 + 7200,
      costPerHour: 0,
    });
  });

  it("charts the fleet as it ran, and the report's total is the chart's area and the minimum minutes", () => {
    const clock = new ManualClock(T0);
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const launch = (cloudId: string): string => {
      const inst = store.createInstance({ typeName: 'c7i.xlarge' });
      store.setInstanceState(inst.id, 'launching', { cloudId });
      store.setInstanceState(inst.id, 'running');
      return inst.id;
    };
    const long = launch('c-1');
    // Ended 21 s after its launch: billed a minute.
    const short = launch('c-2');
    clock.advance(21);
    store.setInstanceState(short, 'terminated');
    // Launched 30 s before a period's end (a month's, T0 + 1200) and ended 10 s after: its minute is split across it.
    clock.advance(1200 - 30 - 21);
    const acrossTheEnd = launch('c-3');
    clock.advance(40);
    store.setInstanceState(acrossTheEnd, 'terminated');
    clock.advance(600);
    store.setInstanceState(long, 'terminated');
    clock.advance(60);
    const instances = billedInstancesIn(store, catalog);
    const perSecond = (instances[0] as BilledInstance).costPerHour / 3600;
    // The short one's 39 s past its end; the one across the month's end, its 20 s past its end, in the next period.
    const extras = [39 + 20, 39, 20];
    for (const [i, [report, closed]] of (
      [
        [computeCostReport(store, catalog, clock.nowSeconds()), false],
        [computeClosedPeriodReport(store, catalog, T0, T0 + 1200), true],
        [computeClosedPeriodReport(store, catalog, T0 + 1200, clock.nowSeconds()), true],
      ] as const
    ).entries()) {
      const doc = buildReportDocument({ cluster: 'c', reason: 'test', report, instances, closed });
      expect(doc.minimumMinuteCost).toBeCloseTo((extras[i] as number) * perSecond, 12);
      expect(area(doc.costPerHourSeries) + (doc.minimumMinuteCost ?? 0)).toBeCloseTo(report.totalCost, 12);
    }
    // The short instance leaves the rate when it ends, not a minute after its launch.
    const series = costPerHourSeries(instances, T0, clock.nowSeconds());
    expect(series.slice(0, 3)).toEqual([
      { atSeconds: T0, costPerHour: 2 * 0.1785 },
      { atSeconds: T0 + 21, costPerHour: 0.1785 },
      { atSeconds: T0 + 1170, costPerHour: 2 * 0.1785 },
    ]);
  });

  it('ends the rate at what the fleet costs now when a short instance ended just before the report', () => {
    const short: BilledInstance = {
      id: 'inst-short',
      typeName: 'p3.2xlarge',
      costPerHour: 3.06,
      fromSeconds: T0 + 100,
      terminatedAtSeconds: T0 + 110,
    };
    const long: BilledInstance = { ...(instances[0] as BilledInstance), terminatedAtSeconds: T0 + 60 };
    const now = T0 + 125;
    const report = attributeCosts({
      instances: [long, short],
      placements: [],
      reservationPrice: () => 1,
      jobs: new Map(),
      sinceSeconds: T0,
      nowSeconds: now,
    });
    const doc = buildReportDocument({ cluster: 'c', reason: 'test', report, instances: [long, short] });
    expect(report.costPerHourNow).toBe(0);
    expect(doc.costPerHourSeries).toEqual([
      { atSeconds: T0, costPerHour: 0.1785 },
      { atSeconds: T0 + 60, costPerHour: 0 },
      { atSeconds: T0 + 100, costPerHour: 3.06 },
      { atSeconds: T0 + 110, costPerHour: 0 },
      { atSeconds: now, costPerHour: 0 },
    ]);
    // It ran 10 s and is billed 60: the 50 s past its end are in the total, and the page says so under the chart.
    expect(doc.minimumMinuteCost).toBeCloseTo((50 * 3.06) / 3600, 12);
    expect(report.totalCost).toBeCloseTo((60 * 0.1785 + 60 * 3.06) / 3600, 12);
    expect(area(doc.costPerHourSeries) + (doc.minimumMinuteCost ?? 0)).toBeCloseTo(report.totalCost, 12);
    const html = reportHtml(doc);
    expect(html).toContain('the fleet costs $0.00/hour now.');
    expect(html).toContain(
      'billed a whole minute (EC2&#39;s minimum): the rest of their minute, $0.0425 of the total, is not drawn here.',
    );
    // A two-minute period in minutes, and the axis labelled at its round ticks only: the period's odd end would
    // crowd the last of them.
    expect(html).toContain('minutes since the start of the period');
    const xs = xAxisLabels(html, 'cost-rate');
    expect(xs.map((l) => l.text)).toEqual(['0', '0.5', '1', '1.5', '2']);
    const gaps = xs.slice(1).map((l, i) => l.x - (xs[i] as { x: number }).x);
    for (const gap of gaps) expect(gap).toBeCloseTo(gaps[0] as number, 1);
  });

  it('colours each of ten teams apart and none like idle; past ten, the costliest nine and "other teams"', () => {
    const teamCount = 12;
    const fleet: BilledInstance[] = Array.from({ length: teamCount + 1 }, (_, k) => ({
      id: `inst-${k}`,
      typeName: 'c7i.xlarge',
      costPerHour: 0.1785,
      fromSeconds: T0,
      terminatedAtSeconds: T0 + 3600,
    }));
    // Team k's job runs (k + 1) minutes on its own instance, so team-12 costs most; the last instance stays idle.
    const placements = Array.from({ length: teamCount }, (_, k) => ({
      taskId: `job-${k + 1}.0`,
      jobId: `job-${k + 1}`,
      instanceId: `inst-${k}`,
      fromSeconds: T0,
      toSeconds: T0 + 60 * (k + 1),
      kind: 'work' as const,
    }));
    const jobs = new Map(
      placements.map((p, k) => [p.jobId, { id: p.jobId, name: `train-${k + 1}`, team: `team-${k + 1}` }]),
    );
    const colours = (teams: number) => {
      const report = attributeCosts({
        instances: fleet,
        placements: placements.slice(teamCount - teams),
        reservationPrice: () => 1,
        jobs,
        sinceSeconds: T0,
        nowSeconds: T0 + 3600,
      });
      const html = reportHtml(
        buildReportDocument({ cluster: 'c', reason: 'test', report, instances: fleet }),
      );
      const option = chartOption(html, 'cost-by-team') as {
        yAxis: { data: string[] };
        series: { data: { itemStyle: { color: string } }[] }[];
      };
      const bars = new Map(
        option.yAxis.data.map((label, i) => [label, option.series[0]?.data[i]?.itemStyle.color as string]),
      );
      return { html, bars };
    };
    const idleGrey = [0xb0, 0xb0, 0xb0];
    const nearGrey = (color: string): boolean => {
      const c = [1, 3, 5].map((i) => parseInt(color.slice(i, i + 2), 16));
      const spread = Math.max(...c) - Math.min(...c);
      return spread < 40 || Math.hypot(...c.map((v, i) => v - (idleGrey[i] as number))) < 40;
    };

    // Ten teams: ten colours, none grey; idle is the one grey bar.
    const ten = colours(10);
    const tenTeams = [...ten.bars].filter(([label]) => label.startsWith('team-'));
    expect(tenTeams).toHaveLength(10);
    expect(new Set(tenTeams.map(([, c]) => c)).size).toBe(10);
    for (const [team, color] of tenTeams) expect(nearGrey(color), `${team}: ${color}`).toBe(false);
    expect(nearGrey(ten.bars.get('idle (no task on the instance)') as string)).toBe(true);

    // Twelve: the nine costliest apart, the other three in one more colour, which the key names.
    const twelve = colours(12);
    const byCost = Array.from({ length: teamCount }, (_, k) => `team-${teamCount - k}`);
    const named = byCost.slice(0, 9).map((t) => twelve.bars.get(t) as string);
    const others = byCost.slice(9).map((t) => twelve.bars.get(t) as string);
    expect(new Set(named).size).toBe(9);
    expect(new Set(others).size).toBe(1);
    expect(named).not.toContain(others[0]);
    for (const color of [...named, ...others]) expect(nearGrey(color), color).toBe(false);
    const key = /Coloured by team: (.*)<\/figcaption>/.exec(twelve.html)?.[1] ?? '';
    const swatches = [...key.matchAll(/<span style="color:(#[0-9a-f]{6})">■<\/span> ([^&<]+)/g)].map((m) => [
      m[1],
      (m[2] as string).trim(),
    ]);
    expect(swatches).toEqual([
      ...byCost.slice(0, 9).map((t, i) => [named[i], t]),
      [others[0], 'the 3 other teams (past the 9 costliest)'],
    ]);
  });

  it('charts nothing for a spot instance EC2 reclaimed in its first hour, as the report bills it nothing', () => {
    const reclaimed: BilledInstance = {
      id: 'inst-1',
      typeName: 'c7i.xlarge',
      costPerHour: 0.36,
      fromSeconds: T0 + 1000,
      terminatedAtSeconds: T0 + 2200,
      reclaimedBySpot: true,
    };
    const report = attributeCosts({
      instances: [reclaimed],
      placements: [],
      reservationPrice: () => 0.36,
      jobs: new Map(),
      sinceSeconds: T0,
      nowSeconds: T0 + 10_000,
    });
    expect(report.totalCost).toBe(0);
    expect(costPerHourSeries([reclaimed], T0, T0 + 10_000).every((p) => p.costPerHour === 0)).toBe(true);
    // A closed period that ended while it ran bills it to the period's end, and charts it so.
    expect(costPerHourSeries([reclaimed], T0, T0 + 1600)).toEqual([
      { atSeconds: T0, costPerHour: 0 },
      { atSeconds: T0 + 1000, costPerHour: 0.36 },
      { atSeconds: T0 + 1600, costPerHour: 0.36 },
    ]);
  });

  it('writes CSV rows per total, team, job and instance, quoting where needed', () => {
    const csv = reportCsv(sampleDocument());
    const lines = csv.trimEnd().split('\n');
    expect(lines[0]).toBe('scope,id,name,team,typeName,cost,idleCost,migrationCost');
    // 1 h of $0.1785 + 1 h of $3.06.
    expect(lines[1]).toBe('total,bars,,,,3.238500,0,0');
    expect(lines).toContain('job,job-1,"cifar, ""quoted""",red,,0.178500,,0');
    expect(lines).toContain('instance,inst-2,,,p3.2xlarge,3.060000,0,');
    expect(lines).toHaveLength(1 + 1 + 2 + 2 + 2); // header, total, teams, jobs, instances
  });

  it('captions the by-job chart with its team colours only when there are teams', () => {
    const empty = attributeCosts({
      instances: [],
      placements: [],
      reservationPrice: () => 1,
      jobs: new Map(),
      sinceSeconds: T0,
      nowSeconds: T0 + 600,
    });
    const html = reportHtml(
      buildReportDocument({ cluster: 'bars', reason: 'test', report: empty, instances: [] }),
    );
    expect(html).toContain('<h2>By job</h2>');
    expect(html).not.toContain('Coloured by team');
    expect(reportHtml(sampleDocument())).toMatch(/Coloured by team: .*■<\/span> red/);
  });

  it('renders a self-contained HTML page with escaped names and inline SVG charts', () => {
    const html = reportHtml(sampleDocument('job-1 cancelled'));
    expect(html.startsWith('<!doctype html>')).toBe(true);
    expect(html).toContain('Costs of cluster bars');
    expect(html).toContain('cifar, &quot;quoted&quot;');
    expect(html).toContain('written because: job-1 cancelled');
    // $/hour over time, by team, by job: each a static SVG, live in the browser (the library inline, no URL).
    expect(
      html.match(/<div class="chart" id="(cost-rate|cost-by-team|cost-by-job)"[^>]*><svg /g),
    ).toHaveLength(3);
    const markup = html.replace(/(<script\b[^>]*>)[\s\S]*?(<\/script>)/g, '$1$2');
    expect(markup).not.toMatch(/https?:\/\/(?!www\.w3\.org)|\ssrc=|<link/);
    // 1 h of $0.1785 + 1 h of $3.06, all attributed to the two jobs.
    expect(html).toContain('$3.24 spent in this period: $3.24 (100.0%) by jobs');
    // Same input, same bytes.
    expect(reportHtml(sampleDocument('job-1 cancelled'))).toBe(html);
    expect(barChart('c', 't', [{ label: '<b>', value: 1 }]).option.yAxis).toMatchObject({ data: ['<b>'] });
  });

  it('writes JSON, CSV and HTML to the object store and reads them back', async () => {
    const store = await openObjectStore(join(scratch, 'objects'));
    const keys = await writeReportFiles(store, sampleDocument());
    const stamp = reportStamp(T0 + 5400);
    expect(keys).toEqual({
      json: `reports/costs-${stamp}.json`,
      csv: `reports/costs-${stamp}.csv`,
      html: `reports/costs-${stamp}.html`,
    });
    expect(stamp).toBe('2023-11-14T23-43-20.000Z');
    const back = await listReports(store);
    expect(back.map((r) => r.key)).toEqual([keys.json]);
    expect(back[0]?.document.totalCost).toBeCloseTo(3.2385, 10);
    expect(await listReports(store, T0 + 6000)).toEqual([]);
    expect(JSON.parse((await store.getBuffer(LATEST_REPORT_KEY)).toString('utf8')).cluster).toBe('bars');
  });

  it('rejects a malformed report with the key and the field', () => {
    expect(() => parseReportDocument('{"schemaVersion":1}', 'reports/x.json')).toThrow(ValidationError);
    try {
      parseReportDocument('{"schemaVersion":1,"kind":"fleetwise.cost-report"}', 'reports/x.json');
    } catch (e) {
      expect((e as ValidationError).source).toBe('reports/x.json');
      expect((e as ValidationError).problems.join('\n')).toContain('cluster');
    }
    for (const minimum of ['lots', -0.5]) {
      const withMinimum = {
        ...JSON.parse(JSON.stringify(sampleDocument())),
        minimumMinuteCost: minimum,
      } as object;
      expect(() => parseReportDocument(JSON.stringify(withMinimum), 'reports/z.json')).toThrow(
        /minimumMinuteCost/,
      );
    }
    expect(() => parseReportDocument('not json', 'reports/y.json')).toThrow(
      /reports\/y\.json: not valid JSON/,
    );
  });

  it('the controller keeps uploaded build contexts content-addressed in the object store', async () => {
    const objects = await openObjectStore(join(scratch, 'contexts'));
    const { controller } = rig({}, { objectStore: objects });
    const storeContext = controller.storeContext;
    if (storeContext === undefined) throw new Error('a controller with an object store keeps build contexts');
    const archive = Buffer.from('fake tar bytes');
    const sha256 = 'a'.repeat(64);
    const ref = await storeContext(Readable.from([archive]), {
      sha256,
      encoding: 'gzip',
      team: 'red',
    });
    expect(ref).toBe(`${objects.location}/contexts/${sha256}.tar.gz`);
    expect((await objects.getBuffer(`contexts/${sha256}.tar.gz`)).toString()).toBe('fake tar bytes');
    await expect(
      storeContext(Readable.from([archive]), { sha256: '../x', encoding: 'tar', team: undefined }),
    ).rejects.toThrow(/sha256/);
    expect(await controller.writeReport?.()).toMatch(/\/reports\/costs-.*\.json$/);
    // Without an object store there is nowhere to keep them, nor task logs or reports: the API answers 501.
    const bare = rig().controller;
    expect(bare.storeContext).toBeUndefined();
    expect(bare.jobLogs).toBeUndefined();
    expect(bare.writeReport).toBeUndefined();
  });

  it('keeps the newest reports only: after each write the older ones go, all three files of each', async () => {
    const objects = await openObjectStore(join(scratch, 'kept-objects'));
    const { controller, clock } = rig({ reportsKept: 3 }, { objectStore: objects });
    const written: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      clock.advance(60);
      written.push((await controller.writeReport?.()) as string);
    }
    const keys: string[] = [];
    for await (const info of objects.list('reports/')) keys.push(info.key);
    const kept = written.slice(2).flatMap((url) => {
      const base = url.replace(/^.*\/(reports\/costs-.*)\.json$/, '$1');
      return [`${base}.csv`, `${base}.html`, `${base}.json`];
    });
    expect(keys.sort()).toEqual([...kept, LATEST_REPORT_KEY].sort());
    expect((await listReports(objects)).map((r) => r.document.generatedAtSeconds)).toEqual(
      [2, 3, 4].map((k) => clock.nowSeconds() - (4 - k) * 60),
    );
    // Pruning again keeps them; a keep of one leaves the newest.
    expect(await pruneCostReports(objects, 3)).toBe(0);
    expect(await pruneCostReports(objects, 1)).toBe(2);
    expect((await listReports(objects)).map((r) => r.key)).toEqual([
      written[4]?.replace(/^.*\/(reports\/)/, '$1'),
    ]);
  });

  it('the controller writes a report when a job ends and every hour, from its loop', async () => {
    const objects = await openObjectStore(join(scratch, 'loop-objects'));
    const { controller, clock } = rig(
      { reportEverySeconds: 3600, roundSeconds: 300, pollSeconds: 60, minRoundGapSeconds: 0 },
      { objectStore: objects },
    );
    const job = controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await controller.start();
    await until(async () => (await listReports(objects)).length === 0 && clock.pendingSleeps > 0);
    clock.advance(1800);
    controller.cancel(job.id);
    await until(async () => (await listReports(objects)).length === 1);
    const afterCancel = (await listReports(objects))[0]?.document;
    expect(afterCancel?.reason).toBe(`${job.id} cancelled`);
    // 1800 s of a c7i.xlarge at $0.1785/h.
    expect(afterCancel?.totalCost).toBeCloseTo(0.1785 / 2, 6);
    await until(() => clock.pendingSleeps > 0);
    clock.advance(1800);
    // On a loaded machine the loop may still be in its pass when the clock jumps, and then sleeps past the hour
    // mark; nudge the clock a poll at a time while it sleeps until the hourly report is out.
    await until(async () => {
      if ((await listReports(objects)).some((r) => r.document.reason === 'hourly')) return true;
      if (clock.pendingSleeps > 0) clock.advance(60);
      return false;
    });
    await controller.stop();
  });
});

async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
