import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { packContext } from '../../src/cli/context-archive.js';
import { extractBuildContext } from '../../src/worker/archives.js';
import { hashBuildContext } from '../../src/worker/image-cache.js';
import { craftTar } from '../helpers/tar.js';

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
    await extractBuildContext(archive, ours, true);
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
        await expect(extractBuildContext(gzip ? gzipSync(tar) : tar, dir, gzip)).rejects.toThrow(reason);
      }
    }
    expect(readdirSync(outside)).toEqual([]);
    expect(existsSync(join(tmp, 'evil'))).toBe(false);
  });
});
