import type { Command } from 'commander';
import { FleetwiseClient } from '../client.js';
import { addConnectionOptions, type ConnectionOptions } from '../client-connection.js';
import { printJson } from '../table.js';
import { terminalSafeDeep } from '../terminal-text.js';

interface DrainOptions extends ConnectionOptions {
  readonly json?: boolean;
}

export function registerDrain(program: Command): void {
  addConnectionOptions(
    program
      .command('drain')
      .description('move every task off an instance and retire it (admin token)')
      .argument('<instance>', 'instance id (inst-4) or EC2 id (i-0abc…)')
      .option('--json', 'print the instance as JSON'),
  ).action(async (instance: string, options: DrainOptions) => {
    const answer = await FleetwiseClient.fromOptions(options).drain(instance);
    if (options.json === true) return printJson(answer);
    const drained = terminalSafeDeep(answer);
    const name = `${drained.id}${drained.cloudId === undefined ? '' : ` (${drained.cloudId})`} ${drained.typeName}`;
    process.stdout.write(
      drained.state === 'draining'
        ? `${name}: draining; its tasks move at the next round, then it is terminated\n`
        : `${name}: ${drained.state}\n`,
    );
  });
}
