import { isMap, isScalar, isSeq, parseDocument, type Document } from 'yaml';
import { ValidationError } from '../../core/validation.js';
import { formatPath } from './problems.js';
import { JOB_SPEC_LIMITS } from './spec.js';

/**
 * An environment variable is text, but YAML reads `VERSION: 1.10` as the number 1.1, `RUN_ID: 007` as 7 and
 * `MASK: 0x1F` as 31. So that a task sees what its spec says, each task's `env` values written as a plain number or
 * boolean are given their source text before the YAML document becomes values (`EPOCHS: 10` reads the same either
 * way). Both readers of spec text use it: the controller's (parse.ts) and `fleetwise submit`'s, which sends the spec
 * on as JSON.
 */
export function keepEnvValuesAsWritten(doc: Document): void {
  const tasks = doc.get('tasks', true);
  if (!isSeq(tasks)) return;
  for (const task of tasks.items) {
    const env = isMap(task) ? task.get('env', true) : undefined;
    if (!isMap(env)) continue;
    for (const { value } of env.items)
      if (
        isScalar(value) &&
        (typeof value.value === 'number' || typeof value.value === 'boolean') &&
        value.source !== undefined
      )
        value.value = value.source;
  }
}

/**
 * A JSON body's env values written as numbers, given the text written, as a YAML spec's are: JSON.parse reads
 * `12345678901234567890` as 12345678901234567000, `1.10` as 1.1 and `-0` as 0, and the task would see those. Only a
 * body with a number among its env values is read again, as YAML (JSON is YAML 1.2), for the text of those numbers;
 * any other body is `value` as it is, and the rest of the value stays JSON.parse's. A number whose text cannot be found
 * that way is refused, naming the field, rather than passed on changed. So is every such number in a body larger
 * than the API takes as YAML (`maxYamlSpecBytes`): the YAML parser takes microseconds a node on the controller's
 * loop, and a 1 MiB body read again held it for seconds.
 */
export function jsonEnvNumbersAsWritten(text: string, value: unknown, source: string): unknown {
  const tasks = isRecord(value) ? value['tasks'] : undefined;
  if (!isRecord(value) || !Array.isArray(tasks) || !tasks.some((t) => numberNames(t).length > 0))
    return value;
  // The value as a YAML spec reads it (keepEnvValuesAsWritten), where the text written is; none when unreadable.
  let asWritten: unknown;
  if (Buffer.byteLength(text, 'utf8') <= JOB_SPEC_LIMITS.maxYamlSpecBytes) {
    // The body parser has refused repeated keys already, so the yaml parser's own (slow) check is not wanted.
    const doc = parseDocument(text, { uniqueKeys: false });
    if (doc.errors.length === 0) {
      keepEnvValuesAsWritten(doc);
      asWritten = doc.toJS();
    }
  }
  const writtenTasks = isRecord(asWritten) && Array.isArray(asWritten['tasks']) ? asWritten['tasks'] : [];
  const problems: string[] = [];
  const written = tasks.map((task: unknown, i) => {
    const names = numberNames(task);
    if (names.length === 0 || !isRecord(task)) return task;
    const env = task['env'] as Record<string, unknown>;
    const writtenTask: unknown = writtenTasks[i];
    const writtenEnv = isRecord(writtenTask) && isRecord(writtenTask['env']) ? writtenTask['env'] : {};
    const kept: Record<string, unknown> = { ...env };
    for (const name of names) {
      const numberText = writtenEnv[name];
      if (typeof numberText !== 'string')
        problems.push(
          `${formatPath(['tasks', i, 'env', name])}: write this value in quotes, as a string: an environment ` +
            `value is text, and as a JSON number it reads as ${String(env[name])}, which may not be what was written`,
        );
      else kept[name] = numberText;
    }
    return { ...task, env: kept };
  });
  if (problems.length > 0) throw new ValidationError(source, problems);
  return { ...value, tasks: written };
}

/** The names of `task`'s env values that are numbers. */
function numberNames(task: unknown): string[] {
  const env = isRecord(task) ? task['env'] : undefined;
  return isRecord(env) ? Object.keys(env).filter((name) => typeof env[name] === 'number') : [];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
