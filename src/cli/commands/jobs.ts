import type { Command } from 'commander';
import { addConnectionOptions, FleetwiseClient, type ConnectionOptions } from '../client.js';
import { formatProgress, formatTable, formatTime, printJson } from '../table.js';
import { formatEta, formatQueue, queueFieldsOf } from './job.js';

interface JobsOptions extends ConnectionOptions {
  readonly json?: boolean;
  readonly state?: string;
  readonly team?: string;
}

export function registerJobs(program: Command): void {
  addConnectionOptions(
    program
      .command('jobs')
      .description("list jobs (a team token lists its own team's)")
      .option('--state <states>', 'only these states, comma-separated (queued,starting,running,migrating,…)')
      .option('--team <team>', 'only this team (admin token)')
      .option('--json', 'print a JSON array of jobs (id, name, team, state, progress, queue, eta, …)'),
  ).action(async (options: JobsOptions) => {
    const client = FleetwiseClient.fromOptions(options);
    const jobs = await client.listJobs({
      ...(options.state === undefined ? {} : { states: options.state.split(',').map((s) => s.trim()) }),
      ...(options.team === undefined ? {} : { team: options.team }),
    });
    if (options.json === true) return printJson(jobs);
    if (jobs.length === 0) return void process.stdout.write('no jobs\n');
    process.stdout.write(
      formatTable(
        ['ID', 'NAME', 'TEAM', 'STATE', 'PROGRESS', 'MIGRATIONS', 'SUBMITTED', 'QUEUE', 'ETA'],
        jobs.map((j) => {
          const fields = queueFieldsOf(j);
          return [
            j.id,
            j.name,
            j.team,
            j.state,
            formatProgress(j.progress),
            j.migrations,
            formatTime(j.submittedAtSeconds),
            formatQueue(fields),
            formatEta(fields),
          ];
        }),
      ),
    );
  });
}
