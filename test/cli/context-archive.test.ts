import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkContext,
  checkDockerfile,
  DockerIgnore,
  MissingDockerfileError,
  packContext,
} from '../../src/cli/context-archive.js';

interface TarEntry {
  readonly path: string;
  readonly type: string;
  readonly mode: number;
  readonly content: string;
  readonly linkTarget: string;
  readonly uid: number;
  readonly mtime: number;
}

/** A minimal tar reader (ustar + PAX path/linkpath) that checks every header checksum. */
function readTar(tar: Buffer): TarEntry[] {
  const entries: TarEntry[] = [];
  let pax: Record<string, string> = {};
  const text = (offset: number, length: number, at: number): string =>
    tar
      .subarray(at + offset, at + offset + length)
      .toString('utf8')
      .replace(/\0.*$/s, '');
  for (let at = 0; at + 512 <= tar.length;) {
    const header = tar.subarray(at, at + 512);
    if (header.every((b) => b === 0)) break;
    let sum = 0;
    header.forEach((b, i) => (sum += i >= 148 && i < 156 ? 32 : b));
    expect(parseInt(text(148, 8, at), 8), `checksum at ${at}`).toBe(sum);
    expect(text(257, 6, at)).toBe('ustar');
    const size = parseInt(text(124, 12, at), 8);
    const type = text(156, 1, at);
    const body = tar.subarray(at + 512, at + 512 + size);
    const headerAt = at;
    at += 512 + Math.ceil(size / 512) * 512;
    if (type === 'x') {
      pax = {};
      for (const record of body
        .toString('utf8')
        .split('\n')
        .filter((r) => r !== '')) {
        const [, kv = ''] = /^\d+ (.*)$/s.exec(record) ?? [];
        const eq = kv.indexOf('=');
        pax[kv.slice(0, eq)] = kv.slice(eq + 1);
      }
      continue;
    }
    const prefix = text(345, 155, headerAt);
    const name = text(0, 100, headerAt);
    entries.push({
      path: pax['path'] ?? (prefix === '' ? name : `${prefix}/${name}`),
      type,
      mode: parseInt(text(100, 8, headerAt), 8),
      content: body.toString('utf8'),
      linkTarget: pax['linkpath'] ?? text(157, 100, headerAt),
      uid: parseInt(text(108, 8, headerAt), 8),
      mtime: parseInt(text(136, 12, headerAt), 8),
    });
    pax = {};
  }
  return entries;
}

let dir = '';
const longDir = `${'d'.repeat(60)}/${'e'.repeat(60)}/${'f'.repeat(60)}`;
const veryLong = `${'g'.repeat(120)}.txt`;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'fleetwise-ctx-'));
  writeFileSync(join(dir, 'Dockerfile'), 'FROM busybox\n');
  writeFileSync(join(dir, 'run.sh'), '#!/bin/sh\n', { mode: 0o755 });
  mkdirSync(join(dir, 'data', 'cache'), { recursive: true });
  writeFileSync(join(dir, 'data', 'keep.txt'), 'keep');
  writeFileSync(join(dir, 'data', 'cache', 'big.bin'), 'x'.repeat(1000));
  writeFileSync(join(dir, 'data', 'cache', 'wanted.bin'), 'w');
  mkdirSync(join(dir, longDir), { recursive: true });
  writeFileSync(join(dir, longDir, 'file.txt'), 'deep');
  writeFileSync(join(dir, veryLong), 'long name');
  symlinkSync('run.sh', join(dir, 'link'));
  writeFileSync(join(dir, '.dockerignore'), '# comment\ndata/cache\n!data/cache/wanted.bin\n**/*.log\n');
  writeFileSync(join(dir, 'debug.log'), 'noise');
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('packContext', () => {
  it('packs a valid tar with modes, symlinks, long paths and .dockerignore applied', async () => {
    const packed = await packContext(dir);
    const entries = readTar(gunzipSync(packed.archive));
    const byPath = new Map(entries.map((e) => [e.path, e]));
    expect(byPath.get('Dockerfile')?.content).toBe('FROM busybox\n');
    expect(byPath.get('run.sh')?.mode).toBe(0o755);
    expect(byPath.get('link')).toMatchObject({ type: '2', linkTarget: 'run.sh' });
    expect(byPath.get(`${longDir}/file.txt`)?.content).toBe('deep'); // ustar prefix split
    expect(byPath.get(veryLong)?.content).toBe('long name'); // PAX path
    expect(byPath.get('data/keep.txt')?.content).toBe('keep');
    expect(byPath.has('data/cache/big.bin')).toBe(false);
    expect(byPath.get('data/cache/wanted.bin')?.content).toBe('w');
    expect(byPath.has('debug.log')).toBe(false);
    expect(packed.files).toBe([...byPath.values()].filter((e) => e.type === '0').length);
    expect(entries.every((e) => e.uid === 0 && e.mtime === 0)).toBe(true);
  });

  it('is deterministic: the same directory gives the same bytes', async () => {
    const [a, b] = await Promise.all([packContext(dir), packContext(dir)]);
    expect(a.archive.equals(b.archive)).toBe(true);
  });

  it('packs a fixed tree to known bytes (the controller stores contexts by content hash)', async () => {
    const fixed = mkdtempSync(join(tmpdir(), 'fleetwise-ctx-fixed-'));
    try {
      mkdirSync(join(fixed, 'src'));
      writeFileSync(join(fixed, 'Dockerfile'), 'FROM busybox\nCOPY src /src\n');
      writeFileSync(join(fixed, 'src', 'main.sh'), 'echo hi\n');
      writeFileSync(join(fixed, `${'n'.repeat(110)}.txt`), 'long');
      symlinkSync('src/main.sh', join(fixed, 'main'));
      chmodSync(join(fixed, 'src'), 0o755);
      chmodSync(join(fixed, 'Dockerfile'), 0o644);
      chmodSync(join(fixed, 'src', 'main.sh'), 0o755);
      chmodSync(join(fixed, `${'n'.repeat(110)}.txt`), 0o600);
      const tar = gunzipSync((await packContext(fixed)).archive);
      expect(createHash('sha256').update(tar).digest('hex')).toBe(
        '943350d520ea6bde2a8853b4099bc732a6eb676915c7e09e8d96fc0852d8b502',
      );
    } finally {
      rmSync(fixed, { recursive: true, force: true });
    }
  });

  it('always sends the Dockerfile and .dockerignore, as the docker CLI does', async () => {
    const ctx = mkdtempSync(join(tmpdir(), 'fleetwise-ctx-keep-'));
    try {
      mkdirSync(join(ctx, 'docker'));
      writeFileSync(join(ctx, 'docker', 'app.Dockerfile'), 'FROM busybox\n');
      writeFileSync(join(ctx, 'notes.txt'), 'x');
      writeFileSync(join(ctx, '.dockerignore'), '*\n');
      const paths = (ctx2: Buffer): string[] => readTar(gunzipSync(ctx2)).map((e) => e.path);
      expect(paths((await packContext(ctx, undefined, 'docker/app.Dockerfile')).archive)).toEqual([
        '.dockerignore',
        'docker/app.Dockerfile',
      ]);
    } finally {
      rmSync(ctx, { recursive: true, force: true });
    }
  });

  it('refuses a context without the Dockerfile its build names, naming it and what the context has', async () => {
    const ctx = mkdtempSync(join(tmpdir(), 'fleetwise-ctx-dockerfile-'));
    try {
      writeFileSync(join(ctx, 'Dockerfile.gpu'), 'FROM busybox\n');
      writeFileSync(join(ctx, 'Dockerfile.cpu'), 'FROM busybox\n');
      writeFileSync(join(ctx, 'app.py'), 'print(1)\n');
      mkdirSync(join(ctx, 'docker'));
      writeFileSync(join(ctx, 'docker', 'Dockerfile'), 'FROM busybox\n');
      symlinkSync('docker', join(ctx, 'linked'));
      const missing = (dockerfile?: string): Promise<unknown> =>
        packContext(ctx, undefined, dockerfile).catch((e: unknown) => e);
      const typo = await missing('Dockerfil');
      expect(typo).toBeInstanceOf(MissingDockerfileError);
      expect((typo as Error).message).toBe(
        `no Dockerfile Dockerfil in build context ${ctx} (it has Dockerfile.cpu, Dockerfile.gpu); ` +
          'the dockerfile is a path relative to the context',
      );
      expect(((await missing()) as Error).message).toBe(
        `no Dockerfile in build context ${ctx} (it has Dockerfile.cpu, Dockerfile.gpu); name another with ` +
          'build.dockerfile',
      );
      // Outside the context, through a symlink (packed as a link, not followed), or with another case.
      for (const path of ['../Dockerfile', 'linked/Dockerfile', 'dockerfile.GPU', 'docker'])
        expect(await missing(path), path).toBeInstanceOf(MissingDockerfileError);
      await expect(checkDockerfile(ctx, 'docker/Dockerfile')).resolves.toBeUndefined();
      await expect(checkDockerfile(ctx, './Dockerfile.gpu')).resolves.toBeUndefined();
      expect((await packContext(ctx, undefined, 'Dockerfile.cpu')).files).toBe(4);
      // Docker builds a lower-case dockerfile when the build names none.
      writeFileSync(join(ctx, 'dockerfile'), 'FROM busybox\n');
      await expect(checkDockerfile(ctx)).resolves.toBeUndefined();
    } finally {
      rmSync(ctx, { recursive: true, force: true });
    }
  });

  it('refuses a missing directory and a context over the size limit', async () => {
    await expect(packContext(join(dir, 'nope'))).rejects.toThrow(/is not a directory/);
    await expect(packContext(dir, { maxExpandedBytes: 4096 })).rejects.toThrow(
      /larger than 4096 bytes before compression, the controller's default limit/,
    );
    await expect(checkContext(dir, undefined, { maxExpandedBytes: 4096 })).rejects.toThrow(
      /larger than 4096 bytes before compression/,
    );
  });

  it('refuses an archive over the upload limit as it is compressed, and one the controller takes for a bomb', async () => {
    const ctx = mkdtempSync(join(tmpdir(), 'fleetwise-ctx-limits-'));
    try {
      writeFileSync(join(ctx, 'Dockerfile'), 'FROM busybox\n');
      writeFileSync(join(ctx, 'zeros.bin'), Buffer.alloc(300 * 1024));
      // 300 KiB of zeros compresses to well under the limit: what counts is the archive as uploaded.
      const small = await packContext(ctx, { maxArchiveBytes: 64 * 1024 });
      expect(small.uncompressedBytes).toBeGreaterThan(300 * 1024);
      expect(small.archive.length).toBeLessThan(64 * 1024);
      expect(gzipSync(gunzipSync(small.archive), { level: 6 }).equals(small.archive)).toBe(true);
      writeFileSync(join(ctx, 'noise.bin'), randomBytes(300 * 1024));
      await expect(packContext(ctx, { maxArchiveBytes: 64 * 1024 })).rejects.toThrow(
        `build context ${ctx} compresses to more than 65536 bytes, the controller's default limit for an upload ` +
          '(buildContexts.maxArchiveBytes): leave files out with .dockerignore',
      );
      // The controller's defaults: 20 MiB of zeros expands over 100 times its archive.
      rmSync(join(ctx, 'noise.bin'));
      writeFileSync(join(ctx, 'zeros.bin'), Buffer.alloc(20 * 1024 * 1024));
      await expect(packContext(ctx)).rejects.toThrow(
        new RegExp(
          `^build context ${ctx} compresses more than 100 times overall \\(20 MiB to \\d+ bytes\\): the controller ` +
            'refuses by default a context expanding past 16 MiB to more than 100 times its archive, as a ' +
            'decompression bomb \\(buildContexts.maxExpansionRatio\\): leave the repetitive files out with ' +
            '\\.dockerignore$',
        ),
      );
    } finally {
      rmSync(ctx, { recursive: true, force: true });
    }
  });

  it('reads names as bytes: one that is not UTF-8 is refused by name unless .dockerignore leaves it out', async () => {
    const ctx = mkdtempSync(join(tmpdir(), 'fleetwise-ctx-bytes-'));
    const latin1 = (name: string): Buffer => Buffer.from(name, 'latin1');
    try {
      writeFileSync(join(ctx, 'Dockerfile'), 'FROM busybox\n');
      mkdirSync(join(ctx, 'data'));
      writeFileSync(Buffer.concat([Buffer.from(`${ctx}/data/`), latin1('caf\xe9.txt')]), 'x');
      writeFileSync(join(ctx, 'data', 'keep.txt'), 'k');
      const refusal =
        `build context ${ctx} has data/caf\\xe9.txt, whose name is not valid UTF-8: archive names are UTF-8, so it ` +
        'cannot be packed as it is (rename it, or leave it out with .dockerignore)';
      await expect(packContext(ctx)).rejects.toThrow(refusal);
      await expect(checkContext(ctx)).rejects.toThrow(refusal);
      writeFileSync(join(ctx, '.dockerignore'), 'data/caf*\n');
      const paths = (archive: Buffer): string[] => readTar(gunzipSync(archive)).map((e) => e.path);
      expect(paths((await packContext(ctx)).archive)).toEqual([
        '.dockerignore',
        'Dockerfile',
        'data/',
        'data/keep.txt',
      ]);
      await expect(checkContext(ctx)).resolves.toBeUndefined();
      // Below a directory left out whose own name is not UTF-8, where a `!` exception makes the walk look inside.
      mkdirSync(Buffer.concat([Buffer.from(`${ctx}/`), latin1('d\xe9p\xf4t')]));
      writeFileSync(Buffer.concat([Buffer.from(`${ctx}/`), latin1('d\xe9p\xf4t/x')]), 'x');
      writeFileSync(join(ctx, '.dockerignore'), 'd*\n!data\ndata/caf*\n');
      expect(paths((await packContext(ctx)).archive)).toEqual([
        '.dockerignore',
        'Dockerfile',
        'data/',
        'data/keep.txt',
      ]);
      writeFileSync(join(ctx, '.dockerignore'), 'data/caf*\nd*\n!d*/x\n');
      await expect(packContext(ctx)).rejects.toThrow(`has d\\xe9p\\xf4t/x, whose name is not valid UTF-8`);
    } finally {
      rmSync(ctx, { recursive: true, force: true });
    }
  });

  it("honours the Dockerfile's own ignore file in place of .dockerignore, as BuildKit does", async () => {
    const ctx = mkdtempSync(join(tmpdir(), 'fleetwise-ctx-own-ignore-'));
    try {
      mkdirSync(join(ctx, 'docker'));
      mkdirSync(join(ctx, 'bin'));
      writeFileSync(join(ctx, 'docker', 'Dockerfile.prod'), 'FROM busybox\nCOPY . /app\n');
      writeFileSync(join(ctx, 'docker', 'Dockerfile.prod.dockerignore'), '.env\ndocker\n');
      writeFileSync(join(ctx, 'Dockerfile'), 'FROM busybox\n');
      writeFileSync(join(ctx, '.dockerignore'), 'bin\n');
      writeFileSync(join(ctx, '.env'), 'SECRET=1\n');
      writeFileSync(join(ctx, 'bin', 'run.sh'), 'echo hi\n');
      const paths = async (dockerfile?: string): Promise<string[]> =>
        readTar(gunzipSync((await packContext(ctx, undefined, dockerfile)).archive)).map((e) => e.path);
      // Its own rules alone: .env is left out, bin (which .dockerignore leaves out) is not; the ignore file and the
      // Dockerfile are packed, so a build on the worker reads the same rules.
      expect(await paths('docker/Dockerfile.prod')).toEqual([
        '.dockerignore',
        'Dockerfile',
        'bin/',
        'bin/run.sh',
        'docker/Dockerfile.prod',
        'docker/Dockerfile.prod.dockerignore',
      ]);
      expect(await paths('./docker//Dockerfile.prod')).toContain('docker/Dockerfile.prod.dockerignore');
      // Another Dockerfile, and the default one, read .dockerignore until they have their own.
      expect(await paths()).toEqual([
        '.dockerignore',
        '.env',
        'Dockerfile',
        'docker/',
        'docker/Dockerfile.prod',
        'docker/Dockerfile.prod.dockerignore',
      ]);
      writeFileSync(join(ctx, 'Dockerfile.dockerignore'), '.env\n');
      expect(await paths()).not.toContain('.env');
      expect(await paths()).toContain('bin/run.sh');
    } finally {
      rmSync(ctx, { recursive: true, force: true });
    }
  });
});

describe('DockerIgnore', () => {
  it('matches segments, ** and exceptions, last rule winning', () => {
    const ignore = DockerIgnore.parse('node_modules\n*.tmp\n**/build\n!keep.tmp\n/secrets/*.key\n');
    expect(ignore.ignores('node_modules/x/y.js')).toBe(true);
    expect(ignore.ignores('a.tmp')).toBe(true);
    expect(ignore.ignores('keep.tmp')).toBe(false);
    expect(ignore.ignores('sub/a.tmp')).toBe(false); // * stays within a segment, as in docker
    expect(ignore.ignores('x/y/build/out')).toBe(true);
    expect(ignore.ignores('build')).toBe(true);
    expect(ignore.ignores('secrets/a.key')).toBe(true);
    expect(ignore.ignores('src/main.ts')).toBe(false);
  });

  it('re-includes with ! below an excluded directory, and a later line excludes again', () => {
    const ignore = DockerIgnore.parse('logs\n!logs/keep\nlogs/keep/secret\n*.md\n!README.md\n');
    expect(ignore.hasExceptions).toBe(true);
    expect(ignore.ignores('logs/a')).toBe(true);
    expect(ignore.ignores('logs/keep/b')).toBe(false);
    expect(ignore.ignores('logs/keep/secret')).toBe(true);
    expect(ignore.ignores('README.md')).toBe(false);
    expect(ignore.ignores('CHANGES.md')).toBe(true);
    expect(ignore.ignores('docs/a.md')).toBe(false); // * does not cross '/'
    expect(DockerIgnore.parse('a\n!\n').hasExceptions).toBe(false); // a bare ! is no rule
  });

  it('** spans any number of directories, zero included', () => {
    const ignore = DockerIgnore.parse('docs/**/*.md\n**/node_modules\ncache/**\n');
    expect(ignore.ignores('docs/a.md')).toBe(true);
    expect(ignore.ignores('docs/x/y/a.md')).toBe(true);
    expect(ignore.ignores('a.md')).toBe(false);
    expect(ignore.ignores('node_modules/x.js')).toBe(true);
    expect(ignore.ignores('pkg/sub/node_modules/x.js')).toBe(true);
    expect(ignore.ignores('cache/a/b')).toBe(true);
    expect(ignore.ignores('cache')).toBe(false); // cache/** matches what is inside, not the directory
  });

  it('a trailing slash matches the directory (and a file of that name), as Go filepath.Clean does', () => {
    const ignore = DockerIgnore.parse('build/\n!build/keep/\n');
    expect(ignore.ignores('build')).toBe(true);
    expect(ignore.ignores('build/out.o')).toBe(true);
    expect(ignore.ignores('build/keep/x')).toBe(false);
    expect(ignore.ignores('src/build')).toBe(false); // anchored at the context root
  });

  it('follows Go filepath.Match: [...] classes, \\ escapes, cleaned paths', () => {
    const ignore = DockerIgnore.parse('[ab].txt\nfile\\*\n./out/../dist\n\\#notes\n');
    expect(ignore.ignores('a.txt')).toBe(true);
    expect(ignore.ignores('c.txt')).toBe(false);
    expect(ignore.ignores('[ab].txt')).toBe(false);
    expect(ignore.ignores('file*')).toBe(true);
    expect(ignore.ignores('fileX')).toBe(false);
    expect(ignore.ignores('dist/x')).toBe(true);
    expect(ignore.ignores('#notes')).toBe(true);
  });

  it('never ignores .dockerignore or the Dockerfile', () => {
    const ignore = DockerIgnore.parse('*\n', 'ci/Dockerfile.prod');
    expect(ignore.ignores('.dockerignore')).toBe(false);
    expect(ignore.ignores('ci/Dockerfile.prod')).toBe(false);
    expect(ignore.ignores('ci/other')).toBe(true);
    expect(ignore.ignores('Dockerfile')).toBe(true); // not the one this build uses
  });
});
