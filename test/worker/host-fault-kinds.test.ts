import { describe, expect, it } from 'vitest';
import { ObjectStoreError } from '../../src/storage/object-store-error.js';
import { RestoreDiskError } from '../../src/worker/checkpoints.js';
import { DockerTimeoutError } from '../../src/worker/executors/docker-engine.js';
import { hostFaultOf } from '../../src/worker/host-fault.js';
import { ImageBuildError, ImagePullError } from '../../src/worker/image-cache.js';

/** A Node system error as fs and net raise them: a code and the system call that failed. */
function systemError(code: string, syscall: string): Error {
  return Object.assign(new Error(`${code}: ${syscall} failed`), { code, syscall });
}

const ref = { jobId: 'job-1', taskId: 'job-1.0' };

/**
 * How a start failure is blamed (src/worker/host-fault.ts): `space` where what the start needed did not fit on the
 * host (it may be the job's alone: the host stays in service), `broken` where the host can start nothing (drained),
 * nothing where the job or the object store failed.
 */
describe("a start failure's host fault", () => {
  it('is `space` for a full disk or engine, which may be this job’s alone', () => {
    expect(hostFaultOf(new RestoreDiskError(ref, 3, systemError('ENOSPC', 'write')))).toBe('space');
    expect(hostFaultOf(systemError('EDQUOT', 'open'))).toBe('space');
    expect(
      hostFaultOf(
        new ImagePullError('registry/big:1', 'write /var/lib/docker/tmp/x: no space left on device'),
      ),
    ).toBe('space');
    const engine500 = Object.assign(new Error('(HTTP code 500) server error - no space left on device'), {
      statusCode: 500,
    });
    expect(hostFaultOf(engine500)).toBe('space');
  });

  it('is `broken` for a disk that fails or is read-only, an engine down or hung, and a restore the disk refused', () => {
    expect(hostFaultOf(new RestoreDiskError(ref, 3, systemError('EIO', 'read')))).toBe('broken');
    expect(hostFaultOf(systemError('EROFS', 'mkdir'))).toBe('broken');
    expect(hostFaultOf(systemError('ECONNREFUSED', 'connect'))).toBe('broken');
    expect(hostFaultOf(new DockerTimeoutError('a container start', 60_000))).toBe('broken');
    expect(hostFaultOf(new RestoreDiskError(ref, 3, systemError('EACCES', 'open')))).toBe('broken');
    // A broken disk further down a chain that also says full: broken wins.
    const both = new Error('unpacking failed', { cause: systemError('EIO', 'write') });
    expect(hostFaultOf(Object.assign(both, { code: 'ENOSPC', syscall: 'write' }))).toBe('broken');
  });

  it("is none for the job's own failures and the object store's", () => {
    expect(hostFaultOf(new ImagePullError('nowhere/image:1', 'manifest unknown'))).toBeUndefined();
    expect(hostFaultOf(new ImageBuildError('/ctx', 'RUN failed', 'No space left on device'))).toBeUndefined();
    // A full disk under an object-store call is the store's to retry, not this host's.
    expect(
      hostFaultOf(new ObjectStoreError('get', 'k', '/store', 1, systemError('ENOSPC', 'write'))),
    ).toBeUndefined();
    // ENOENT is a missing file of the job's, unless connecting (the engine's socket).
    expect(hostFaultOf(systemError('ENOENT', 'open'))).toBeUndefined();
    expect(hostFaultOf(new Error('exec: "python": executable file not found'))).toBeUndefined();
  });
});
