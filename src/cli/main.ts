#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { ValidationError } from '../core/validation.js';
import { registerBench } from './commands/bench.js';
import { registerCatalog } from './commands/catalog.js';
import { registerController } from './commands/controller.js';
import { registerSimulate } from './commands/simulate.js';
import { registerTune } from './commands/tune.js';
import { registerSubmit } from './commands/submit.js';
import { registerJobs } from './commands/jobs.js';
import { registerJob } from './commands/job.js';
import { registerCancel } from './commands/cancel.js';
import { registerCluster } from './commands/cluster.js';
import { registerWhy } from './commands/why.js';
import { registerDrain } from './commands/drain.js';
import { registerReport } from './commands/report.js';
import { registerLogs } from './commands/logs.js';
import { registerWorker } from './commands/worker.js';
import { registerDown } from './commands/down.js';

/** The `fleetwise` command. Each subcommand lives in src/cli/commands/<name>.ts and registers itself here. */
export function buildProgram(): Command {
  const program = new Command('fleetwise')
    .description('Cost-aware cluster autoscaler for AWS batch jobs')
    .version('0.1.0')
    .showHelpAfterError();
  registerBench(program);
  registerCatalog(program);
  registerController(program);
  registerSimulate(program);
  registerTune(program);
  registerSubmit(program);
  registerJobs(program);
  registerJob(program);
  registerCancel(program);
  registerCluster(program);
  registerWhy(program);
  registerDrain(program);
  registerReport(program);
  registerLogs(program);
  registerWorker(program);
  registerDown(program);
  return program;
}

async function main(): Promise<void> {
  try {
    await buildProgram().parseAsync(process.argv);
  } catch (e) {
    if (e instanceof CommanderError) process.exit(e.exitCode);
    if (e instanceof ValidationError) {
      process.stderr.write(
        `fleetwise: invalid input: ${e.source}\n${e.problems.map((p) => `  - ${p}`).join('\n')}\n`,
      );
      process.exit(2);
    }
    process.stderr.write(`fleetwise: ${(e as Error).message}\n`);
    process.exit(1);
  }
}

await main();
