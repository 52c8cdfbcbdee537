import { z } from 'zod';
import { ValidationError } from '../core/validation.js';
import type { JobSpec, TaskTemplateSpec } from './job-spec/spec.js';
import { retryStrategyWarnings } from './job-spec/retry-schema.js';
import { runLimitWarnings } from './run-limits.js';
import type { StateStore } from './state-store.js';
import { unusedQueueFieldWarnings } from './job-spec/queue-section.js';

/**
 * What a job's tasks become on this cluster's workers, said at submission. The process executor (local mode without
 * Docker) runs a task's command on the host: an `image:` is not pulled and a `build:` is not built, which the
 * submitter is told (a warning in the answer and the job view) instead of finding out from a host program's
 * behaviour. What can never run is refused: under the process executor a task without a command (it would need the
 * image's default command), under Docker a task with neither image nor build.
 */

export type ExecutorKind = 'docker' | 'process';

/** The job spec as API errors name it (api/submission.ts). */
const SOURCE = 'job spec';

function describeCommand(command: readonly string[]): string {
  const text = command.join(' ');
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

function checkTask(
  t: TaskTemplateSpec,
  index: number,
  executor: ExecutorKind,
): { problem?: string; warning?: string } {
  const path = `tasks.${index}`;
  if (executor === 'docker') {
    if (t.image === undefined && t.build === undefined)
      return {
        problem:
          `${path}: a command alone (no image or build) runs only under the process executor; ` +
          'this cluster runs tasks in Docker: give an image or a build context',
      };
    return {};
  }
  // An uploaded build context is named by its stored archive, which would mean nothing to the submitter.
  const origin =
    t.image !== undefined ? `image ${t.image}` : t.build !== undefined ? 'a build context' : undefined;
  if (origin === undefined) return {};
  if (t.command === undefined)
    return {
      problem:
        `${path}: ${origin} without a command cannot run here: tasks run without Docker, and the process executor ` +
        "runs a task's command on this host (it cannot use the image's default command); give a command " +
        '(or start the controller where Docker answers)',
    };
  const where =
    t.image !== undefined
      ? `image ${t.image} is ignored and \`${describeCommand(t.command)}\` runs directly on this host (its programs, not the image's)`
      : `the build context's Dockerfile is not built and \`${describeCommand(t.command)}\` runs on this host in the context directory`;
  return {
    warning: `task ${t.name}: no Docker engine (process executor): ${where}, without isolation or resource limits`,
  };
}

/**
 * The warnings of a submission under `executor`; throws a ValidationError (400, naming each task) for what can never
 * run there. An unknown executor checks nothing.
 */
export function checkExecution(spec: JobSpec, executor: ExecutorKind | undefined): string[] {
  if (executor === undefined) return [];
  const problems: string[] = [];
  const warnings: string[] = [];
  spec.tasks.forEach((t, i) => {
    const { problem, warning } = checkTask(t, i, executor);
    if (problem !== undefined) problems.push(problem);
    if (warning !== undefined) warnings.push(warning);
  });
  if (problems.length > 0) throw new ValidationError(SOURCE, problems);
  return warnings;
}

/**
 * What a submission of `spec` is told on this cluster, or refused for (a ValidationError): how its tasks run under
 * `executor`, its run limits, a retry rule its attempts leave no room for, and the `queue:` fields nothing reads. A
 * dry run asks the same, so it calls valid only what a submission takes.
 */
export function submissionWarnings(spec: JobSpec, executor: ExecutorKind | undefined): string[] {
  return [
    ...checkExecution(spec, executor),
    ...runLimitWarnings(spec),
    ...retryStrategyWarnings(spec),
    ...unusedQueueFieldWarnings(spec),
  ];
}

const warningsKey = (jobId: string): string => `execution.job.${jobId}.warnings`;
const warningsSchema = z.array(z.string());

/** Kept in the store's key-values, so the job view (and a restarted controller) shows them too. */
export function recordJobWarnings(store: StateStore, jobId: string, warnings: readonly string[]): void {
  if (warnings.length > 0) store.setValue(warningsKey(jobId), [...warnings]);
}

/**
 * Add a warning learned while the job runs, replacing any earlier one of the same `kind` (its leading words): the job
 * view says what last happened, not every time it did.
 */
export function addJobWarning(store: StateStore, jobId: string, kind: string, warning: string): void {
  const kept = readJobWarnings(store, jobId).filter((w) => !w.startsWith(kind));
  store.setValue(warningsKey(jobId), [...kept, `${kind} ${warning}`]);
}

/**
 * Take back the warnings of `kind` (their leading words) learned while the job ran: what they said is over. The key
 * goes when no warning is left.
 */
export function removeJobWarning(store: StateStore, jobId: string, kind: string): void {
  const warnings = readJobWarnings(store, jobId);
  const kept = warnings.filter((w) => !w.startsWith(kind));
  if (kept.length === warnings.length) return;
  if (kept.length === 0) store.deleteValue(warningsKey(jobId));
  else store.setValue(warningsKey(jobId), kept);
}

export function readJobWarnings(store: StateStore, jobId: string): string[] {
  const parsed = warningsSchema.safeParse(store.getValue(warningsKey(jobId)));
  return parsed.success ? parsed.data : [];
}
