import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { ObjectStore } from '../storage/object-store.js';
import { parseBuildContextRef } from '../protocol/object-keys.js';
import { extractBuildContext } from './archives.js';
import type { TaskLaunch } from './executor.js';

/**
 * A build context uploaded by `fleetwise submit` (`…/contexts/<sha256>.tar[.gz]` in the object store) is fetched once
 * per host and unpacked under the work directory, keyed by its hash; a plain directory is used as it is.
 * `store` is asked for only when an archive must be fetched (the agent may not be registered otherwise).
 */
export async function fetchBuildContext(
  build: { readonly context: string; readonly dockerfile?: string | undefined },
  workDir: string,
  store: () => ObjectStore,
): Promise<NonNullable<TaskLaunch['build']>> {
  const uploaded = parseBuildContextRef(build.context);
  if (uploaded === undefined) {
    const { hashBuildContext } = await import('./image-cache.js');
    return {
      contextDir: build.context,
      dockerfile: build.dockerfile,
      contentHash: await hashBuildContext(build.context),
    };
  }
  const { key, sha256: hash, encoding } = uploaded;
  const target = join(workDir, 'contexts', hash);
  try {
    await readFile(join(target, '.fleetwise-complete'));
  } catch {
    // Tasks of one job (or jobs sharing a context) start together: the first call extracts, the others wait for it.
    let pending = extracting.get(target);
    if (pending === undefined) {
      pending = extract(target, () => store().getBuffer(key), encoding === 'gzip').finally(() =>
        extracting.delete(target),
      );
      extracting.set(target, pending);
    }
    await pending;
  }
  return { contextDir: target, dockerfile: build.dockerfile, contentHash: hash };
}

/** Extractions under way in this process, by target directory; a failed one is forgotten, so the next call retries. */
const extracting = new Map<string, Promise<void>>();

/**
 * Unpack into a temporary directory of its own (unique, so it never meets one a crashed worker left behind) and rename
 * it into place once complete; on failure the temporary directory is removed.
 */
async function extract(target: string, fetch: () => Promise<Buffer>, gzip: boolean): Promise<void> {
  await mkdir(dirname(target), { recursive: true });
  const temp = await mkdtemp(`${target}.tmp-`);
  try {
    const archive = await fetch();
    await extractBuildContext(archive, temp, gzip);
    await writeFile(join(temp, '.fleetwise-complete'), '');
    await rm(target, { recursive: true, force: true });
    await rename(temp, target);
  } catch (e) {
    await rm(temp, { recursive: true, force: true });
    throw e;
  }
}
