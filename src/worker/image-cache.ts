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
 * all). Built images nothing needs any more are removed (evictBuilt), the few most recently used excepted: a worker
 * building a new image at every edit of a project would otherwise fill its disk, and then fail every start.
 */
export const BUILD_REPOSITORY = 'fleetwise-build';

/**
 * Built images kept when nothing uses them, newest use first: a re-run of a recent project (or of the version before
 * the last edit) starts without building again, while a worker building a new image at every edit of a project does
 * not fill its disk with all of them.
 */
export const KEEP_UNUSED_BUILD_IMAGES = 3;

/**
 * How long an image `ensureBuilt` returned is never removed: the start it was returned to creates its container
 * within this time, and until then nothing on the engine shows that the image is wanted.
 */
export const RECENTLY_RETURNED_MS = 60_000;

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

/**
 * A pull that failed: the image is nowhere to be pulled (the job's), or the engine had no room for it (`outOfSpace`:
 * the host's; the engine reports it in the progress stream, with no status of its own).
 */
export class ImagePullError extends Error {
  readonly outOfSpace: boolean;

  constructor(
    readonly image: string,
    reason: string,
    options?: ErrorOptions,
  ) {
    super(`pulling image ${image} failed: ${reason}`, options);
    this.name = 'ImagePullError';
    this.outOfSpace = /no space left on device/i.test(reason);
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

export interface ImageCacheOptions {
  /** Unused built images kept (default KEEP_UNUSED_BUILD_IMAGES). */
  readonly keepUnused?: number;
  /** How long an image just returned is never removed (default RECENTLY_RETURNED_MS). */
  readonly recentlyReturnedMs?: number;
}

/**
 * An Engine API call bounded in time (the executor's timeouts): a hung engine fails an eviction pass rather than keeping
 * it, and every pass after it, waiting for ever.
 */
export type EngineCall = <T>(call: string, request: (abortSignal: AbortSignal) => Promise<T>) => Promise<T>;

/** How an eviction pass calls the engine: queries (listings) and changes (removals), each bounded. */
export interface EngineCalls {
  readonly query: EngineCall;
  readonly change: EngineCall;
}

const unbounded: EngineCall = (_call, request) => request(new AbortController().signal);

export interface BuildEviction {
  /** The tags removed. */
  readonly removed: readonly string[];
  /** The tags whose removal failed, with why (an engine error other than "in use" or "gone"). */
  readonly failed: readonly { readonly tag: string; readonly message: string }[];
}

interface BuiltTag {
  readonly tag: string;
  readonly imageId: string;
  /** When this worker last returned it, else when it was built (a restarted worker remembers no use). */
  readonly lastUsedMs: number;
}

function statusCodeOf(e: unknown): number | undefined {
  return typeof e === 'object' && e !== null && 'statusCode' in e && typeof e.statusCode === 'number'
    ? e.statusCode
    : undefined;
}

export class ImageCache {
  /** Builds and pulls in flight, so concurrent starts of one job's tasks build once. */
  private readonly inFlight = new Map<string, Promise<string>>();
  /** When each image was last returned to a start (ms): the order unused built images are kept in. */
  private readonly lastReturned = new Map<string, number>();
  /** Removals under way, by tag: a build or pull of that tag waits for its removal before it looks for the image. */
  private readonly removing = new Map<string, Promise<void>>();
  private readonly keepUnused: number;
  private readonly recentlyReturnedMs: number;

  constructor(
    private readonly docker: Docker,
    options: ImageCacheOptions = {},
  ) {
    this.keepUnused = options.keepUnused ?? KEEP_UNUSED_BUILD_IMAGES;
    this.recentlyReturnedMs = options.recentlyReturnedMs ?? RECENTLY_RETURNED_MS;
    if (!Number.isInteger(this.keepUnused) || this.keepUnused < 0)
      throw new Error(`keepUnused must be a whole number of images, at least 0 (got ${this.keepUnused})`);
    if (!Number.isFinite(this.recentlyReturnedMs) || this.recentlyReturnedMs < 0)
      throw new Error(
        `recentlyReturnedMs must be a number of milliseconds, at least 0 (got ${this.recentlyReturnedMs})`,
      );
  }

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
      let stream: NodeJS.ReadableStream;
      try {
        stream = await this.docker.pull(image);
      } catch (e) {
        // The engine refused the pull outright (an unknown registry, a missing digest): said as a pull of this image.
        // The cause stays, so an engine that cannot be reached is still the host's fault (host-fault.ts).
        throw new ImagePullError(image, e instanceof Error ? e.message.trim() : String(e), { cause: e });
      }
      const result = await follow(this.docker, stream);
      if (result.error !== undefined || !(await imageExists(this.docker, image)))
        throw new ImagePullError(image, result.error ?? 'not present after the pull');
      return image;
    });
  }

  /**
   * One build or pull per key at a time. It waits for a removal of the key under way (evictBuilt), so that it never
   * finds an image that is about to go; its time of return is noted before it leaves the in-flight map, so that an
   * eviction pass sees it either in flight or just returned, never neither.
   */
  private once(key: string, make: () => Promise<string>): Promise<string> {
    const pending = this.inFlight.get(key);
    if (pending !== undefined) return pending;
    const p = (async () => {
      await this.removing.get(key);
      const image = await make();
      this.lastReturned.set(key, Date.now());
      return image;
    })().finally(() => this.inFlight.delete(key));
    this.inFlight.set(key, p);
    return p;
  }

  /** A start may be using the tag: its build or pull is in flight, or it was returned moments ago. */
  private wanted(tag: string, now: number): boolean {
    const returned = this.lastReturned.get(tag);
    return this.inFlight.has(tag) || (returned !== undefined && now - returned < this.recentlyReturnedMs);
  }

  /**
   * Remove built images (repository BUILD_REPOSITORY only: never a pulled image, never anything else on the engine)
   * that nothing needs, keeping those any container on the engine uses (running or stopped, by image id: a tag may
   * have moved on), those `held` names (tasks prepared here and not started yet), those a build or pull is in flight
   * for or was just returned by, and the `keepUnused` most recently used of the rest. Removal is by tag and never
   * forced: the engine refuses to remove an image a container created meanwhile uses (409), which leaves it; one
   * already gone (404) is not a failure either. The in-flight and just-returned checks are made again right before
   * each removal, and a build of the tag waits until the removal is done, so a start never gets an image being removed.
   */
  async evictBuilt(
    held: Iterable<string>,
    calls: EngineCalls = { query: unbounded, change: unbounded },
  ): Promise<BuildEviction> {
    const images = await calls.query('a listing of built images', (abortSignal) =>
      this.docker.listImages({ filters: { reference: [BUILD_REPOSITORY] }, abortSignal }),
    );
    const containers = await calls.query('a listing of every container', (abortSignal) =>
      this.docker.listContainers({ all: true, abortSignal }),
    );
    const heldTags = new Set(held);
    const keptIds = new Set(containers.map((c) => c.ImageID));
    const built: BuiltTag[] = [];
    for (const image of images)
      for (const tag of image.RepoTags ?? []) {
        if (!tag.startsWith(`${BUILD_REPOSITORY}:`)) continue;
        if (heldTags.has(tag)) keptIds.add(image.Id);
        built.push({
          tag,
          imageId: image.Id,
          lastUsedMs: this.lastReturned.get(tag) ?? image.Created * 1000,
        });
      }
    const now = Date.now();
    const unused = built
      .filter((b) => !keptIds.has(b.imageId) && !this.wanted(b.tag, now))
      .sort((a, b) => b.lastUsedMs - a.lastUsedMs || a.tag.localeCompare(b.tag));
    const removed: string[] = [];
    const failed: { tag: string; message: string }[] = [];
    for (const { tag } of unused.slice(this.keepUnused)) {
      // Checked and marked with nothing awaited in between: a start asking for the tag from here on waits for this.
      if (this.wanted(tag, Date.now())) continue;
      const removal = calls
        .change(`the removal of image ${tag}`, (abortSignal) =>
          this.docker.getImage(tag).remove({ abortSignal }),
        )
        .then(
          (): 'removed' => 'removed',
          (e: unknown): 'kept' | Error => {
            const code = statusCodeOf(e);
            // 409: a container uses it (created since the listing); 404: gone already.
            return code === 409 || code === 404 ? 'kept' : e instanceof Error ? e : new Error(String(e));
          },
        );
      const done = removal.then(() => undefined);
      this.removing.set(tag, done);
      const outcome = await removal;
      if (this.removing.get(tag) === done) this.removing.delete(tag);
      if (outcome === 'removed') {
        removed.push(tag);
        this.lastReturned.delete(tag);
      } else if (outcome instanceof Error) failed.push({ tag, message: outcome.message });
    }
    return { removed, failed };
  }
}
