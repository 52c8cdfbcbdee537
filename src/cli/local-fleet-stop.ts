/**
 * Stopping local mode's worker processes with the controller (each checkpoints its tasks first), or leaving them with
 * `--keep-workers`.
 */
import { join } from 'node:path';
import type { LocalInstance, LocalProvider } from '../cloud/local/local-provider.js';
import { exitTimes, liveWorkers, stopWorkersGently } from '../cloud/local/local-shutdown.js';
import { readWorkerEngine, type WorkerEngine } from '../cloud/local/worker-spawner.js';
import { LIVE_JOB_STATES } from '../controller/state/lifecycle.js';
import type { StateStore } from '../controller/state-store.js';
import { containerName } from '../worker/executors/docker.js';
import { dockerWhere } from '../worker/executors/docker-engine.js';
import { executorOf } from './commands/local-task-stopper.js';

/** Seconds a stopping worker may need: its jobs' longest checkpoint timeout, plus the uploads and a last report. */
export function workerStopGraceSeconds(store: StateStore): number {
  const timeouts = store.listJobs({ states: LIVE_JOB_STATES }).map((j) => j.spec.checkpoint.timeoutSeconds);
  return Math.max(0, ...timeouts) + 20;
}

/**
 * Local mode's instances are processes on this machine: a stopped controller stops them too (each worker checkpoints
 * and stops its tasks, then its instance is terminated), so nothing keeps running, and nothing is billed, unseen. The
 * next start finds the instances terminated and resumes their jobs from those checkpoints. `--keep-workers` leaves
 * them running and says which, and how to stop them later. Tasks that could not be stopped (their engine did not
 * answer) are named with where they may still run, and that their jobs may run twice: the instances keep them on
 * record (`tasksLeft`) for `fleetwise down` or the next controller to stop. Returns the instances terminated, each
 * with when it ended: when its worker exited.
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
  // Tasks earlier ended instances left running are tried once more with the rest.
  const earlierLeft = options.keepWorkers
    ? []
    : provider.instances().filter((i) => i.state === 'terminated' && i.tasksLeft !== undefined);
  if (running.length === 0 && earlierLeft.length === 0) return [];
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
  if (running.length > 0)
    out(
      `stopping ${running.length} local worker(s): checkpointing their tasks (up to ${options.graceSeconds} s; ` +
        'Ctrl-C again exits at once and leaves them running)',
    );
  const outcomes = await stopWorkersGently(running, { graceMs: options.graceSeconds * 1000 });
  // A retry of leftover tasks under way finishes first: its outcome is recorded before these are read.
  await provider.leftTaskStopsDone();
  // Each instance ends when its own worker exited (a killed one now), not when the slowest was done.
  await provider.terminate(
    [...running, ...earlierLeft].map((i) => i.instanceId),
    exitTimes(outcomes),
  );
  const ids = new Set([...running, ...earlierLeft].map((i) => i.instanceId));
  const left = provider.instances().filter((i) => ids.has(i.instanceId) && i.tasksLeft !== undefined);
  const leftIds = new Set(left.map((i) => i.instanceId));
  const clean = outcomes.filter((o) => !leftIds.has(o.instanceId));
  const killed = clean.filter((o) => o.outcome === 'still-running').map((o) => o.instanceId);
  if (clean.length > 0)
    out(
      `stopped ${clean.map((o) => `${o.instanceId} (pid ${o.pid ?? '?'})`).join(', ')}` +
        (killed.length === 0 ? '' : `; killed ${killed.join(', ')}, which did not stop in time`) +
        '; their jobs resume from their checkpoints when the controller starts again',
    );
  for (const inst of left) out(leftTasksWarning(inst, options.stateDir));
  const stopped = new Set(running.map((i) => i.instanceId));
  return provider
    .instances()
    .filter((i) => stopped.has(i.instanceId) && i.terminatedAtMs !== undefined)
    .map((i) => ({ cloudId: i.instanceId, atSeconds: (i.terminatedAtMs as number) / 1000 }));
}

/**
 * An ended instance whose tasks could not be stopped: which may still run and where, that their jobs may run twice,
 * and how to stop them.
 */
function leftTasksWarning(instance: LocalInstance, stateDir: string): string {
  const tasks = instance.tasksLeft ?? [];
  return (
    `warning: local instance ${instance.instanceId} stopped, but its tasks could not be: ` +
    `${tasksStillRunning(instance, tasks, readWorkerEngine(instance.dir))}; their jobs resume when the controller ` +
    'starts again and run twice until those are stopped: stop them with ' +
    `fleetwise down --state-dir ${stateDir} once their engine answers, or remove them yourself and run ` +
    `fleetwise down --state-dir ${stateDir} --forget-tasks ${instance.instanceId}`
  );
}

/** The tasks an instance may have left running, as a user finds them: containers by name, processes by directory. */
export function tasksStillRunning(
  instance: LocalInstance,
  tasks: readonly string[],
  engine: WorkerEngine | undefined,
): string {
  if (executorOf(instance.dir, engine) === 'process')
    return `its task processes (${tasks.join(', ') || 'none recorded'}) under ${join(instance.dir, 'executor')} may still run`;
  const where =
    engine === undefined
      ? `the Docker engine at ${dockerWhere()} (its worker's engine was not recorded)`
      : `the Docker engine at ${dockerWhere({ DOCKER_HOST: engine.dockerHost })}`;
  const names = tasks.map((t) => containerName(t, instance.instanceId));
  return names.length === 0
    ? `containers labelled fleetwise.instance=${instance.instanceId} may still run on ${where}`
    : `container${names.length === 1 ? '' : 's'} ${names.join(', ')} may still run on ${where}`;
}
