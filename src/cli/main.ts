#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { ValidationError } from '../core/validation.js';
import { registerBench } from './commands/bench.js';
import { registerCatalog } from './commands/catalog.js';
import { registerSimulate } from './commands/simulate.js';

/** The `fleetwise` command. Each subcommand lives in src/cli/commands/<name>.ts and registers itself here. */
export function buildProgram(): Command {
  const program = new Command('fleetwise')
    .description('Cost-aware cluster autoscaler for AWS batch jobs')
    .version('0.1.0')
    .showHelpAfterError();
  registerBench(program);
  registerCatalog(program);
  registerSimulate(program);
  return program;
}

async function main(): Promise<void> {
  try {
    await buildProgram().parseAsync(process.argv);
  } catch (e) {
    if (e instanceof CommanderError) process.exit(e.exitCode);
    if (e instanceof ValidationError) {
      process.stderr.write(`fleetwise: invalid input: ${e.source}\n${e.problems.map((p) => `  - ${p}`).join('\n')}\n`);
      process.exit(2);
    }
    process.stderr.write(`fleetwise: ${(e as Error).message}\n`);
    process.exit(1);
  }
}

await main();
