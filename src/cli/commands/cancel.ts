import type { Command } from 'commander';
import {
  addConnectionOptions,
  FleetwiseClient,
  type ConnectionOptions,
  type JobSummaryResponse,
} from '../client.js';
import { printJson } from '../table.js';

interface CancelOptions extends ConnectionOptions {
  readonly json?: boolean;
}

export function registerCancel(program: Command): void {
  addConnectionOptions(
    program
      .command('cancel')
      .description('cancel jobs: their tasks stop and their instances are freed at the next round')
      .argument('<id...>', 'job ids, e.g. job-7')
      .option('--json', 'print the cancelled jobs as a JSON array'),
  ).action(async (ids: string[], options: CancelOptions) => {
    const client = FleetwiseClient.fromOptions(options);
    const cancelled: JobSummaryResponse[] = [];
    for (const id of ids) {
      const job = await client.cancelJob(id);
      cancelled.push(job);
      if (options.json !== true) process.stdout.write(`${job.id} (${job.name}): ${job.state}\n`);
    }
    if (options.json === true) printJson(cancelled);
  });
}
