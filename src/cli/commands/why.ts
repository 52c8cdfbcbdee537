import type { Command } from 'commander';
import { addConnectionOptions, FleetwiseClient, type ConnectionOptions } from '../client.js';
import { formatTime, printJson } from '../table.js';

interface WhyOptions extends ConnectionOptions {
  readonly json?: boolean;
  readonly limit?: string;
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
      throw new Error(`--limit: expected a positive whole number, got ${options.limit}`);
    const why = await FleetwiseClient.fromOptions(options).why(id, limit);
    if (options.json === true) return printJson(why);
    process.stdout.write(`${why.jobId}: ${why.state}\n`);
    if (why.records.length === 0) {
      process.stdout.write('no scheduling decision mentions this job yet\n');
      return;
    }
    for (const r of why.records) {
      // The controller's summary usually carries the plan and reason already; add them only when it does not.
      const { chosen, reason } = r.decision;
      const plan = chosen === undefined || r.summary.includes(chosen) ? '' : ` [plan: ${chosen}]`;
      process.stdout.write(`round ${r.round} at ${formatTime(r.atSeconds)}: ${r.summary}${plan}\n`);
      if (reason !== undefined && !r.summary.includes(reason)) process.stdout.write(`  ${reason}\n`);
    }
  });
}
