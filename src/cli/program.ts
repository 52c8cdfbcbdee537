import { Command } from 'commander';

/**
 * With `--json`, scripts read stdout as JSON: an error then goes to stderr as one JSON object (`{"error": …}`, plus
 * `status` and `details` when the controller gave them) with a non-zero exit, and stdout stays empty. Decided from
 * the arguments, since a usage error can come before commander knows which command runs.
 */
export function wantsJsonErrors(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).includes('--json');
}

export function writeJsonError(error: string, extra: Record<string, unknown> = {}): void {
  process.stderr.write(`${JSON.stringify({ error, ...extra })}\n`);
}

type Register = (program: Command) => void;

/**
 * Each subcommand lives in src/cli/commands/<name>.ts and registers itself, loaded only when needed: the controller's
 * and the simulator's modules take most of a second to load, which every `fleetwise jobs` and every worker process
 * would otherwise pay. Listed in the order help shows them.
 */
const SUBCOMMANDS: ReadonlyArray<readonly [name: string, load: () => Promise<Register>]> = [
  ['bench', async () => (await import('./commands/bench.js')).registerBench],
  ['catalog', async () => (await import('./commands/catalog.js')).registerCatalog],
  ['controller', async () => (await import('./commands/controller.js')).registerController],
  ['simulate', async () => (await import('./commands/simulate.js')).registerSimulate],
  ['export-trace', async () => (await import('./commands/export-trace.js')).registerExportTrace],
  ['tune', async () => (await import('./commands/tune.js')).registerTune],
  ['submit', async () => (await import('./commands/submit.js')).registerSubmit],
  ['jobs', async () => (await import('./commands/jobs.js')).registerJobs],
  ['job', async () => (await import('./commands/job.js')).registerJob],
  ['cancel', async () => (await import('./commands/cancel.js')).registerCancel],
  ['cluster', async () => (await import('./commands/cluster.js')).registerCluster],
  ['why', async () => (await import('./commands/why.js')).registerWhy],
  ['colocation', async () => (await import('./commands/colocation.js')).registerColocation],
  ['drain', async () => (await import('./commands/drain.js')).registerDrain],
  ['report', async () => (await import('./commands/report.js')).registerReport],
  ['logs', async () => (await import('./commands/logs.js')).registerLogs],
  ['wait', async () => (await import('./commands/wait.js')).registerWait],
  ['resubmit', async () => (await import('./commands/resubmit.js')).registerResubmit],
  ['worker', async () => (await import('./commands/worker.js')).registerWorker],
  ['down', async () => (await import('./commands/down.js')).registerDown],
  ['token', async () => (await import('./commands/token.js')).registerToken],
];

/** The subcommand the arguments name (the first one not an option), when it is one of ours; otherwise all are needed. */
export function namedSubcommand(argv: readonly string[]): string | undefined {
  const first = argv.find((a) => !a.startsWith('-'));
  return SUBCOMMANDS.some(([name]) => name === first) ? first : undefined;
}

/**
 * The `fleetwise` command, with every subcommand, or only `only` (the one the arguments run: its help and errors
 * are the same either way).
 */
export async function buildProgram(jsonErrors = false, only?: string): Promise<Command> {
  const program = new Command('fleetwise')
    .description('Cost-aware cluster autoscaler for AWS batch jobs')
    .version('0.1.0')
    .showHelpAfterError(!jsonErrors)
    // Commander's own errors reach main(), which exits 2 on a usage error as on any other bad input.
    .exitOverride();
  // Set before the subcommands are added: they inherit it.
  if (jsonErrors)
    program.configureOutput({
      outputError: (text) => writeJsonError(text.trim().replace(/^error: /, '')),
    });
  const wanted = SUBCOMMANDS.filter(([name]) => only === undefined || name === only);
  for (const register of await Promise.all(wanted.map(([, load]) => load()))) register(program);
  return checkRequiredOptionsLast(program);
}

/**
 * Commander checks required options before unknown ones, so a misspelled required flag (`simulate --schedular eva`)
 * would be reported as the required one missing, its did-you-mean lost. The required options of `command` and of its
 * subcommands become ordinary ones, marked "(required)" in help, and are checked with Commander's own words just
 * before the action runs: after the unknown options.
 */
export function checkRequiredOptionsLast(command: Command): Command {
  const required = command.options.filter((option) => option.mandatory);
  for (const option of required) {
    option.mandatory = false;
    option.description = `${option.description} (required)`;
  }
  if (required.length > 0)
    command.hook('preAction', () => {
      for (const option of required)
        if (command.getOptionValue(option.attributeName()) === undefined)
          command.error(`error: required option '${option.flags}' not specified`, {
            code: 'commander.missingMandatoryOptionValue',
          });
    });
  for (const sub of command.commands) checkRequiredOptionsLast(sub);
  return command;
}
