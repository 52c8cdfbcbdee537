#!/usr/bin/env node
import { CommanderError } from 'commander';
import { ValidationError } from '../core/validation.js';
import { ApiError } from './client.js';
import { buildProgram, namedSubcommand, wantsJsonErrors, writeJsonError } from './program.js';

/** `fleetwise`: builds the program with the subcommand the arguments name (src/cli/program.ts) and runs it. */
async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const json = wantsJsonErrors(args);
  try {
    await (await buildProgram(json, namedSubcommand(args))).parseAsync(process.argv);
  } catch (e) {
    // Commander's usage errors (an unknown option, a missing argument) are bad input like any other: exit 2.
    if (e instanceof CommanderError)
      process.exit(e.exitCode === 1 && e.code !== 'commander.error' ? 2 : e.exitCode);
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
