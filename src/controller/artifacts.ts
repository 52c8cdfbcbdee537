import { Readable } from 'node:stream';
import { z } from 'zod';
import { buildContextKey, parseBuildContextRef } from '../protocol/object-keys.js';
import { readAll, type ObjectStore } from '../storage/object-store.js';
import { StoredJobLogs } from './job-logs.js';
import type { StateStore } from './state-store.js';

/** Files the API reads and writes in the object store besides reports: task logs and Docker build contexts. */

/** An uploaded build context, as its owner described it. */
export interface ContextInfo {
  readonly sha256: string;
  /** `tar`, or `gzip` for a gzip-compressed tar (both are what `docker build` accepts as a context). */
  readonly encoding: 'tar' | 'gzip';
  /** The uploading team, or undefined for the admin. */
  readonly team: string | undefined;
}

/** Where a key of the store is, as users address it (`s3://bucket/key`, a local path). */
export function locationOf(store: ObjectStore, key: string): string {
  return store.location.endsWith('/') ? `${store.location}${key}` : `${store.location}/${key}`;
}

/**
 * A job's task output, from the log objects workers upload (`logs/<job>/…`: each run of a task one object, or segments
 * from workers that ship what is new) while tasks run and when they stop or finish: each run headed `==> run <==`, in
 * start order (job-logs.ts, which the API streams instead).
 */
export async function readJobLogs(objectStore: ObjectStore, jobId: string): Promise<string> {
  return (await readAll(await new StoredJobLogs(objectStore, jobId).text())).toString('utf8');
}

/**
 * Keep an uploaded Docker build context in the object store, content-addressed (the same archive is stored once),
 * streaming: `archive` goes to the store as it arrives. When it is already stored it is still read to the end (its
 * checks run as it is read, so a body that is not the declared archive is refused either way). Answers the reference
 * a job spec's `build.context` carries for workers to fetch.
 */
export async function storeBuildContext(
  objectStore: ObjectStore,
  store: StateStore,
  archive: Readable,
  info: ContextInfo,
): Promise<string> {
  const key = buildContextKey(info.sha256, info.encoding);
  let sizeBytes = 0;
  async function* counted(): AsyncGenerator<Buffer> {
    for await (const chunk of archive) {
      sizeBytes += (chunk as Buffer).length;
      yield chunk as Buffer;
    }
  }
  const body = Readable.from(counted(), { objectMode: false });
  if (await objectStore.exists(key)) for await (const chunk of body) void chunk;
  else await objectStore.put(key, body);
  store.appendEvent({
    kind: 'context.stored',
    message: `build context ${info.sha256.slice(0, 12)} (${sizeBytes} bytes) from ${info.team ?? 'admin'}`,
    data: { key, sizeBytes, team: info.team ?? null },
  });
  if (info.team !== undefined) store.setValue(uploaderKey(key, info.team), true);
  return locationOf(objectStore, key);
}

/**
 * Contexts are content-addressed and shared in the store, so who may build from one is kept beside it: one key per
 * team that uploaded it (no read-modify-write, so two teams uploading the same archive at once both keep theirs).
 */
const storedEventData = z.object({ key: z.string(), team: z.string().nullable() });

function uploaderKey(key: string, team: string): string {
  return `contexts.uploadedBy.${key}.${team}`;
}

/**
 * Set in the state once the uploaders of contexts stored before they were kept have been recorded from their
 * `context.stored` events (which name the team): the event log is then never read again to answer who uploaded what.
 */
const UPLOADERS_RECORDED_KEY = 'contexts.uploadersRecorded';

/** Stores this process has seen recorded: the request path then reads not even the marker. */
const recordedStores = new WeakSet<StateStore>();

/**
 * Record, once per state, the uploaders of contexts known only from their `context.stored` events (stored before
 * uploaders were kept), so a resubmission of an older job still passes. Reading every such event is slow in a
 * long-lived state, so it is done once (at start-up, or at the first check if the API serves before that) and
 * marked done in the state: a later process, or a check on the request path, reads only the per-team keys. Uploads
 * record their own key, so none is missed by an upload during or after this.
 */
export function recordUploadersFromEvents(store: StateStore): void {
  if (recordedStores.has(store)) return;
  if (store.getValue(UPLOADERS_RECORDED_KEY) !== true) {
    const uploaders = new Set<string>();
    for (const e of store.listEvents({ kind: 'context.stored' })) {
      const stored = storedEventData.safeParse(e.data);
      if (stored.success && stored.data.team !== null)
        uploaders.add(uploaderKey(stored.data.key, stored.data.team));
    }
    store.transaction(() => {
      for (const key of uploaders) store.setValue(key, true);
      store.setValue(UPLOADERS_RECORDED_KEY, true);
    });
  }
  recordedStores.add(store);
}

/** Whether `team` uploaded the context under `key`: one key-value read (once the older uploaders are recorded). */
function uploadedBy(store: StateStore, key: string, team: string): boolean {
  recordUploadersFromEvents(store);
  return store.getValue(uploaderKey(key, team)) === true;
}

const UPLOAD_HINT =
  'upload the directory with POST /v1/contexts and give the reference it answers (fleetwise submit does both)';

/** What a `build.context` that is no upload reference (a path on some host) is told. */
export const NOT_UPLOADED = `is not an uploaded build context; ${UPLOAD_HINT}`;

/**
 * Why a job spec's `build.context` `ref` may not be used by `team` (undefined: the admin, who may use any stored
 * context), or undefined when it may: it must be the reference an upload answered, of a context still in the store
 * that this team uploaded. Every context is readable by the jobs built from it, so naming another team's sha256
 * must not be enough. A context this team did not upload and one that is not stored get the same answer: whether
 * another team's archive exists is not for this team to learn.
 */
export async function buildContextProblem(
  objectStore: ObjectStore,
  store: StateStore,
  ref: string,
  team: string | undefined,
): Promise<string | undefined> {
  const parsed = parseBuildContextRef(ref);
  if (parsed === undefined) return NOT_UPLOADED;
  // A team's own key first: a reference it did not upload is refused without asking the object store.
  const refused =
    (team !== undefined && !uploadedBy(store, parsed.key, team)) || !(await objectStore.exists(parsed.key));
  if (refused)
    return team === undefined
      ? `is not a stored build context; ${UPLOAD_HINT}`
      : `is not a build context team ${team} uploaded; ${UPLOAD_HINT}`;
  const expected = locationOf(objectStore, parsed.key);
  if (ref !== expected) return `is not the reference the upload answered: give ${JSON.stringify(expected)}`;
  return undefined;
}
