import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { packContext } from '../../src/cli/context-archive.js';
import {
  ContextLimitError,
  DEFAULT_CONTEXT_LIMITS,
  type ContextLimits,
} from '../../src/protocol/context-limits.js';
import { extractBuildContext, extractCheckpoint } from '../../src/worker/archives.js';
import { hashBuildContext, listFiles } from '../../src/worker/image-cache.js';
import { craftTar, gzipBomb } from '../helpers/tar.js';
import { asNobody, NOBODY } from '../helpers/as-nobody.js';

const MIB = 1024 * 1024;

/** Extract `archive` (a Buffer, streamed as a store would) under `limits`. */
function extract(
  archive: Buffer,
  dir: string,
  gzip: boolean,
  limits: ContextLimits = DEFAULT_CONTEXT_LIMITS,
  sha256?: string,
): Promise<void> {
  return extractBuildContext(Readable.from([archive]), dir, { gzip, limits, sha256 });
}

/** `archive` in 64 KiB chunks, as a store streams an object. */
function streamed(archive: Buffer): Readable {
  const chunks: Buffer[] = [];
  for (let at = 0; at < archive.length; at += 64 * 1024) chunks.push(archive.subarray(at, at + 64 * 1024));
  return Readable.from(chunks);
}

/** Bytes written under `dir`. */
async function bytesUnder(dir: string): Promise<number> {
  const { statSync } = await import('node:fs');
  return (await listFiles(dir)).reduce((sum, f) => sum + statSync(join(dir, f)).size, 0);
}

let tmp = '';
beforeEach(() => {
  tmp = mkdtempSync(join(tmpdir(), 'fw-archives-'));
});
afterEach(() => rmSync(tmp, { recursive: true, force: true }));

describe('extractBuildContext', () => {
  it('unpacks what submit packs to the same tree GNU tar unpacks, links to anywhere kept as links', async () => {
    const src = join(tmp, 'src');
    mkdirSync(join(src, 'app', 'deep'), { recursive: true });
    writeFileSync(join(src, 'Dockerfile'), 'FROM busybox\n');
    writeFileSync(join(src, 'app', 'run.sh'), '#!/bin/sh\n', { mode: 0o755 });
    writeFileSync(join(src, 'app', 'deep', `${'x'.repeat(130)}.txt`), 'long');
    symlinkSync('/etc/hostname', join(src, 'host'));
    const { archive } = await packContext(src);
    const ours = join(tmp, 'ours');
    const gnu = join(tmp, 'gnu');
    mkdirSync(ours);
    mkdirSync(gnu);
    await extract(archive, ours, true);
    execFileSync('tar', ['-xzf', '-', '-C', gnu, '--no-same-owner'], { input: archive });
    expect(await hashBuildContext(ours)).toBe(await hashBuildContext(gnu));
    expect(await hashBuildContext(ours)).toBe(await hashBuildContext(src));
    expect(readlinkSync(join(ours, 'host'))).toBe('/etc/hostname');
  });

  it('never writes outside the directory, even through a link the archive made', async () => {
    const outside = join(tmp, 'outside');
    mkdirSync(outside);
    const cases: [Parameters<typeof craftTar>[0], RegExp][] = [
      [[{ name: '../outside/evil', content: 'x' }], /has a `\.\.` path segment/],
      [[{ name: join(outside, 'evil'), content: 'x' }], /has an absolute path/],
      [
        [
          { name: 'out', type: 'symlink', linkname: outside },
          { name: 'out/evil', content: 'x' },
        ],
        /"out\/evil" goes through out, not a directory/,
      ],
    ];
    for (const [i, [entries, reason]] of cases.entries()) {
      const tar = await craftTar(entries);
      for (const gzip of [false, true]) {
        const dir = join(tmp, `ctx-${i}-${gzip}`);
        mkdirSync(dir);
        await expect(extract(gzip ? gzipSync(tar) : tar, dir, gzip)).rejects.toThrow(reason);
      }
    }
    expect(readdirSync(outside)).toEqual([]);
    expect(existsSync(join(tmp, 'evil'))).toBe(false);
  });

  it('stops a gzip bomb at its expansion ratio, having written only a little of it', async () => {
    const bomb = await gzipBomb(256 * MIB); // about 250 KiB of gzip
    expect(bomb.length).toBeLessThan(MIB);
    const dir = join(tmp, 'bomb');
    mkdirSync(dir);
    const refused = extract(bomb, dir, true);
    await expect(refused).rejects.toBeInstanceOf(ContextLimitError);
    await expect(refused).rejects.toThrow(/expands more than 100 times its archive .*maxExpansionRatio/);
    // Refused once the expansion passed 16 MiB at over 100×: far from the 256 MiB it would have become.
    expect(await bytesUnder(dir)).toBeLessThan(32 * MIB);
  });

  it('refuses an archive over its size, or one expanding over its expanded size, naming the limit', async () => {
    const files = await craftTar([{ name: 'a.txt', content: 'y'.repeat(300_000) }]);
    const over = async (limits: Partial<ContextLimits>, gzip: boolean): Promise<ContextLimitError> => {
      const dir = join(tmp, `over-${Object.keys(limits).join()}-${gzip}`);
      mkdirSync(dir);
      const error = await extract(gzip ? gzipSync(files) : files, dir, gzip, {
        ...DEFAULT_CONTEXT_LIMITS,
        ...limits,
      }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ContextLimitError);
      return error as ContextLimitError;
    };
    expect((await over({ maxArchiveBytes: 100_000 }, false)).limit).toBe('maxArchiveBytes');
    expect((await over({ maxExpandedBytes: 100_000 }, true)).message).toMatch(
      /expands to more than its limit of 100000 bytes \(maxExpandedBytes\)/,
    );
    // Within the limits it unpacks.
    const fine = join(tmp, 'fine');
    mkdirSync(fine);
    await extract(gzipSync(files), fine, true, { ...DEFAULT_CONTEXT_LIMITS, maxExpandedBytes: MIB });
    expect(readdirSync(fine)).toEqual(['a.txt']);
  });

  it('checks the expansion ratio against the archive size the store gave, whatever the order of its files', async () => {
    const src = join(tmp, 'src');
    mkdirSync(src);
    writeFileSync(join(src, 'Dockerfile'), 'FROM busybox\n');
    // Zeros first by name (a preallocated disk image), then incompressible weights: 2.7 times overall.
    writeFileSync(join(src, 'a-disk.img'), Buffer.alloc(20 * MIB));
    writeFileSync(join(src, 'z-model.bin'), randomBytes(12 * MIB));
    const { archive } = await packContext(src);
    const options = { gzip: true, limits: DEFAULT_CONTEXT_LIMITS };
    const sized = join(tmp, 'sized');
    mkdirSync(sized);
    await extractBuildContext(streamed(archive), sized, { ...options, archiveBytes: archive.length });
    expect(await hashBuildContext(sized)).toBe(await hashBuildContext(src));
    // Without a size, the zeros alone are the expansion of what was read so far.
    const unsized = join(tmp, 'unsized');
    mkdirSync(unsized);
    await expect(extractBuildContext(streamed(archive), unsized, options)).rejects.toThrow(
      /expands more than 100 times its archive read so far .*maxExpansionRatio/,
    );
  });

  it('with the archive size given, still stops a bomb early, and refuses an archive longer than the size', async () => {
    const bomb = await gzipBomb(200 * MIB);
    const dir = join(tmp, 'bomb');
    mkdirSync(dir);
    const refused = extractBuildContext(streamed(bomb), dir, {
      gzip: true,
      limits: DEFAULT_CONTEXT_LIMITS,
      archiveBytes: bomb.length,
    });
    await expect(refused).rejects.toBeInstanceOf(ContextLimitError);
    await expect(refused).rejects.toThrow(
      `expands more than 100 times its archive (${bomb.length} bytes to over`,
    );
    expect(await bytesUnder(dir)).toBeLessThan(32 * MIB);

    const archive = gzipSync(await craftTar([{ name: 'Dockerfile', content: 'FROM busybox\n' }]));
    const longer = join(tmp, 'longer');
    mkdirSync(longer);
    await expect(
      extractBuildContext(streamed(archive), longer, {
        gzip: true,
        limits: DEFAULT_CONTEXT_LIMITS,
        archiveBytes: archive.length - 1,
      }),
    ).rejects.toThrow(
      `the build context archive is longer than the ${archive.length - 1} bytes declared for it ` +
        `(${archive.length} bytes read): a different or damaged archive`,
    );
  });

  it('refuses an archive that is not the one its reference names', async () => {
    const archive = gzipSync(await craftTar([{ name: 'Dockerfile', content: 'FROM busybox\n' }]));
    const sha256 = createHash('sha256').update(archive).digest('hex');
    const dir = join(tmp, 'digest');
    mkdirSync(dir);
    await expect(extract(archive, dir, true, DEFAULT_CONTEXT_LIMITS, 'f'.repeat(64))).rejects.toThrow(
      /not the one referenced: its sha256 is/,
    );
    const ok = join(tmp, 'digest-ok');
    mkdirSync(ok);
    await extract(archive, ok, true, DEFAULT_CONTEXT_LIMITS, sha256);
    expect(readdirSync(ok)).toEqual(['Dockerfile']);
  });
});

describe('directory modes', () => {
  it('a worker that is not root extracts into read-only directories, each ending with its archive mode', async () => {
    const tar = await craftTar([
      { name: 'vendor', type: 'directory', mode: 0o555 },
      { name: 'vendor/lib.go', content: 'package lib\n', mode: 0o444 },
      // No search permission: its subdirectory's mode must be applied before its own.
      { name: 'sealed', type: 'directory', mode: 0o444 },
      { name: 'sealed/inner', type: 'directory', mode: 0o555 },
      { name: 'sealed/inner/state', content: 'epoch 3\n', mode: 0o644 },
      { name: 'shared', type: 'directory', mode: 0o775 },
    ]);
    // Readable and searchable by nobody, who owns the directories extracted into.
    chmodSync(tmp, 0o755);
    const archive = join(tmp, 'data.tar');
    writeFileSync(archive, tar);
    const context = join(tmp, 'context');
    const checkpoint = join(tmp, 'checkpoint');
    for (const dir of [context, checkpoint]) {
      mkdirSync(dir);
      chownSync(dir, NOBODY, NOBODY);
    }
    await asNobody(async () => {
      await extract(tar, context, false);
      await extractCheckpoint(archive, checkpoint);
    });
    for (const dir of [context, checkpoint]) {
      const mode = (name: string): number => statSync(join(dir, name)).mode & 0o777;
      expect([mode('vendor'), mode('sealed'), mode('sealed/inner'), mode('shared')]).toEqual([
        0o555, 0o444, 0o555, 0o775,
      ]);
      expect([mode('vendor/lib.go'), mode('sealed/inner/state')]).toEqual([0o444, 0o644]);
      expect(readFileSync(join(dir, 'vendor', 'lib.go'), 'utf8')).toBe('package lib\n');
      expect(readFileSync(join(dir, 'sealed', 'inner', 'state'), 'utf8')).toBe('epoch 3\n');
      expect(statSync(join(dir, 'sealed', 'inner', 'state')).uid).toBe(NOBODY);
    }
  });
});
