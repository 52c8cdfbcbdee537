import type { Command } from 'commander';
import { z } from 'zod';
import { runOptimalityBench, type OptimalityReport, type OptimalityTrial } from '../../bench/optimality.js';
import { loadCatalogFile } from '../../cloud/catalog-file.js';
import { ValidationError } from '../../core/validation.js';
import { batchProgress } from '../batch-progress.js';
import { flagProblems, numberText } from './sim-flags.js';
import { loadWorkloadCatalog } from '../../sim/traces/load.js';
import { singleTaskWorkloads } from '../../sim/traces/workloads.js';

const intFrom = (min: number) =>
  numberText(z.number().int('must be a whole number').min(min, `must be at least ${min}`));

const optionsSchema = z.object({
  tasks: numberText(
    z
      .number()
      .int('must be a whole number')
      .min(1, 'must be at least 1')
      .max(200, 'must be at most 200 (GLPK cannot prove optimality beyond a few dozen tasks)'),
  ),
  trials: intFrom(1),
  seed: intFrom(0),
  timeLimit: numberText(z.number().finite().positive('must be a positive number of seconds')),
  formulation: z.enum(['auto', 'patterns', 'assignment']),
  catalog: z.string().min(1).optional(),
  workloads: z.string().min(1).optional(),
  json: z.boolean().optional(),
});

/** `fleetwise bench optimality`: Full Reconfiguration and No-Packing against the exact ILP (Eva §4.2, Table 4). */
export function registerBenchOptimality(bench: Command): Command {
  return bench
    .command('optimality')
    .description(
      'cost of Full Reconfiguration and No-Packing relative to the exact ILP optimum (Eva §4.2, Table 4)',
    )
    .option('--tasks <n>', 'tasks sampled per trial', '20')
    .option('--trials <n>', 'number of trials', '20')
    .option('--seed <n>', 'seed of the task samples', '1')
    .option('--time-limit <seconds>', 'ILP time limit per trial', '10')
    .option('--formulation <name>', 'ILP formulation: auto, patterns or assignment', 'auto')
    .option('--catalog <path>', 'instance catalog JSON (default: the bundled us-east-1 catalog)')
    .option(
      '--workloads <path>',
      'Eva workload catalog JSON (default: data/eva-reference/workload_catalog.json)',
    )
    .option('--json', 'print one JSON object instead of a table')
    .action(async (raw: Record<string, unknown>) => {
      const parsed = optionsSchema.safeParse(raw);
      if (!parsed.success)
        throw new ValidationError('fleetwise bench optimality', flagProblems(parsed.error));
      const opts = parsed.data;
      const catalog = opts.catalog === undefined ? loadCatalogFile() : loadCatalogFile(opts.catalog);
      const workloadCatalog =
        opts.workloads === undefined ? loadWorkloadCatalog() : loadWorkloadCatalog(opts.workloads);
      // A trial's ILP may take its whole time limit: a line per trial (a bar on a terminal) shows the bench is working.
      const progress = batchProgress(opts.trials, 'bench optimality', 'trials');
      const onTrial = (t: OptimalityTrial): void =>
        progress.done(
          t.trial,
          `trial ${t.trial} (ILP ${t.ilpStatus}, Full/ILP ${ratio(t.heuristicRatio)}, ${t.ilpSeconds.toFixed(1)} s)`,
        );
      const report = await runOptimalityBench({
        catalog,
        workloads: singleTaskWorkloads(workloadCatalog).map((w) => ({ name: w.name, demand: w.demand })),
        tasksPerTrial: opts.tasks,
        trials: opts.trials,
        seed: opts.seed,
        timeLimitSeconds: opts.timeLimit,
        formulation: opts.formulation,
        onTrial,
      }).finally(() => progress.stop());
      process.stdout.write(opts.json === true ? `${JSON.stringify(report)}\n` : formatReport(report));
    });
}

const money = (x: number | null): string => (x === null ? '-' : x.toFixed(4));
const ratio = (x: number | null): string => (x === null ? '-' : x.toFixed(3));

export function formatReport(report: OptimalityReport): string {
  const header = [
    'trial',
    'ILP status',
    'ILP $/h',
    'bound $/h',
    'Full $/h',
    'NoPack $/h',
    'Full/ILP',
    'NoPack/ILP',
    'ILP s',
  ];
  const rows = report.trials.map((t) => [
    String(t.trial),
    t.ilpStatus,
    money(t.ilpCostPerHour),
    money(t.ilpLowerBoundCostPerHour),
    money(t.heuristicCostPerHour),
    money(t.noPackingCostPerHour),
    ratio(t.heuristicRatio),
    ratio(t.noPackingRatio),
    t.ilpSeconds.toFixed(2),
  ]);
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] as string).length)));
  const line = (cells: readonly string[]): string =>
    cells.map((s, c) => s.padStart(widths[c] as number)).join('  ');
  return [
    `Eva §4.2 micro-benchmark: ${report.trials.length} trials × ${report.tasksPerTrial} tasks, seed ${report.seed}, ILP limit ${report.timeLimitSeconds} s`,
    line(header),
    ...rows.map(line),
    '',
    `trials with a proven optimum: ${report.optimalTrials}/${report.trials.length}`,
    `Full Reconfiguration / optimal: mean ${ratio(report.meanRatio)}, max ${ratio(report.maxRatio)} (paper: 1.01)`,
    `No-Packing / optimal: mean ${ratio(report.noPackingRatio)} (paper: 1.56)`,
    `total ${report.totalSeconds.toFixed(1)} s`,
    '',
  ].join('\n');
}
