import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An HTTP proxy in front of moto_server that makes S3 fail in the middle of a transfer, as a store's blip does:
 * UploadPart calls from a part number on answer 503 SlowDown (an outage starting mid multipart upload), or GetObject
 * bodies break off after some bytes (a connection reset mid-download); or every request on some keys answers 503.
 * Everything else passes through.
 */
export interface S3FaultProxy {
  readonly url: string;
  /** UploadPart with this part number or higher answers 503 (undefined: parts pass). */
  failUploadPartsFrom(partNumber: number | undefined): void;
  /** GetObject bodies are cut (the connection destroyed) after this many bytes (undefined: bodies pass). */
  cutDownloadsAfter(bytes: number | undefined): void;
  /** UploadPart calls answered 503 so far. */
  readonly refusedParts: number;
  /** Every request whose (decoded) path holds one of these answers 503 (a store failing on some keys only). */
  readonly failingPaths: Set<string>;
  close(): Promise<void>;
}

export async function startS3FaultProxy(target: string): Promise<S3FaultProxy> {
  const upstream = new URL(target);
  let failFrom: number | undefined;
  let cutAfter: number | undefined;
  let refusedParts = 0;
  const failingPaths = new Set<string>();
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://proxy');
    const part = Number(url.searchParams.get('partNumber') ?? 0);
    const path = decodeURIComponent(req.url ?? '/');
    const failingPath = [...failingPaths].some((fragment) => path.includes(fragment));
    const failingPart =
      req.method === 'PUT' && url.searchParams.has('uploadId') && failFrom !== undefined && part >= failFrom;
    if (failingPath || failingPart) {
      if (failingPart) refusedParts++;
      req.resume();
      req.on('end', () => {
        res.writeHead(503, { 'content-type': 'application/xml' });
        res.end(
          '<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>' +
            '<Message>Please reduce your request rate.</Message></Error>',
        );
      });
      return;
    }
    const cut = req.method === 'GET' && !url.searchParams.has('list-type') ? cutAfter : undefined;
    const forward = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        if (cut === undefined || answer.statusCode !== 200) {
          answer.pipe(res);
          return;
        }
        let sent = 0;
        answer.on('data', (chunk: Buffer) => {
          if (sent >= cut) return;
          const piece = chunk.subarray(0, cut - sent);
          sent += piece.length;
          res.write(piece);
          if (sent >= cut) {
            answer.destroy();
            // Flushed first, so the client has the bytes before the connection breaks.
            res.write('', () => res.socket?.destroy());
          }
        });
        answer.on('end', () => res.end());
      },
    );
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    failUploadPartsFrom(partNumber) {
      failFrom = partNumber;
    },
    cutDownloadsAfter(bytes) {
      cutAfter = bytes;
    },
    get refusedParts() {
      return refusedParts;
    },
    failingPaths,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
