import type { Command } from 'commander';
import { ValidationError } from '../../core/validation.js';
import { ColocationTable, type SerializedColocationTable } from '../../scheduler/colocation-table.js';
import { FleetwiseClient } from '../client.js';
import { addConnectionOptions, type ConnectionOptions } from '../client-connection.js';
import { formatTable, printJson } from '../table.js';
import { checkOutputFile } from '../output-target.js';
import { writeColocationTableFile } from './colocation-table-file.js';
import { terminalSafeDeep } from '../terminal-text.js';

interface ColocationOptions extends ConnectionOptions {
  readonly json?: boolean;
  readonly out?: string;
}

/**
 * The learned table as rows, the pairs that slow a workload most first: a workload's observed throughput beside
 * others, as a share of its throughput alone, and how many observations it rests on.
 */
export function colocationRows(table: SerializedColocationTable): string[][] {
  return [...table.entries]
    .sort((a, b) => a.mean - b.mean || a.target.localeCompare(b.target))
    .map((e) => [e.target, e.others.join(' + '), e.mean.toFixed(3), String(e.count)]);
}

/**
 * What the footer says a pair not yet observed is priced at: the prior the scheduler plans with, which it learns from
 * the pairs observed alone together (ColocationTable.refreshPrior). The table holds only the configured rate it starts
 * from; a reader should not have to average that with the rows to know the rate every unseen pair is planned at.
 */
export function unseenPairFooter(table: SerializedColocationTable): string {
  const prior = ColocationTable.fromJSON(table).defaultRate.toFixed(3);
  const configured = table.defaultRate.toFixed(3);
  // One row per workload of a pair: a pair seen together once gives two rates, each side's.
  const rates = table.entries.filter((e) => e.others.length === 1).length;
  return rates === 0
    ? `a pair not yet observed is priced at ${prior} (the configured rate: no pair observed alone together yet)`
    : `a pair not yet observed is priced at ${prior}: the mean of the configured ${configured} and the ` +
        `${rates} rate${rates === 1 ? '' : 's'} observed of workloads in pairs alone together`;
}

export function registerColocation(program: Command): void {
  addConnectionOptions(
    program
      .command('colocation')
      .description(
        "show what the controller's scheduler learned of co-location: each workload's throughput beside others, as a share of its throughput alone (Eva §4.3)",
      )
      .option('--json', 'print the table as JSON')
      .option('--out <file>', 'also write the table for `fleetwise simulate --colocation-table`'),
  ).action(async (options: ColocationOptions) => {
    if (options.out !== undefined) checkOutputFile(options.out, '--out');
    const { table } = await FleetwiseClient.fromOptions(options).clusterColocation();
    if (options.out !== undefined) {
      if (table === null)
        throw new ValidationError('--out', [
          "the controller's scheduler learns no co-location (it is a baseline): there is no table to write",
        ]);
      writeColocationTableFile(options.out, table, '--out');
    }
    if (options.json === true) return printJson({ table });
    if (table === null) {
      process.stdout.write("the controller's scheduler learns no co-location (it is a baseline, not Eva)\n");
      return;
    }
    process.stdout.write(
      table.entries.length === 0
        ? 'nothing learned yet: no co-located tasks have reported their throughput\n'
        : formatTable(
            ['WORKLOAD', 'BESIDE', 'THROUGHPUT', 'OBSERVED'],
            colocationRows(terminalSafeDeep(table)),
          ),
    );
    process.stdout.write(
      `\nthroughput: a share of the workload's throughput alone; ${unseenPairFooter(table)}` +
        `${options.out === undefined ? '' : `\nwritten to ${options.out}`}\n`,
    );
  });
}
