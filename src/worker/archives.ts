import { createHash } from 'node:crypto';
import { constants, createReadStream, createWriteStream, type Stats } from 'node:fs';
import {
  chmod,
  link,
  lstat,
  mkdir,
  open,
  readdir,
  readlink,
  realpath,
  symlink,
  utimes,
  type FileHandle,
} from 'node:fs/promises';
import { isAbsolute, join, posix } from 'node:path';
import { pipeline as pipe, Readable, Transform } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { pipeline } from 'node:stream/promises';
import { extract as tarExtract, pack as tarPack, type Header } from 'tar-stream';
import { ExpansionMeter, type ContextLimits } from '../protocol/context-limits.js';
import { MAX_LINK_HOPS, plainEntryName, unsafeEntryNameReason } from '../protocol/archive-entry-names.js';

/**
 * The worker's tar archives, written and read in-process with tar-stream (no host `tar`, so busybox, GNU and BSD tar
 * differences stop mattering): checkpoints, and the build contexts `fleetwise submit` uploads. The format is plain
 * ustar with PAX for long names: what GNU tar made before reads the same way (GNU long names, hard links and a
 * leading `./` are understood), and any tar can read what this writes.
 *
 * Extraction trusts nothing in the archive, even a checkpoint whose sha256 was checked (whoever can write the store
 * can write a matching manifest): absolute names and `..` are refused, a checkpoint's symlinks must point inside the
 * directory (followed through its other links too), a hard link must name a file already extracted, no entry is
 * written through a symlink (every parent must be a real directory), and no entry replaces an existing path. Set-id
 * bits and owners are dropped.
 */

/** The contract's rule for symlinks: relative, and resolving inside the checkpoint directory. */
function linkEscapes(entry: string, target: string): boolean {
  if (target === '' || posix.isAbsolute(target) || isAbsolute(target)) return true;
  const resolved = posix.normalize(posix.join(posix.dirname(entry), target));
  return resolved === '..' || resolved.startsWith('../');
}

/**
 * Whether following `entry` (a symlink to `target`) leads outside the directory once the directory's other links
 * (`links`, path → target) are followed as the kernel would. Each link may pass linkEscapes on its own and still lead
 * out through another: `l -> .` then `m -> l/..` is the directory's parent. A `..` climbs from where the lookup has
 * got to, so the walk follows each link it meets before going on.
 */
function linkLeadsOut(entry: string, target: string, links: ReadonlyMap<string, string>): boolean {
  const where = posix.dirname(entry) === '.' ? [] : posix.dirname(entry).split('/');
  // Segments still to walk, the next one last.
  const pending = target.split('/').reverse();
  let hops = 0;
  for (let segment = pending.pop(); segment !== undefined; segment = pending.pop()) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') {
      if (where.length === 0) return true;
      where.pop();
      continue;
    }
    const next = links.get([...where, segment].join('/'));
    if (next === undefined) {
      where.push(segment);
      continue;
    }
    if (++hops > MAX_LINK_HOPS) return false;
    if (next === '' || posix.isAbsolute(next) || isAbsolute(next)) return true;
    pending.push(...next.split('/').reverse());
  }
  return false;
}

/** The first of `links` (path → target) that leads outside the directory through the others, if any. */
function linkLeadingOut(links: ReadonlyMap<string, string>): [string, string] | undefined {
  for (const [entry, target] of links) if (linkLeadsOut(entry, target, links)) return [entry, target];
  return undefined;
}

export class UnsafeArchiveEntry extends Error {
  constructor(entry: string, reason: string) {
    super(`entry ${JSON.stringify(entry)} ${reason}`);
    this.name = 'UnsafeArchiveEntry';
  }
}

/**
 * Open the checkpoint file `path` under `realDir` (symlinks resolved) for reading, refusing anything but the regular
 * file lstat listed (`listed`): O_NOFOLLOW keeps a link swapped in for the file from being followed, O_NONBLOCK keeps a
 * FIFO swapped in from blocking the open, and the descriptor must be a regular file with the listed device, inode and
 * size. O_NOFOLLOW covers the last component only, and lstat itself follows a directory above the file that became a
 * link, so on Linux the descriptor's own path (/proc/self/fd) must also be the one under the directory.
 */
async function openListedFile(realDir: string, path: string, listed: Stats): Promise<FileHandle> {
  const full = join(realDir, path);
  const changed = (how: string): UnsafeArchiveEntry =>
    new UnsafeArchiveEntry(path, `changed after it was listed (${how}): not packed`);
  let file: FileHandle;
  try {
    file = await open(full, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ELOOP') throw changed('now a symlink');
    throw e;
  }
  try {
    const opened = await file.stat();
    if (!opened.isFile()) throw changed('no longer a regular file');
    if (opened.dev !== listed.dev || opened.ino !== listed.ino) throw changed('now a different file');
    if (opened.size !== listed.size)
      throw changed(`its size went from ${listed.size} to ${opened.size} bytes`);
    if (process.platform === 'linux') {
      const where = await readlink(`/proc/self/fd/${file.fd}`);
      if (where !== full) throw changed(`opened ${where}, outside the checkpoint directory`);
    }
    return file;
  } catch (e) {
    await file.close();
    throw e;
  }
}

/**
 * Stream `dir`'s `files` as a tar. Regular files keep their mode and mtime; symlinks are stored as links (never
 * followed) and must stay inside the directory, or the checkpoint could not be restored; other kinds (FIFOs,
 * sockets) hold no state and are left out. `files` are '/'-separated paths relative to `dir`. Returns the stream
 * and the files it will contain.
 *
 * The task owns `dir` and runs while it is packed, and the worker reads as root: each file is read through a
 * descriptor proven to be the very file listed (openListedFile), never by its path again, so swapping a file or a
 * directory above it for a link to a host file cannot put the host file in the checkpoint.
 */
export async function packCheckpoint(
  dir: string,
  files: readonly string[],
): Promise<{ readonly tar: Readable; readonly files: string[] }> {
  const entries: { readonly path: string; readonly header: Header; readonly listed: Stats }[] = [];
  for (const path of files) {
    const info = await lstat(join(dir, path));
    const base = {
      name: path,
      mode: info.mode & 0o777,
      mtime: info.mtime,
      uid: 0,
      gid: 0,
      uname: '',
      gname: '',
      devmajor: 0,
      devminor: 0,
    };
    if (info.isFile())
      entries.push({ path, listed: info, header: { ...base, type: 'file', size: info.size, linkname: '' } });
    else if (info.isSymbolicLink()) {
      const target = await readlink(join(dir, path));
      if (linkEscapes(path, target))
        throw new UnsafeArchiveEntry(
          path,
          `is a symlink to ${target}, outside the checkpoint directory (only relative links within it restore)`,
        );
      entries.push({ path, listed: info, header: { ...base, type: 'symlink', size: 0, linkname: target } });
    }
  }
  const links = new Map(
    entries.filter((e) => e.header.type === 'symlink').map((e) => [e.path, e.header.linkname ?? '']),
  );
  const out = linkLeadingOut(links);
  if (out !== undefined)
    throw new UnsafeArchiveEntry(
      out[0],
      `is a symlink to ${out[1]}, which leads outside the checkpoint directory through its other links`,
    );
  const tar = tarPack();
  const write = async (): Promise<void> => {
    const realDir = await realpath(dir);
    for (const { path, header, listed } of entries) {
      if (header.type !== 'file') {
        await new Promise<void>((resolve, reject) => tar.entry(header, (e) => (e ? reject(e) : resolve())));
        continue;
      }
      const file = await openListedFile(realDir, path, listed);
      try {
        // tar-stream fails the entry if the file's size changes while it streams (the task must not write meanwhile).
        await pipeline(file.createReadStream({ autoClose: false }), tar.entry(header));
      } finally {
        await file.close();
      }
    }
    tar.finalize();
  };
  write().catch((e: Error) => tar.destroy(e));
  // A Node Readable for the object store's put (multipart uploads read it like any stream).
  return { tar: Readable.from(tar), files: entries.map((e) => e.path) };
}

/**
 * Stream the unpacked build context `dir` as the tar the engine's build endpoint takes, without following anything
 * in it: a context's symlinks may point anywhere on this host (extractBuildContext), so they are stored as links,
 * for the builder to resolve inside the context as `docker build` does. Reading through one would have the worker
 * read whatever it names (a link to /dev/zero never ends, one to a FIFO blocks). Directories (empty ones too) and
 * regular files are stored with their modes; FIFOs, sockets and devices are left out, as extraction leaves them.
 * `.dockerignore` is not applied again: `fleetwise submit` applied it when packing, keeping the Dockerfile and
 * `.dockerignore` whatever it says, as Docker does (applying it here would drop an ignored Dockerfile).
 */
export function packBuildContext(dir: string): Readable {
  const tar = tarPack();
  const base = { uid: 0, gid: 0, uname: '', gname: '', devmajor: 0, devminor: 0 };
  const add = (header: Header): Promise<void> =>
    new Promise((resolve, reject) => tar.entry(header, (e) => (e ? reject(e) : resolve())));
  const walk = async (relative: string): Promise<void> => {
    const entries = await readdir(join(dir, relative), { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const name = relative === '' ? e.name : `${relative}/${e.name}`;
      const full = join(dir, name);
      const info = await lstat(full);
      const common = { ...base, name, mode: info.mode & 0o777, mtime: info.mtime, linkname: '' };
      if (info.isDirectory()) {
        await add({ ...common, type: 'directory', size: 0 });
        await walk(name);
      } else if (info.isSymbolicLink()) {
        await add({ ...common, type: 'symlink', size: 0, linkname: await readlink(full) });
      } else if (info.isFile()) {
        // O_NOFOLLOW and O_NONBLOCK: should the path have changed since lstat, opening it neither follows a link nor
        // waits on a FIFO; the size is the open file's.
        const file = await open(full, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
        try {
          const opened = await file.stat();
          if (!opened.isFile()) continue;
          await pipeline(
            file.createReadStream({ autoClose: false }),
            tar.entry({ ...common, type: 'file', size: opened.size }),
          );
        } finally {
          await file.close();
        }
      }
    }
  };
  walk('')
    .then(() => tar.finalize())
    .catch((e: Error) => tar.destroy(e));
  return Readable.from(tar);
}

/** The safe relative form of an entry's name, or undefined for the directory itself (GNU tar's `./`). */
function safeName(raw: string): string | undefined {
  const why = unsafeEntryNameReason(raw);
  if (why !== undefined) throw new UnsafeArchiveEntry(raw, why);
  const name = plainEntryName(raw);
  return name === '' ? undefined : name;
}

async function drain(stream: AsyncIterable<unknown>): Promise<void> {
  for await (const chunk of stream) void chunk;
}

/**
 * Extract the tar file `archive` into `dir` (an existing, empty directory) under the rules above. Throws on the first
 * unsafe or unreadable entry; the caller empties the directory before trying another checkpoint.
 */
export async function extractCheckpoint(archive: string, dir: string): Promise<void> {
  await extractInto(createReadStream(archive), dir, { linksMayLeave: false });
}

/** A pass-through that hands each chunk to `inspect` first; what `inspect` throws fails the stream. */
function inspecting(inspect: (chunk: Buffer) => void): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      try {
        inspect(chunk);
        done(null, chunk);
      } catch (e) {
        done(e as Error);
      }
    },
  });
}

export interface BuildContextExtraction {
  /** The archive is gzip-compressed (otherwise a plain tar). */
  readonly gzip: boolean;
  /** Checked as the archive streams in: extraction stops at the first byte over a limit (ContextLimitError). */
  readonly limits: ContextLimits;
  /** The archive's sha256, as its reference names it: a different archive is refused once read. */
  readonly sha256?: string | undefined;
  /**
   * The archive's size, when the store says it before it is read: the expansion ratio is then checked against the
   * whole archive, whatever the order of its files, and reading more than this is an error.
   */
  readonly archiveBytes?: number | undefined;
}

/**
 * Extract an uploaded build context (tar, or gzip-compressed tar) streaming from `archive` into `dir`, an existing
 * empty directory, never holding it whole in memory. Its size, expanded size and expansion ratio are metered as it
 * decompresses (a decompression bomb is stopped early, src/protocol/context-limits.ts). A context's symlinks may
 * point anywhere, as `docker build` copies them as links; they are never followed while extracting. The caller
 * removes `dir` when this throws.
 */
export async function extractBuildContext(
  archive: Readable,
  dir: string,
  options: BuildContextExtraction,
): Promise<void> {
  const meter = new ExpansionMeter(options.limits, options.archiveBytes);
  const hash = createHash('sha256');
  const read = inspecting((chunk) => {
    hash.update(chunk);
    meter.addArchive(chunk.length);
  });
  const expanded = inspecting((chunk) => meter.addExpanded(chunk.length));
  // Any stream failing (the store, gunzip, a limit) destroys them all; extractInto sees the failure on its source.
  const tarBytes = options.gzip
    ? pipe(archive, read, createGunzip(), expanded, () => undefined)
    : pipe(archive, read, expanded, () => undefined);
  await extractInto(tarBytes, dir, { linksMayLeave: true });
  const sha256 = hash.digest('hex');
  if (options.sha256 !== undefined && sha256 !== options.sha256)
    throw new Error(
      `the stored build context is not the one referenced: its sha256 is ${sha256.slice(0, 12)}…, ` +
        `the reference names ${options.sha256.slice(0, 12)}…`,
    );
}

async function extractInto(
  source: Readable,
  dir: string,
  options: { readonly linksMayLeave: boolean },
): Promise<void> {
  /** Directories below `dir` known to be real directories (an entry never replaces an existing path). */
  const directories = new Set<string>(['']);
  const ensureParents = async (name: string, create: boolean): Promise<void> => {
    const segments = name.split('/').slice(0, -1);
    for (let i = 1; i <= segments.length; i++) {
      const parent = segments.slice(0, i).join('/');
      if (directories.has(parent)) continue;
      const info = await lstat(join(dir, parent)).catch(() => undefined);
      if (info === undefined && create) await mkdir(join(dir, parent));
      else if (info === undefined)
        throw new UnsafeArchiveEntry(name, 'names a file that is not in the archive');
      else if (!info.isDirectory())
        throw new UnsafeArchiveEntry(name, `goes through ${parent}, not a directory`);
      directories.add(parent);
    }
  };
  const notThere = async (name: string): Promise<void> => {
    if ((await lstat(join(dir, name)).catch(() => undefined)) !== undefined)
      throw new UnsafeArchiveEntry(name, 'appears twice in the archive');
  };

  /** The symlinks extracted (path → target), checked together once all are known (!linksMayLeave). */
  const links = new Map<string, string>();
  /**
   * The archive's directories and their modes, applied once everything is in them: created owner-writable, so a
   * read-only directory (0555, as Go's module cache makes them) still takes its files when the worker is not root.
   */
  const directoryModes = new Map<string, number>();

  const extract = tarExtract();
  source.once('error', (e) => extract.destroy(e));
  source.pipe(extract);
  try {
    for await (const entry of extract) {
      const { header } = entry;
      const name = safeName(header.name);
      if (name === undefined) {
        await drain(entry);
        continue;
      }
      const target = join(dir, name);
      switch (header.type) {
        case 'directory': {
          await drain(entry);
          await ensureParents(name, true);
          const info = await lstat(target).catch(() => undefined);
          if (info === undefined) await mkdir(target, { mode: 0o700 });
          else if (!info.isDirectory())
            throw new UnsafeArchiveEntry(name, 'replaces a file with a directory');
          directories.add(name);
          directoryModes.set(name, header.mode & 0o777);
          break;
        }
        case 'file':
        case 'contiguous-file': {
          await ensureParents(name, true);
          await notThere(name);
          // 'wx': O_CREAT|O_EXCL, which also refuses to open through a symlink at the final path.
          await pipeline(entry, createWriteStream(target, { flags: 'wx', mode: 0o600 }));
          await chmod(target, header.mode & 0o777);
          await utimes(target, header.mtime, header.mtime);
          break;
        }
        case 'symlink': {
          await drain(entry);
          if (!options.linksMayLeave && linkEscapes(name, header.linkname))
            throw new UnsafeArchiveEntry(name, `is a symlink to ${header.linkname}, outside the directory`);
          await ensureParents(name, true);
          await notThere(name);
          await symlink(header.linkname, target);
          links.set(name, header.linkname);
          break;
        }
        case 'link': {
          // GNU tar stored a second name of the same file as a hard link to the first.
          await drain(entry);
          const linked = safeName(header.linkname);
          if (linked === undefined) throw new UnsafeArchiveEntry(name, 'is a hard link to the directory');
          await ensureParents(linked, false);
          const info = await lstat(join(dir, linked)).catch(() => undefined);
          if (info === undefined || !info.isFile())
            throw new UnsafeArchiveEntry(name, `is a hard link to ${linked}, not a file extracted before it`);
          await ensureParents(name, true);
          await notThere(name);
          await link(join(dir, linked), target);
          break;
        }
        default:
          // FIFOs and devices hold no state, and creating devices would need privileges: left out.
          await drain(entry);
      }
    }
    // Extraction never follows a link (parents must be real directories), so links are checked together at the
    // end: a later link can make an earlier one lead out. The caller empties the directory when this throws.
    const out = options.linksMayLeave ? undefined : linkLeadingOut(links);
    if (out !== undefined)
      throw new UnsafeArchiveEntry(
        out[0],
        `is a symlink to ${out[1]}, which leads outside the directory through the archive's other links`,
      );
    // Deepest first: a directory whose mode denies search (no x) would keep its subdirectories from being reached.
    const byDepth = [...directoryModes].sort((a, b) => b[0].split('/').length - a[0].split('/').length);
    for (const [name, mode] of byDepth) await chmod(join(dir, name), mode);
  } finally {
    source.destroy();
  }
}
