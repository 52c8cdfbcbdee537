import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
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
    const temp = `${target}.${process.pid}.tmp`;
    await rm(temp, { recursive: true, force: true });
    await mkdir(temp, { recursive: true });
    const archive = await store().getBuffer(key);
    await extractBuildContext(archive, temp, encoding === 'gzip');
    await writeFile(join(temp, '.fleetwise-complete'), '');
    await rm(target, { recursive: true, force: true });
    await rename(temp, target);
  }
  return { contextDir: target, dockerfile: build.dockerfile, contentHash: hash };
}
