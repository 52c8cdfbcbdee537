import type { Command } from 'commander';

/** `fleetwise bench <name>`: benchmarks that print JSON (bench/README.md lists the targets). */
export function registerBench(program: Command): Command {
  const bench = program.command('bench').description('run a benchmark and print JSON');
  return bench;
}
