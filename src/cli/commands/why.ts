import type { Command } from 'commander';
import { ValidationError } from '../../core/validation.js';
import { z } from 'zod';
import { addConnectionOptions, FleetwiseClient, type ConnectionOptions } from '../client.js';
import type { WhyResponse } from '../api-responses.js';
import { formatTable, formatTime, printJson } from '../table.js';
import { formatDuration } from '../work-estimate.js';

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
});
const decisionSchema = z.object({
  scheduler: z.string().optional(),
  chosen: z.string().optional(),
  reason: z.string().optional(),
  horizonSeconds: z.number().optional(),
  paybackMargin: z.number().optional(),
  candidates: z.array(candidateSchema).default([]),
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

function net(c: Candidate, horizon: number, margin: number): number {
  return c.savingPerSecond * horizon - margin * c.migrationCost;
}

/** "plan full of 4: saving $0.42/h, migration $0.03, net $0.31 over T = 1h12m", or undefined without numbers. */
function planLine(d: Decision, margin: number): string | undefined {
  const chosen = d.candidates.find((c) => c.name === d.chosen);
  if (chosen === undefined) return undefined;
  const horizon = d.horizonSeconds;
  const of = d.candidates.length > 1 ? ` (of ${d.candidates.length} candidates)` : '';
  const numbers = [
    `saving ${formatMoney(chosen.savingPerSecond * 3600)}/h`,
    `migration ${formatMoney(chosen.migrationCost)}`,
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
  const groups = new Map<string, { names: string[]; chosen: boolean; cells: string[] }>();
  for (const c of d.candidates) {
    const cells = [
      formatMoney(c.savingPerSecond * 3600),
      formatMoney(c.migrationCost),
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
  return formatTable(['', 'candidates', 'saving/h', 'migration', 'net', ''], rows)
    .split('\n')
    .map((l) => (l === '' ? l : `    ${l}`))
    .join('\n');
}

/** What the numbers mean, once at the end, with this output's own T and margin. */
function legend(rows: readonly Row[], margin: number): string {
  const withNumbers = rows.filter((r) => showsNumbers(r) && r.decision.candidates.length > 0);
  if (withNumbers.length === 0) return '';
  const lines = [
    '',
    'saving/h: what running the jobs each on its own cheapest instance would cost per hour, minus the plan’s cost',
    'migration: the cost of carrying the plan out (instance time launching, checkpointing and restoring moved jobs)',
  ];
  if (withNumbers.some((r) => r.decision.horizonSeconds !== undefined)) {
    lines.push(
      'T: the horizon, how long the scheduler expects a configuration to last (from how often jobs arrive and end)',
    );
    lines.push(
      margin === 1
        ? 'net: saving × T − migration; a plan that moves jobs is chosen only when its net beats the others'
        : `net: saving × T − ${margin} × migration; payback margin ×${margin}: a move must pay back ${margin} times ` +
            'its migration cost within T before it is chosen',
    );
  }
  return `${lines.join('\n')}\n`;
}

export function renderWhy(why: WhyResponse): string {
  const out = [`${why.jobId}: ${why.state}\n`];
  if (why.records.length === 0) return `${out[0]}no scheduling decision mentions this job yet\n`;
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
      .option('--limit <n>', 'at most this many decisions, newest first', '10')
      .option('--json', 'print the decision records as JSON'),
  ).action(async (id: string, options: WhyOptions) => {
    const limit = Number(options.limit ?? '10');
    if (!Number.isInteger(limit) || limit < 1)
      throw new ValidationError('--limit', [`expected a positive whole number, got ${options.limit}`]);
    const why = await FleetwiseClient.fromOptions(options).why(id, limit);
    if (options.json === true) return printJson(why);
    process.stdout.write(renderWhy(why));
  });
}
