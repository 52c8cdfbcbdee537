import type { Command } from 'commander';
import { registerBenchArms } from './bench-arms.js';
import { registerBenchBound } from './bench-bound.js';
import { registerBenchController } from './bench-controller.js';
import { registerBenchCosts } from './bench-costs.js';
import { registerBenchOptimality } from './bench-optimality.js';
import { registerBenchScheduler } from './bench-scheduler.js';

/** `fleetwise bench <name>`: benchmarks that print a table, or one JSON object with --json (bench/README.md lists the targets). */
export function registerBench(program: Command): Command {
  const bench = program
    .command('bench')
    .description('run a benchmark and print a table (--json: one JSON object)');
  registerBenchScheduler(bench);
  registerBenchOptimality(bench);
  registerBenchBound(bench);
  registerBenchController(bench);
  registerBenchArms(bench);
  registerBenchCosts(bench);
  return bench;
}
