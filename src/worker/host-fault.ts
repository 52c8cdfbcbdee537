import { errnoCode } from '../core/errno.js';
import { isObjectStoreError } from '../storage/object-store-error.js';
import { RestoreDiskError } from './checkpoints.js';
import { DockerTimeoutError } from './executors/docker.js';
import { ImageBuildError } from './image-cache.js';

/**
 * Whether a task's start failed because of this worker's host rather than its job: the job would start on another
 * worker, so the controller places it there without counting one of its attempts (worker-protocol.ts `hostFault`).
 *
 * A host fault is this worker's own disk failing under a start: restoring the task's checkpoint (RestoreDiskError),
 * or a system call on the worker's filesystem answering that the disk is full, out of quota, read-only or failing
 * (HOST_DISK_ERRNO), as unpacking a build context can; or its container engine: not answering in time
 * (DockerTimeoutError), not reachable at its socket (ENGINE_UNREACHABLE_ERRNO on `connect`), or out of space for the
 * image it pulls or the container it creates. The error and every error in its `cause` chain are looked at.
 * Nothing the job decides is one: an image that does not build or cannot be pulled, a missing command, an archive the
 * worker refuses, an exit of the task (never a start failure); nor is the object store failing, which the start waits
 * out and which another worker would meet as well.
 */

/** What a full, over-quota, read-only or failing disk answers a system call with. */
const HOST_DISK_ERRNO: ReadonlySet<string> = new Set(['ENOSPC', 'EDQUOT', 'EROFS', 'EIO']);

/** What connecting to an engine that is down, or whose socket is missing or closed to this worker, answers. */
const ENGINE_UNREACHABLE_ERRNO: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ENOENT', 'EACCES']);

/** How far a `cause` chain is followed (one made circular by hand must not loop for ever). */
const MAX_CAUSES = 16;

export function isHostFault(error: unknown): boolean {
  let found = false;
  let current: unknown = error;
  for (let depth = 0; depth < MAX_CAUSES && current !== undefined && current !== null; depth++) {
    // The job's own failures, and the store's, are never the host's, whatever they were caused by.
    if (isObjectStoreError(current) || current instanceof ImageBuildError) return false;
    if (
      current instanceof RestoreDiskError ||
      current instanceof DockerTimeoutError ||
      isHostDiskError(current) ||
      isEngineUnreachable(current) ||
      isEngineOutOfSpace(current)
    )
      found = true;
    current = current instanceof Error ? current.cause : undefined;
  }
  return found;
}

/** A Node system error (it names its system call) with one of the host disk's error codes. */
function isHostDiskError(error: unknown): boolean {
  const code = errnoCode(error);
  return (
    code !== undefined &&
    HOST_DISK_ERRNO.has(code) &&
    typeof (error as { syscall?: unknown }).syscall === 'string'
  );
}

/** A connection to the container engine refused, or its socket missing or closed to this worker. */
function isEngineUnreachable(error: unknown): boolean {
  const code = errnoCode(error);
  return (
    code !== undefined &&
    ENGINE_UNREACHABLE_ERRNO.has(code) &&
    (error as { syscall?: unknown }).syscall === 'connect'
  );
}

/** The engine's own answer (an HTTP status) that its disk is full: pulling or creating on a full data root. */
function isEngineOutOfSpace(error: unknown): boolean {
  return (
    typeof (error as { statusCode?: unknown }).statusCode === 'number' &&
    error instanceof Error &&
    /no space left on device/i.test(error.message)
  );
}
