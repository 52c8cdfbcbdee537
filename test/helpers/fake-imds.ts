import { createServer, type Server } from 'node:http';

/**
 * The instance metadata service as a worker on EC2 sees it, over real HTTP, with IMDSv2's rules (the instances are
 * launched with HttpTokens=required): a session token from `PUT /latest/api/token` with a TTL header, then GETs that
 * carry it; anything else is 401. It serves one instance's identity document and its rsa2048 signature, which a test
 * may swap between requests.
 */
export interface FakeImds {
  readonly url: string;
  /** What the next GETs serve. */
  serve(identity: { readonly document: string; readonly rsa2048: string }): void;
  /** Requests seen, as `METHOD path`, in order. */
  readonly requests: string[];
  close(): Promise<void>;
}

const SESSION = 'fake-imds-session-token-0123456789';

export async function startFakeImds(): Promise<FakeImds> {
  let served: { document: string; rsa2048: string } = { document: '{}', rsa2048: '' };
  const requests: string[] = [];
  const server: Server = createServer((req, res) => {
    requests.push(`${req.method ?? '?'} ${req.url ?? '?'}`);
    const send = (status: number, body: string): void => {
      res.writeHead(status, { 'content-type': 'text/plain' }).end(body);
    };
    if (req.method === 'PUT' && req.url === '/latest/api/token') {
      if (req.headers['x-aws-ec2-metadata-token-ttl-seconds'] === undefined) return send(400, 'missing TTL');
      return send(200, SESSION);
    }
    if (req.method !== 'GET') return send(405, 'method not allowed');
    if (req.headers['x-aws-ec2-metadata-token'] !== SESSION)
      return send(401, 'IMDSv2 session token required');
    if (req.url === '/latest/dynamic/instance-identity/document') return send(200, served.document);
    if (req.url === '/latest/dynamic/instance-identity/rsa2048') return send(200, served.rsa2048);
    send(404, 'not found');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    serve(identity) {
      served = { ...identity };
    },
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
