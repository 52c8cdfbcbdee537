import type { Dirent } from 'node:fs';
import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import { isAbsolute, join, posix, relative, sep } from 'node:path';
import { gzipSync } from 'node:zlib';
import dockerignore from '@balena/dockerignore';
import { pack as tarPack, type Header } from 'tar-stream';
import { MAX_LINK_HOPS, plainEntryName, unsafeEntryNameReason } from '../protocol/archive-entry-names.js';

/**
 * A Docker build context as a gzip-compressed POSIX tar (what `docker build` accepts), packed deterministically:
 * sorted entries, zero owner and mtime, so the same directory always yields the same bytes and the controller can
 * store it content-addressed. tar-stream writes the headers (ustar, PAX for long names); `.dockerignore` is matched
 * by @balena/dockerignore, a port of Docker's own matcher that dockerode uses, so a context excludes what
 * `docker build` would. Symlinks are stored as links, never followed, so nothing outside the context is read.
 */

/** Refuse contexts larger than this before compressing (the controller's default upload limit is 256 MiB). */
export const MAX_CONTEXT_BYTES = 1024 * 1024 * 1024;

const BLOCK = 512;
/** Dockerfile-like names a missing-Dockerfile error lists at most. */
const MAX_LOOKALIKES = 5;
/** Every entry's mtime: a fixed date, so rebuilding the archive from the same files gives the same bytes. */
const EPOCH = new Date(0);

export interface PackedContext {
  readonly archive: Buffer;
  readonly files: number;
  readonly uncompressedBytes: number;
}

/** A build context without the Dockerfile its build names: the build would fail on the worker, after a launch. */
export class MissingDockerfileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MissingDockerfileError';
  }
}

/** Docker's Dockerfile when a build names none, and the lower-case name docker also takes for it. */
const DEFAULT_DOCKERFILES = ['Dockerfile', 'dockerfile'];

/**
 * Pack `directory` as a build context for `dockerfile` (a path inside it; Docker's default when undefined), which
 * must be in it (checkDockerfile).
 */
export async function packContext(
  directory: string,
  maxBytes: number = MAX_CONTEXT_BYTES,
  dockerfile?: string,
): Promise<PackedContext> {
  const info = await lstat(directory).catch(() => undefined);
  if (info === undefined || !info.isDirectory())
    throw new Error(`build context ${directory} is not a directory`);
  await checkDockerfile(directory, dockerfile);
  const ignore = await DockerIgnore.load(directory, dockerfile);
  const tooLarge = (): Error =>
    new Error(`build context ${directory} is larger than ${maxBytes} bytes (add a .dockerignore?)`);

  const tar = tarPack();
  const chunks: Buffer[] = [];
  let bytes = 0;
  tar.on('data', (data) => {
    const chunk = data as Buffer; // tar-stream emits Buffers on Node (b4a)
    chunks.push(chunk);
    bytes += chunk.length;
  });
  const ended = new Promise<void>((resolve, reject) => {
    tar.once('end', resolve);
    tar.once('error', reject);
  });
  // A lower bound of the archive's size (header blocks, padded contents, end marker; PAX records come on top),
  // checked before a file is read so that an oversized context fails without loading it.
  let estimate = 2 * BLOCK;
  const add = (header: Header | Omit<Header, 'size'>, content?: Buffer): Promise<void> => {
    estimate += BLOCK + Math.ceil((content?.length ?? 0) / BLOCK) * BLOCK;
    if (estimate > maxBytes) throw tooLarge();
    return new Promise((resolve, reject) => {
      const done = (err?: Error | null): void => (err ? reject(err) : resolve());
      if (content === undefined) tar.entry(header, done);
      else tar.entry(header, content, done);
    });
  };
  const owner = { uid: 0, gid: 0, uname: '', gname: '', mtime: EPOCH, devmajor: 0, devminor: 0 };

  let files = 0;
  const walk = async (dir: string): Promise<void> => {
    const names = (await readdir(dir)).sort();
    for (const name of names) {
      const path = join(dir, name);
      const rel = relative(directory, path).split(sep).join('/');
      const stat = await lstat(path);
      if (ignore.ignores(rel)) {
        // A `!pattern` may re-include something below an ignored directory: look inside without adding the
        // directory, as docker does.
        if (stat.isDirectory() && ignore.hasExceptions) await walk(path);
        continue;
      }
      const mode = stat.mode & 0o7777;
      if (stat.isDirectory()) {
        await add({ ...owner, name: `${rel}/`, type: 'directory', mode, linkname: '', size: 0 });
        await walk(path);
      } else if (stat.isSymbolicLink()) {
        await add({ ...owner, name: rel, type: 'symlink', mode, linkname: await readlink(path), size: 0 });
      } else if (stat.isFile()) {
        if (estimate + BLOCK + stat.size > maxBytes) throw tooLarge();
        const content = await readFile(path);
        await add({ ...owner, name: rel, type: 'file', mode, linkname: '', size: content.length }, content);
        files++;
      }
      // Sockets, FIFOs and devices have no place in a build context: skipped, as docker does.
    }
  };
  try {
    await walk(directory);
    tar.finalize();
    await ended;
  } catch (e) {
    tar.destroy();
    throw e;
  }
  if (bytes > maxBytes) throw tooLarge();
  const uncompressed = Buffer.concat(chunks);
  return { archive: gzipSync(uncompressed, { level: 6 }), files, uncompressedBytes: uncompressed.length };
}

/**
 * Refuse a build context that lacks the Dockerfile its build names (`dockerfile`, a path relative to `directory`;
 * Docker's default when undefined): checked before a job is submitted (or dry-run), so a typo or a misplaced file is
 * an error then rather than a failed build on a launched worker. The file must be in the archive as packed: every
 * directory on its path a real one (symlinks are packed as links, never followed), its name matching exactly (also on
 * a case-insensitive disk). The Dockerfile is always packed, whatever `.dockerignore` says. A Dockerfile that is a
 * symlink must lead to a file packed in the context: the worker's build reads the link inside the unpacked archive,
 * where a target outside the context, or one `.dockerignore` leaves out, does not exist.
 */
export async function checkDockerfile(directory: string, dockerfile?: string): Promise<void> {
  const candidates = dockerfile === undefined ? DEFAULT_DOCKERFILES : [plainEntryName(dockerfile)];
  let refused: string | undefined;
  for (const path of candidates) {
    const found = await packedDockerfile(directory, path, dockerfile);
    if (found === true) return;
    if (refused === undefined && found !== false) {
      const named = dockerfile ?? path;
      refused = `Dockerfile ${named} in build context ${directory} is a symlink to ${found.target}, ${found.reason}`;
    }
  }
  if (refused !== undefined)
    throw new MissingDockerfileError(
      `${refused}; a build sees only what is packed in the context ` +
        '(copy the file in, or build from a directory holding both)',
    );
  const where = dockerfile === undefined ? '' : posix.dirname(plainEntryName(dockerfile));
  const names = await readdir(join(directory, where === '.' ? '' : where)).catch(() => []);
  const lookalikes = names
    .filter((n) => /dockerfile/i.test(n))
    .sort()
    .slice(0, MAX_LOOKALIKES)
    .map((n) => (where === '.' || where === '' ? n : `${where}/${n}`));
  throw new MissingDockerfileError(
    `no ${dockerfile === undefined ? 'Dockerfile' : `Dockerfile ${dockerfile}`} in build context ${directory}` +
      (lookalikes.length === 0 ? '' : ` (it has ${lookalikes.join(', ')})`) +
      (dockerfile === undefined
        ? '; name another with build.dockerfile'
        : '; the dockerfile is a path relative to the context'),
  );
}

/** The entry named `name` in `dir`, matched exactly (a case-insensitive disk would match other cases too). */
async function entryOf(dir: string, name: string): Promise<Dirent | undefined> {
  return (await readdir(dir, { withFileTypes: true }).catch(() => [])).find((e) => e.name === name);
}

/**
 * Whether `path` ('/'-separated, relative) is packed by packContext under that name as a file the build can read:
 * true for a file, or a symlink leading to a packed file inside the context; false when nothing is packed there; for a
 * symlink leading anywhere else, its target and why it fails.
 */
async function packedDockerfile(
  directory: string,
  path: string,
  dockerfile: string | undefined,
): Promise<boolean | { readonly target: string; readonly reason: string }> {
  if (path === '' || unsafeEntryNameReason(path) !== undefined) return false;
  const segments = path.split('/');
  const name = segments.pop() ?? '';
  const parent = join(directory, ...segments);
  for (const [i, segment] of segments.entries())
    if ((await entryOf(join(directory, ...segments.slice(0, i)), segment))?.isDirectory() !== true)
      return false;
  const entry = await entryOf(parent, name);
  if (entry === undefined) return false;
  if (entry.isFile()) return true;
  if (!entry.isSymbolicLink()) return false;
  const target = await readlink(join(parent, name));
  const reason = await linkProblem(directory, path, target, await DockerIgnore.load(directory, dockerfile));
  return reason === undefined ? true : { target, reason };
}

/**
 * Why the symlink at `entry` (relative to `directory`) to `target` does not lead to a file packed in the context, or
 * undefined when it does. Links are followed as the kernel would, each `..` climbing from where the lookup has got
 * to; a target that is absolute, or climbs above the context, leads out (the worker's archive rule, linkLeadsOut).
 */
async function linkProblem(
  directory: string,
  entry: string,
  target: string,
  ignore: DockerIgnore,
): Promise<string | undefined> {
  if (target === '' || posix.isAbsolute(target) || isAbsolute(target))
    return 'which leads outside the context';
  const where = posix.dirname(entry) === '.' ? [] : posix.dirname(entry).split('/');
  // Segments still to walk, the next one last.
  const pending = target.split('/').reverse();
  let hops = 1;
  for (let segment = pending.pop(); segment !== undefined; segment = pending.pop()) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') {
      if (where.length === 0) return 'which leads outside the context';
      where.pop();
      continue;
    }
    const found = await entryOf(join(directory, ...where), segment);
    const path = [...where, segment].join('/');
    if (found === undefined) return `which is not in the context (nothing at ${path})`;
    // A directory is not checked: a `!pattern` may pack a file below one `.dockerignore` leaves out.
    const left = `which .dockerignore leaves out of the context (${path})`;
    if (found.isSymbolicLink()) {
      if (ignore.ignores(path)) return left;
      if (++hops > MAX_LINK_HOPS) return 'which does not resolve (a loop of links)';
      const next = await readlink(join(directory, ...where, segment));
      if (next === '' || posix.isAbsolute(next) || isAbsolute(next))
        return `which leads outside the context (through ${path})`;
      pending.push(...next.split('/').reverse());
    } else if (found.isDirectory()) where.push(segment);
    else if (pending.some((s) => s !== '' && s !== '.'))
      return `which is not in the context (${path} is not a directory)`;
    else if (!found.isFile()) return `which is not a file (${path})`;
    else return ignore.ignores(path) ? left : undefined;
  }
  return `which is not a file (${where.length === 0 ? 'the context itself' : where.join('/')})`;
}

/**
 * `.dockerignore` with Docker's semantics (@balena/dockerignore follows moby's matcher: Go `filepath.Match` globs
 * with `[...]` classes and `\` escapes, `**` across directories, `!` exceptions where the last matching line wins,
 * a pattern matching a parent directory excluding what is below it, paths cleaned like Go's `filepath.Clean`).
 * Like the docker CLI, the `.dockerignore` and the Dockerfile themselves are always sent: the builder needs them.
 */
export class DockerIgnore {
  private constructor(
    private readonly matcher: ReturnType<typeof dockerignore.default>,
    readonly hasExceptions: boolean,
  ) {}

  static async load(directory: string, dockerfile?: string): Promise<DockerIgnore> {
    const text = await readFile(join(directory, '.dockerignore'), 'utf8').catch(() => '');
    return DockerIgnore.parse(text, dockerfile);
  }

  static parse(text: string, dockerfile?: string): DockerIgnore {
    const lines = text.split(/\r?\n/).map((l) => l.trim());
    const matcher = dockerignore.default({ ignorecase: false }).add(lines);
    const dockerfiles =
      dockerfile === undefined ? DEFAULT_DOCKERFILES : [posix.normalize(dockerfile).replace(/^\/+/, '')];
    const kept = ['.dockerignore', ...dockerfiles].filter((f) => matcher.ignores(f));
    if (kept.length > 0) matcher.add(kept.map((f) => `!${f}`));
    const hasExceptions = kept.length > 0 || lines.some((l) => /^!\s*\S/.test(l));
    return new DockerIgnore(matcher, hasExceptions);
  }

  /** Whether `path` ('/'-separated, relative to the context) is left out; a match on a parent counts. */
  ignores(path: string): boolean {
    return this.matcher.ignores(path);
  }
}
