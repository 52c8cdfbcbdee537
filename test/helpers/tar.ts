import { pack as tarPack, type Header } from 'tar-stream';

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
