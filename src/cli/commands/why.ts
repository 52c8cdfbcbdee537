import type { Command } from 'commander';
import { ValidationError } from '../../core/validation.js';
import { z } from 'zod';
import { FleetwiseClient } from '../client.js';
import { addConnectionOptions, type ConnectionOptions } from '../client-connection.js';
import { requireJobIds } from '../job-id-arguments.js';
import type { WhyResponse } from '../api-responses.js';
import { formatTable, formatTime, printJson } from '../table.js';
import { formatDuration } from '../work-estimate.js';
import { terminalSafeDeep } from '../terminal-text.js';
import { MAX_WHY_DECISIONS } from '../../protocol/why-limit.js';
import { queueFieldsOf, queuePlaceText } from './job.js';

interface WhyOptions extends ConnectionOptions {
  readonly json?: boolean;
  readonly limit?: string;
}

/** The parts of a decision record `why` shows numbers from (the client keeps the rest of the record as sent). */
const candidateSchema = z.object({
  name: z.string(),
  costPerHour: z.number(),
  savingPerSecond: z.number(),
  migrationCost: z.number(),
  movedJobs: z.array(z.string()),
  rejectedBecause: z.string().optional(),
  leftWaiting: z.number().int().nonnegative().optional(),
  timeCostPerHour: z.number().optional(),
  migrationTimeCost: z.number().optional(),
});
const decisionSchema = z.object({
  scheduler: z.string().optional(),
  chosen: z.string().optional(),
  reason: z.string().optional(),
  horizonSeconds: z.number().optional(),
  paybackMargin: z.number().optional(),
  prices: z.enum(['standalone', 'packed']).optional(),
  packingEfficiency: z.number().optional(),
  valueOfTimePerJobHour: z.number().optional(),
  candidates: z.array(candidateSchema).default([]),
});
/** How the job's capacity is bought (absent from a controller of an older release: no line). */
const marketSchema = z.object({
  spot: z.string(),
  instances: z.array(
    z.object({
      id: z.string(),
      typeName: z.string(),
      market: z.enum(['spot', 'on-demand']),
      onDemandBecause: z.string().optional(),
    }),
  ),
});
type Candidate = z.output<typeof candidateSchema>;
type Decision = z.output<typeof decisionSchema>;

/** Dollars to the cent, never `$-0.00`: an amount that rounds to zero is zero. */
export function formatMoney(amount: number): string {
  const cents = Math.round(amount * 100);
  if (cents === 0) return '$0.00';
  return `${cents < 0 ? '-' : ''}$${(Math.abs(cents) / 100).toFixed(2)}`;
}

/**
 * Eva's payback margin k (a move must pay back k times its migration cost), from the decision record. Rounds recorded
 * before the record carried it have it only in Eva's reason text (`migration $0.12 ×8`); without either, the rule is
 * Eva's own, k = 1.
 */
export function paybackMarginOf(decision: {
  readonly paybackMargin?: number | undefined;
  readonly reason?: string | undefined;
}): number {
  if (decision.paybackMargin !== undefined) return decision.paybackMargin;
  const match = /×(\d+(?:\.\d+)?)/.exec(decision.reason ?? '');
  return match === null ? 1 : Number(match[1]);
}

interface Row {
  readonly rounds: number[];
  readonly atSeconds: number;
  readonly summary: string;
  readonly decision: Decision;
}

/** Consecutive rounds that say the same for the job (a job waiting for an hour) are one entry. */
function groupRounds(records: WhyResponse['records']): Row[] {
  const rows: Row[] = [];
  for (const r of records) {
    const decision = decisionSchema.safeParse(r.decision);
    const d: Decision = decision.success ? decision.data : { candidates: [] };
    const last = rows.at(-1);
    if (last !== undefined && last.summary === r.summary && last.decision.chosen === d.chosen)
      last.rounds.push(r.round);
    else rows.push({ rounds: [r.round], atSeconds: r.atSeconds, summary: r.summary, decision: d });
  }
  return rows;
}

/** "round 4 at …", or "rounds 2–9 (8), last at …" (records are newest first). */
function roundsLabel(row: Row): string {
  const at = formatTime(row.atSeconds);
  const { rounds } = row;
  if (rounds.length === 1) return `round ${rounds[0]} at ${at}`;
  return `rounds ${rounds.at(-1)}–${rounds[0]} (${rounds.length}), last at ${at}`;
}

/** The plan's numbers explain a round that moved or placed the job; a waiting job's line says all there is. */
function showsNumbers(row: Row): boolean {
  return /^(moved|placed)|; (moved|placed)/.test(row.summary);
}

/**
 * The value of the completion time a plan costs over T, as Eva's rule weighs it (eva-choice.ts `weighed`): its
 * slowdown for T, plus k times the delays its moves and new instances add. Undefined when time was not weighed.
 */
function timeCost(c: Candidate, horizon: number, margin: number): number | undefined {
  if (c.timeCostPerHour === undefined && c.migrationTimeCost === undefined) return undefined;
  return ((c.timeCostPerHour ?? 0) * horizon) / 3600 + margin * (c.migrationTimeCost ?? 0);
}

/** The figure the decision rule compares: saving × T − k × migration − the time the plan costs. */
function net(c: Candidate, horizon: number, margin: number): number {
  return c.savingPerSecond * horizon - margin * c.migrationCost - (timeCost(c, horizon, margin) ?? 0);
}

/** Whether any candidate of the decision had the value of time weighed. */
function timeWeighed(d: Decision): boolean {
  return d.candidates.some((c) => c.timeCostPerHour !== undefined || c.migrationTimeCost !== undefined);
}

/** "plan full of 4: saving $0.42/h, migration $0.03, net $0.31 over T = 1h12m", or undefined without numbers. */
function planLine(d: Decision, margin: number): string | undefined {
  const chosen = d.candidates.find((c) => c.name === d.chosen);
  if (chosen === undefined) return undefined;
  const horizon = d.horizonSeconds;
  const of = d.candidates.length > 1 ? ` (of ${d.candidates.length} candidates)` : '';
  const time = horizon === undefined ? undefined : timeCost(chosen, horizon, margin);
  const numbers = [
    `saving ${formatMoney(chosen.savingPerSecond * 3600)}/h`,
    `migration ${formatMoney(chosen.migrationCost)}`,
    ...(time === undefined ? [] : [`time ${formatMoney(time)}`]),
    ...(horizon === undefined
      ? []
      : [`net ${formatMoney(net(chosen, horizon, margin))} over T = ${formatDuration(horizon)}`]),
  ];
  return `plan ${chosen.name}${of}: ${numbers.join(', ')}`;
}

/**
 * The candidates as one table; candidates with the same numbers (often all of them: nothing to repack) share a row,
 * so four near-identical plans read as one.
 */
function candidateTable(d: Decision, margin: number): string {
  const horizon = d.horizonSeconds;
  const timed = timeWeighed(d);
  const groups = new Map<string, { names: string[]; chosen: boolean; cells: string[] }>();
  for (const c of d.candidates) {
    const time = horizon === undefined ? undefined : timeCost(c, horizon, margin);
    const cells = [
      formatMoney(c.savingPerSecond * 3600),
      formatMoney(c.migrationCost),
      ...(timed ? [time === undefined ? '-' : formatMoney(time)] : []),
      horizon === undefined ? '-' : formatMoney(net(c, horizon, margin)),
      c.rejectedBecause !== undefined
        ? `breaks ${c.rejectedBecause}`
        : c.leftWaiting === undefined
          ? ''
          : `cut to the caps: ${c.leftWaiting} new job(s) wait`,
    ];
    const key = cells.join('|');
    const group = groups.get(key) ?? { names: [], chosen: false, cells };
    group.names.push(c.name);
    group.chosen ||= c.name === d.chosen;
    groups.set(key, group);
  }
  const rows = [...groups.values()].map((g) => [g.chosen ? '→' : '', g.names.join(', '), ...g.cells]);
  const header = ['', 'candidates', 'saving/h', 'migration', ...(timed ? ['time'] : []), 'net', ''];
  return formatTable(header, rows)
    .split('\n')
    .map((l) => (l === '' ? l : `    ${l}`))
    .join('\n');
}

/** What saving/h is figured against: the task prices the rounds recorded (Eva's reservationPrice). */
function savingLine(rows: readonly Row[]): string {
  const prices = new Set(rows.map((r) => r.decision.prices));
  const efficiencies = [
    ...new Set(
      rows.flatMap((r) => (r.decision.packingEfficiency === undefined ? [] : [r.decision.packingEfficiency])),
    ),
  ];
  const theta = efficiencies.length === 1 ? ` = ${efficiencies[0]}` : '';
  // TNRP: each task's price times its expected speed where the plan puts it.
  const work = 'what the jobs’ work (at their expected speeds) would cost per hour';
  const minus = ', minus the plan’s cost';
  if (prices.size === 1 && prices.has('standalone'))
    return `saving/h: ${work} with each job on its own cheapest instance${minus}`;
  if (prices.size === 1 && prices.has('packed'))
    return (
      `saving/h: ${work} at packed prices (each task its dominant share of a packed ` +
      `instance’s price ÷ packing efficiency θ${theta}, at most its own cheapest instance’s; tasks of multi-task jobs ` +
      `at the latter)${minus}; so a job alone on an instance it does not fill shows a loss`
    );
  return (
    `saving/h: ${work} at the scheduler’s task prices (standalone: each on its own ` +
    `cheapest instance; packed: its share of a packed instance; ${prices.size === 1 ? 'these rounds did not record which' : 'they changed between these rounds'})${minus}`
  );
}

/** What the numbers mean, once at the end, with this output's own T and margin. */
function legend(rows: readonly Row[], margin: number): string {
  const withNumbers = rows.filter((r) => showsNumbers(r) && r.decision.candidates.length > 0);
  if (withNumbers.length === 0) return '';
  const lines = [
    '',
    savingLine(withNumbers),
    'migration: the cost of carrying the plan out (instance time launching, checkpointing and restoring moved jobs)',
  ];
  if (withNumbers.some((r) => r.decision.horizonSeconds !== undefined)) {
    const timed = withNumbers.some((r) => timeWeighed(r.decision));
    const k = margin === 1 ? '' : `${margin} × `;
    lines.push(
      'T: the horizon, how long the scheduler expects a configuration to last (from how often jobs arrive and end)',
    );
    if (timed)
      lines.push(
        `time: what the plan costs in jobs’ completion time, valued per job-hour: its co-location slowdown over T, ` +
          `plus ${k}the delays its moves and new instances add`,
      );
    const formula = `net: saving × T − ${k}migration${timed ? ' − time' : ''}`;
    lines.push(
      margin === 1
        ? `${formula}; a plan that moves jobs is chosen only when its net beats the others`
        : `${formula}; payback margin ×${margin}: a move must pay back ${margin} times ` +
            'its migration cost within T before it is chosen',
    );
  }
  return `${lines.join('\n')}\n`;
}

/**
 * "market: inst-2 (c7i.large) on demand: <why>; inst-3 (c7i.large) on spot": the market of each instance the job's
 * tasks are on and, for a job that may use spot on an on-demand one, why where the controller's records say;
 * undefined when it is on none (or the controller does not say).
 */
export function marketLine(why: WhyResponse): string | undefined {
  const parsed = marketSchema.safeParse((why as Record<string, unknown>)['market']);
  if (!parsed.success || parsed.data.instances.length === 0) return undefined;
  const m = parsed.data;
  const parts = m.instances.map(
    (i) =>
      `${i.id} (${i.typeName}) ${i.market === 'spot' ? 'on spot' : 'on demand'}` +
      `${i.onDemandBecause === undefined ? '' : `: ${i.onDemandBecause}`}`,
  );
  return `market: ${parts.join('; ')}${m.spot === 'never' ? ' (the job never runs on spot)' : ''}`;
}

/** A round with nothing else to plan records no decision: its waits are told as this round's. */
const LATEST_ROUND = 'the latest round (nothing else to plan, so not recorded)';

export function renderWhy(why: WhyResponse): string {
  const market = marketLine(why);
  const out = [`${why.jobId}: ${why.state}\n${market === undefined ? '' : `${market}\n`}`];
  // The latest round's wait, when that round had nothing else to plan and so recorded no decision to say it.
  const unrecorded = why.latestWait?.recorded === false ? why.latestWait : undefined;
  if (why.records.length === 0) {
    // No round recorded a decision (one over a cap alone, on an idle cluster, has nothing planned): the queue's word.
    const q = queueFieldsOf(why).queue;
    if (q !== undefined && q !== null && q.status === 'waiting')
      return `${out[0]}no recorded round decided about it yet; the queue keeps it waiting: ${queuePlaceText(q)}\n`;
    // Held for capacity since its submission, a job has no place in the queue: the latest round says why it waits.
    if (unrecorded !== undefined)
      return `${out[0]}no recorded round decided about it yet; ${LATEST_ROUND}: kept waiting: ${unrecorded.summary}\n`;
    return `${out[0]}no scheduling decision mentions this job yet\n`;
  }
  // Newer than every record: what the job waits for now comes first.
  if (unrecorded !== undefined) out.push(`${LATEST_ROUND}: kept waiting: ${unrecorded.summary}\n`);
  const rows = groupRounds(why.records);
  const margin = Math.max(1, ...rows.map((r) => paybackMarginOf(r.decision)));
  for (const row of rows) {
    out.push(`${roundsLabel(row)}: ${row.summary}\n`);
    if (!showsNumbers(row)) continue;
    const plan = planLine(row.decision, margin);
    if (plan !== undefined) out.push(`  ${plan}\n`);
    else if (row.decision.reason !== undefined)
      out.push(
        `  ${row.decision.chosen === undefined ? '' : `plan ${row.decision.chosen}: `}${row.decision.reason}\n`,
      );
    if (row.decision.candidates.length > 1) out.push(candidateTable(row.decision, margin));
  }
  out.push(legend(rows, margin));
  return out.join('');
}

export function registerWhy(program: Command): void {
  addConnectionOptions(
    program
      .command('why')
      .description('explain a job: the scheduling decisions that kept it waiting, moved it or placed it')
      .argument('<id>', 'job id, e.g. job-7')
      .option('--limit <n>', `at most this many decisions, newest first (at most ${MAX_WHY_DECISIONS})`, '10')
      .option('--json', 'print the decision records as JSON'),
  ).action(async (id: string, options: WhyOptions) => {
    // Refused here as bad input, as cancel and wait refuse it, rather than as the controller's 404 (or no answer).
    requireJobIds([id], 'arguments');
    const limit = Number(options.limit ?? '10');
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_WHY_DECISIONS)
      throw new ValidationError('--limit', [
        `expected a whole number from 1 to ${MAX_WHY_DECISIONS}, got ${options.limit}`,
      ]);
    const why = await FleetwiseClient.fromOptions(options).why(id, limit);
    if (options.json === true) return printJson(why);
    process.stdout.write(renderWhy(terminalSafeDeep(why)));
  });
}
