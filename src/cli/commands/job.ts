import type { Command } from 'commander';
import { addConnectionOptions, FleetwiseClient, type ConnectionOptions } from '../client.js';
import { formatProgress, formatTable, formatTime, printJson } from '../table.js';

interface JobOptions extends ConnectionOptions {
  readonly json?: boolean;
}

export function registerJob(program: Command): void {
  addConnectionOptions(
    program
      .command('job')
      .description('show one job: state, progress, migrations, instances and tasks')
      .argument('<id>', 'job id, e.g. job-7')
      .option('--json', 'print the job document as JSON'),
  ).action(async (id: string, options: JobOptions) => {
    const job = await FleetwiseClient.fromOptions(options).getJob(id);
    if (options.json === true) return printJson(job);
    const progress =
      job.progress.total === null
        ? `${job.progress.completed} iterations`
        : `${job.progress.completed}/${job.progress.total} iterations (${formatProgress(job.progress)})`;
    const lines = [
      `job        ${job.id} (${job.name})`,
      `team       ${job.team}`,
      `state      ${job.state}${job.reason === undefined ? '' : ` (${job.reason})`}`,
      `progress   ${progress}`,
      `migrations ${job.migrations}`,
      `submitted  ${formatTime(job.submittedAtSeconds)}`,
      `started    ${formatTime(job.startedAtSeconds)}`,
      `finished   ${formatTime(job.finishedAtSeconds)}`,
      `eta        ${job.etaSeconds === null ? '-' : `${Math.round(job.etaSeconds)} s`}`,
    ];
    process.stdout.write(`${lines.join('\n')}\n\n`);
    process.stdout.write(
      formatTable(
        ['TASK', 'NAME', 'STATE', 'INSTANCE'],
        job.tasks.map((t) => [t.id, t.name, t.state, t.instanceId ?? '-']),
      ),
    );
    if (job.instances.length > 0) {
      process.stdout.write('\n');
      process.stdout.write(
        formatTable(
          ['INSTANCE', 'CLOUD ID', 'TYPE', 'STATE', 'ZONE', 'TASKS'],
          job.instances.map((i) => [
            i.id,
            i.cloudId ?? '-',
            i.typeName,
            i.state,
            i.availabilityZone ?? '-',
            i.taskIds.join(','),
          ]),
        ),
      );
    }
  });
}
