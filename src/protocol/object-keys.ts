/**
 * Where everything lives in the object store, in one place: workers write checkpoints and logs, the controller reads
 * logs and writes build contexts and cost reports, the CLI reads reports straight from the store. Every key is built
 * (and, where a reader must recognise one, parsed) here, so the writers and readers cannot disagree.
 *
 *   checkpoints/<job>/<task>/<seq>/data.tar        a task's checkpoint (seq zero-padded, so key order is seq order);
 *   checkpoints/<job>/<task>/<seq>/manifest.json   written last: a seq without a manifest is a partial upload
 *   checkpoints/<job>/<task>/exit-<attempt>.json   how the task ended on its own in that attempt of its job (its
 *                                                  worker writes it before reporting the exit)
 *   logs/<job>/<run>.segments/<seq>.log            a run's output as numbered segments (run: `<start ms>-<task>-
 *                                                  <instance>.log`); every segment but the last is sealed
 *   logs/<job>/<start ms>-<task>-<instance>.log    a run's whole output as one object (workers before segments)
 *   contexts/<sha256>.tar[.gz]                     a build context `fleetwise submit` uploaded (content-addressed)
 *   reports/costs-<UTC stamp>.{json,csv,html}      cost reports (the stamp sorts chronologically)
 *   reports/latest.json                            a copy of the newest JSON cost report
 *   reports/months/<YYYY-MM>.{json,csv,html}       the cost report of each UTC month once it has ended (kept)
 *   backups/<cluster>/state-<seq>.db.gz            a gzip-compressed copy of the controller's SQLite state
 *   backups/<cluster>/state-<seq>.json             its manifest (size, sha256), written after the data
 *   backups/<cluster>/latest.json                  a copy of the newest manifest, written last
 *   backups/<cluster>/secrets.json                 the state directory's tokens a restored controller needs
 *   jobs/<cluster>/<job>/spec.json                 an accepted job's spec, stored before its submission is answered
 *   jobs/<cluster>/<job>/end.json                  how and when the job ended (written once it has)
 */

export interface CheckpointRef {
  readonly jobId: string;
  readonly taskId: string;
}

const CHECKPOINT_DATA_FILE = 'data.tar';
const CHECKPOINT_MANIFEST_FILE = 'manifest.json';
const CHECKPOINT_SEQ_DIGITS = 8;

/** Every checkpoint and exit record of one job's tasks (the trailing slash keeps job-1 from matching job-10). */
export function jobCheckpointsPrefix(jobId: string): string {
  return `checkpoints/${jobId}/`;
}

export function checkpointPrefix(ref: CheckpointRef): string {
  return `${jobCheckpointsPrefix(ref.jobId)}${ref.taskId}/`;
}

export function checkpointKeys(ref: CheckpointRef, seq: number): { data: string; manifest: string } {
  const base = `${checkpointPrefix(ref)}${String(seq).padStart(CHECKPOINT_SEQ_DIGITS, '0')}/`;
  return { data: `${base}${CHECKPOINT_DATA_FILE}`, manifest: `${base}${CHECKPOINT_MANIFEST_FILE}` };
}

/** The sequence number and part of one of `ref`'s checkpoint objects; undefined for any other key. */
export function parseCheckpointKey(
  ref: CheckpointRef,
  key: string,
): { readonly seq: number; readonly part: 'data' | 'manifest' } | undefined {
  const prefix = checkpointPrefix(ref);
  if (!key.startsWith(prefix)) return undefined;
  const match = /^(\d+)\/(data\.tar|manifest\.json)$/.exec(key.slice(prefix.length));
  if (match?.[1] === undefined) return undefined;
  return { seq: Number(match[1]), part: match[2] === CHECKPOINT_MANIFEST_FILE ? 'manifest' : 'data' };
}

/**
 * Where a task's exit in one attempt of its job is recorded, beside its checkpoints (which are as much the task's
 * as its exit is; checkpoint listings skip it).
 */
export function taskExitKey(ref: CheckpointRef, attempt: number): string {
  if (!Number.isSafeInteger(attempt) || attempt < 1)
    throw new Error(`an attempt is a positive integer, got ${attempt}`);
  return `${checkpointPrefix(ref)}exit-${attempt}.json`;
}

export function taskLogPrefix(jobId: string): string {
  return `logs/${jobId}/`;
}

/** One log object per run of a task, ordered by start time so concatenating them in key order reads in time order. */
export function taskLogKey(jobId: string, taskId: string, startedAtMs: number, instanceId: string): string {
  return `${taskLogPrefix(jobId)}${taskLogRunName(taskId, startedAtMs, instanceId)}`;
}

/**
 * A run's name: what `fleetwise logs` heads its output with, and the key of its single object (older workers) or the
 * stem of its segments. Start time first, so runs sort in start order.
 */
export function taskLogRunName(taskId: string, startedAtMs: number, instanceId: string): string {
  return `${taskLogRunStem(taskId, startedAtMs)}${instanceId}.log`;
}

function taskLogRunStem(taskId: string, startedAtMs: number): string {
  return `${String(Math.floor(startedAtMs)).padStart(14, '0')}-${taskId}-`;
}

/**
 * Every log object of the runs of `taskId` that started at `startedAtMs`, whatever instance stored them: how a
 * restarted worker finds the run it was shipping (the trailing dash keeps job-7.1 from matching job-7.10).
 */
export function taskLogRunPrefix(jobId: string, taskId: string, startedAtMs: number): string {
  return `${taskLogPrefix(jobId)}${taskLogRunStem(taskId, startedAtMs)}`;
}

const LOG_SEGMENTS_SUFFIX = '.segments/';
const LOG_SEGMENT_DIGITS = 8;

/** Segment `seq` (from 0) of a run's output; zero-padded, so key order is segment order. */
export function taskLogSegmentKey(jobId: string, runName: string, seq: number): string {
  if (!Number.isSafeInteger(seq) || seq < 0) throw new Error(`a log segment is a whole number, got ${seq}`);
  return `${taskLogPrefix(jobId)}${runName}${LOG_SEGMENTS_SUFFIX}${String(seq).padStart(LOG_SEGMENT_DIGITS, '0')}.log`;
}

/** What a key under `taskLogPrefix(jobId)` holds: a run's single object, or one of its segments. */
export type TaskLogObject =
  | { readonly kind: 'whole'; readonly runName: string }
  | { readonly kind: 'segment'; readonly runName: string; readonly seq: number };

export function parseTaskLogKey(jobId: string, key: string): TaskLogObject | undefined {
  const prefix = taskLogPrefix(jobId);
  if (!key.startsWith(prefix)) return undefined;
  const rest = key.slice(prefix.length);
  const segment = /^([^/]+\.log)\.segments\/(\d+)\.log$/.exec(rest);
  if (segment?.[1] !== undefined) return { kind: 'segment', runName: segment[1], seq: Number(segment[2]) };
  return /^[^/]+$/.test(rest) ? { kind: 'whole', runName: rest } : undefined;
}

export type ContextEncoding = 'tar' | 'gzip';

const SHA256_HEX = /^[0-9a-f]{64}$/;

/** Where an uploaded build context is kept: named by the sha256 of the archive, so uploading it again is a no-op. */
export function buildContextKey(sha256: string, encoding: ContextEncoding): string {
  if (!SHA256_HEX.test(sha256)) throw new Error('a build context is named by its sha256 (64 hex digits)');
  return `contexts/${sha256}.${encoding === 'gzip' ? 'tar.gz' : 'tar'}`;
}

/**
 * The build context a job's `build.context` names, when it is an uploaded one: the reference ends with a
 * buildContextKey (the controller answers it inside its store location, `s3://bucket/prefix/contexts/…`). Undefined
 * for anything else (a directory on the worker's host). Only the shape: a worker fetches the key from its own store,
 * and the controller admits a reference only as its upload answered it, for the team that uploaded it (artifacts.ts).
 */
export function parseBuildContextRef(
  ref: string,
): { readonly key: string; readonly sha256: string; readonly encoding: ContextEncoding } | undefined {
  const match = /(?:^|\/)(contexts\/([0-9a-f]{64})\.(tar|tar\.gz))$/.exec(ref);
  if (match?.[1] === undefined || match[2] === undefined) return undefined;
  return { key: match[1], sha256: match[2], encoding: match[3] === 'tar.gz' ? 'gzip' : 'tar' };
}

export const REPORTS_PREFIX = 'reports/';
/** Every cost report's keys start with this (latest.json does not). */
export const COST_REPORTS_PREFIX = `${REPORTS_PREFIX}costs-`;
export const LATEST_REPORT_KEY = `${REPORTS_PREFIX}latest.json`;

/** The keys of one cost report; `stamp` must sort chronologically and be safe as a file name. */
export function costReportKeys(stamp: string): ReportFileKeys {
  return reportFileKeys(`${COST_REPORTS_PREFIX}${stamp}`);
}

/** A report's three files: JSON, CSV and HTML under one base name. */
export interface ReportFileKeys {
  readonly json: string;
  readonly csv: string;
  readonly html: string;
}

function reportFileKeys(base: string): ReportFileKeys {
  return { json: `${base}.json`, csv: `${base}.csv`, html: `${base}.html` };
}

/** Each ended month's cost report: never pruned, so the months of a year stay side by side. */
export const MONTHLY_REPORTS_PREFIX = `${REPORTS_PREFIX}months/`;

/** The keys of a month's cost report; `month` is `YYYY-MM` (UTC). */
export function monthlyReportKeys(month: string): ReportFileKeys {
  return reportFileKeys(`${MONTHLY_REPORTS_PREFIX}${month}`);
}

/** The stamp of a cost report's file (any of its three); undefined for any other key. */
export function parseCostReportKey(key: string): { readonly stamp: string } | undefined {
  if (!key.startsWith(COST_REPORTS_PREFIX)) return undefined;
  const match = /^(.+)\.(json|csv|html)$/.exec(key.slice(COST_REPORTS_PREFIX.length));
  return match?.[1] === undefined ? undefined : { stamp: match[1] };
}

const BACKUP_SEQ_DIGITS = 10;

/** Every backup object of a cluster starts with this. */
export function stateBackupPrefix(cluster: string): string {
  return `backups/${cluster}/`;
}

/** One backup: its data (the gzip-compressed database) and its manifest (seq zero-padded, so key order is seq order). */
export function stateBackupKeys(cluster: string, seq: number): { data: string; manifest: string } {
  if (!Number.isSafeInteger(seq) || seq < 1)
    throw new Error(`a backup seq is a positive integer, got ${seq}`);
  const base = `${stateBackupPrefix(cluster)}state-${String(seq).padStart(BACKUP_SEQ_DIGITS, '0')}`;
  return { data: `${base}.db.gz`, manifest: `${base}.json` };
}

/** The cluster, seq and part of a backup object's key; undefined for any other key. */
export function parseStateBackupKey(
  key: string,
): { readonly cluster: string; readonly seq: number; readonly part: 'data' | 'manifest' } | undefined {
  const match = /(?:^|\/)backups\/([^/]+)\/state-(\d+)\.(db\.gz|json)$/.exec(key);
  if (match?.[1] === undefined || match[2] === undefined) return undefined;
  const seq = Number(match[2]);
  if (!Number.isSafeInteger(seq) || seq < 1) return undefined;
  return { cluster: match[1], seq, part: match[3] === 'json' ? 'manifest' : 'data' };
}

/** The newest backup's manifest, written after its data and manifest: a reader never finds it ahead of them. */
export function latestBackupKey(cluster: string): string {
  return `${stateBackupPrefix(cluster)}latest.json`;
}

export function backupSecretsKey(cluster: string): string {
  return `${stateBackupPrefix(cluster)}secrets.json`;
}

/** Every archived job of a cluster starts with this. */
export function jobArchivePrefix(cluster: string): string {
  return `jobs/${cluster}/`;
}

export function jobArchiveKeys(cluster: string, jobId: string): { spec: string; end: string } {
  const base = `${jobArchivePrefix(cluster)}${jobId}/`;
  return { spec: `${base}spec.json`, end: `${base}end.json` };
}

/** The job and part of a job archive key under `cluster`; undefined for any other key. */
export function parseJobArchiveKey(
  cluster: string,
  key: string,
): { readonly jobId: string; readonly part: 'spec' | 'end' } | undefined {
  const prefix = jobArchivePrefix(cluster);
  if (!key.startsWith(prefix)) return undefined;
  const match = /^([^/]+)\/(spec|end)\.json$/.exec(key.slice(prefix.length));
  if (match?.[1] === undefined) return undefined;
  return { jobId: match[1], part: match[2] === 'end' ? 'end' : 'spec' };
}
