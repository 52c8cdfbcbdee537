import type { Command } from 'commander';
import { z } from 'zod';
import { FleetwiseClient } from '../client.js';
import { addConnectionOptions, type ConnectionOptions } from '../client-connection.js';
import { formatDollars, formatTable, formatTime, printJson } from '../table.js';
import { terminalSafeDeep } from '../terminal-text.js';
import { formatDuration } from '../work-estimate.js';

interface ClusterOptions extends ConnectionOptions {
  readonly json?: boolean;
}

/** 412 µs, 5.21 ms. */
export function formatMicroseconds(us: number | undefined): string {
  if (us === undefined) return '-';
  return us < 1000 ? `${Math.round(us)} µs` : `${(us / 1000).toFixed(2)} ms`;
}

/** An instance's market as the controller says it; `-` from a controller of an older release, which does not. */
const marketSchema = z.object({ market: z.enum(['spot', 'on-demand']) });

function marketCell(instance: object): string {
  const parsed = marketSchema.safeParse(instance);
  return parsed.success ? parsed.data.market : '-';
}

/** An instance's last launch error as the controller says it: absent while none, and from older releases. */
const launchErrorSchema = z.object({
  launchError: z.object({
    // Withheld from a team token.
    message: z.string().optional(),
    code: z.string().optional(),
    attempts: z.number(),
    atSeconds: z.number(),
    nextAttemptAtSeconds: z.number(),
    permanent: z.boolean(),
  }),
});

/**
 * The line printed under an instance whose launches fail, saying why it is still `requested`: how often and when it
 * failed, when it is tried again, the cloud's code and message, and whether only an operator can lift the refusal.
 */
export function launchErrorLine(instance: object, nowSeconds: number): string | undefined {
  const parsed = launchErrorSchema.safeParse(instance);
  if (!parsed.success) return undefined;
  const e = parsed.data.launchError;
  const wait = e.nextAttemptAtSeconds - nowSeconds;
  const code = e.code ?? 'no error code';
  return (
    `  launch failed ${e.attempts === 1 ? 'once' : `${e.attempts} times`} ` +
    `(${e.permanent ? `${code}: refused until its cause is fixed` : code}), last at ${formatTime(e.atSeconds)}, ` +
    `${wait >= 1 ? `next try in ${formatDuration(wait)}` : 'next try due'}` +
    `${e.message === undefined ? '' : `: ${e.message}`}`
  );
}

export function registerCluster(program: Command): void {
  addConnectionOptions(
    program
      .command('cluster')
      .description(
        'show the instances (zone/placement group, market), the tasks on them, the current $/hour and the round trips the workers measured between them',
      )
      .option('--json', 'print the cluster view (and its round trips, as `latency`) as JSON'),
  ).action(async (options: ClusterOptions) => {
    const client = FleetwiseClient.fromOptions(options);
    const [view, measured] = await Promise.all([client.cluster(), client.clusterLatency()]);
    if (options.json === true) return printJson({ ...view, latency: measured });
    const [cluster, latency] = terminalSafeDeep([view, measured] as const);
    if (cluster.instances.length === 0) process.stdout.write('no instances\n');
    else {
      const [header, ...rows] = formatTable(
        ['INSTANCE', 'CLOUD ID', 'TYPE', 'STATE', 'ZONE', 'MARKET', '$/HOUR', 'TASKS'],
        cluster.instances.map((i) => [
          i.id,
          i.cloudId ?? '-',
          i.typeName,
          i.state,
          // zone/placement group: instances of one group are the nearest the cloud can place them.
          `${i.availabilityZone ?? '-'}${i.placementGroup === undefined ? '' : `/${i.placementGroup}`}`,
          // $/hour is as billed: a spot instance's is its pool's price, below its type's list price.
          marketCell(i),
          formatDollars(i.costPerHour),
          i.taskIds.length === 0 ? '-' : i.taskIds.join(','),
        ]),
      )
        .trimEnd()
        .split('\n');
      // A failing launch goes right under its instance's row: that is where `requested` leaves one wondering.
      const now = Date.now() / 1000;
      const lines = rows.flatMap((row, k) => {
        const instance = cluster.instances[k];
        const note = instance === undefined ? undefined : launchErrorLine(instance, now);
        return note === undefined ? [row] : [row, note];
      });
      process.stdout.write(`${[header, ...lines].join('\n')}\n`);
    }
    const pending = cluster.tasks.filter((t) => t.instanceId === undefined).length;
    process.stdout.write(
      `\n${cluster.instances.length} instances, ${cluster.tasks.length} tasks (${pending} unplaced)` +
        `${cluster.scope === 'team' ? ' of your team' : ''}, ${formatDollars(cluster.costPerHour)}/hour\n`,
    );
    if (cluster.orphans.length > 0)
      process.stdout.write(
        `\n${formatTable(
          ['ORPHAN', 'TYPE', 'STATE', 'ZONE', 'POLICY'],
          cluster.orphans.map((o) => [o.cloudId, o.typeName, o.state, o.availabilityZone ?? '-', o.policy]),
        )}` +
          `${cluster.orphans.length} orphan instance(s): tagged with the cluster but unknown to its state, so what runs ` +
          'on them is not accounted for; kept running and not used. Restore the state if it was lost; otherwise stop ' +
          'them, or restart the controller with --orphans adopt|terminate\n',
      );
    if (latency.pairs.length > 0) {
      const now = Date.now() / 1000;
      process.stdout.write(
        `\nround trips measured by the workers (max and p99 over each one's window):\n` +
          formatTable(
            ['FROM', 'TO', 'MAX', 'P99', 'SAMPLES', 'FAILED', 'AGE'],
            latency.pairs.map((p) => [
              p.fromInstanceId,
              p.toInstanceId,
              formatMicroseconds(p.maxMicroseconds),
              formatMicroseconds(p.p99Microseconds),
              String(p.samples),
              String(p.failures),
              `${Math.max(0, Math.round(now - p.atSeconds))} s`,
            ]),
          ),
      );
    }
    // Controllers sharing a PostgreSQL state: which one answered, and the lease's fencing token.
    const leader = cluster.controller;
    if (leader !== undefined && leader.epoch !== null)
      process.stdout.write(
        `controller: ${leader.role}, lease epoch ${leader.epoch}` +
          `${leader.holder === null ? '' : ` held by ${leader.holder}`}\n`,
      );
  });
}
