import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';

/**
 * HTTP as a fuzz test needs it: requests sent exactly as given (a path with bad escapes, any method, a body with any
 * content type, no fetch normalization), and raw bytes on a socket for what no client library would send.
 */

export interface RawAnswer {
  readonly status: number;
  readonly contentType: string | undefined;
  readonly text: string;
}

/** Thrown when the client library itself refuses to send a request (e.g. a character Node allows in no path). */
export class ClientRefused extends Error {
  override name = 'ClientRefused';
}

export function sendRequest(
  url: string,
  request: {
    readonly method: string;
    readonly target: string;
    readonly headers: Readonly<Record<string, string>>;
    readonly body?: Uint8Array;
  },
  timeoutMs: number,
): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    let req: ReturnType<typeof httpRequest>;
    try {
      req = httpRequest({
        host: hostname,
        port: Number(port),
        method: request.method,
        path: request.target,
        headers: {
          ...request.headers,
          ...(request.body === undefined ? {} : { 'content-length': String(request.body.length) }),
        },
        agent: false,
      });
    } catch (e) {
      reject(new ClientRefused((e as Error).message));
      return;
    }
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    req.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    req.once('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (c: Buffer) => chunks.push(c));
      response.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      response.once('end', () => {
        clearTimeout(timer);
        const type = response.headers['content-type'];
        resolve({
          status: response.statusCode ?? 0,
          contentType: type,
          text: Buffer.concat(chunks).toString('utf8'),
        });
      });
    });
    req.end(request.body === undefined ? undefined : Buffer.from(request.body));
  });
}

/**
 * Write `bytes` to a fresh connection, half-close it, and read until the server closes it. Answers the status code of
 * every response the server wrote (a pipelined stream may get several), in order. Once the client has sent all it
 * will, the server has nothing left to wait for: a connection still open after `timeoutMs` is refused as hung.
 */
export function sendRawBytes(url: string, bytes: Uint8Array, timeoutMs: number): Promise<number[]> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    const statuses = (): number[] =>
      [
        ...Buffer.concat(chunks)
          .toString('latin1')
          .matchAll(/(?:^|\r\n)HTTP\/1\.[01] (\d{3}) /g),
      ].map((m) => Number(m[1]));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(
        new Error(
          `the server kept the connection open for ${timeoutMs} ms, answering ${statuses().join(', ') || 'nothing'}`,
        ),
      );
    }, timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      // The server cutting a garbage stream short is an answer, not a failure.
      if (e.code === 'ECONNRESET' || e.code === 'EPIPE') resolve(statuses());
      else reject(e);
    });
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(statuses());
    });
    socket.end(Buffer.from(bytes));
  });
}
