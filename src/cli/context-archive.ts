import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import { join, posix, relative, sep } from 'node:path';
import { gzipSync } from 'node:zlib';
import dockerignore from '@balena/dockerignore';
import { pack as tarPack, type Header } from 'tar-stream';

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
/** Every entry's mtime: a fixed date, so rebuilding the archive from the same files gives the same bytes. */
const EPOCH = new Date(0);

export interface PackedContext {
  readonly archive: Buffer;
  readonly files: number;
  readonly uncompressedBytes: number;
}

export async function packContext(
  directory: string,
  maxBytes: number = MAX_CONTEXT_BYTES,
  dockerfile = 'Dockerfile',
): Promise<PackedContext> {
  const info = await lstat(directory).catch(() => undefined);
  if (info === undefined || !info.isDirectory())
    throw new Error(`build context ${directory} is not a directory`);
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

  static async load(directory: string, dockerfile = 'Dockerfile'): Promise<DockerIgnore> {
    const text = await readFile(join(directory, '.dockerignore'), 'utf8').catch(() => '');
    return DockerIgnore.parse(text, dockerfile);
  }

  static parse(text: string, dockerfile = 'Dockerfile'): DockerIgnore {
    const lines = text.split(/\r?\n/).map((l) => l.trim());
    const matcher = dockerignore.default({ ignorecase: false }).add(lines);
    const kept = ['.dockerignore', posix.normalize(dockerfile).replace(/^\/+/, '')].filter((f) =>
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
