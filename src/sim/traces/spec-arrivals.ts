import { z } from 'zod';
import { DURATION_RULE, durationSecondsSchema } from '../../core/duration.js';
import { describeIssues, ValidationError } from '../../core/validation.js';
import { parseDocumentUniqueKeys, yamlErrorLine } from '../../core/yaml-unique-keys.js';
import { MAX_TRACE_ARRIVAL_SECONDS } from './trace-bounds.js';

/**
 * When the jobs of a directory of job specs arrive. The controller's job spec is strict and has no place for an
 * arrival time, so it is said next to the specs: an `arrivals.yaml` index mapping each spec file to its arrival
 * (seconds or a duration such as 30m after the trace starts), or, without one, the files in name order a fixed gap
 * apart (`--arrival-gap-seconds`, default 0: all at once).
 */

/** The index file's names; it is not a job spec. */
export const ARRIVALS_FILES = ['arrivals.yaml', 'arrivals.yml'] as const;

function isArrivalsFileName(name: string): boolean {
  return (ARRIVALS_FILES as readonly string[]).includes(name.toLowerCase());
}

/**
 * The arrivals index among a directory's file names, if any. Two (arrivals.yaml beside arrivals.yml) are refused,
 * naming the directory and both: reading one would silently drop what the other says.
 */
export function arrivalsIndexName(names: readonly string[], dir: string): string | undefined {
  const indexes = names.filter(isArrivalsFileName);
  if (indexes.length > 1)
    throw new ValidationError(dir, [
      `${indexes.slice(0, -1).join(', ')} and ${indexes.at(-1) ?? ''} both say when the jobs arrive: keep one`,
    ]);
  return indexes[0];
}

/** File names that hold a job spec (YAML or JSON). */
export function isSpecFileName(name: string): boolean {
  return /\.(ya?ml|json)$/i.test(name) && !isArrivalsFileName(name);
}

const arrivalsSchema = z.record(
  z.string().min(1),
  // Bounded here as the trace bounds an arrival, so an entry too late is named by its file, not by the trace built from it.
  durationSecondsSchema(
    z
      .number()
      .finite()
      .nonnegative('must be 0 seconds or more')
      .max(
        MAX_TRACE_ARRIVAL_SECONDS,
        `at most ${MAX_TRACE_ARRIVAL_SECONDS} s (ten years) after the trace starts`,
      ),
  ),
  { error: `expected a map of job spec file → arrival (${DURATION_RULE})` },
);

/**
 * Parse an arrivals index against the directory's spec files: every spec file must be listed, and every entry must
 * name one of them, so a renamed or forgotten file is an error rather than a job that silently arrives at 0.
 */
export function parseArrivals(
  text: string,
  source: string,
  specFiles: readonly string[],
): ReadonlyMap<string, number> {
  let value: unknown;
  try {
    const doc = parseDocumentUniqueKeys(text);
    const [error] = doc.errors;
    if (error !== undefined) throw error;
    value = doc.toJS();
  } catch (e) {
    throw new ValidationError(source, [`not valid YAML: ${yamlErrorLine((e as Error).message)}`]);
  }
  if (value === null || value === undefined)
    throw new ValidationError(source, [
      '(root): empty; list each job spec file with its arrival, e.g. train.yaml: 30m',
    ]);
  const parsed = arrivalsSchema.safeParse(value);
  if (!parsed.success) throw new ValidationError(source, describeIssues(parsed.error));
  const problems: string[] = [];
  for (const file of Object.keys(parsed.data))
    if (!specFiles.includes(file))
      problems.push(
        `${file}: no such job spec file in the directory (it has ${specFiles.length === 0 ? 'none' : specFiles.join(', ')})`,
      );
  for (const file of specFiles)
    if (!(file in parsed.data)) problems.push(`${file}: missing: every job spec file needs an arrival`);
  if (problems.length > 0) throw new ValidationError(source, problems);
  return new Map(Object.entries(parsed.data));
}

/** Without an index: the files in the order given, `gapSeconds` apart from 0. */
export function gapArrivals(specFiles: readonly string[], gapSeconds: number): ReadonlyMap<string, number> {
  if (!(Number.isFinite(gapSeconds) && gapSeconds >= 0))
    throw new Error(`the arrival gap must be 0 seconds or more, got ${gapSeconds}`);
  const last = (specFiles.length - 1) * gapSeconds;
  if (last > MAX_TRACE_ARRIVAL_SECONDS)
    throw new ValidationError('--arrival-gap-seconds', [
      `${gapSeconds} s between ${specFiles.length} job spec files puts the last, ${specFiles.at(-1) ?? ''}, at ${last} s: ` +
        `arrivals are at most ${MAX_TRACE_ARRIVAL_SECONDS} s (ten years) after the trace starts`,
    ]);
  return new Map(specFiles.map((file, i) => [file, i * gapSeconds]));
}
