import type { JobSpec } from './spec.js';

/** The fields of a spec's `queue:` section that read as if they placed the job, but that nothing reads. */
const UNUSED_QUEUE_FIELDS = ['class', 'priority', 'stages'] as const;

/**
 * What a submission is told when its spec sets `queue.class`, `queue.priority` or `queue.stages`: the section is
 * accepted and kept (specs written with it keep working), but the controller classes jobs by its own queue config and
 * orders them by their class's ordering, so these fields change nothing. Empty when none is set.
 */
export function unusedQueueFieldWarnings(spec: JobSpec): string[] {
  const set = UNUSED_QUEUE_FIELDS.filter((field) => spec.queue[field] !== undefined);
  if (set.length === 0) return [];
  const fields = set.map((field) => `queue.${field}`).join(', ');
  return [
    `${fields} ${set.length === 1 ? 'is' : 'are'} not used: the controller classes jobs by size or by team ` +
      "(its queue config's classifyBy and classes) and orders each class by its configured ordering",
  ];
}
