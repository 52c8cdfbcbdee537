import { pack as tarPack, type Header } from 'tar-stream';
import { createGzip } from 'node:zlib';

/** A tar with exactly these entries (names, types and link targets unchecked), as a hostile store could hold. */
export async function craftTar(
  entries: readonly (Partial<Header> & { readonly name: string; readonly content?: string })[],
): Promise<Buffer> {
  const tar = tarPack();
  const chunks: Buffer[] = [];
  tar.on('data', (c) => chunks.push(c as Buffer));
  const ended = new Promise<void>((resolve) => tar.once('end', () => resolve()));
  for (const { content, ...header } of entries)
    await new Promise<void>((resolve, reject) =>
      tar.entry(header, content ?? '', (e) => (e ? reject(e) : resolve())),
    );
  tar.finalize();
  await ended;
  return Buffer.concat(chunks);
}

/**
 * A gzip bomb: a gzip-compressed tar holding one file of `expandedBytes` zeros, a few KiB per MiB once compressed.
 * Built streaming, so even a large one never sits whole in memory uncompressed.
 */
export async function gzipBomb(expandedBytes: number): Promise<Buffer> {
  const tar = tarPack();
  const gzip = createGzip({ level: 9 });
  const chunks: Buffer[] = [];
  gzip.on('data', (c: Buffer) => chunks.push(c));
  const ended = new Promise<void>((resolve, reject) => {
    gzip.once('end', () => resolve());
    gzip.once('error', reject);
  });
  tar.pipe(gzip);
  const entry = tar.entry({ name: 'zeros.bin', size: expandedBytes });
  const zeros = Buffer.alloc(1024 * 1024);
  for (let left = expandedBytes; left > 0; left -= zeros.length) {
    const more = entry.write(left >= zeros.length ? zeros : zeros.subarray(0, left));
    if (!more) await new Promise<void>((resolve) => entry.once('drain', () => resolve()));
  }
  entry.end(() => undefined);
  tar.finalize();
  await ended;
  return Buffer.concat(chunks);
}
