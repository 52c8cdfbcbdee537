import type { Command } from 'commander';
import { z } from 'zod';
import { costBounds } from '../../bench/cost-bound.js';
import { ValidationError } from '../../core/validation.js';
import { loadIlpSolver } from '../../scheduler/ilp.js';
import { runSimulation } from '../../sim/run-simulation.js';
import { constantPairwise } from '../../world/ground-truth.js';
import { createScheduler } from '../../scheduler/registry.js';
import { formatTable } from '../table.js';
import {
  addPriceOverridesOption,
  addTraceOptions,
  flagProblems,
  inferFormat,
  loadTraceFlags,
  offersSpot,
  priceOverridesOptionField,
  readPriceOverridesFile,
  refuseSpotPricesWithoutSpot,
  traceOptionFields,
} from './sim-flags.js';

const optionsSchema = z.object({
  ...traceOptionFields,
  ...priceOverridesOptionField,
  json: z.boolean().optional(),
  spot: z.enum(['off', 'on'], { message: 'must be off or on' }).optional(),
});
const NO_INTERFERENCE_TRUTH = constantPairwise(1);

/**
 * `fleetwise bench bound`: lower bounds on any scheduler's cost for a trace (src/bench/cost-bound.ts), next to the
 * simulated No-Packing cost, so that `simulate`'s normalized costs can be read against what is reachable at all.
 */
export function registerBenchBound(bench: Command): Command {
  return addPriceOverridesOption(
    addTraceOptions(
      bench
        .command('bound')
        .description(
          'lower bounds on any scheduler’s cost for a trace (fluid fleet, no delays, no interference)',
        ),
    ),
  )
    .option('--json', 'print one JSON object instead of a table')
    .option(
      '--spot <off|on>',
      "on: instances may be bought at their cheapest spot pool's price (the catalog's spot market), as `simulate --spot on` may; jobs with spot: never stay on demand (default off)",
    )
    .action(async (raw: Record<string, unknown>) => {
      const parsed = optionsSchema.safeParse(raw);
      if (!parsed.success)
        throw new ValidationError('fleetwise bench bound options', flagProblems(parsed.error));
      const o = { ...parsed.data, format: parsed.data.format ?? inferFormat(parsed.data.trace) };
      const prices = o.priceOverrides === undefined ? undefined : readPriceOverridesFile(o.priceOverrides);
      if (o.spot !== 'on')
        refuseSpotPricesWithoutSpot(prices, 'needs --spot on (without it the bounds are on demand)');
      const { catalog, trace } = loadTraceFlags(o, o.spot === 'on', prices);
      if (o.spot === 'on' && !offersSpot(catalog))
        throw new ValidationError('fleetwise bench bound options', [
          '--spot: on needs a catalog with spot pools (a spot section with offerings; the bundled one has one)',
        ]);
      const started = performance.now();
      const bounds = costBounds(await loadIlpSolver(), catalog, trace.jobs, {
        spot: o.spot === 'on' ? catalog.spot : undefined,
      });
      const seconds = (performance.now() - started) / 1000;
      // No-Packing on the trace already loaded (no interference to model: every task is alone).
      const noPacking = runSimulation({
        trace,
        catalog,
        scheduler: createScheduler('no-packing', { catalog, interferenceProfile: NO_INTERFERENCE_TRUTH }),
        groundTruth: NO_INTERFERENCE_TRUTH,
      }).summary.totalCost;
      const result = {
        trace: trace.name,
        jobs: trace.jobs.length,
        spot: o.spot === 'on',
        noPackingCost: noPacking,
        standaloneCost: bounds.standaloneCost,
        workBound: bounds.workBound,
        timedBound: bounds.timedBound,
        normalizedWorkBound: bounds.workBound / noPacking,
        normalizedTimedBound: bounds.timedBound / noPacking,
        segments: bounds.segments,
        seconds,
      };
      if (o.json === true) {
        process.stdout.write(`${JSON.stringify(result)}\n`);
        return;
      }
      // EC2 charges nothing for a spot instance it reclaims in its first hour: a bill can go below a spot bound.
      const atSpot = o.spot === 'on' ? ', spot where a job allows it, before first-hour reclaim refunds' : '';
      const row = (name: string, cost: number, meaning: string) => [
        name,
        `$${cost.toFixed(2)}`,
        (cost / noPacking).toFixed(4),
        meaning,
      ];
      process.stdout.write(
        `${trace.name}: ${trace.jobs.length} jobs\n` +
          formatTable(
            ['', 'cost', 'vs no-packing', 'what it is'],
            [
              row('no-packing', noPacking, 'simulated: every task alone on its cheapest type, on demand'),
              row('standalone', bounds.standaloneCost, 'the same without delays'),
              row('timed bound', bounds.timedBound, `no job waits or slows: fluid fleet over time${atSpot}`),
              row('work bound', bounds.workBound, `any schedule: fluid fleet for the task-hours${atSpot}`),
            ],
          ),
      );
    });
}
