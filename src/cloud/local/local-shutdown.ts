import { readWorkerExit } from './worker-exit-record.js';
import type { LocalInstance } from './local-provider.js';
import { isWorkerOf } from './worker-spawner.js';

/**
 * Stopping local instances' workers the gentle way: SIGTERM to each worker (spawned with --stop-tasks-on-exit, so it
 * checkpoints and stops its tasks, reports once more, and exits), then wait for them. What is still alive after
 * the grace period is left to the provider's terminate, which kills it and its tasks. Each worker's exit is timed:
 * its instance ends then (`exitTimes`), not when the slowest of them is done.
 */

export interface WorkerStopOutcome {
  readonly instanceId: string;
  readonly pid: number | undefined;
  /** exited: after our SIGTERM; gone: was not running; still-running: did not exit within the grace period. */
  readonly outcome: 'exited' | 'gone' | 'still-running';
  /**
   * When its worker was found gone: within a poll of its exit; for one gone before the stop began, when it recorded
   * its exit (a worker that gave up), else when the stop began. Undefined for one still running, which ends when it
   * is killed.
   */
  readonly exitedAtMs?: number | undefined;
}

/** The local instances whose worker process still runs (by pid and command line). */
export function liveWorkers(instances: readonly LocalInstance[]): LocalInstance[] {
  return instances.filter(
    (i) => i.state === 'running' && i.pid !== undefined && isWorkerOf(i.pid, i.instanceId),
  );
}

export async function stopWorkersGently(
  instances: readonly LocalInstance[],
  options: { readonly graceMs: number; readonly pollMs?: number },
): Promise<WorkerStopOutcome[]> {
  const running = instances.filter((i) => i.state === 'running');
  const exitedAtMs = new Map<string, number>();
  let waiting = liveWorkers(running);
  const startedMs = Date.now();
  // A worker that gave up said when it went; later than the stop's start it cannot be, whatever its record says.
  for (const inst of running)
    if (!waiting.includes(inst))
      exitedAtMs.set(inst.instanceId, Math.min(startedMs, readWorkerExit(inst.dir)?.exitedAtMs ?? startedMs));
  const signalled = new Set<string>();
  for (const inst of waiting) {
    try {
      process.kill(inst.pid as number, 'SIGTERM');
      signalled.add(inst.instanceId);
    } catch {
      // exited meanwhile
    }
  }
  const deadline = startedMs + options.graceMs;
  for (;;) {
    const alive = liveWorkers(waiting);
    const nowMs = Date.now();
    for (const inst of waiting) if (!alive.includes(inst)) exitedAtMs.set(inst.instanceId, nowMs);
    waiting = alive;
    if (waiting.length === 0 || nowMs >= deadline) break;
    await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 200));
  }
  const alive = new Set(waiting.map((i) => i.instanceId));
  return running.map((i) => ({
    instanceId: i.instanceId,
    pid: i.pid,
    outcome: alive.has(i.instanceId) ? 'still-running' : signalled.has(i.instanceId) ? 'exited' : 'gone',
    exitedAtMs: exitedAtMs.get(i.instanceId),
  }));
}

/** When each stopped worker exited, by instance: what the provider's terminate ends their instances at. */
export function exitTimes(outcomes: readonly WorkerStopOutcome[]): Map<string, number> {
  return new Map(
    outcomes.flatMap((o) => (o.exitedAtMs === undefined ? [] : [[o.instanceId, o.exitedAtMs] as const])),
  );
}
