import { mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
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
  try {
    await readFile(completeMarker(target));
  } catch {
    // Tasks of one job (or jobs sharing a context) start together: the first call extracts, the others wait for it.
    let pending = extracting.get(target);
    if (pending === undefined) {
      pending = extract(target, () => store().get(key), {
        gzip: encoding === 'gzip',
        sha256: hash,
        limits: build.limits ?? DEFAULT_CONTEXT_LIMITS,
      }).finally(() => extracting.delete(target));
      extracting.set(target, pending);
    }
    await pending;
  }
  return { contextDir: target, dockerfile: build.dockerfile, contentHash: hash };
}

/** Extractions under way in this process, by target directory; a failed one is forgotten, so the next call retries. */
const extracting = new Map<string, Promise<void>>();
/** Context directories already swept of what a killed worker left there, in this process. */
const swept = new Set<string>();

/** A temporary extraction directory of `target` (mkdtemp adds six characters). */
const TEMP_MARK = '.tmp-';

/**
 * The file saying `target` was extracted whole: beside it, never inside it. Inside, the archive decides what is at
 * that path, and a context's symlinks may point anywhere on the host (a link named like the marker would have the
 * worker, root on EC2, truncate whatever it points to when writing the marker).
 */
function completeMarker(target: string): string {
  return `${target}.complete`;
}

/**
 * Remove the temporary directories a worker killed mid-extraction left in `contexts`, once per process: each is
 * unique (mkdtemp), so no later extraction would ever reuse or remove it. Other extractions under way in this process
 * are left alone; `starting`'s own temporary directory does not exist yet.
 */
async function sweepLeftovers(contexts: string, starting: string): Promise<void> {
  if (swept.has(contexts)) return;
  swept.add(contexts);
  for (const name of await readdir(contexts).catch(() => [])) {
    const mark = name.indexOf(TEMP_MARK);
    if (mark <= 0) continue;
    const of = join(contexts, name.slice(0, mark));
    if (of === starting || !extracting.has(of))
      await rm(join(contexts, name), { recursive: true, force: true });
  }
}

/**
 * Unpack into a temporary directory of its own (unique, so it never meets one a crashed worker left behind) and rename
 * it into place once complete; on any failure (the store, a limit, an unsafe entry) the temporary directory is
 * removed.
 */
async function extract(
  target: string,
  open: () => Promise<Readable>,
  options: { readonly gzip: boolean; readonly sha256: string; readonly limits: ContextLimits },
): Promise<void> {
  await mkdir(dirname(target), { recursive: true });
  await sweepLeftovers(dirname(target), target);
  const temp = await mkdtemp(`${target}${TEMP_MARK}`);
  try {
    await extractBuildContext(await open(), temp, options);
    // The marker goes last: a worker killed anywhere before it leaves a context that is extracted again.
    await rm(completeMarker(target), { force: true });
    await rm(target, { recursive: true, force: true });
    await rename(temp, target);
    await writeFile(completeMarker(target), '', { flag: 'wx' });
  } catch (e) {
    await rm(temp, { recursive: true, force: true });
    throw e;
  }
}
