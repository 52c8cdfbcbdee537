import type { Command } from 'commander';
import { addConnectionOptions, FleetwiseClient, type ConnectionOptions } from '../client.js';

export function registerLogs(program: Command): void {
  addConnectionOptions(
    program
      .command('logs')
      .description("print a job's task logs (collected by the worker agent)")
      .argument('<id>', 'job id, e.g. job-7'),
  ).action(async (id: string, options: ConnectionOptions) => {
    const text = await FleetwiseClient.fromOptions(options).logs(id);
    process.stdout.write(text.endsWith('\n') || text === '' ? text : `${text}\n`);
  });
}
