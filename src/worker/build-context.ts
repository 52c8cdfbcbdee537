import { chmod, lstat, mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { DEFAULT_CONTEXT_LIMITS, type ContextLimits } from '../protocol/context-limits.js';
import { parseBuildContextRef } from '../protocol/object-keys.js';
import type { ObjectStore } from '../storage/object-store.js';
import { extractBuildContext } from './archives.js';
import type { TaskLaunch } from './executor.js';

/**
 * A build context uploaded through the controller (`…/contexts/<sha256>.tar[.gz]` in the object store) is fetched
 * once per host and unpacked under the work directory, keyed by its hash, streaming and within its team's limits.
 * Nothing else is a build context here: a path on this host named in a job spec is refused, or any user who can
 * submit a job could make a worker hash and run a task in any directory of the host.
 * `store` is asked for only when an archive must be fetched (the agent may not be registered otherwise).
 * The unpacked context stays until every task it was handed to has been built from it (releaseBuildContext): an
 * image holds it then, and a task run as a process, which runs inside it, never releases it.
 */
export async function fetchBuildContext(
  build: {
    readonly context: string;
    readonly dockerfile?: string | undefined;
    readonly limits?: ContextLimits | undefined;
  },
  workDir: string,
  store: () => ObjectStore,
): Promise<NonNullable<TaskLaunch['build']>> {
  const uploaded = parseBuildContextRef(build.context);
  if (uploaded === undefined)
    throw new Error(
      `build context ${JSON.stringify(build.context)} is not an uploaded context: workers run only contexts ` +
        'uploaded to the controller (`fleetwise submit` uploads a local directory)',
    );
  const { key, sha256: hash, encoding } = uploaded;
  const contexts = join(workDir, 'contexts');
  const target = join(contexts, hash);
  // Held from the start, so that no removal begins while this call looks for the context or unpacks it.
  holders.set(target, (holders.get(target) ?? 0) + 1);
  try {
    await removing.get(target);
    try {
      await readFile(completeMarker(target));
    } catch {
      // Tasks of one job (or jobs sharing a context) start together: the first call extracts, the others wait for it.
      let pending = extracting.get(target);
      if (pending === undefined) {
        pending = extract(target, () => openArchive(store(), key), {
          gzip: encoding === 'gzip',
          sha256: hash,
          limits: build.limits ?? DEFAULT_CONTEXT_LIMITS,
        }).finally(() => extracting.delete(target));
        extracting.set(target, pending);
      }
      await pending;
    }
  } catch (e) {
    letGo(target);
    throw e;
  }
  const handout = { contextDir: target, dockerfile: build.dockerfile, contentHash: hash };
  handouts.set(handout, target);
  return handout;
}

/**
 * The task given `build` (what fetchBuildContext returned) needs its unpacked context no more: its image is built, or
 * its build failed (a retry fetches the context again). Once no task holds the context it is removed, its marker
 * first, so that a worker killed midway leaves a context that is extracted again, never one marked complete but
 * half gone. Anything else (a directory fetchBuildContext did not hand out, a release already made) is left alone.
 */
export async function releaseBuildContext(build: object): Promise<void> {
  const target = handouts.get(build);
  if (target === undefined) return;
  handouts.delete(build);
  if (!letGo(target)) return;
  const removal = remove(target).finally(() => {
    if (removing.get(target) === removal) removing.delete(target);
  });
  removing.set(target, removal);
  await removal;
}

/** Contexts handed out and not yet released, each by the object handed out: a task's launch carries that object. */
const handouts = new WeakMap<object, string>();
/** Per context directory, the calls under way and the handouts not yet released. */
const holders = new Map<string, number>();
/** Removals under way, by context directory: a fetch of the same context waits for its removal before it looks. */
const removing = new Map<string, Promise<void>>();

/** One holder of `target` fewer; whether none is left. */
function letGo(target: string): boolean {
  const left = (holders.get(target) ?? 1) - 1;
  if (left > 0) holders.set(target, left);
  else holders.delete(target);
  return left <= 0;
}

/**
 * Never fails the build that released it: a marker that stays leaves a whole context (used again, or removed after
 * the next build from it), a directory that stays without its marker is replaced by the next extraction or swept.
 */
async function remove(target: string): Promise<void> {
  try {
    await rm(completeMarker(target), { force: true });
    await removeTree(target);
  } catch {
    // As above: nothing is left that a later fetch would take for a whole context.
  }
}

/** Extractions under way in this process, by target directory; a failed one is forgotten, so the next call retries. */
const extracting = new Map<string, Promise<void>>();
/** Sweeps of what a killed worker left, by contexts directory: one per process, which every extraction waits for. */
const sweeps = new Map<string, Promise<void>>();

/** A temporary extraction directory of `target` (mkdtemp adds six characters). */
const TEMP_MARK = '.tmp-';
/** What completeMarker adds to a context's directory. */
const COMPLETE = '.complete';
/** A context directory's name: the sha256 of its archive. */
const HASH = /^[0-9a-f]{64}$/;

/**
 * The file saying `target` was extracted whole: beside it, never inside it. Inside, the archive decides what is at
 * that path, and a context's symlinks may point anywhere on the host (a link named like the marker would have the
 * worker, root on EC2, truncate whatever it points to when writing the marker).
 */
function completeMarker(target: string): string {
  return `${target}${COMPLETE}`;
}

/**
 * Remove what a killed worker left in `contexts`, once per process and before this process extracts anything there:
 * the temporary directories of extractions (each is unique, mkdtemp, so no later extraction would ever reuse or remove
 * it), and contexts without their marker (a removal or an extraction cut short: no task was handed one, and nothing
 * else would remove it unless the same context came again). A removal under way in this process is left to finish.
 * Best effort: what cannot be removed stays, and extractions go on.
 */
function sweepLeftovers(contexts: string): Promise<void> {
  let sweep = sweeps.get(contexts);
  if (sweep === undefined) {
    sweep = (async (): Promise<void> => {
      const names = await readdir(contexts);
      for (const name of names) {
        const mark = name.indexOf(TEMP_MARK);
        const leftover =
          mark > 0 ||
          (HASH.test(name) && !names.includes(`${name}${COMPLETE}`) && !removing.has(join(contexts, name)));
        if (leftover) await removeTree(join(contexts, name));
      }
    })().catch(() => undefined);
    sweeps.set(contexts, sweep);
  }
  return sweep;
}

/**
 * The stored archive `key` and its size, which lets extraction check the expansion ratio against the whole archive.
 * An object replaced between the two is still caught: reading past the size is refused, and any other archive fails
 * its sha256.
 */
async function openArchive(
  store: ObjectStore,
  key: string,
): Promise<{ readonly archive: Readable; readonly sizeBytes: number | undefined }> {
  const info = await store.head(key);
  // No archive is empty: a size of 0 is a store that did not say (S3 without a Content-Length), checked as it reads.
  const sizeBytes = info !== undefined && info.sizeBytes > 0 ? info.sizeBytes : undefined;
  return { archive: await store.get(key), sizeBytes };
}

/**
 * Unpack into a temporary directory of its own (unique, so it never meets one a crashed worker left behind) and rename
 * it into place once complete; on any failure (the store, a limit, an unsafe entry) the temporary directory is
 * removed.
 */
async function extract(
  target: string,
  open: () => Promise<{ readonly archive: Readable; readonly sizeBytes: number | undefined }>,
  options: { readonly gzip: boolean; readonly sha256: string; readonly limits: ContextLimits },
): Promise<void> {
  await mkdir(dirname(target), { recursive: true });
  await sweepLeftovers(dirname(target));
  const temp = await mkdtemp(`${target}${TEMP_MARK}`);
  try {
    const { archive, sizeBytes } = await open();
    await extractBuildContext(archive, temp, { ...options, archiveBytes: sizeBytes });
    // The marker goes last: a worker killed anywhere before it leaves a context that is extracted again.
    await rm(completeMarker(target), { force: true });
    await removeTree(target);
    await rename(temp, target);
    await writeFile(completeMarker(target), '', { flag: 'wx' });
  } catch (e) {
    await removeTree(temp);
    throw e;
  }
}

/**
 * Remove `path` whole. A context keeps its archive's directory modes, read-only ones too (0555, as Go's module cache
 * makes them), from which a worker that is not root can remove nothing: those are made writable by their owner first.
 */
async function removeTree(path: string): Promise<void> {
  try {
    await rm(path, { recursive: true, force: true });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'EACCES' && code !== 'EPERM') throw e;
    await makeWritable(path);
    await rm(path, { recursive: true, force: true });
  }
}

/** Give the owner full access to `path` and every directory below it (a symlink is never followed). */
async function makeWritable(path: string): Promise<void> {
  const info = await lstat(path).catch(() => undefined);
  if (info === undefined || !info.isDirectory()) return;
  await chmod(path, (info.mode & 0o777) | 0o700);
  for (const name of await readdir(path)) await makeWritable(join(path, name));
}
