import { isMap, isNode, isScalar, isSeq, type Document, type LineCounter } from 'yaml';
import type { z } from 'zod';
import { nearestKey } from '../../core/strict-object.js';
import { formatFieldPath } from '../../core/validation.js';
import { KNOWN_KEYS } from './schema.js';

/** Turning zod issues into one-line problems that name the field, a likely intended name and the line. */

export type Path = readonly (string | number)[];
export interface Problem {
  readonly path: Path;
  readonly message: string;
}

/** Unknown keys of one object explained one by one; the rest are counted in one problem. */
const MAX_EXPLAINED_UNKNOWN_KEYS = 20;

export function formatPath(path: Path): string {
  return formatFieldPath(path);
}

export function explainIssue(issue: z.core.$ZodIssue): Problem[] {
  const path = issue.path.filter((p): p is string | number => typeof p !== 'symbol');
  if (issue.code === 'unrecognized_keys') {
    const known = knownKeysAt(path);
    // A request body may hold tens of thousands of unknown keys: each explained one costs edit distances and a line
    // of the answer, so past the first few they are counted, not explained.
    const explained = issue.keys.slice(0, MAX_EXPLAINED_UNKNOWN_KEYS).map((key): Problem => {
      if (path.length === 0 && isTaskOnlyKey(key))
        return { path: [key], message: 'a field of a task: put it under tasks[]' };
      const hint = nearestKey(key, known);
      return {
        path: [...path, key],
        message: `unknown field${hint === undefined ? '' : `, did you mean ${hint}?`}${known.length > 0 ? ` (known: ${known.join(', ')})` : ''}`,
      };
    });
    const more = issue.keys.length - explained.length;
    return more === 0
      ? explained
      : [...explained, { path, message: `${more} more unknown field${more === 1 ? '' : 's'}` }];
  }
  if (issue.code === 'invalid_key') return [{ path, message: issue.issues.map((i) => i.message).join('; ') }];
  if (issue.code === 'invalid_type' && /received undefined$/.test(issue.message))
    return [
      {
        path,
        message:
          path.length === 1 && path[0] === 'tasks'
            ? `required: the job's list of tasks, ${TASKS_EXAMPLE}`
            : `required (${issue.expected})`,
      },
    ];
  return [{ path, message: issue.message }];
}

/** How a job's tasks are written, for problems that point a flat spec at `tasks`. */
const TASKS_EXAMPLE = 'e.g. tasks: [{image: …, command: […], demand: […]}]';

/** Keys of a task that a job does not have: at the top level they were meant for `tasks[]`. */
function isTaskOnlyKey(key: string): boolean {
  return (
    (KNOWN_KEYS.task as readonly string[]).includes(key) &&
    !(KNOWN_KEYS.job as readonly string[]).includes(key)
  );
}

function knownKeysAt(path: Path): readonly string[] {
  if (path.length === 0) return KNOWN_KEYS.job;
  if (path.length === 1 && path[0] === 'checkpoint') return KNOWN_KEYS.checkpoint;
  if (path.length === 2 && path[0] === 'tasks') return KNOWN_KEYS.task;
  if (path.length === 3 && path[0] === 'tasks' && path[2] === 'build') return KNOWN_KEYS.build;
  if (path.length === 1 && path[0] === 'retryStrategy') return KNOWN_KEYS.retryStrategy;
  if (path.length === 1 && path[0] === 'network') return KNOWN_KEYS.network;
  if (path.length === 1 && path[0] === 'arrayProperties') return KNOWN_KEYS.arrayProperties;
  if (path.length === 3 && path[0] === 'retryStrategy' && path[1] === 'evaluateOnExit')
    return KNOWN_KEYS.exitRule;
  return [];
}

/**
 * 1-based line of the field at `path`: its key's (a block value starts a line below its key, and a problem names the
 * key), an item's own, or the deepest existing ancestor's for a missing field; undefined when its top-level key is not
 * in the document (a required field left out, or a name that is no field of the file, such as a request header's): the
 * document's first line would point at an unrelated field.
 */
export function lineOf(doc: Document, counter: LineCounter, path: Path): number | undefined {
  if (path.length > 0 && !doc.hasIn(path.slice(0, 1))) return undefined;
  for (let n = path.length; n >= 0; n--) {
    const node = n === 0 ? doc.contents : namingNode(doc, path.slice(0, n));
    if (isNode(node) && node.range !== undefined && node.range !== null)
      return counter.linePos(node.range[0]).line;
  }
  return undefined;
}

/** The node that names the field at a non-empty `path`: its key in a mapping, the item itself in a sequence. */
function namingNode(doc: Document, path: Path): unknown {
  const parent: unknown = path.length === 1 ? doc.contents : doc.getIn(path.slice(0, -1), true);
  const segment = path[path.length - 1];
  if (isMap(parent))
    return parent.items.find((pair) => isScalar(pair.key) && String(pair.key.value) === String(segment))?.key;
  if (isSeq(parent) && typeof segment === 'number') return parent.items[segment];
  return undefined;
}
