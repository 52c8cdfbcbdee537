import type { Command } from 'commander';
import { addConnectionOptions, FleetwiseClient, type ConnectionOptions } from '../client.js';
import { formatDollars, formatTable, printJson } from '../table.js';

interface ClusterOptions extends ConnectionOptions {
  readonly json?: boolean;
}

export function registerCluster(program: Command): void {
  addConnectionOptions(
    program
      .command('cluster')
      .description('show the instances, the tasks on them and the current $/hour')
      .option('--json', 'print the cluster view as JSON'),
  ).action(async (options: ClusterOptions) => {
    const cluster = await FleetwiseClient.fromOptions(options).cluster();
    if (options.json === true) return printJson(cluster);
    if (cluster.instances.length === 0) process.stdout.write('no instances\n');
    else
      process.stdout.write(
        formatTable(
          ['INSTANCE', 'CLOUD ID', 'TYPE', 'STATE', 'ZONE', '$/HOUR', 'TASKS'],
          cluster.instances.map((i) => [
            i.id,
            i.cloudId ?? '-',
            i.typeName,
            i.state,
            i.availabilityZone ?? '-',
            formatDollars(i.costPerHour),
            i.taskIds.length === 0 ? '-' : i.taskIds.join(','),
          ]),
        ),
      );
    const pending = cluster.tasks.filter((t) => t.instanceId === undefined).length;
    process.stdout.write(
      `\n${cluster.instances.length} instances, ${cluster.tasks.length} tasks (${pending} unplaced)` +
        `${cluster.scope === 'team' ? ' of your team' : ''}, ${formatDollars(cluster.costPerHour)}/hour\n`,
    );
    // Controllers sharing a PostgreSQL state: which one answered, and the lease's fencing token.
    const leader = cluster.controller;
    if (leader !== undefined && leader.epoch !== null)
      process.stdout.write(
        `controller: ${leader.role}, lease epoch ${leader.epoch}` +
          `${leader.holder === null ? '' : ` held by ${leader.holder}`}\n`,
      );
  });
}
