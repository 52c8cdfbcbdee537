import { constants } from 'node:os';
import type { Command } from 'commander';
import { z } from 'zod';
import { benchCostReport, type CostReportBenchResult } from '../../bench/cost-report-bench.js';
import { loadCatalogFile } from '../../cloud/catalog-file.js';
import { ValidationError } from '../../core/validation.js';
import { formatTable } from '../table.js';
import { benchProgress, onBenchStopSignals } from './bench-process.js';
import { flagProblems, numberText } from './sim-flags.js';

const optionsSchema = z.object({
  jobs: z
    .string()
    .regex(/^\d+(,\d+)*$/, 'must be a comma-separated list of job counts, e.g. 1000,10000')
    .transform((s) => s.split(',').map(Number))
    .refine((xs) => xs.every((x) => x >= 1 && x <= 1_000_000), 'each count must be between 1 and 1,000,000'),
  checkpoints: numberText(
    z.number().int('must be an integer').min(0, 'must be ≥ 0').max(1_000, 'must be ≤ 1,000'),
  ),
  repeats: numberText(z.number().int('must be an integer').min(1, 'must be ≥ 1').max(50, 'must be ≤ 50')),
  json: z.boolean().optional(),
});

/**
 * `fleetwise bench costs`: the whole history's cost report (what the controller writes when jobs end and what
 * `fleetwise jobs` asks for) as a full replay of the event log against the incremental report, on SQLite states of N
 * finished jobs.
 */
export function registerBenchCosts(bench: Command): Command {
  return bench
    .command('costs')
    .description(
      'time the whole-history cost report on states of N finished jobs: full replay against the incremental report',
    )
    .option('--jobs <list>', 'comma-separated history sizes (finished jobs)', '1000,10000')
    .option('--checkpoints <n>', 'checkpoints each job leaves', '10')
    .option('--repeats <n>', 'timed reports per figure (the median is printed)', '5')
    .option('--json', 'print one JSON object instead of a table')
    .action(async (raw: Record<string, unknown>) => {
      const parsed = optionsSchema.safeParse(raw);
      if (!parsed.success)
        throw new ValidationError('fleetwise bench costs options', flagProblems(parsed.error));
      const opts = parsed.data;
      const progress = benchProgress('bench costs');
      // Stopped by a signal (Ctrl-C, `timeout`, a hang-up), it closes and removes its SQLite state as when it finishes:
      // left alone, Node would exit at once and leave the state (hundreds of MB at the larger sizes) in the temp
      // directory.
      const abort = new AbortController();
      let stopSignal: NodeJS.Signals | undefined;
      const stopped = (signal: NodeJS.Signals): void => {
        if (stopSignal !== undefined) return;
        stopSignal = signal;
        abort.abort(new Error(`stopped by ${signal}`));
      };
      const stopListening = onBenchStopSignals(stopped);
      let results: CostReportBenchResult[];
      try {
        results = await benchCostReport(
          loadCatalogFile(),
          { jobs: opts.jobs, checkpointsPerJob: opts.checkpoints, repeats: opts.repeats },
          abort.signal,
          progress,
        );
      } catch (e) {
        if (stopSignal === undefined) throw e;
        process.stderr.write(`bench costs: stopped by ${stopSignal}\n`);
        process.exit(128 + constants.signals[stopSignal]);
      } finally {
        stopListening();
      }
      if (opts.json === true) {
        process.stdout.write(`${JSON.stringify({ results })}\n`);
        return;
      }
      process.stdout.write(
        formatTable(
          [
            'jobs',
            'events',
            'full replay ms',
            'incremental first ms',
            'incremental next ms',
            'total $',
            'max rel. diff',
          ],
          results.map((r) => [
            String(r.jobs),
            String(r.events),
            r.fullReplayMs.toFixed(1),
            r.incrementalFirstMs.toFixed(1),
            r.incrementalNextMs.toFixed(2),
            r.totalCost.toFixed(2),
            r.maxRelativeDifference.toExponential(1),
          ]),
        ),
      );
    });
}
