import { errnoCode } from '../core/errno.js';
import type { HostFaultKind } from '../protocol/worker-protocol.js';
import { isObjectStoreError } from '../storage/object-store-error.js';
import { RestoreDiskError } from './checkpoints.js';
import { DockerTimeoutError } from './executors/docker-engine.js';
import { ImageBuildError, ImagePullError } from './image-cache.js';

/**
 * Whether a task's start failed because of this worker's host rather than its job, and how: the job would start on
 * another worker, so the controller places it there without counting one of its attempts (worker-protocol.ts
 * `hostFault`).
 *
 * - `space`: the host's disk had no room for what the start needed (ENOSPC, EDQUOT restoring the checkpoint or
 *   unpacking the build context; the engine out of space for the image it pulls or the container it creates). What
 *   did not fit may be this job's alone (a checkpoint larger than the disk): the host is fine for the others.
 * - `broken`: the host cannot start anything (its disk read-only or failing, EROFS, EIO; its container engine not
 *   answering in time, or not reachable at its socket).
 *
 * The error and every error in its `cause` chain are looked at; `broken` wins over `space`. Nothing the job decides is
 * one: an image that does not build or cannot be pulled, a missing command, an archive the worker refuses, an exit of
 * the task (never a start failure); nor is the object store failing, which the start waits out and which another worker
 * would meet as well.
 */

/** What a full or over-quota disk answers a system call with. */
const DISK_FULL_ERRNO: ReadonlySet<string> = new Set(['ENOSPC', 'EDQUOT']);
/** What a read-only or failing disk answers a system call with. */
const DISK_BROKEN_ERRNO: ReadonlySet<string> = new Set(['EROFS', 'EIO']);

/** What connecting to an engine that is down, or whose socket is missing or closed to this worker, answers. */
const ENGINE_UNREACHABLE_ERRNO: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ENOENT', 'EACCES']);

/** How far a `cause` chain is followed (one made circular by hand must not loop for ever). */
const MAX_CAUSES = 16;

export function hostFaultOf(error: unknown): HostFaultKind | undefined {
  let space = false;
  let restoreDisk = false;
  let current: unknown = error;
  for (let depth = 0; depth < MAX_CAUSES && current !== undefined && current !== null; depth++) {
    // The job's own failures, and the store's, are never the host's, whatever they were caused by.
    if (isObjectStoreError(current) || current instanceof ImageBuildError) return undefined;
    const kind = kindOf(current);
    if (kind === 'broken') return 'broken';
    if (kind === 'space') space = true;
    if (current instanceof RestoreDiskError) restoreDisk = true;
    current = current instanceof Error ? current.cause : undefined;
  }
  if (space) return 'space';
  // A restore the disk failed for a reason its chain does not name (EACCES, EPERM…): the disk cannot be used.
  return restoreDisk ? 'broken' : undefined;
}

function kindOf(error: unknown): HostFaultKind | undefined {
  if (error instanceof DockerTimeoutError) return 'broken';
  if (error instanceof ImagePullError) return error.outOfSpace ? 'space' : undefined;
  const code = errnoCode(error);
  const syscall = (error as { syscall?: unknown } | null)?.syscall;
  if (code !== undefined && typeof syscall === 'string') {
    if (syscall === 'connect') return ENGINE_UNREACHABLE_ERRNO.has(code) ? 'broken' : undefined;
    if (DISK_FULL_ERRNO.has(code)) return 'space';
    if (DISK_BROKEN_ERRNO.has(code)) return 'broken';
  }
  // The engine's own answer (an HTTP status) that its disk is full: pulling or creating on a full data root.
  if (
    typeof (error as { statusCode?: unknown } | null)?.statusCode === 'number' &&
    error instanceof Error &&
    /no space left on device/i.test(error.message)
  )
    return 'space';
  return undefined;
}
