import { Readable } from 'node:stream';

/** Read a stream to the end into one Buffer. */
export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream)
    chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks);
}

/**
 * `body` relayed chunk by chunk, its failure replaced by `as(failure)`: a store's download breaking mid-body is the
 * store's failure, told apart from the reader's own. Destroying the relay destroys `body`.
 */
export function relayErrorsAs(body: Readable, as: (failure: unknown) => Error): Readable {
  async function* relay(): AsyncGenerator<Buffer> {
    try {
      for await (const chunk of body)
        yield typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
    } catch (e) {
      throw as(e);
    }
  }
  return Readable.from(relay(), { objectMode: false });
}

/**
 * Remember the first error `stream` emits (or had already, before this was called); the returned function answers
 * it (undefined while there is none).
 */
export function watchForError(stream: Readable): () => Error | undefined {
  let failure: Error | undefined;
  const remember = (e: Error): void => {
    failure ??= e;
  };
  stream.on('error', remember);
  return () => failure ?? stream.errored ?? undefined;
}
