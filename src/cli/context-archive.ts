import type { Dirent, Stats } from 'node:fs';
import { lstat, readdir, readFile, readlink, stat } from 'node:fs/promises';
import { isAbsolute, join, posix, sep } from 'node:path';
import { createGzip } from 'node:zlib';
import dockerignore from '@balena/dockerignore';
import { pack as tarPack, type Header } from 'tar-stream';
import { MAX_LINK_HOPS, plainEntryName, unsafeEntryNameReason } from '../protocol/archive-entry-names.js';
import {
  DEFAULT_CONTEXT_LIMITS,
  describeBytes,
  RATIO_CHECK_FROM_BYTES,
  type ContextLimits,
} from '../protocol/context-limits.js';

/**
 * A Docker build context as a gzip-compressed POSIX tar (what `docker build` accepts), packed deterministically:
 * sorted entries, zero owner and mtime, so the same directory always yields the same bytes and the controller can
 * store it content-addressed. tar-stream writes the headers (ustar, PAX for long names); `.dockerignore` is matched
 * by @balena/dockerignore, a port of Docker's own matcher that dockerode uses, so a context excludes what
 * `docker build` would. Symlinks are stored as links, never followed, so nothing outside the context is read.
 */

/**
 * The limits a context is packed within: the controller's defaults for an upload. The controller does not tell a
 * client the limits it was configured with, so a context over its defaults is refused here, as packing reaches them,
 * rather than compressed for minutes and then refused by the upload (a team the controller allows more cannot send
 * more through `fleetwise submit`).
 */
export const PACK_LIMITS: ContextLimits = DEFAULT_CONTEXT_LIMITS;

const BLOCK = 512;
/** Dockerfile-like names a missing-Dockerfile error lists at most. */
const MAX_LOOKALIKES = 5;
/** Every entry's mtime: a fixed date, so rebuilding the archive from the same files gives the same bytes. */
const EPOCH = new Date(0);
/** Names are packed as UTF-8 (PAX headers say so): a name that is not cannot be sent as it is on disk. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

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

/** Tar bytes an entry takes at least: its header block and its contents padded to whole blocks. */
function entryBytes(stats: Stats): number {
  return BLOCK + (stats.isFile() ? Math.ceil(stats.size / BLOCK) * BLOCK : 0);
}

/** A context's root: a directory, or a link to one (only the links inside it are packed as links). */
async function requireDirectory(directory: string): Promise<void> {
  const info = await stat(directory).catch(() => undefined);
  if (info === undefined || !info.isDirectory())
    throw new Error(`build context ${directory} is not a directory`);
}

function tooLarge(directory: string, maxExpandedBytes: number): Error {
  return new Error(
    `build context ${directory} is larger than ${describeBytes(maxExpandedBytes)} before compression, the ` +
      "controller's default limit (buildContexts.maxExpandedBytes): leave files out with .dockerignore",
  );
}

/**
 * Check `directory` packs as a build context for `dockerfile` without reading a file: it is a directory holding the
 * Dockerfile, every name in it that is packed can be, and what is packed is within `limits` before compression. Run
 * for every file of a submission before anything is uploaded, so such a problem refuses them all.
 */
export async function checkContext(
  directory: string,
  dockerfile?: string,
  limits: Partial<ContextLimits> = {},
): Promise<void> {
  const { maxExpandedBytes } = { ...PACK_LIMITS, ...limits };
  await requireDirectory(directory);
  await checkDockerfile(directory, dockerfile);
  let estimate = 2 * BLOCK;
  for await (const entry of contextEntries(directory, await DockerIgnore.load(directory, dockerfile))) {
    estimate += entryBytes(entry.stats);
    if (estimate > maxExpandedBytes) throw tooLarge(directory, maxExpandedBytes);
  }
}

/**
 * Pack `directory` as a build context for `dockerfile` (a path inside it; Docker's default when undefined), which
 * must be in it (checkDockerfile), within `limits` (the controller's defaults unless given): packing stops at the
 * first byte over one.
 */
export async function packContext(
  directory: string,
  limits: Partial<ContextLimits> = {},
  dockerfile?: string,
): Promise<PackedContext> {
  const { maxExpandedBytes, maxArchiveBytes, maxExpansionRatio } = { ...PACK_LIMITS, ...limits };
  await requireDirectory(directory);
  await checkDockerfile(directory, dockerfile);
  const ignore = await DockerIgnore.load(directory, dockerfile);
  const overArchive = (): Error =>
    new Error(
      `build context ${directory} compresses to more than ${describeBytes(maxArchiveBytes)}, the controller's ` +
        'default limit for an upload (buildContexts.maxArchiveBytes): leave files out with .dockerignore',
    );

  const tar = tarPack();
  const gzip = createGzip({ level: 6 });
  const chunks: Buffer[] = [];
  let tarBytes = 0;
  let archiveBytes = 0;
  // Compressed as it is written, so a context over the upload limit is known as soon as its archive passes it.
  tar.on('data', (data) => {
    const chunk = data as Buffer; // tar-stream emits Buffers on Node (b4a)
    tarBytes += chunk.length;
    if (!gzip.destroyed) gzip.write(chunk);
  });
  tar.once('end', () => {
    if (!gzip.destroyed) gzip.end();
  });
  gzip.on('data', (chunk: Buffer) => {
    archiveBytes += chunk.length;
    if (archiveBytes > maxArchiveBytes) gzip.destroy(overArchive());
    else chunks.push(chunk);
  });
  const ended = new Promise<void>((resolve, reject) => {
    gzip.once('end', resolve);
    gzip.once('error', reject);
    tar.once('error', reject);
  });
  ended.catch(() => undefined); // awaited below; a failure mid-walk is thrown from there
  let failed: Error | undefined;
  gzip.once('error', (e) => (failed = e));
  // A lower bound of the archive's size (header blocks, padded contents, end marker; PAX records come on top),
  // checked before a file is read so that an oversized context fails without loading it.
  let estimate = 2 * BLOCK;
  const add = async (header: Header, content?: Buffer): Promise<void> => {
    if (failed !== undefined) throw failed;
    await new Promise<void>((resolve, reject) => {
      const done = (err?: Error | null): void => (err ? reject(err) : resolve());
      if (content === undefined) tar.entry(header, done);
      else tar.entry(header, content, done);
    });
    // Compression lags the tar: waiting for it keeps what is held in memory, and the overshoot, to a file.
    if (!gzip.destroyed && gzip.writableNeedDrain)
      await new Promise<void>((resolve) => {
        const done = (): void => {
          gzip.off('drain', done);
          gzip.off('close', done);
          resolve();
        };
        gzip.on('drain', done);
        gzip.on('close', done);
      });
  };
  const owner = { uid: 0, gid: 0, uname: '', gname: '', mtime: EPOCH, devmajor: 0, devminor: 0 };

  let files = 0;
  try {
    for await (const { name, path, stats, linkname } of contextEntries(directory, ignore)) {
      estimate += entryBytes(stats);
      if (estimate > maxExpandedBytes) throw tooLarge(directory, maxExpandedBytes);
      const mode = stats.mode & 0o7777;
      if (stats.isDirectory())
        await add({ ...owner, name: `${name}/`, type: 'directory', mode, linkname: '', size: 0 });
      else if (linkname !== undefined)
        await add({ ...owner, name, type: 'symlink', mode, linkname, size: 0 });
      else {
        const content = await readFile(path);
        await add({ ...owner, name, type: 'file', mode, linkname: '', size: content.length }, content);
        files++;
      }
    }
    tar.finalize();
    await ended;
  } catch (e) {
    tar.destroy();
    gzip.destroy();
    throw e;
  }
  if (tarBytes > maxExpandedBytes) throw tooLarge(directory, maxExpandedBytes);
  // The controller's rule for an upload of known size (`submit` sends its Content-Length), and the worker's for the
  // stored archive: past RATIO_CHECK_FROM_BYTES expanded, at most maxExpansionRatio times the whole archive.
  if (tarBytes > RATIO_CHECK_FROM_BYTES && tarBytes > maxExpansionRatio * archiveBytes)
    throw new Error(
      `build context ${directory} compresses more than ${maxExpansionRatio} times overall ` +
        `(${describeBytes(tarBytes)} to ${describeBytes(archiveBytes)}): the controller refuses by default a context ` +
        `expanding past ${describeBytes(RATIO_CHECK_FROM_BYTES)} to more than ${maxExpansionRatio} times its ` +
        'archive, as a decompression bomb (buildContexts.maxExpansionRatio): leave the repetitive files out with ' +
        '.dockerignore',
    );
  return { archive: Buffer.concat(chunks), files, uncompressedBytes: tarBytes };
}

/** A file of a context as packed: its name in the archive, its path on disk and what it is. */
interface ContextEntry {
  /** '/'-separated, relative to the context. */
  readonly name: string;
  /** The bytes of its path on disk, which need not be UTF-8. */
  readonly path: Buffer;
  readonly stats: Stats;
  /** A symlink's target, as stored. */
  readonly linkname?: string;
}

/** A path inside a context as `.dockerignore` matches it and as a refusal shows it. */
interface ContextPath {
  /** Matched against `.dockerignore`: a byte that is not UTF-8 reads as U+FFFD. */
  readonly matched: string;
  /** Shown in errors: such a byte as \xNN. */
  readonly shown: string;
  /** Whether every name on it is UTF-8, and so can be packed. */
  readonly utf8: boolean;
}

/**
 * `raw` as UTF-8 where it is, each byte that is not as \xNN: a name as a message can show it.
 */
function escapedName(raw: Buffer): string {
  let out = '';
  for (let i = 0; i < raw.length;) {
    const lead = raw[i] ?? 0;
    const length = lead < 0x80 ? 1 : lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : 4;
    const decoded = lead > 0xf4 ? undefined : utf8Text(raw.subarray(i, i + length));
    if (decoded !== undefined && i + length <= raw.length) {
      out += decoded;
      i += length;
    } else {
      out += `\\x${lead.toString(16).padStart(2, '0')}`;
      i++;
    }
  }
  return out;
}

function utf8Text(raw: Buffer): string | undefined {
  try {
    return UTF8.decode(raw);
  } catch {
    return undefined;
  }
}

function notUtf8(directory: string, shown: string): Error {
  return new Error(
    `build context ${directory} has ${shown}, whose name is not valid UTF-8: archive names are UTF-8, so it cannot ` +
      'be packed as it is (rename it, or leave it out with .dockerignore)',
  );
}

/**
 * What of `directory` is packed, in archive order: every entry `.dockerignore` does not leave out, sorted by name,
 * a directory before what it holds. Names are read as bytes, so one that is not UTF-8 is found by its own name (and
 * refused unless `.dockerignore` leaves it out). Sockets, FIFOs and devices have no place in a build context: skipped,
 * as docker does.
 */
async function* contextEntries(directory: string, ignore: DockerIgnore): AsyncGenerator<ContextEntry> {
  const separator = Buffer.from(sep);
  async function* walk(dir: Buffer, at: ContextPath | undefined): AsyncGenerator<ContextEntry> {
    const names = (await readdir(dir, { encoding: 'buffer' })).map((raw) => {
      const text = utf8Text(raw);
      return { raw, text, matched: text ?? raw.toString('utf8') };
    });
    // Sorted as JavaScript sorts strings (UTF-16 code units), the order archives were always packed in.
    names.sort((a, b) =>
      a.matched < b.matched ? -1 : a.matched > b.matched ? 1 : Buffer.compare(a.raw, b.raw),
    );
    for (const { raw, text, matched } of names) {
      const shownName = text ?? escapedName(raw);
      const rel: ContextPath = {
        matched: at === undefined ? matched : `${at.matched}/${matched}`,
        shown: at === undefined ? shownName : `${at.shown}/${shownName}`,
        utf8: text !== undefined && (at?.utf8 ?? true),
      };
      const path = Buffer.concat([dir, separator, raw]);
      if (ignore.ignores(rel.matched)) {
        // A `!pattern` may re-include something below an ignored directory: look inside without adding the
        // directory, as docker does.
        if (ignore.hasExceptions && (await lstat(path)).isDirectory()) yield* walk(path, rel);
        continue;
      }
      if (!rel.utf8) throw notUtf8(directory, rel.shown);
      const stats = await lstat(path);
      if (stats.isDirectory()) {
        yield { name: rel.matched, path, stats };
        yield* walk(path, rel);
      } else if (stats.isSymbolicLink()) {
        const target = await readlink(path, { encoding: 'buffer' });
        const linkname = utf8Text(target);
        if (linkname === undefined)
          throw new Error(
            `build context ${directory} has ${rel.shown}, a symlink to ${escapedName(target)}, which is not ` +
              'valid UTF-8: archive names are UTF-8, so it cannot be packed as it is (change the link, or ' +
              'leave it out with .dockerignore)',
          );
        yield { name: rel.matched, path, stats, linkname };
      } else if (stats.isFile()) yield { name: rel.matched, path, stats };
    }
  }
  yield* walk(Buffer.from(directory), undefined);
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
 * Like the docker CLI, the ignore file and the Dockerfile themselves are always sent: the builder needs them.
 */
export class DockerIgnore {
  private constructor(
    private readonly matcher: ReturnType<typeof dockerignore.default>,
    readonly hasExceptions: boolean,
  ) {}

  /**
   * The ignore file of a build of `dockerfile` in `directory`, as BuildKit reads it: the Dockerfile's own
   * (`docker/Dockerfile.prod.dockerignore` beside `docker/Dockerfile.prod`, `Dockerfile.dockerignore` for the
   * default) where there is one, in place of the context's `.dockerignore`.
   */
  static async load(directory: string, dockerfile?: string): Promise<DockerIgnore> {
    const own = `${dockerfile === undefined ? 'Dockerfile' : plainEntryName(dockerfile)}.dockerignore`;
    const text =
      dockerfile !== undefined && unsafeEntryNameReason(dockerfile) !== undefined
        ? undefined
        : await readFile(join(directory, own), 'utf8').catch(() => undefined);
    if (text !== undefined) return DockerIgnore.parse(text, dockerfile, own);
    return DockerIgnore.parse(
      await readFile(join(directory, '.dockerignore'), 'utf8').catch(() => ''),
      dockerfile,
    );
  }

  /** The rules of `text`, read from `ignoreFile` (packed, as the Dockerfile is, whatever the rules say). */
  static parse(text: string, dockerfile?: string, ignoreFile = '.dockerignore'): DockerIgnore {
    const lines = text.split(/\r?\n/).map((l) => l.trim());
    const matcher = dockerignore.default({ ignorecase: false }).add(lines);
    const dockerfiles =
      dockerfile === undefined ? DEFAULT_DOCKERFILES : [posix.normalize(dockerfile).replace(/^\/+/, '')];
    const kept = [...new Set(['.dockerignore', ignoreFile, ...dockerfiles])].filter((f) =>
      matcher.ignores(f),
    );
    if (kept.length > 0) matcher.add(kept.map((f) => `!${f}`));
    const hasExceptions = kept.length > 0 || lines.some((l) => /^!\s*\S/.test(l));
    return new DockerIgnore(matcher, hasExceptions);
  }

  /** Whether `path` ('/'-separated, relative to the context) is left out; a match on a parent counts. */
  ignores(path: string): boolean {
    return this.matcher.ignores(path);
  }
}
