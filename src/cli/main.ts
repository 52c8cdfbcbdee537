#!/usr/bin/env node
import { CommanderError } from 'commander';
import { ValidationError } from '../core/validation.js';
import { ApiError, apiErrorIn, FailureWithLines, NamedRefusal } from './client-errors.js';
import { buildProgram, namedSubcommand, wantsJsonErrors, writeJsonError } from './program.js';
import { terminalSafe } from './terminal-text.js';

/** `fleetwise`: builds the program with the subcommand the arguments name (src/cli/program.ts) and runs it. */
async function main(): Promise<void> {
  // A reader that closed the pipe (`| head -1`) has all it wanted: the command ends there quietly, as other Unix
  // tools do, instead of dying on its next write with a stack trace (`jobs --watch`, `logs --follow` included).
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(0);
    throw e;
  });
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
          terminalSafe(
            `fleetwise: invalid input: ${e.source}\n${e.problems.map((p) => `  - ${p}`).join('\n')}\n`,
          ),
        );
      process.exit(2);
    }
    if (json) writeJsonError(...jsonError(e));
    // An error may quote the controller, which may quote a task's output.
    else process.stderr.write(`fleetwise: ${terminalSafe((e as Error).message)}\n`);
    process.exit(refusedInput(e) ? 2 : 1);
  }
}

/**
 * An error as --json tells it: with the controller's status and reason when it answered, also under a command's
 * wrapper naming what the answer was for. The details, which a message lists on further lines, are a field of their
 * own: as the command words them when it kept them apart (a NamedRefusal), else the controller's.
 */
function jsonError(e: unknown): [error: string, extra: Record<string, unknown>] {
  const refusal = apiErrorIn(e);
  if (refusal === undefined)
    return e instanceof FailureWithLines ? [e.headline, { details: e.details }] : [(e as Error).message, {}];
  const told = e instanceof NamedRefusal || e instanceof ApiError ? e : undefined;
  return [
    told?.headline ?? (e as Error).message,
    { status: refusal.status, reason: refusal.reason, details: told?.details ?? refusal.details },
  ];
}

/**
 * The controller refused the request's input (a malformed query or spec, a dependency that does not exist, a body or id
 * too long, an idempotency key reused with another spec): bad input like a client-side check's, not a failure to
 * reach or be served by the controller.
 */
function refusedInput(e: unknown): boolean {
  const refusal = apiErrorIn(e);
  return refusal !== undefined && [400, 413, 414, 422].includes(refusal.status);
}

await main();
