import type { Readable } from 'node:stream';
import type { ObjectStore } from '../storage/object-store.js';
import { buildContextProblem, readJobLogs, storeBuildContext, type ContextInfo } from './artifacts.js';
import { StoredJobLogs, type JobLogReader } from './job-logs.js';
import type { StateStore } from './state-store.js';

/**
 * What the API reads and writes in the object store through the controller: task logs and build contexts
 * (artifacts.ts). Each is absent without an object store (a dry run), and its route then answers 501.
 */
export interface StoredArtifacts {
  /** A job's task output, from the log objects workers upload. */
  readonly jobLogs: ((jobId: string) => Promise<string>) | undefined;
  /** A job's task output part by part, or streamed whole (job-logs.ts). */
  readonly jobLogReader: ((jobId: string) => JobLogReader) | undefined;
  /** Keep an uploaded Docker build context; answers the reference a job spec's `build.context` carries. */
  readonly storeContext: ((archive: Readable, info: ContextInfo) => Promise<string>) | undefined;
  /** Why a submission by `team` (undefined: the admin) may not name `ref` as a build context, or undefined. */
  readonly buildContextProblem:
    ((ref: string, team: string | undefined) => Promise<string | undefined>) | undefined;
}

export function storedArtifacts(objectStore: ObjectStore | undefined, store: StateStore): StoredArtifacts {
  if (objectStore === undefined)
    return {
      jobLogs: undefined,
      jobLogReader: undefined,
      storeContext: undefined,
      buildContextProblem: undefined,
    };
  return {
    jobLogs: (jobId) => readJobLogs(objectStore, jobId),
    jobLogReader: (jobId) => new StoredJobLogs(objectStore, jobId),
    storeContext: (archive, info) => storeBuildContext(objectStore, store, archive, info),
    buildContextProblem: (ref, team) => buildContextProblem(objectStore, store, ref, team),
  };
}
