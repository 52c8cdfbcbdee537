import { CommanderError, type Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { ValidationError } from '../../src/core/validation.js';

/**
 * A required flag misspelled is reported as the unknown option it is, with its did-you-mean, not as the required one
 * missing; a required flag left out is still refused in Commander's words, and help marks it "(required)".
 */

/** The command `path` names (e.g. ['catalog', 'refresh']) in `program`, its error output kept out of the test's. */
function commandAt(program: Command, path: readonly string[]): Command {
  let command = program;
  for (const name of path) {
    const sub = command.commands.find((c) => c.name() === name);
    if (sub === undefined) throw new Error(`no command ${path.join(' ')}`);
    command = sub;
  }
  return command;
}

/** The CommanderError running `args` ends in (nothing runs: every case is refused before its action). */
async function usageError(args: readonly string[]): Promise<CommanderError> {
  const program = await buildProgram(false, args[0]);
  const silence = (c: Command): void => {
    c.configureOutput({ writeErr: () => undefined, writeOut: () => undefined });
    c.commands.forEach(silence);
  };
  silence(program);
  try {
    await program.parseAsync([...args], { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) return e;
    throw e;
  }
  throw new Error(`${args.join(' ')} was not refused`);
}

const MISSPELLED: ReadonlyArray<readonly [args: readonly string[], meant: string]> = [
  [['simulate', '--format', 'eva', '--schedular', 'eva'], '--scheduler'],
  [['worker', '--controler', 'http://127.0.0.1:1', '--instance-id', 'i-1'], '--controller'],
  [['worker', '--controller', 'http://127.0.0.1:1', '--instance-idd', 'i-1'], '--instance-id'],
  [['catalog', 'refresh', '--regin', 'us-east-1'], '--region'],
  [['token', 'create', '--teem', 'ml'], '--team'],
  [['bench', 'arms', '--seeds', '1-2', '--armm', 'a=--queue fifo'], '--arm'],
  [['bench', 'arms', '--seedss', '1-2', '--arm', 'a=--queue fifo', '--arm', 'b=--queue srpt'], '--seeds'],
];

describe('required options', () => {
  it.each(MISSPELLED)('%j: the misspelled flag is named, with the one meant', async (args, meant) => {
    const error = await usageError(args);
    expect(error.code).toBe('commander.unknownOption');
    expect(error.message).toContain(`(Did you mean ${meant}?)`);
  });

  it('a required flag left out is refused in Commander words, as a usage error', async () => {
    const error = await usageError(['simulate', '--format', 'eva']);
    expect(error.code).toBe('commander.missingMandatoryOptionValue');
    expect(error.message).toBe("error: required option '--scheduler <names>' not specified");
    expect(error.exitCode).toBe(1);
    const worker = await usageError(['worker', '--controller', 'http://127.0.0.1:1']);
    expect(worker.message).toBe("error: required option '--instance-id <id>' not specified");
  });

  it('help marks each required flag', async () => {
    const cases: ReadonlyArray<readonly [path: readonly string[], flags: readonly string[]]> = [
      [['simulate'], ['--scheduler <names>']],
      [['worker'], ['--controller <url>', '--instance-id <id>']],
      [['catalog', 'refresh'], ['--region <region>']],
      [['token', 'create'], ['--team <team>']],
      [
        ['bench', 'arms'],
        ['--seeds <list>', '--arm <name=flags>'],
      ],
    ];
    for (const [path, flags] of cases) {
      const command = commandAt(await buildProgram(false, path[0]), path);
      for (const flag of flags) {
        const option = command.options.find((o) => o.flags === flag);
        expect(option?.description, `${path.join(' ')} ${flag}`).toMatch(/\(required\)$/);
      }
      expect(command.helpInformation()).toContain('(required)');
    }
  });

  it("a bench arm's misspelled --scheduler is named with its did-you-mean", () => {
    expect(() => parseSimulateArgs(['--format', 'eva', '--schedular', 'eva'], 'arm a')).toThrow(
      expect.objectContaining({
        problems: [expect.stringContaining('(Did you mean --scheduler?)')],
      }) as ValidationError,
    );
    expect(() => parseSimulateArgs(['--format', 'eva'], 'arm a')).toThrow(
      expect.objectContaining({
        problems: ["required option '--scheduler <names>' not specified"],
      }) as ValidationError,
    );
  });
});
