import type { JobSpec } from '../../job-spec/spec.js';
import type {
  AttemptFailure,
  EventRecord,
  InstanceRecord,
  InstanceState,
  IntentRecord,
  IntentState,
  JobRecord,
  JobState,
  JsonValue,
  RoundRecord,
  TaskRecord,
  TaskState,
  TeamTokenRecord,
} from '../../state-store.js';
import { HASH_PREFIX_LENGTH } from '../tokens.js';
import type { Row } from './connection.js';

/** Rows (snake_case columns, NULL for absent) to the records the StateStore interface returns. */

function str(row: Row, column: string): string {
  return String(row[column]);
}
function num(row: Row, column: string): number {
  return Number(row[column]);
}
function optStr(row: Row, column: string): string | undefined {
  const v = row[column];
  return v === null || v === undefined ? undefined : String(v);
}
function optNum(row: Row, column: string): number | undefined {
  const v = row[column];
  return v === null || v === undefined ? undefined : Number(v);
}
/**
 * Only defined fields, so records from both stores compare equal field by field. (A plain loop: every row the store
 * reads passes here, and entries/filter/fromEntries allocate an array per field.)
 */
function defined<T extends object>(value: T): T {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const v = (value as Record<string, unknown>)[key];
    if (v !== undefined) out[key] = v;
  }
  return out as T;
}

/** A job's spec from its stored JSON. Stored specs were validated on submit: our own output, not external input. */
export function parseStoredSpec(_jobId: string, json: string): JobSpec {
  return JSON.parse(json) as JobSpec;
}

export function jobFromRow(row: Row): JobRecord {
  return jobRecordFromRow(row, parseStoredSpec);
}

/** `specOf` turns the stored spec into the record's (a cache may answer it: specs never change once stored). */
export function jobRecordFromRow(row: Row, specOf: (jobId: string, json: string) => JobSpec): JobRecord {
  return defined({
    id: str(row, 'id'),
    name: str(row, 'name'),
    team: str(row, 'team'),
    spec: specOf(str(row, 'id'), str(row, 'spec_json')),
    state: str(row, 'state') as JobState,
    reason: optStr(row, 'reason'),
    submittedAtSeconds: num(row, 'submitted_at'),
    startedAtSeconds: optNum(row, 'started_at'),
    finishedAtSeconds: optNum(row, 'finished_at'),
    updatedAtSeconds: num(row, 'updated_at'),
    completedIterations: num(row, 'completed_iterations'),
    totalIterations: optNum(row, 'total_iterations'),
    migrations: num(row, 'migrations'),
    attempts: num(row, 'attempts'),
    // Written by applyJob from AttemptFailure records: our own output.
    attemptFailures:
      optStr(row, 'attempt_failures_json') === undefined
        ? undefined
        : (JSON.parse(str(row, 'attempt_failures_json')) as AttemptFailure[]),
  });
}

export function taskFromRow(row: Row): TaskRecord {
  return defined({
    id: str(row, 'id'),
    jobId: str(row, 'job_id'),
    index: num(row, 'task_index'),
    name: str(row, 'name'),
    workloadKey: str(row, 'workload_key'),
    state: str(row, 'state') as TaskState,
    instanceId: optStr(row, 'instance_id'),
    lastCheckpointKey: optStr(row, 'last_checkpoint_key'),
    lastCheckpointAtSeconds: optNum(row, 'last_checkpoint_at'),
    updatedAtSeconds: num(row, 'updated_at'),
  });
}

export function instanceFromRow(row: Row): InstanceRecord {
  return defined({
    id: str(row, 'id'),
    cloudId: optStr(row, 'cloud_id'),
    typeName: str(row, 'type_name'),
    state: str(row, 'state') as InstanceState,
    availabilityZone: optStr(row, 'availability_zone'),
    placementGroup: optStr(row, 'placement_group'),
    launchToken: str(row, 'launch_token'),
    requestedAtSeconds: num(row, 'requested_at'),
    launchedAtSeconds: optNum(row, 'launched_at'),
    runningAtSeconds: optNum(row, 'running_at'),
    terminatedAtSeconds: optNum(row, 'terminated_at'),
    updatedAtSeconds: num(row, 'updated_at'),
    workerTokenHash: optStr(row, 'worker_token_hash'),
    reason: optStr(row, 'reason'),
  });
}

export function intentFromRow(row: Row): IntentRecord {
  return defined({
    id: num(row, 'id'),
    kind: str(row, 'kind'),
    payload: JSON.parse(str(row, 'payload_json')) as unknown,
    state: str(row, 'state') as IntentState,
    key: optStr(row, 'idempotency_key'),
    round: optNum(row, 'round'),
    error: optStr(row, 'error'),
    createdAtSeconds: num(row, 'created_at'),
    updatedAtSeconds: num(row, 'updated_at'),
  }) as IntentRecord;
}

export function roundFromRow(row: Row): RoundRecord {
  return {
    round: num(row, 'round'),
    atSeconds: num(row, 'at_seconds'),
    configuration: JSON.parse(str(row, 'configuration_json')) as RoundRecord['configuration'],
    decision: JSON.parse(str(row, 'decision_json')) as RoundRecord['decision'],
  };
}

export function eventFromRow(row: Row): EventRecord {
  const data = optStr(row, 'data_json');
  return defined({
    seq: num(row, 'seq'),
    atSeconds: num(row, 'at_seconds'),
    kind: str(row, 'kind'),
    jobId: optStr(row, 'job_id'),
    taskId: optStr(row, 'task_id'),
    instanceId: optStr(row, 'instance_id'),
    message: optStr(row, 'message'),
    data: data === undefined ? undefined : (JSON.parse(data) as JsonValue),
  });
}

export function tokenFromRow(row: Row): TeamTokenRecord {
  return defined({
    team: str(row, 'team'),
    label: optStr(row, 'label'),
    hashPrefix: str(row, 'token_hash').slice(0, HASH_PREFIX_LENGTH),
    createdAtSeconds: num(row, 'created_at'),
    revokedAtSeconds: optNum(row, 'revoked_at'),
  });
}
