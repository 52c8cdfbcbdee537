import type { LocalInstance } from './local-provider.js';
import { isWorkerOf } from './worker-spawner.js';

/**
 * Stopping local instances' workers the gentle way: SIGTERM to each worker (spawned with --stop-tasks-on-exit, so it
 * checkpoints and stops its tasks, reports once more, and exits), then wait for them. What is still alive after
 * the grace period is left to the provider's terminate, which kills it and its tasks.
 */

export interface WorkerStopOutcome {
  readonly instanceId: string;
  readonly pid: number | undefined;
  /** exited: after our SIGTERM; gone: was not running; still-running: did not exit within the grace period. */
  readonly outcome: 'exited' | 'gone' | 'still-running';
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
  const signalled = new Set<string>();
  for (const inst of liveWorkers(running)) {
    try {
      process.kill(inst.pid as number, 'SIGTERM');
      signalled.add(inst.instanceId);
    } catch {
      // exited meanwhile
    }
  }
  const deadline = Date.now() + options.graceMs;
  while (liveWorkers(running).length > 0 && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 200));
  const alive = new Set(liveWorkers(running).map((i) => i.instanceId));
  return running.map((i) => ({
    instanceId: i.instanceId,
    pid: i.pid,
    outcome: alive.has(i.instanceId) ? 'still-running' : signalled.has(i.instanceId) ? 'exited' : 'gone',
  }));
}
