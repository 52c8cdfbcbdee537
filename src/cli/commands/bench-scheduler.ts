import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { z } from 'zod';
import { benchScheduler, type WeightedDemand } from '../../bench/scheduler-bench.js';
import { loadCatalogFile } from '../../cloud/catalog-file.js';
import { ValidationError } from '../../core/validation.js';
import { flagProblems, numberText } from './sim-flags.js';
import { alibabaDemandFrequencies } from '../../sim/traces/alibaba.js';
import { BUNDLED_ALIBABA_TRACE_PATH } from '../../sim/traces/load.js';

const optionsSchema = z.object({
  tasks: z
    .string()
    .regex(/^\d+(,\d+)*$/, 'must be a comma-separated list of task counts, e.g. 1000,8000')
    .transform((s) => s.split(',').map(Number))
    .refine((xs) => xs.every((x) => x >= 1 && x <= 1_000_000), 'each count must be between 1 and 1,000,000'),
  seed: numberText(z.number().int('must be a whole number').min(0, 'must be ≥ 0')),
  repeats: numberText(
    z.number().int('must be a whole number').min(1, 'must be at least 1').max(50, 'must be at most 50'),
  ).optional(),
  catalog: z.string().min(1).optional(),
  trace: z.string().min(1).optional(),
  json: z.boolean().optional(),
});

/**
 * `fleetwise bench scheduler`: Full Reconfiguration on tasks sampled (seeded) from the demand vectors of the
 * Alibaba GPU trace (one co-location identity per vector, as Eva's conversion assigns a workload per vector).
 */
export function registerBenchScheduler(bench: Command): Command {
  return bench
    .command('scheduler')
    .description('time Full Reconfiguration on N tasks sampled from the Alibaba trace demands')
    .option('--tasks <list>', 'comma-separated task counts', '1000,2000,4000,8000,16000')
    .option('--seed <n>', 'sampling seed', '1')
    .option('--repeats <n>', 'runs per size; seconds is their median (default 5, 3 above 20k tasks)')
    .option('--catalog <path>', 'instance catalog JSON (default: the bundled us-east-1 catalog)')
    .option('--trace <path>', 'Alibaba pod list CSV (default: the bundled openb_pod_list_default.csv)')
    .option('--json', 'print one JSON object instead of a table')
    .action((raw: Record<string, unknown>) => {
      const parsed = optionsSchema.safeParse(raw);
      if (!parsed.success) throw new ValidationError('fleetwise bench scheduler', flagProblems(parsed.error));
      const opts = parsed.data;
      const catalog = opts.catalog === undefined ? loadCatalogFile() : loadCatalogFile(opts.catalog);
      const tracePath = opts.trace ?? BUNDLED_ALIBABA_TRACE_PATH;
      let text: string;
      try {
        text = readFileSync(tracePath, 'utf8');
      } catch (e) {
        throw new ValidationError('--trace', [
          `cannot read the Alibaba pod list ${tracePath}: ${(e as Error).message}`,
        ]);
      }
      const demands: WeightedDemand[] = alibabaDemandFrequencies(text, catalog, tracePath).map((f) => ({
        demand: { any: f.demand },
        weight: f.count,
        key: `alibaba[${f.demand.join(',')}]`,
      }));
      const results = benchScheduler(catalog, demands, opts.tasks, {
        seed: opts.seed,
        ...(opts.repeats === undefined ? {} : { repeats: opts.repeats }),
      });
      if (opts.json === true) {
        process.stdout.write(`${JSON.stringify({ results })}\n`);
        return;
      }
      const rows = results.map((r) => [
        String(r.tasks),
        r.seconds.toFixed(4),
        String(r.instances),
        r.costPerHour.toFixed(2),
        r.noPackingCostPerHour.toFixed(2),
        (r.costPerHour / r.noPackingCostPerHour).toFixed(3),
      ]);
      const header = ['tasks', 'seconds', 'instances', '$/h', 'no-packing $/h', 'ratio'];
      const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
      const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i] as number)).join('  ');
      process.stdout.write(`${[line(header), ...rows.map(line)].join('\n')}\n`);
    });
}
