import { Readable } from 'node:stream';
import { buildContextKey } from '../protocol/object-keys.js';
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
  return locationOf(objectStore, key);
}
