import { JOB_ID_PATTERN } from '../controller/job-spec/spec.js';
import { ValidationError } from '../core/validation.js';

/** Refuse, naming each, the given ids that are not job ids (`job-<n>`); `field` is where they were given. */
export function requireJobIds(ids: readonly string[], field: string): void {
  const notIds = ids.filter((id) => !JOB_ID_PATTERN.test(id));
  if (notIds.length > 0)
    throw new ValidationError(
      field,
      notIds.map((id) => `${JSON.stringify(id)}: not a job id (job-<n>)`),
    );
}
