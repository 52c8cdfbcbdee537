import { isMap, isScalar, isSeq, type Document } from 'yaml';

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
