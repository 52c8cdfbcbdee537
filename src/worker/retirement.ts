import type { AgentLogger } from './agent-options.js';
import { ControllerRequestError } from './controller-client.js';
import type { Executor } from './executor.js';
import type { TaskLifecycle } from './task-lifecycle.js';

/**
 * A worker the controller has retired: it took the worker for lost (a partition longer than the heartbeat timeout),
 * terminated or is terminating its instance, and resumed its tasks elsewhere from their last uploaded checkpoints.
 * Where terminating does not end the worker at once (EC2's shutting-down window, a terminate call that fails and is
 * retried, external workers), the worker learns it from the controller's next answer, and its tasks must end there
 * and then: running on, each would upload checkpoints under the same keys and seqs as the copy that replaced it.
 */

/**
 * The states a 410 names that retire this worker: the controller's record of the instance (terminating, terminated:
 * routes of the heartbeat and of any registration), and EC2's at a launch registration (shutting-down, terminated,
 * stopping, stopped: the controller's cloud sync takes such an instance for lost and moves its tasks alike).
 */
const RETIRED_STATE = /\bis (terminating|terminated|shutting-down|stopping|stopped)\b/;

/**
 * The state named by a controller answer that retires this worker; undefined for any other answer. A 410 that names
 * none of them (a proxy's, a reason of a newer controller) is not taken for a retirement: killing tasks the controller
 * may still count on is worse than the give-up time of an ordinary failure.
 */
export function retiredState(e: unknown): string | undefined {
  if (!(e instanceof ControllerRequestError) || e.statusCode !== 410) return undefined;
  return RETIRED_STATE.exec(e.message)?.[1];
}

/** Phases in which a task may still run on this host. */
const LIVE_PHASES: ReadonlySet<string> = new Set(['starting', 'running', 'checkpointing']);

/**
 * End every task of a retired worker, uploading nothing: the watchers first (no checkpoint is uploaded or pruned
 * from then on, whatever a stop under way asks of them), then a kill of each task, never a checkpoint signal (its last
 * checkpoint is the one the controller resumed it from). The caller has made the object store unreachable and ended
 * the store retries, so what was under way (a start, a checkpoint-stop, an exit being recorded) ends without writing;
 * a start under way may still have launched its task meanwhile, which is killed once it has ended. Returns the ids of
 * the tasks that were alive.
 */
export async function stopRetiredTasks(
  tasks: TaskLifecycle,
  executor: Executor,
  log: AgentLogger,
): Promise<string[]> {
  const all = [...tasks.all()];
  await Promise.all(all.map((t) => t.watcher?.retire()));
  const alive = all.filter((t) => LIVE_PHASES.has(t.phase));
  await Promise.all(
    alive.map((t) =>
      executor
        .kill(t.taskId)
        .catch((e: unknown) => log.warn(`task ${t.taskId}: could not kill it: ${(e as Error).message}`)),
    ),
  );
  await tasks.settle();
  for (const t of tasks.all()) {
    if (!LIVE_PHASES.has(t.phase)) continue;
    // Started after the kill above, or left mid-stop: killed now, and recorded as stopped.
    await t.watcher?.retire();
    await tasks
      .stop(t, false, { signal: 'SIGKILL', timeoutSeconds: 0 })
      .catch((e: unknown) => log.warn(`task ${t.taskId}: could not kill it: ${(e as Error).message}`));
    if (!alive.includes(t)) alive.push(t);
  }
  return alive.map((t) => t.taskId);
}
