import type { ControllerSettings } from '../../controller/settings.js';

/** The controller's settings, as the rest of the simulator names them (only this directory imports the controller). */
export type { ControllerSettings };
import { isLatencySensitive } from '../../core/latency-curves.js';
import { ValidationError } from '../../core/validation.js';
import { queueConfigFor } from '../queue-options.js';
import {
  groundTruthFor,
  learnedColocationOf,
  loadRequestCatalog,
  loadRequestTrace,
  requestScheduler,
  spotRunOptions,
  type RunRequest,
} from '../run-request.js';
import type { RunResult } from '../../world/run-result.js';
import type { Trace } from '../../world/trace.js';
import { checkEveryJobAdmissible } from '../../world/never-fits.js';
import { runControllerSimulation } from './run-controller.js';

/**
 * One `--runtime controller` run in this thread (a run worker calls it): the request's trace, catalog and ground
 * truth as for the engine (run-request.ts executeRun), the scheduler from the simulator's factory, and the controller
 * settings either from the user's config (`--config`, settingsFromConfig) or from the caps and queue flags.
 */
export async function executeControllerRun(
  request: RunRequest,
  onProgress?: (fraction: number) => void,
): Promise<RunResult> {
  refuseEngineOnlyFields(request);
  const catalog = loadRequestCatalog(request);
  const trace = loadRequestTrace(request, catalog);
  refuseNetworkDeclarations(request, trace);
  const groundTruth = groundTruthFor(request);
  const settings = controllerSettingsFor(
    request,
    trace.jobs.map((j) => j.durationSeconds * j.tasks.length),
  );
  const caps = settings.caps;
  checkEveryJobAdmissible(
    trace,
    catalog,
    caps,
    settings.admitBy ?? 'standalone',
    settings.queue,
    request.spot !== undefined,
  );
  // A config's `scheduler:` tunables reach the factory through the request's eva fields (simulate.ts maps them).
  const scheduler = requestScheduler(request, catalog, groundTruth, caps);
  const result = await runControllerSimulation({
    trace,
    catalog,
    groundTruth,
    scheduler,
    name: request.scheduler,
    settings,
    ...spotRunOptions(request),
    ...(request.roundSeconds !== undefined ? { roundSeconds: request.roundSeconds } : {}),
    ...(request.pollSeconds !== undefined ? { pollSeconds: request.pollSeconds } : {}),
    ...(request.earlyRounds === true ? { earlyRounds: true } : {}),
    ...(request.starts === undefined ? {} : { reportStarts: true, coStart: request.starts.coStart === true }),
    ...(onProgress !== undefined
      ? { onProgress: (p) => onProgress(p.totalJobs > 0 ? p.finishedJobs / p.totalJobs : 1) }
      : {}),
  });
  return {
    ...result,
    ...learnedColocationOf(request, scheduler),
    summary: {
      ...result.summary,
      scheduler: request.label ?? request.scheduler,
      // Which value of time an Eva run planned with, as the engine's report names it (a `--value-of-time` sweep).
      ...(request.evaValueOfTime !== undefined && request.scheduler.startsWith('eva')
        ? { valueOfTimePerJobHour: request.evaValueOfTime }
        : {}),
    },
  };
}

/**
 * What the engine simulates that this runtime has no model of: refused, naming the flag, rather than a run that
 * reports the request's settings while it ran without them. The controller's own completion-time predictions run
 * against real time, so `queue.predict` is left aside here and the report says the predictions were off.
 */
function refuseEngineOnlyFields(request: RunRequest): void {
  const flags = [
    ...(request.network === undefined ? [] : ['--latency-config']),
    ...((request.trace.latencySensitiveShare ?? 0) > 0 ? ['--latency-sensitive'] : []),
  ];
  if (flags.length > 0)
    throw new ValidationError(flags.join(', '), [
      'the simulated network runs in the engine runtime only (--runtime engine): with --runtime controller, round trips reach the controller from its workers',
    ]);
}

/**
 * A trace whose jobs declare a `network:` that matters (a latency curve, or traffic billed across zones): refused as
 * the flags are, since this runtime has no simulated network and would report those jobs at full speed with no
 * cross-zone cost. A declaration of `none` with no traffic changes nothing in either runtime.
 */
function refuseNetworkDeclarations(request: RunRequest, trace: Trace): void {
  const declaring = trace.jobs.filter(
    (j) => j.network !== undefined && (isLatencySensitive(j.network.sensitivity) || j.network.gibPerHour > 0),
  );
  if (declaring.length === 0) return;
  const named = declaring.slice(0, 3).map((j) => JSON.stringify(j.id));
  const more = declaring.length > named.length ? ` and ${declaring.length - named.length} more` : '';
  throw new ValidationError(request.trace.path ?? '--trace', [
    `network (job ${named.join(', ')}${more}): the simulated network runs in the engine runtime only ` +
      "(--runtime engine): with --runtime controller, these jobs' round trips and cross-zone traffic would be ignored",
  ]);
}

/**
 * The controller's settings for a run. With a config: its own settings (caps, queue classes, round and poll
 * periods), except what only makes sense against a real cloud (a dry run never acts, reports need an object
 * store). Otherwise the caps and queue the flags asked for, as the engine's queue layer gets them.
 */
export function controllerSettingsFor(
  request: RunRequest,
  jobSizesSeconds: readonly number[],
): Partial<ControllerSettings> & Pick<ControllerSettings, 'caps'> {
  const fromConfig = request.controllerSettings;
  // Placement between rounds as the flags ask (`--place-between-rounds`, `--bind`), over the config's choice.
  const starts =
    request.starts === undefined
      ? {}
      : { placeBetweenRounds: request.starts.placeBetweenRounds, bindBetweenRounds: request.starts.bind };
  const moves = request.makeBeforeBreak === undefined ? {} : { makeBeforeBreak: request.makeBeforeBreak };
  const queue = request.queue;
  // The request's round period and queue flags over the config's, as the engine takes them (`--round-seconds`,
  // `--queue`, the caps, `--admit-by`).
  const round = request.roundSeconds === undefined ? {} : { roundSeconds: request.roundSeconds };
  if (fromConfig !== undefined) {
    const queueConfig =
      queue?.config ??
      fromConfig.queue ??
      (queue === undefined ? undefined : queueConfigFor(queue.kind, jobSizesSeconds));
    return {
      ...fromConfig,
      ...starts,
      ...moves,
      ...(queue === undefined ? {} : { caps: queue.caps }),
      ...(queueConfig === undefined ? {} : { queue: queueConfig }),
      ...(queue?.admitBy === undefined ? {} : { admitBy: queue.admitBy }),
      dryRun: false,
      reportEverySeconds: Number.POSITIVE_INFINITY,
      ...round,
      pollSeconds: request.pollSeconds ?? fromConfig.pollSeconds,
    };
  }
  return {
    ...starts,
    ...moves,
    ...round,
    caps: queue?.caps ?? {},
    ...(queue === undefined ? {} : { queue: queue.config ?? queueConfigFor(queue.kind, jobSizesSeconds) }),
    ...(queue?.admitBy === undefined ? {} : { admitBy: queue.admitBy }),
  };
}
