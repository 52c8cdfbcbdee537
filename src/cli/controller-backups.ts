import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BackupSchedule, type BackupMetrics } from '../controller/backup/backup-schedule.js';
import {
  SECRET_NAMES,
  type BackupSecrets,
  type SecretFilePaths,
} from '../controller/backup/backup-documents.js';
import { JobArchive, type JobArchiveMetrics } from '../controller/backup/job-archive.js';
import type { RestoreSummary } from '../controller/backup/restore-state.js';
import { StateBackup } from '../controller/backup/state-backup.js';
import type { Clock } from '../controller/clock.js';
import type { ControllerLogger } from '../controller/seams.js';
import type { SqliteStateStore } from '../controller/state/sqlite-state-store.js';
import { markedAtSeconds } from '../controller/state/initialization.js';
import type { ObjectStore } from '../storage/object-store.js';

/** The controller's backups: the state every period, and the job archive every submission waits for. */
export interface ControllerBackups {
  readonly schedule: BackupSchedule;
  readonly archive: JobArchive;
}

export interface ControllerBackupOptions {
  readonly everySeconds: number;
  readonly keep: number;
  readonly cluster: string;
  readonly stateDir: string;
  /** The state directory's token files a restore needs (read at each backup, stored when they change). */
  readonly secretFiles: SecretFilePaths;
  readonly store: SqliteStateStore;
  readonly objectStore: ObjectStore | undefined;
  readonly clock: Clock;
  readonly log: ControllerLogger;
  readonly metrics: BackupMetrics & JobArchiveMetrics;
}

/** Backups as configured; undefined when turned off (`backupSeconds: 0`) or without an object store. */
export function controllerBackups(options: ControllerBackupOptions): ControllerBackups | undefined {
  const { objectStore } = options;
  if (options.everySeconds === 0 || objectStore === undefined) return undefined;
  const backup = new StateBackup({
    source: options.store,
    objectStore,
    cluster: options.cluster,
    workDir: join(options.stateDir, 'backup-tmp'),
    keep: options.keep,
    secrets: () => readSecrets(options.secretFiles),
    nowSeconds: () => options.clock.nowSeconds(),
  });
  return {
    schedule: new BackupSchedule({
      backup: () => backup.run(),
      changeMark: () => options.store.changeMark(),
      everySeconds: options.everySeconds,
      clock: options.clock,
      log: options.log,
      metrics: options.metrics,
    }),
    archive: new JobArchive({
      objectStore,
      cluster: options.cluster,
      clock: options.clock,
      log: options.log,
      metrics: options.metrics,
      stateBeganAtSeconds: () => markedAtSeconds(options.store),
    }),
  };
}

function readSecrets(files: ControllerBackupOptions['secretFiles']): BackupSecrets {
  const read = (path: string): string | undefined => {
    try {
      const text = readFileSync(path, 'utf8').trim();
      return text === '' ? undefined : text;
    } catch {
      return undefined; // not made in this mode (the admin token from the environment, no workers)
    }
  };
  const secrets: BackupSecrets = { version: 1 };
  for (const name of SECRET_NAMES) {
    const value = read(files[name]);
    if (value !== undefined) secrets[name] = value;
  }
  return secrets;
}

/**
 * The one line `--restore-from` prints. Team tokens are in the state alone (no archive carries them as it does jobs):
 * the line says they are as of the backup, so an operator knows a revoke after it must be made again.
 */
export function describeRestore(summary: RestoreSummary): string {
  const taken = new Date(summary.manifest.takenAtSeconds * 1000).toISOString();
  return (
    `restored the state from ${summary.location} ${summary.manifest.key} (backup ${summary.manifest.seq}, taken ` +
    `${taken}); from the job archive: ${summary.resubmitted.length} job(s) accepted after it submitted again` +
    `${summary.resubmitted.length === 0 ? '' : ` (${summary.resubmitted.join(', ')})`}, ${summary.ended.length} ` +
    `ended as they did after it${summary.ended.length === 0 ? '' : ` (${summary.ended.join(', ')})`}` +
    `${summary.withdrawn.length === 0 ? '' : `, ${summary.withdrawn.length} withdrawn, of an array the loss cut short (${summary.withdrawn.join(', ')})`}; ` +
    `team tokens as of ${taken} (a token created or revoked after it is not in the backup: do it again); ` +
    `${summary.secrets.length === 0 ? 'no tokens in the backup' : `tokens restored: ${summary.secrets.join(', ')}`}` +
    `${summary.skipped.length === 0 ? '' : `; passed over newer backups: ${summary.skipped.map((s) => `${s.key} (${s.reason})`).join('; ')}`}\n`
  );
}
