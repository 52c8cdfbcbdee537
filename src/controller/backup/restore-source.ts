import { parseStateBackupKey } from '../../protocol/object-keys.js';

/** Where `--restore-from` points: an object store, and in it a given backup or the newest one. */
export interface RestoreSource {
  /** The object store's location (`s3://bucket/prefix` or a directory), as `--object-store` takes it. */
  readonly location: string;
  /** A given backup's data or manifest key; undefined for the newest (`latest.json`). */
  readonly key?: string | undefined;
  /** The cluster a given key names (checked against the controller's). */
  readonly cluster?: string | undefined;
}

const LATEST_SUFFIX = /(?:^|\/)backups\/([^/]+)\/latest\.json$/;

/**
 * Parse `--restore-from`: an object store (`s3://bucket/prefix`, a directory: the newest backup of the controller's
 * cluster there), one backup in it (`…/backups/<cluster>/state-<seq>.db.gz`, or its `.json` manifest), or a
 * cluster's `latest.json`.
 */
export function parseRestoreSource(text: string): RestoreSource {
  const trimmed = text.trim();
  if (trimmed === '')
    throw new Error('--restore-from is empty (expected s3://bucket/prefix, a directory, or a backup in one)');
  const latest = LATEST_SUFFIX.exec(trimmed);
  if (latest?.[1] !== undefined) {
    const at = trimmed.lastIndexOf(`backups/${latest[1]}/latest.json`);
    return { location: storeRoot(trimmed, at), cluster: latest[1] };
  }
  const parsed = parseStateBackupKey(trimmed);
  if (parsed === undefined) return { location: trimmed };
  const at = trimmed.lastIndexOf(`backups/${parsed.cluster}/state-`);
  return { location: storeRoot(trimmed, at), key: trimmed.slice(at), cluster: parsed.cluster };
}

/** The store's location: what precedes the key (`s3://bucket`, `/dir`, `/`), or the working directory for none. */
function storeRoot(text: string, keyStart: number): string {
  const before = text.slice(0, keyStart);
  if (before === '') return '.';
  const root = before.replace(/\/+$/, '');
  // `/` and `file:///` are roots themselves; trimming their slash would change what they name.
  return root === '' || root.endsWith(':') ? before : root;
}
