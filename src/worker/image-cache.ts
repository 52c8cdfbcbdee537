import { createHash } from 'node:crypto';
import { access, readdir, readFile, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import type Docker from 'dockerode';
import { plainEntryName } from '../protocol/archive-entry-names.js';
import { packBuildContext } from './archives.js';
import { releaseBuildContext } from './build-context.js';

/**
 * Images for tasks on one host. A build context is built once per content hash and Dockerfile and tagged with them
 * (`fleetwise-build:<hash>`), so every task of a job (and every later job with the same context and Dockerfile)
 * reuses it; an image reference is pulled only when it is missing locally (workers may have no registry access at
 * all).
 */
export const BUILD_REPOSITORY = 'fleetwise-build';

/** Docker's Dockerfile when a build names none. */
const DEFAULT_DOCKERFILE = 'Dockerfile';

/**
 * The tag of the image built from the context with `contentHash` by `dockerfile`. One context may hold several
 * Dockerfiles (Dockerfile.gpu, Dockerfile.cpu) that make different images from the same bytes, so the Dockerfile is
 * part of the identity: the default one is tagged with the content hash itself, any other with the hash of the two
 * (`./Dockerfile.gpu` and `Dockerfile.gpu` are the same file). Tags are at most 128 characters of [A-Za-z0-9_.-];
 * 32 hex characters of sha256 are plenty to tell images apart.
 */
export function buildTag(contentHash: string, dockerfile: string = DEFAULT_DOCKERFILE): string {
  const clean = contentHash.toLowerCase().replace(/^sha256:/, '');
  if (!/^[0-9a-f]{16,}$/.test(clean))
    throw new Error(`build context hash "${contentHash}" is not a hex digest (at least 16 hex digits)`);
  const path = plainEntryName(dockerfile);
  const identity =
    path === DEFAULT_DOCKERFILE ? clean : createHash('sha256').update(`${clean}\0${path}`).digest('hex');
  return `${BUILD_REPOSITORY}:${identity.slice(0, 32)}`;
}

/** Files of a directory, relative, '/'-separated, sorted (symlinks are listed, not followed). */
export async function listFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string): Promise<void> => {
    const entries = await readdir(d, { withFileTypes: true });
    for (const e of entries) {
      const full = join(d, e.name);
      if (e.isDirectory()) await walk(full);
      else out.push(relative(dir, full).split(sep).join('/'));
    }
  };
  await walk(dir);
  return out.sort();
}

/** sha256 over the sorted relative paths, modes and contents of a build context directory. */
export async function hashBuildContext(dir: string): Promise<string> {
  const hash = createHash('sha256');
  for (const file of await listFiles(dir)) {
    const full = join(dir, file);
    const info = await stat(full);
    hash.update(`${file}\0${(info.mode & 0o777).toString(8)}\0${info.size}\0`);
    hash.update(await readFile(full));
  }
  return hash.digest('hex');
}

export class ImageBuildError extends Error {
  constructor(
    readonly contextDir: string,
    reason: string,
    readonly output: string,
  ) {
    super(`building ${contextDir} failed: ${reason}\n${output.split('\n').slice(-15).join('\n')}`);
    this.name = 'ImageBuildError';
  }
}

interface ProgressEvent {
  readonly stream?: string;
  readonly status?: string;
  readonly error?: string;
  readonly errorDetail?: { readonly message?: string };
}

/** Wait for a build/pull/import stream; the daemon reports failures in-band as `{"error": …}` events. */
function follow(docker: Docker, stream: NodeJS.ReadableStream): Promise<{ output: string; error?: string }> {
  let output = '';
  let error: string | undefined;
  return new Promise((resolve, reject) => {
    docker.modem.followProgress(
      stream,
      (err: Error | null) =>
        err === null ? resolve({ output, ...(error === undefined ? {} : { error }) }) : reject(err),
      (event: ProgressEvent) => {
        if (event.stream !== undefined) output += event.stream;
        else if (event.status !== undefined) output += `${event.status}\n`;
        if (event.error !== undefined) error = event.errorDetail?.message ?? event.error;
      },
    );
  });
}

async function imageExists(docker: Docker, name: string): Promise<boolean> {
  try {
    await docker.getImage(name).inspect();
    return true;
  } catch (e) {
    if ((e as { statusCode?: number }).statusCode === 404) return false;
    throw e;
  }
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

export interface BuildRequest {
  readonly contextDir: string;
  readonly dockerfile?: string | undefined;
  readonly contentHash: string;
}

export class ImageCache {
  /** Builds and pulls in flight, so concurrent starts of one job's tasks build once. */
  private readonly inFlight = new Map<string, Promise<string>>();

  constructor(private readonly docker: Docker) {}

  /**
   * The image for a build context, built unless an image of its content hash and Dockerfile exists on this host. Then
   * the context unpacked for this task is released (releaseBuildContext): the image holds what it is needed for, and
   * once no other task is to be built from it, it is removed rather than kept on disk for every version of a project.
   */
  async ensureBuilt(build: BuildRequest): Promise<string> {
    try {
      return await this.build(build);
    } finally {
      await releaseBuildContext(build);
    }
  }

  private build(build: BuildRequest): Promise<string> {
    const tag = buildTag(build.contentHash, build.dockerfile);
    return this.once(tag, async () => {
      if (await imageExists(this.docker, tag)) return tag;
      // Released after an earlier build of this task (a held task starting later), and the image is gone since.
      if (!(await exists(build.contextDir)))
        throw new ImageBuildError(
          build.contextDir,
          `image ${tag} is not on this host and its build context is gone (a context is removed once its image ` +
            'is built; a new start of the task fetches it again)',
          '',
        );
      // The context goes as a tar the worker packs itself, never as a directory for dockerode to pack: dockerode
      // would read the context's .dockerignore on this host, following it wherever it links, and apply it again
      // without Docker's rule that the Dockerfile is always sent (archives.ts, packBuildContext).
      const stream = await this.docker.buildImage(packBuildContext(build.contextDir), {
        t: tag,
        rm: true,
        forcerm: true,
        ...(build.dockerfile === undefined ? {} : { dockerfile: build.dockerfile }),
      });
      const result = await follow(this.docker, stream);
      if (result.error !== undefined)
        throw new ImageBuildError(build.contextDir, result.error, result.output);
      if (!(await imageExists(this.docker, tag)))
        throw new ImageBuildError(build.contextDir, 'the daemon reported no image', result.output);
      return tag;
    });
  }

  /** An image reference, pulled only when it is not on this host. */
  ensurePulled(image: string): Promise<string> {
    return this.once(image, async () => {
      if (await imageExists(this.docker, image)) return image;
      const stream = await this.docker.pull(image);
      const result = await follow(this.docker, stream);
      if (result.error !== undefined || !(await imageExists(this.docker, image)))
        throw new Error(`pulling image ${image} failed: ${result.error ?? 'not present after the pull'}`);
      return image;
    });
  }

  private once(key: string, make: () => Promise<string>): Promise<string> {
    const pending = this.inFlight.get(key);
    if (pending !== undefined) return pending;
    const p = make().finally(() => this.inFlight.delete(key));
    this.inFlight.set(key, p);
    return p;
  }
}
