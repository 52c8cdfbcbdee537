import type { Catalog } from '../../core/catalog.js';
import { ANY_FAMILY } from '../../core/resources.js';
import { ValidationError } from '../../core/validation.js';
import { canHost, demandSignature } from '../../scheduler/reservation-price.js';
import type { Trace } from '../../world/trace.js';

/** How many problems the error lists before counting the rest (a trace for another catalog can have thousands). */
const MAX_LISTED_PROBLEMS = 20;

/**
 * Refuse a trace read from a file whose tasks the run's catalog cannot take: a demand family the catalog does not have
 * (a typo, or a trace written for another catalog), or a demand no instance type can host. The run would refuse them
 * too, but only once it is built, as a failure of the run rather than bad input; the job spec parser checks a spec's
 * demands the same way (controller/job-spec/parse.ts).
 */
export function checkTraceAgainstCatalog(trace: Trace, catalog: Catalog, source: string): void {
  const families = [...new Set(catalog.types.map((t) => t.family))];
  const problems: string[] = [];
  for (const job of trace.jobs)
    for (const task of job.tasks) {
      const where = `job ${job.id} task ${task.name}`;
      const unknown = Object.keys(task.demand).filter((f) => f !== ANY_FAMILY && !families.includes(f));
      for (const family of unknown)
        problems.push(
          `${where}: demand.${family}: family ${family} is not in the ${catalog.region} catalog (it has ` +
            `${families.join(', ')}; use any for every family)`,
        );
      if (unknown.length === 0 && !catalog.types.some((t) => canHost(t, task.demand)))
        problems.push(
          `${where}: demand: no instance type of the ${catalog.region} catalog can host ${demandSignature(task.demand)}`,
        );
    }
  if (problems.length === 0) return;
  const listed = problems.slice(0, MAX_LISTED_PROBLEMS);
  const more = problems.length - listed.length;
  throw new ValidationError(source, more > 0 ? [...listed, `… and ${more} more problems`] : listed);
}
