import { chmodSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Catalog } from '../../../core/catalog.js';
import { ValidationError } from '../../../core/validation.js';
import type { ControllerConfig } from '../../../controller/config.js';
import type { ControllerLogger } from '../../../controller/seams.js';
import { restoreState } from '../../../controller/backup/restore-state.js';
import { openObjectStore } from '../../../storage/open-object-store.js';
import { describeRestore } from '../../controller-backups.js';
import { sharesState } from '../../controller-state.js';
import { STATE_DB_FILE } from '../../local-state.js';
import { claimStateDir, recordSharedController } from '../../state-dir-lock.js';
import type { SecretFiles } from './secrets.js';

/** The controller's state directory: made owner-only, claimed by this controller, filled from a backup on request. */

/** The SQLite state in the state directory (`fleetwise export-trace` reads it too). */
export const DB_FILE = STATE_DB_FILE;

/** Create the state directory (owner-only) and claim it for this controller; returns what releases the claim. */
export function claimStateDirectory(config: ControllerConfig): () => void {
  mkdirSync(config.stateDir, { recursive: true, mode: 0o700 });
  // mkdir's mode applies only to a directory it creates: an existing one is narrowed too, as its files hold secrets.
  chmodSync(config.stateDir, 0o700);
  // A shared (PostgreSQL) state is guarded by its lease instead: controllers sharing it may share the directory too,
  // each recorded on its own so that `fleetwise down` stops every one before the workers they would launch again.
  return sharesState(config) ? recordSharedController(config.stateDir) : claimStateDir(config.stateDir);
}

export interface RestoreFromBackupOptions {
  /** `--restore-from`: an object store, or one backup in it. */
  readonly from: string;
  readonly config: ControllerConfig;
  readonly catalog: Catalog;
  readonly secretFiles: SecretFiles;
  readonly log: ControllerLogger;
  /** Releases the state directory's claim: a failed restore leaves the directory free. */
  readonly releaseStateDir: () => void;
}

/** Install the state (and its tokens) from a backup (`--restore-from`), and say on stdout what was restored. */
export async function restoreFromBackup(options: RestoreFromBackupOptions): Promise<void> {
  const { config, log, releaseStateDir } = options;
  if (sharesState(config)) {
    releaseStateDir();
    throw new ValidationError('fleetwise controller', [
      '--restore-from: restores a SQLite state from its backups; a PostgreSQL state (--state) is restored with ' +
        "the database's own tools (pg_restore, point-in-time recovery)",
    ]);
  }
  const restored = await restoreState({
    from: options.from,
    cluster: config.cluster,
    dbFile: join(config.stateDir, DB_FILE),
    secretFiles: options.secretFiles,
    openObjectStore: (location) => openObjectStore(location, { region: config.region }),
    catalog: options.catalog,
  }).catch((e: unknown) => {
    releaseStateDir();
    throw e;
  });
  process.stdout.write(describeRestore(restored));
  log.info('state restored from a backup', {
    key: restored.manifest.key,
    resubmitted: restored.resubmitted.length,
    ended: restored.ended.length,
  });
}
