import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { gzipSync } from 'node:zlib';

/**
 * A Docker build context as a gzip-compressed POSIX tar (what `docker build` accepts), packed deterministically:
 * sorted entries, zero owner and mtime, so the same directory always yields the same bytes and the controller can
 * store it content-addressed. `.dockerignore` is honoured for the common patterns (see DockerIgnore). Symlinks are
 * stored as links, never followed, so nothing outside the context is read.
 */

/** Refuse contexts larger than this before compressing (the controller's default upload limit is 256 MiB). */
export const MAX_CONTEXT_BYTES = 1024 * 1024 * 1024;

const BLOCK = 512;

export interface PackedContext {
  readonly archive: Buffer;
  readonly files: number;
  readonly uncompressedBytes: number;
}

export async function packContext(
  directory: string,
  maxBytes: number = MAX_CONTEXT_BYTES,
): Promise<PackedContext> {
  const info = await lstat(directory).catch(() => undefined);
  if (info === undefined || !info.isDirectory())
    throw new Error(`build context ${directory} is not a directory`);
  const ignore = await DockerIgnore.load(directory);
  const blocks: Buffer[] = [];
  let bytes = 0;
  let files = 0;
  const add = (chunk: Buffer): void => {
    bytes += chunk.length;
    if (bytes > maxBytes)
      throw new Error(`build context ${directory} is larger than ${maxBytes} bytes (add a .dockerignore?)`);
    blocks.push(chunk);
  };
  const walk = async (dir: string): Promise<void> => {
    const names = (await readdir(dir)).sort();
    for (const name of names) {
      const path = join(dir, name);
      const rel = relative(directory, path).split(sep).join('/');
      const stat = await lstat(path);
      if (ignore.ignores(rel)) {
        // A `!pattern` may re-include something below an ignored directory: look inside without adding the directory.
        if (stat.isDirectory() && ignore.hasExceptions) await walk(path);
        continue;
      }
      const mode = stat.mode & 0o7777;
      if (stat.isDirectory()) {
        add(entry(`${rel}/`, '5', mode, 0));
        await walk(path);
      } else if (stat.isSymbolicLink()) {
        add(entry(rel, '2', mode, 0, await readlink(path)));
      } else if (stat.isFile()) {
        const content = await readFile(path);
        add(entry(rel, '0', mode, content.length));
        add(content);
        add(Buffer.alloc((BLOCK - (content.length % BLOCK)) % BLOCK));
        files++;
      }
      // Sockets, FIFOs and devices have no place in a build context: skipped, as docker does.
    }
  };
  await walk(directory);
  add(Buffer.alloc(2 * BLOCK)); // end-of-archive marker
  const tar = Buffer.concat(blocks);
  return { archive: gzipSync(tar, { level: 6 }), files, uncompressedBytes: tar.length };
}

/** One entry's header block(s): a PAX extended header first when the path or link target is too long for ustar. */
function entry(path: string, type: '0' | '2' | '5', mode: number, size: number, linkTarget = ''): Buffer {
  const pax: string[] = [];
  const split = splitUstarPath(path);
  if (split === undefined) pax.push(paxRecord('path', path));
  if (Buffer.byteLength(linkTarget) > 100) pax.push(paxRecord('linkpath', linkTarget));
  const main = header({
    name: split?.name ?? truncate(path, 100),
    prefix: split?.prefix ?? '',
    type,
    mode,
    size,
    linkTarget: truncate(linkTarget, 100),
  });
  if (pax.length === 0) return main;
  const body = Buffer.from(pax.join(''), 'utf8');
  const paxHeader = header({
    name: truncate(`PaxHeader/${path}`, 100),
    prefix: '',
    type: 'x',
    mode: 0o644,
    size: body.length,
    linkTarget: '',
  });
  return Buffer.concat([paxHeader, body, Buffer.alloc((BLOCK - (body.length % BLOCK)) % BLOCK), main]);
}

function truncate(text: string, bytes: number): string {
  let out = text;
  while (Buffer.byteLength(out) > bytes) out = out.slice(0, -1);
  return out;
}

/** A PAX record is "<length> <key>=<value>\n", where the length counts itself. */
function paxRecord(key: string, value: string): string {
  const rest = ` ${key}=${value}\n`;
  let length = Buffer.byteLength(rest);
  while (String(length).length + Buffer.byteLength(rest) !== length)
    length = String(length).length + Buffer.byteLength(rest);
  return `${length}${rest}`;
}

/** ustar splits a path at a '/' into prefix (≤ 155 bytes) and name (≤ 100 bytes). */
function splitUstarPath(path: string): { name: string; prefix: string } | undefined {
  if (Buffer.byteLength(path) <= 100) return { name: path, prefix: '' };
  for (let i = path.indexOf('/'); i !== -1; i = path.indexOf('/', i + 1)) {
    const prefix = path.slice(0, i);
    const name = path.slice(i + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(name) <= 100 && name !== '')
      return { name, prefix };
  }
  return undefined;
}

function header(h: {
  name: string;
  prefix: string;
  type: string;
  mode: number;
  size: number;
  linkTarget: string;
}): Buffer {
  const block = Buffer.alloc(BLOCK);
  const write = (text: string, offset: number, length: number): void => {
    block.write(text, offset, length, 'utf8');
  };
  const octal = (value: number, offset: number, length: number): void =>
    write(`${value.toString(8).padStart(length - 1, '0')}\0`, offset, length);
  write(h.name, 0, 100);
  octal(h.mode, 100, 8);
  octal(0, 108, 8); // uid
  octal(0, 116, 8); // gid
  octal(h.size, 124, 12);
  octal(0, 136, 12); // mtime: fixed, for reproducible archives
  write(' '.repeat(8), 148, 8); // checksum placeholder
  write(h.type, 156, 1);
  write(h.linkTarget, 157, 100);
  write('ustar\0', 257, 6);
  write('00', 263, 2);
  write(h.prefix, 345, 155);
  let sum = 0;
  for (const byte of block) sum += byte;
  write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
  return block;
}

/**
 * The subset of `.dockerignore` most contexts use: one pattern per line, `#` comments, `*` and `?` within a path
 * segment, `**` across segments, a leading `!` re-includes, and a pattern matching a directory excludes what is
 * below it. The last matching pattern wins, as in docker.
 */
export class DockerIgnore {
  private constructor(
    private readonly rules: readonly { readonly regex: RegExp; readonly include: boolean }[],
  ) {}

  static async load(directory: string): Promise<DockerIgnore> {
    const text = await readFile(join(directory, '.dockerignore'), 'utf8').catch(() => '');
    return DockerIgnore.parse(text);
  }

  static parse(text: string): DockerIgnore {
    const rules = text
      .split(/\r?\n/)
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'))
      .flatMap((line) => {
        const include = line.startsWith('!');
        const pattern = (include ? line.slice(1) : line).trim().replace(/^\/+/, '').replace(/\/+$/, '');
        const cleaned = pattern
          .split('/')
          .filter((s) => s !== '' && s !== '.')
          .join('/');
        return cleaned === '' ? [] : [{ regex: globToRegExp(cleaned), include }];
      });
    return new DockerIgnore(rules);
  }

  get hasExceptions(): boolean {
    return this.rules.some((r) => r.include);
  }

  /** Whether `path` ('/'-separated, relative to the context) is left out; a match on a parent counts. */
  ignores(path: string): boolean {
    let ignored = false;
    const segments = path.split('/');
    for (const rule of this.rules) {
      for (let n = 1; n <= segments.length; n++)
        if (rule.regex.test(segments.slice(0, n).join('/'))) {
          ignored = !rule.include;
          break;
        }
    }
    return ignored;
  }
}

function globToRegExp(pattern: string): RegExp {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] as string;
    if (c === '*' && pattern[i + 1] === '*') {
      // `**/` matches zero or more directories; a bare `**` matches anything.
      if (pattern[i + 2] === '/') {
        out += '(?:.*/)?';
        i += 2;
      } else {
        out += '.*';
        i += 1;
      }
    } else if (c === '*') out += '[^/]*';
    else if (c === '?') out += '[^/]';
    else out += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${out}$`);
}
