/**
 * Stopping local mode's worker processes with the controller (each checkpoints its tasks first), or leaving them with
 * `--keep-workers`.
 */
import type { LocalProvider } from '../cloud/local/local-provider.js';
import { exitTimes, liveWorkers, stopWorkersGently } from '../cloud/local/local-shutdown.js';
import { LIVE_JOB_STATES } from '../controller/state/lifecycle.js';
import type { StateStore } from '../controller/state-store.js';

/** Seconds a stopping worker may need: its jobs' longest checkpoint timeout, plus the uploads and a last report. */
export function workerStopGraceSeconds(store: StateStore): number {
  const timeouts = store.listJobs({ states: LIVE_JOB_STATES }).map((j) => j.spec.checkpoint.timeoutSeconds);
  return Math.max(0, ...timeouts) + 20;
}

/**
 * Local mode's instances are processes on this machine: a stopped controller stops them too (each worker checkpoints
 * and stops its tasks, then its instance is terminated), so nothing keeps running, and nothing is billed, unseen. The
 * next start finds the instances terminated and resumes their jobs from those checkpoints. `--keep-workers` leaves
 * them running and says which, and how to stop them later. Returns the instances terminated, each with when
 * it ended: when its worker exited.
 */
export async function stopLocalFleet(
  provider: LocalProvider,
  options: {
    readonly keepWorkers: boolean;
    readonly stateDir: string;
    readonly giveUpSeconds: number;
    readonly graceSeconds: number;
  },
): Promise<{ readonly cloudId: string; readonly atSeconds: number }[]> {
  const running = provider.instances().filter((i) => i.state === 'running');
  if (running.length === 0) return [];
  const out = (line: string): boolean => process.stdout.write(`${line}\n`);
  if (options.keepWorkers) {
    const live = liveWorkers(running);
    out(
      `--keep-workers: left ${live.length} worker process(es) running with their tasks: ` +
        `${live.map((i) => `${i.instanceId} (pid ${i.pid ?? '?'})`).join(', ') || 'none still alive'}`,
    );
    out(
      `  a controller started again on ${options.stateDir} adopts them; ` +
        (options.giveUpSeconds > 0
          ? `without one, each checkpoints its tasks and exits after ${options.giveUpSeconds} s`
          : 'without one they wait indefinitely (workerGiveUpSeconds: 0)'),
    );
    out(`  stop them now with: fleetwise down --state-dir ${options.stateDir}`);
    return [];
  }
  out(
    `stopping ${running.length} local worker(s): checkpointing their tasks (up to ${options.graceSeconds} s; ` +
      'Ctrl-C again exits at once and leaves them running)',
  );
  const outcomes = await stopWorkersGently(running, { graceMs: options.graceSeconds * 1000 });
  // Each instance ends when its own worker exited (a killed one now), not when the slowest was done.
  await provider.terminate(
    running.map((i) => i.instanceId),
    exitTimes(outcomes),
  );
  const killed = outcomes.filter((o) => o.outcome === 'still-running').map((o) => o.instanceId);
  out(
    `stopped ${outcomes.map((o) => `${o.instanceId} (pid ${o.pid ?? '?'})`).join(', ')}` +
      (killed.length === 0 ? '' : `; killed ${killed.join(', ')}, which did not stop in time`) +
      '; their jobs resume from their checkpoints when the controller starts again',
  );
  const stopped = new Set(running.map((i) => i.instanceId));
  return provider
    .instances()
    .filter((i) => stopped.has(i.instanceId) && i.terminatedAtMs !== undefined)
    .map((i) => ({ cloudId: i.instanceId, atSeconds: (i.terminatedAtMs as number) / 1000 }));
}
