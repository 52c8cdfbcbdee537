import { z } from 'zod';
import type { DryRunResponse } from './api-responses.js';
import { completionText, predictionsOf } from './commands/job.js';
import { formatDollars, formatTable, formatTime } from './table.js';

/** A dry run's spot quote (absent: the controller buys no spot, the job never runs on spot, or an older release). */
const dryRunSpotSchema = z.object({
  costPerHour: z.number(),
  tasks: z.array(
    z.object({ name: z.string(), instanceType: z.string(), zone: z.string(), costPerHour: z.number() }),
  ),
});

/**
 * "spot  $0.04/hour alone at the cheapest spot price of its host (c7i.large $0.04/h in us-east-1b)": what the job would
 * cost where the controller buys it on spot, besides the on-demand quote.
 */
function spotLine(view: DryRunResponse): string {
  const parsed = dryRunSpotSchema.safeParse((view as Record<string, unknown>)['spot']);
  if (!parsed.success) return '';
  const hosts = parsed.data.tasks
    .map((t) => `${t.instanceType} ${formatDollars(t.costPerHour)}/h in ${t.zone}`)
    .join(', ');
  return (
    `on spot    ${formatDollars(parsed.data.costPerHour)}/hour alone at the cheapest spot price of its host ` +
    `(${hosts}); bought on spot when that, interruption risk priced in, beats on demand\n`
  );
}

/** What `submit --dry-run` prints of a spec the controller found valid: its cost, hosts, spot quote, holds and ETA. */
export function formatDryRun(file: string, view: DryRunResponse): string {
  const eta = view.eta;
  const held = view.waitingFor ?? [];
  const bound = view.startsNoEarlierThanSeconds;
  const heldLine =
    held.length === 0
      ? ''
      : `held       until ${held.join(', ')} ${held.length === 1 ? 'has' : 'have'} succeeded` +
        `${bound === undefined || bound === null ? '' : `: by ${predictionsOf(held.length)} it would start no earlier than ${formatTime(bound)}`}\n`;
  const etaLine =
    eta === null
      ? 'eta        - (no prediction: predictions are off on this controller, or it is stopping)'
      : `eta        ${completionText(eta) ?? 'unknown'}` +
        `${eta.startSeconds === null ? '' : `, start ${formatTime(eta.startSeconds)}`} (${eta.basis})`;
  const arrayLine =
    view.arraySize === undefined
      ? ''
      : `array      ${view.arraySize} jobs, alike but for FLEETWISE_ARRAY_INDEX 0–${view.arraySize - 1}; the cost ` +
        'and ETA below are of one of them submitted alone\n';
  return (
    `${file}: ${view.name} (team ${view.team}) is valid; dry run, nothing submitted\n` +
    arrayLine +
    formatTable(
      ['TASK', 'REPLICAS', 'INSTANCE TYPE', '$/HOUR'],
      view.tasks.map((t) => [t.name, t.replicas, t.instanceType, formatDollars(t.costPerHour)]),
    ) +
    `cost       ${formatDollars(view.costPerHour)}/hour alone (reservation prices; packing shares instances and costs less)\n` +
    spotLine(view) +
    heldLine +
    `${etaLine}\n`
  );
}
