import { finished, PassThrough, Readable } from 'node:stream';

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

/** A caller's body as a store's put reads it (bodyRelay). */
export interface BodyRelay {
  /** What the store reads instead of the body: the body's bytes, its end and its own failure. */
  readonly relay: Readable;
  /** The body's own failure, if it failed before the store stopped reading it (undefined otherwise). */
  bodyFailure(): Error | undefined;
}

/**
 * `body` relayed to a store's put, so a failure can be blamed on the right side. A store that fails mid-body (a part
 * upload refused, a write to a full disk) stops reading and destroys what it reads: given the body itself, that
 * destroy errors the body with an AbortError, which would then look like the caller's body failing (not retried)
 * instead of the store failing (retried). Here the store destroys the relay; the body is then released without an
 * error, and only a failure the body had before that counts as the body's.
 */
export function bodyRelay(body: Readable): BodyRelay {
  let failure: Error | undefined = body.errored ?? undefined;
  let released = false;
  const relay = new PassThrough({
    destroy(error, callback) {
      released = true;
      body.unpipe(relay);
      if (!body.destroyed) body.destroy();
      callback(error);
    },
  });
  // The reader of the relay (the store) has the relay's failure already; this keeps an unread one from crashing.
  relay.on('error', () => undefined);
  finished(body, (error) => {
    if (error === undefined || error === null || released) return;
    failure ??= error;
    relay.destroy(error);
  });
  if (failure === undefined) body.pipe(relay);
  else relay.destroy(failure);
  return { relay, bodyFailure: () => failure };
}
