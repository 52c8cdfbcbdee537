#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { ValidationError } from '../core/validation.js';
import { ApiError } from './client.js';
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
import { registerToken } from './commands/token.js';
import { registerExportTrace } from './commands/export-trace.js';

/**
 * With `--json`, scripts read stdout as JSON: an error then goes to stderr as one JSON object (`{"error": …}`, plus
 * `status` and `details` when the controller gave them) with a non-zero exit, and stdout stays empty. Decided from
 * the arguments, since a usage error can come before commander knows which command runs.
 */
function wantsJsonErrors(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).includes('--json');
}

function writeJsonError(error: string, extra: Record<string, unknown> = {}): void {
  process.stderr.write(`${JSON.stringify({ error, ...extra })}\n`);
}

/** The `fleetwise` command. Each subcommand lives in src/cli/commands/<name>.ts and registers itself here. */
export function buildProgram(jsonErrors = false): Command {
  const program = new Command('fleetwise')
    .description('Cost-aware cluster autoscaler for AWS batch jobs')
    .version('0.1.0')
    .showHelpAfterError(!jsonErrors);
  // Set before the subcommands are added: they inherit it.
  if (jsonErrors)
    program.configureOutput({
      outputError: (text) => writeJsonError(text.trim().replace(/^error: /, '')),
    });
  registerBench(program);
  registerCatalog(program);
  registerController(program);
  registerSimulate(program);
  registerExportTrace(program);
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
  registerToken(program);
  return program;
}

async function main(): Promise<void> {
  const json = wantsJsonErrors(process.argv.slice(2));
  try {
    await buildProgram(json).parseAsync(process.argv);
  } catch (e) {
    if (e instanceof CommanderError) process.exit(e.exitCode);
    if (e instanceof ValidationError) {
      if (json) writeJsonError(`invalid input: ${e.source}`, { details: e.problems });
      else
        process.stderr.write(
          `fleetwise: invalid input: ${e.source}\n${e.problems.map((p) => `  - ${p}`).join('\n')}\n`,
        );
      process.exit(2);
    }
    if (json)
      writeJsonError(
        // An ApiError's message lists its details on further lines; they are a field of their own here.
        e instanceof ApiError ? (e.message.split('\n')[0] ?? e.message) : (e as Error).message,
        e instanceof ApiError ? { status: e.status, reason: e.reason, details: e.details } : {},
      );
    else process.stderr.write(`fleetwise: ${(e as Error).message}\n`);
    process.exit(1);
  }
}

await main();
