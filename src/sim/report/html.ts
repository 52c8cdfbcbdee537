import type { RunResult } from '../../world/run-result.js';
import { reportCharts } from './charts.js';
import { escapeXml } from '../../report/escape.js';
import { chartHtml } from '../../report/chart.js';
import { seriesStyle } from '../../report/palette.js';
import { BASE_STYLE, dataTable, htmlPage } from './page.js';
import {
  BASELINE,
  baselineLabel,
  money as twoDecimals,
  one,
  SCHEDULER_COLUMN,
  summaryGroups,
  three,
} from './format.js';
import { heldToCaps, SPOT_REFUNDS, type ReportBounds, type ReportSettings } from './json.js';

const STYLE = `${BASE_STYLE}
  tr.cheapest td { font-weight: 600; }
  p.bounds { color: #444; }
`;

/** The scheduler the report is about when it ran; otherwise the lead speaks of the cheapest run. */
const FOCUS = 'eva';

const dollars = (x: number): string => `$${twoDecimals(x)}`;

/** "$X (Y%) above" a bound, or "below" it: never a negative distance. */
function distanceTo(cost: number, bound: number): string {
  const gap = cost - bound;
  const share = bound > 0 ? ` (${one((100 * Math.abs(gap)) / bound)}%)` : '';
  return `${dollars(Math.abs(gap))}${share} ${gap >= 0 ? 'above' : 'below'}`;
}

/** "$X (Y%) less than no-packing" (or more), the baseline named as `label` (baselineLabel). */
function versusBaseline(cost: number, baseline: number, label: string): string {
  const saving = baseline - cost;
  const share = baseline > 0 ? ` (${one((100 * Math.abs(saving)) / baseline)}%)` : '';
  return `${dollars(Math.abs(saving))}${share} ${saving >= 0 ? 'less' : 'more'} than ${label}`;
}

/**
 * The report's first lines: what the focus run (eva, else the cheapest) saved against no-packing in dollars, at what
 * cost in completion time, where its money went, how far it is from the trace's lower bounds, and which run was
 * cheapest if another. Held to caps or quotas (`capped`), jobs wait: the bound without delays bounds no such run (a
 * run may cost less), so it is measured against the work bound alone, as the cost chart draws it. At spot prices the
 * bounds price instance time before AWS's first-hour refunds (json.ts `SPOT_REFUNDS`), which can take a bill below
 * them: the distance is then said to be below, and why.
 */
function leadParagraph(
  results: readonly RunResult[],
  bounds: ReportBounds | undefined,
  capped: boolean,
): string {
  if (results.length === 0) return '<p class="lead">No runs.</p>';
  const cheapest = results.reduce((a, b) => (b.summary.totalCost < a.summary.totalCost ? b : a));
  const baseline = results.find((r) => r.summary.scheduler === BASELINE);
  const focus = results.find((r) => r.summary.scheduler === FOCUS) ?? cheapest;
  const name = (r: RunResult): string =>
    `<strong style="color:${seriesStyle(r.summary.scheduler).color}">${escapeXml(r.summary.scheduler)}</strong>`;
  const parts: string[] = [];
  const label = baselineLabel(results);
  const cost = focus.summary.totalCost;
  if (baseline !== undefined && baseline !== focus) {
    const jct = focus.summary.meanJctHours;
    const baseJct = baseline.summary.meanJctHours;
    const jctChange =
      baseJct > 0 ? ` (${jct >= baseJct ? '+' : '−'}${one((100 * Math.abs(jct - baseJct)) / baseJct)}%)` : '';
    parts.push(
      `${name(focus)}: <strong>${escapeXml(versusBaseline(cost, baseline.summary.totalCost, label))}</strong> ` +
        `(${escapeXml(dollars(cost))} against ${escapeXml(dollars(baseline.summary.totalCost))}); ` +
        `mean job completion time ${escapeXml(three(jct))} h against ${escapeXml(three(baseJct))} h${escapeXml(jctChange)}.`,
    );
  } else
    parts.push(
      `${name(focus)} cost ${escapeXml(dollars(cost))}${baseline === undefined ? ` (${BASELINE} did not run)` : ''}.`,
    );
  const ledger = ledgerSentence(focus, baseline);
  if (ledger !== undefined) parts.push(ledger);
  if (bounds !== undefined) {
    const from = (bound: number): string => escapeXml(distanceTo(cost, bound));
    // At spot prices the bounds count every instance-second; AWS's first-hour refunds can take a bill below them.
    const floor =
      bounds.atSpotPrices === true
        ? `below which a bill goes only by refunds no bound counts (${SPOT_REFUNDS})`
        : 'below which no schedule can go';
    parts.push(
      capped
        ? `That is ${from(bounds.workBound)} the work bound (${escapeXml(dollars(bounds.workBound))}), ` +
            `${floor}; under caps or quotas jobs wait, so the lower bound without delays does not bound it.`
        : `That is ${from(bounds.timedBound)} the lower bound of ${escapeXml(dollars(bounds.timedBound))} ` +
            `for this trace without delays, and ${from(bounds.workBound)} the work bound ` +
            `(${escapeXml(dollars(bounds.workBound))}), ${floor}.`,
    );
  }
  const spot = spotSentence(focus, results);
  if (spot !== undefined) parts.push(spot);
  if (cheapest !== focus) {
    const cheapestCost = cheapest.summary.totalCost;
    parts.push(
      `The cheapest run was ${name(cheapest)}: ${escapeXml(
        baseline === undefined
          ? dollars(cheapestCost)
          : `${dollars(cheapestCost)}, ${versusBaseline(cheapestCost, baseline.summary.totalCost, label)}`,
      )}.`,
    );
  }
  return `<p class="lead" id="lead">${parts.join(' ')}</p>`;
}

/**
 * `89.6% on work, 8.6% on co-location slowdown and 1.0% on idle room`: a run's three main parts, of its bill, and its
 * traffic across zones when it reports the network (the bill is then the total cost, traffic included).
 */
function ledgerParts(r: RunResult): string | undefined {
  const b = r.costBreakdown;
  const traffic = r.network?.crossZoneCost;
  const bill = Object.values(b ?? {}).reduce((a, x) => a + x, 0) + (traffic ?? 0);
  if (b === undefined || bill <= 0) return undefined;
  const share = (x: number): string => `${one((100 * x) / bill)}%`;
  const parts = [
    `${share(b.working)} on work`,
    `${share(b.slowdown)} on co-location slowdown`,
    `${share(b.idle)} on idle room`,
    ...(traffic === undefined ? [] : [`${share(traffic)} on traffic across zones`]),
  ];
  return `${parts.slice(0, -1).join(', ')} and ${parts.at(-1) ?? ''}`;
}

/** Where the focus run's money went (cost-ledger.ts), and no-packing's for contrast. */
function ledgerSentence(focus: RunResult, baseline: RunResult | undefined): string | undefined {
  const own = ledgerParts(focus);
  if (own === undefined) return undefined;
  const base = baseline === undefined || baseline === focus ? undefined : ledgerParts(baseline);
  return escapeXml(
    `Of its bill, ${focus.summary.scheduler} spent ${own}${base === undefined ? '' : ` (${BASELINE}: ${base})`}.`,
  );
}

/** The spot baselines' names end so (karpenter-spot, skypilot-spot): the runs a spot report is read against. */
const SPOT_BASELINE_SUFFIX = '-spot';

/**
 * With spot open, what the focus run did with it (its share of instance-hours on spot, its instances EC2 took back and
 * the work interruptions cost) and how it stands against the spot baselines that ran, in cost and mean JCT. A runtime
 * that evicts its jobs at the notice (karpenter-spot) loses their work then, and may end the emptied instance itself
 * before EC2 takes it: work lost with no instance reclaimed.
 */
function spotSentence(focus: RunResult, results: readonly RunResult[]): string | undefined {
  const spot = focus.spot;
  if (spot === undefined) return undefined;
  const name = escapeXml(focus.summary.scheduler);
  const n = spot.interruptions;
  const lost = `${three(spot.lostWorkHours)} job-hours of work`;
  const reclaims =
    n > 0
      ? `${n} of its instances ${n === 1 ? 'was' : 'were'} reclaimed and interruptions lost ${lost}`
      : spot.lostWorkHours > 0
        ? `none was reclaimed, but evicting jobs at interruption notices lost ${lost}`
        : 'none was reclaimed';
  const own = `${name} bought ${one(100 * spot.spotShare)}% of its instance-hours on spot; ${reclaims}.`;
  const baselines = results.filter((r) => r !== focus && r.summary.scheduler.endsWith(SPOT_BASELINE_SUFFIX));
  if (baselines.length === 0) return own;
  const against = baselines.map((r, i) => {
    const cost = r.summary.totalCost;
    const gap = cost > 0 ? `${one((100 * Math.abs(cost - focus.summary.totalCost)) / cost)}% ` : '';
    const jct = `${i === 0 ? 'at a mean JCT of ' : 'at '}${three(r.summary.meanJctHours)} h`;
    return (
      `${gap}${focus.summary.totalCost <= cost ? 'less' : 'more'} than ${escapeXml(r.summary.scheduler)} ` +
      `(${escapeXml(dollars(cost))} ${jct})`
    );
  });
  return `${own} Against the spot baselines, ${name} costs ${against.join(' and ')}.`;
}

/** The trace's lower bounds, in $ and relative to No-Packing's simulated cost when it ran. */
function boundsParagraph(results: readonly RunResult[], bounds: ReportBounds): string {
  const noPacking = results.find((r) => r.summary.scheduler === BASELINE)?.summary.totalCost;
  const money = (x: number) =>
    dollars(x) +
    (noPacking === undefined || !(noPacking > 0)
      ? ''
      : ` (${three(x / noPacking)} of ${baselineLabel(results)})`);
  const spot = bounds.atSpotPrices === true;
  return (
    `<p id="bounds" class="bounds">Lower bounds for this trace (<code>fleetwise bench bound${spot ? ' --spot on' : ''}</code>): ` +
    `no schedule${spot ? "'s instances" : ''} can cost less than ${escapeXml(money(bounds.workBound))}, the work ` +
    `bound (a fluid fleet for the trace's task-hours${spot ? ", each type at its cheapest spot pool's price where the job allows spot" : ''}); ` +
    `one where no job waits or slows down costs at least ${escapeXml(money(bounds.timedBound))}.` +
    (spot
      ? ` Both are before refunds: ${SPOT_REFUNDS}, so a run with such reclaims may be billed less than the bounds.`
      : '') +
    '</p>'
  );
}

/** What the summary's normalised costs are relative to. */
function normalizedCostNote(results: readonly RunResult[]): string {
  const label = baselineLabel(results);
  return label === BASELINE
    ? `Norm. cost is relative to ${BASELINE} when it ran.`
    : `The “÷ ${label}” column is each run's cost as a share of no-packing's, which bought no spot: most of a ` +
        "spot run's saving against it is the spot discount, not packing.";
}

/** The summary's tables (format.ts summaryGroups), each keyed by the scheduler with its colour. */
function summaryTables(results: readonly RunResult[]): string {
  const cheapest = Math.min(...results.map((r) => r.summary.totalCost));
  return summaryGroups(results)
    .map((group) => {
      const columns = [SCHEDULER_COLUMN, ...group.columns];
      const table = dataTable(
        `summary-${group.id}`,
        columns,
        results,
        (r) => (r.summary.totalCost === cheapest ? ' class="cheapest"' : ''),
        // The scheduler's colour next to its name: the key to every chart below.
        (c, r) =>
          c === SCHEDULER_COLUMN
            ? `<span class="swatch" style="background:${seriesStyle(r.summary.scheduler).color}"></span>${escapeXml(c.cell(r))}`
            : escapeXml(c.cell(r)),
      );
      return `<h3>${escapeXml(group.title)}</h3>${table}`;
    })
    .join('\n');
}

/**
 * The self-contained report.html: the lead (saving and bounds), the summary table, the five charts, then the
 * settings. Charts are ECharts SVGs, live when scripts run (the library is inline), so it opens offline and can be
 * attached to an issue as is.
 */
export function reportHtml(
  results: readonly RunResult[],
  settings: ReportSettings,
  bounds?: ReportBounds,
): string {
  const capped = heldToCaps(settings);
  const figures = reportCharts(results, bounds, { capped }).map(
    ({ chart, caption }) =>
      `<figure><h3>${escapeXml(chart.title)}</h3>${chartHtml(chart)}<figcaption>${escapeXml(caption)}</figcaption></figure>`,
  );
  return htmlPage(
    {
      title: 'fleetwise simulation report',
      heading: 'fleetwise simulation report',
      style: STYLE,
      bundle: 'common',
    },
    settings,
    [
      leadParagraph(results, bounds, capped),
      `<section id="summary"><h2>Summary</h2>${summaryTables(results)}` +
        `<p>${escapeXml(normalizedCostNote(results))} Utilization is time-weighted over the run. ` +
        'Bold: the cheapest run. Hover a column header for its meaning.</p>' +
        (bounds === undefined ? '' : boundsParagraph(results, bounds)) +
        '</section>',
      `<section id="charts"><h2>Charts</h2>\n${figures.join('\n')}\n</section>`,
    ],
  );
}
