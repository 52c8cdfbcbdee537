/**
 * A stored job spec (a `JobSpec` as the controller keeps it and the job archive holds it) in the form a user writes,
 * so that it can be validated again (a restore from the job archive validates every spec against the catalog it
 * restores with). Validation renames or converts a few fields on the way in; this turns exactly those back:
 * - `spotMaxDelaySeconds` is written as `spotMaxDelayMinutes`;
 * - `network.rootTask` is written as `network.root` (an expanded task name, which the written form takes as is);
 * - a task's workload derived from the job's (`<workload>_<task>` with several tasks) is left out, to be derived again
 *   (written out it could be longer than a written workload may be);
 * - an array's `arrayProperties.sameIndexOf` and `sequential` are written in `dependsOn`, as AWS Batch's
 *   `{ jobId, type: N_TO_N }` and `{ type: SEQUENTIAL }` (only an array being submitted has them, never a stored job).
 * Everything else is stored as written (defaults filled in, which validate to themselves). The input is whatever a
 * document held, so it is read as unknown: anything unexpected is left for validation to name.
 */
export function writtenJobSpec(stored: unknown): unknown {
  if (!isRecord(stored)) return stored;
  const { spotMaxDelaySeconds, network, ...rest } = stored;
  const written: Record<string, unknown> = { ...rest };
  if (spotMaxDelaySeconds !== undefined)
    written['spotMaxDelayMinutes'] =
      typeof spotMaxDelaySeconds === 'number' ? spotMaxDelaySeconds / 60 : spotMaxDelaySeconds;
  if (network !== undefined) written['network'] = writtenNetwork(network);
  return writtenArray(writtenTasks(written));
}

function writtenTasks(written: Record<string, unknown>): Record<string, unknown> {
  const { workload, tasks } = written;
  if (typeof workload !== 'string' || !Array.isArray(tasks)) return written;
  const derived = (task: Record<string, unknown>): string =>
    tasks.length === 1 ? workload : `${workload}_${String(task['name'])}`;
  return {
    ...written,
    tasks: tasks.map((task: unknown) => {
      if (!isRecord(task) || task['workload'] !== derived(task)) return task;
      const { workload: _derived, ...rest } = task;
      return rest;
    }),
  };
}

function writtenArray(written: Record<string, unknown>): Record<string, unknown> {
  const array = written['arrayProperties'];
  if (!isRecord(array) || (!('sameIndexOf' in array) && !('sequential' in array))) return written;
  const { sameIndexOf, sequential, ...rest } = array;
  const own = Array.isArray(written['dependsOn']) ? (written['dependsOn'] as unknown[]) : [];
  const dependsOn = [
    ...own,
    ...(Array.isArray(sameIndexOf) ? sameIndexOf.map((jobId: unknown) => ({ jobId, type: 'N_TO_N' })) : []),
    ...(sequential === true ? [{ type: 'SEQUENTIAL' }] : []),
  ];
  return { ...written, arrayProperties: rest, ...(dependsOn.length === 0 ? {} : { dependsOn }) };
}

function writtenNetwork(network: unknown): unknown {
  if (!isRecord(network) || !('rootTask' in network)) return network;
  const { rootTask, ...rest } = network;
  return rootTask === undefined ? rest : { ...rest, root: rootTask };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
