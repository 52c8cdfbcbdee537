import { chmod, lchown, lstat, mkdir, open, readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { errnoCode } from '../../core/errno.js';
import type { TaskLaunch } from '../executor.js';

/**
 * The paths on the host a task's container (or process) mounts: its checkpoint directory and progress file, made
 * before the start and made writable by the user the image runs as.
 */

/** Make sure the progress file exists: bind-mounting a missing path makes Docker create a directory there. */
export async function prepareHostPaths(launch: TaskLaunch): Promise<void> {
  await mkdir(launch.checkpointDir, { recursive: true });
  await mkdir(dirname(launch.progressFile), { recursive: true });
  await (await open(launch.progressFile, 'a')).close();
}

/**
 * Whom a container of an image runs as, from the image's USER (`user`, `user:group`, names or ids): root when it names
 * none, ids when they are numbers. A name is resolved only by the image's own /etc/passwd, which the worker does not
 * read: such a user is `named`.
 */
export type ImageUser =
  | { readonly kind: 'root' }
  | { readonly kind: 'id'; readonly uid: number; readonly gid?: number | undefined }
  | { readonly kind: 'named' };

export function imageUser(user: string | undefined): ImageUser {
  const [name = '', group] = (user ?? '').split(':', 2);
  if (name === '' || name === 'root' || /^0+$/.test(name)) return { kind: 'root' };
  if (!/^\d+$/.test(name)) return { kind: 'named' };
  const gid = group !== undefined && /^\d+$/.test(group) ? Number(group) : undefined;
  return { kind: 'id', uid: Number(name), ...(gid === undefined ? {} : { gid }) };
}

/** Every path in `dir` (itself included, parents before their children), never through a symlink. */
async function treeOf(
  dir: string,
): Promise<{ readonly path: string; readonly kind: 'dir' | 'file' | 'link' }[]> {
  const out: { path: string; kind: 'dir' | 'file' | 'link' }[] = [{ path: dir, kind: 'dir' }];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await treeOf(path)));
    else out.push({ path, kind: e.isSymbolicLink() ? 'link' : 'file' });
  }
  return out;
}

/**
 * Let the container's user write its checkpoint directory (and what a restore put there) and its progress file. The
 * worker creates them as itself (root on EC2), and an image with a non-root USER could otherwise write neither: its
 * task would never checkpoint, yet run to success. A numeric USER gets them as its own (lchown, never through a link).
 * A named one (only the image's /etc/passwd knows its id, and the worker does not read into images), or any user when
 * the worker may not chown (it is not root), gets them writable by every user instead: they hold nothing but what the
 * task itself writes there, and the instance runs nothing but the worker and its tasks.
 */
export async function grantHostPaths(launch: TaskLaunch, user: ImageUser): Promise<void> {
  if (user.kind === 'root') return;
  const tree = [
    ...(await treeOf(launch.checkpointDir)),
    { path: launch.progressFile, kind: 'file' as const },
  ];
  if (user.kind === 'id') {
    try {
      for (const { path } of tree) await lchown(path, user.uid, user.gid ?? -1);
      return;
    } catch (e) {
      if (errnoCode(e) !== 'EPERM') throw e;
    }
  }
  for (const { path, kind } of tree) {
    if (kind === 'link') continue; // chmod would follow it
    const mode = (await lstat(path)).mode & 0o7777;
    await chmod(path, mode | (kind === 'dir' ? 0o777 : 0o666));
  }
}
