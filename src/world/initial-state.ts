import { crossZonePricePerGiB } from '../core/catalog.js';
import { CostLedger } from './cost-ledger.js';
import { defaultNetworkConfig } from './network-config.js';
import { NetworkWorld } from './network-world.js';
import type { ForkSetup, RunOptions } from './simulation-types.js';
import { buildSimJobs } from './trace-jobs.js';
import { WorldState } from './world-state.js';

/**
 * The world a run starts from: the trace's jobs, on the given (else the default) network, with a cost ledger; for a
 * prediction (`fork`), the jobs of the world it runs forward, whose instances and events are imported afterwards
 * (world-io.ts `importWorld`).
 */
export function initialState(options: RunOptions, fork: ForkSetup | undefined): WorldState {
  // Predictions ignore the network (the scheduler's expected rates model co-location only).
  const network =
    fork === undefined
      ? new NetworkWorld(
          options.network?.config ?? defaultNetworkConfig(options.catalog.region),
          options.network?.seed ?? 0,
          crossZonePricePerGiB(options.catalog),
        )
      : undefined;
  const state = new WorldState(
    fork === undefined
      ? buildSimJobs(options.trace, options.catalog)
      : // A world is taken mid-run: a dependency not in it has ended.
        buildSimJobs({ name: 'prediction', jobs: fork.world.jobs.map((j) => j.spec) }, options.catalog, {
          dependenciesMayHaveEnded: true,
        }),
    options.onEvent,
    network,
  );
  if (options.checkpointIntervalSeconds !== undefined)
    for (const job of state.jobs) job.checkpointIntervalSeconds = options.checkpointIntervalSeconds;
  // Where the money went is the run's; a prediction's world only looks ahead for completion times.
  if (fork === undefined) state.ledger = new CostLedger();
  return state;
}
