import type { Catalog, InstanceType } from '../core/catalog.js';
import { ANY_FAMILY } from '../core/resources.js';

/**
 * What `fleetwise submit` needs to check a spec file locally for its structure only, and to give the problems the
 * controller finds in it (sent as JSON, so named by field path alone) the line of the field in the file.
 */

/** A field path as problems name it, read back: keys and array indices. */
export type FieldPath = readonly (string | number)[];

/**
 * The field path a problem starts with (`tasks.0.demand: …`, `env["a: b"]: …`, `(root): …`; see formatFieldPath),
 * or undefined when it names none. A bare key holding a dot reads as two keys: its line is then its parent's.
 */
export function problemPath(problem: string): FieldPath | undefined {
  if (problem.startsWith('(root): ')) return [];
  const match = /^(?:[A-Za-z0-9_.-]+|\["(?:[^"\\]|\\.)*"\])+(?=: )/.exec(problem);
  if (match === null) return undefined;
  const path: (string | number)[] = [];
  for (const [, bare, quoted] of match[0].matchAll(/([A-Za-z0-9_.-]+)|\[("(?:[^"\\]|\\.)*")\]/g)) {
    if (quoted !== undefined) path.push(JSON.parse(quoted) as string);
    else
      for (const key of (bare ?? '').split('.'))
        if (key !== '') path.push(/^\d+$/.test(key) ? Number(key) : key);
  }
  return path;
}

/** The problems, each naming a field, with the line `lineAt` gives for it; those that already have one are kept. */
export function withLines(
  problems: readonly string[],
  lineAt: (path: FieldPath) => number | undefined,
): string[] {
  return problems.map((problem) => {
    if (/\(line \d+\)$/.test(problem)) return problem;
    const path = problemPath(problem);
    const line = path === undefined ? undefined : lineAt(path);
    return line === undefined ? problem : `${problem} (line ${line})`;
  });
}

/**
 * A catalog on which every demand of `spec` fits: one unbounded type for each family its tasks name, and one more for
 * `any`. Checked against it, a spec is checked for all but its fit, which the controller decides by its own catalog
 * (the one it places jobs on, which may not be the bundled one).
 */
export function catalogHostingAnyDemand(spec: unknown): Catalog {
  const families = new Set<string>(['unbounded']);
  const tasks = isMap(spec) && Array.isArray(spec['tasks']) ? (spec['tasks'] as unknown[]) : [];
  for (const task of tasks) {
    const demand = isMap(task) ? task['demand'] : undefined;
    if (isMap(demand))
      for (const family of Object.keys(demand)) if (family !== ANY_FAMILY) families.add(family);
  }
  const types = [...families].map((family): InstanceType => ({
    name: `${family}.unbounded`,
    family,
    capacity: [Infinity, Infinity, Infinity],
    costPerHour: 0,
    delays: { instantiateSeconds: 0, workerStartSeconds: 0, workerRegisterSeconds: 0, terminateSeconds: 0 },
  }));
  return { provider: 'aws', region: 'any', types };
}

function isMap(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
