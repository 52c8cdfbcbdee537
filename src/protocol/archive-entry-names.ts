/**
 * Which names may stand in a build context or checkpoint archive, and so which paths a job spec may name inside a
 * build context (its `dockerfile`). One rule for the controller, which refuses an unsafe upload as it arrives, and the
 * worker, which refuses it again as it extracts: a name is relative, '/'-separated, never climbs out with `..` and
 * holds no NUL byte (a C string would end there). Empty and `.` segments are harmless (`./a`, `a//b`).
 */

/** Why `name` may not name a path inside an archive's directory, or undefined when it may. */
export function unsafeEntryNameReason(name: string): string | undefined {
  if (name.includes('\0')) return 'has a NUL byte in its name';
  if (name.startsWith('/')) return 'has an absolute path'; // POSIX: archives name paths with '/'
  if (name.split('/').includes('..')) return 'has a `..` path segment';
  return undefined;
}

/** A safe name in its plain form (`./a//b` is `a/b`); '' for the directory itself (GNU tar's `./`). */
export function plainEntryName(name: string): string {
  return name
    .split('/')
    .filter((s) => s !== '' && s !== '.')
    .join('/');
}

/**
 * Links one path lookup may follow on Linux (MAXSYMLINKS): a longer chain fails (ELOOP) and leads nowhere. The worker
 * resolves an archive's links by it, and `fleetwise submit` a Dockerfile that is a link, as the kernel would.
 */
export const MAX_LINK_HOPS = 40;
