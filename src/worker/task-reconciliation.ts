import type { z } from 'zod';
import { desiredTaskSchema, type DesiredTask } from '../protocol/worker-protocol.js';
import type { AgentLogger } from './agent-options.js';
import type { TaskLifecycle } from './task-lifecycle.js';

/**
 * One heartbeat's answer carried out on this host, level-triggered: each desired task is started, released, stopped or
 * forgotten as its action and its local phase say, and a task the answer no longer names is checkpointed and stopped
 * (running) or forgotten (ended). The work itself runs in the background (task-lifecycle.ts).
 */

export interface ReconcileDeps {
  readonly tasks: TaskLifecycle;
  readonly log: AgentLogger;
  /** A spot interruption is under way: nothing starts on this host. */
  readonly evacuating: () => boolean;
}

export function reconcileTasks(deps: ReconcileDeps, answer: readonly DesiredTask[]): void {
  // A connection that does not validate (tests, embedders) cannot make the agent act on a malformed spec either.
  const desired: DesiredTask[] = [];
  for (const [i, raw] of answer.entries()) {
    const parsed = desiredTaskSchema.safeParse(raw);
    if (parsed.success) desired.push(parsed.data);
    else
      deps.log.warn(
        `refused desired task ${i} from the controller: ${describeIssues(parsed.error, `tasks.${i}`)}`,
      );
  }
  const wanted = new Map(desired.map((d) => [d.taskId, d]));
  const tasks = deps.tasks;
  for (const d of desired) {
    const t = tasks.get(d.taskId);
    if (t?.busy !== undefined) {
      // A checkpoint-stop under way keeps the deadline it began with, unless this one is sooner: the controller caps
      // the timeout at what a notice leaves, and a notice that reached only the controller (the interruption queue)
      // must cut short a stop begun before it (a move with the job's 900 s) as much as one begun after.
      if (d.action === 'checkpoint-stop') tasks.capStop(t, d.checkpoint.timeoutSeconds);
      // A stop without a checkpoint (its job ended) turns a checkpoint-stop under way into a kill now: a task
      // ignoring the signal would otherwise run, billed, until the job's checkpoint timeout. Anything else busy (a
      // start) is stopped once done, by a later answer.
      else if (d.action === 'stop') tasks.cutStopShort(t);
      continue;
    }
    if (d.action === 'run') {
      // The instance is going away: nothing starts here (the controller moves the tasks once it hears).
      if (deps.evacuating()) continue;
      // A task that exited in an earlier attempt of its job runs again (from its checkpoint) in the next one. A task
      // held ready in another attempt (co-start: its job was retried, and placed here again before this worker heard
      // an answer without it) is prepared again for this one: the controller counts only this attempt's ready
      // tasks, and a release must never start the other attempt's launch.
      const newAttempt =
        t !== undefined &&
        (((t.phase === 'failed' || t.phase === 'succeeded') && (d.attempt ?? 1) > (t.attempt ?? 1)) ||
          (t.phase === 'ready' && (d.attempt ?? 1) !== (t.attempt ?? 1)));
      if (t === undefined || t.phase === 'stopped' || newAttempt) tasks.start(d);
      // Co-start: its job was released (the hold is gone), so what was prepared runs now.
      else if (t.phase === 'ready' && d.hold !== true) tasks.release(t);
    } else if (t?.phase === 'ready')
      // Prepared and never started: nothing to checkpoint or stop.
      tasks.background(t, () => tasks.forget(t));
    else if (t !== undefined && isStoppable(t.phase))
      // A stop that ended without finishing (its task is still `checkpointing`) is started again: no dead end.
      tasks.background(t, () => tasks.stop(t, d.action === 'checkpoint-stop', d.checkpoint));
  }
  for (const t of tasks.all()) {
    if (wanted.has(t.taskId) || t.busy !== undefined) continue;
    if (t.phase === 'running' || t.phase === 'checkpointing')
      tasks.background(t, () =>
        tasks.stop(t, true, {
          signal: (t.signal ?? 'SIGTERM') as DesiredTask['checkpoint']['signal'],
          timeoutSeconds: t.timeoutSeconds ?? 60,
        }),
      );
    else tasks.background(t, () => tasks.forget(t));
  }
}

/** Phases a stop applies to: under way, or a stop that did not finish. */
function isStoppable(phase: string): boolean {
  return phase === 'running' || phase === 'starting' || phase === 'checkpointing';
}

/** `tasks.0.action: Invalid option…; …` — the field path and zod's reason for each issue. */
export function describeIssues(error: z.ZodError, prefix = ''): string {
  return error.issues
    .slice(0, 5)
    .map(
      (i) =>
        `${[prefix, ...i.path.map(String)].filter((p) => p !== '').join('.') || '(answer)'}: ${i.message}`,
    )
    .join('; ');
}
