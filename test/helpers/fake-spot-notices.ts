import { createServer, type Server } from 'node:http';

/**
 * The spot notices of the instance metadata service over real HTTP, with IMDSv2's session rule (a token from
 * `PUT /latest/api/token` with a TTL header, then GETs carrying it; anything else 401). Each session is one worker:
 * `interruptNext` arms a notice that the next session to poll `spot/instance-action` receives, and keeps receiving,
 * while every other session gets 404 as on an instance EC2 leaves alone, so one of several local workers sharing this
 * server is interrupted. `rebalanceAll` serves a rebalance recommendation to every session.
 */
export interface FakeSpotNotices {
  readonly url: string;
  /** The next worker to poll is told EC2 reclaims its instance `inSeconds` from now. */
  interruptNext(inSeconds?: number): void;
  rebalanceAll(): void;
  /** When the armed notice was first served (ms since the epoch), if it was. */
  readonly servedAtMs: number | undefined;
  /** Polls of spot/instance-action seen. */
  readonly polls: number;
  close(): Promise<void>;
}

export async function startFakeSpotNotices(): Promise<FakeSpotNotices> {
  let sessions = 0;
  let armed: { inSeconds: number } | undefined;
  let interrupted: { session: string; time: string } | undefined;
  let servedAtMs: number | undefined;
  let rebalance: string | undefined;
  let polls = 0;
  const server: Server = createServer((req, res) => {
    const send = (status: number, body: string): void => {
      res.writeHead(status, { 'content-type': 'text/plain' }).end(body);
    };
    if (req.method === 'PUT' && req.url === '/latest/api/token') {
      if (req.headers['x-aws-ec2-metadata-token-ttl-seconds'] === undefined) return send(400, 'missing TTL');
      sessions += 1;
      return send(200, `fake-session-${sessions}`);
    }
    const session = req.headers['x-aws-ec2-metadata-token'];
    if (req.method !== 'GET') return send(405, 'method not allowed');
    if (typeof session !== 'string' || !session.startsWith('fake-session-'))
      return send(401, 'IMDSv2 session token required');
    if (req.url === '/latest/meta-data/spot/instance-action') {
      polls += 1;
      if (armed !== undefined && interrupted === undefined) {
        interrupted = { session, time: new Date(Date.now() + armed.inSeconds * 1000).toISOString() };
        servedAtMs = Date.now();
      }
      if (interrupted?.session === session)
        return send(200, JSON.stringify({ action: 'terminate', time: interrupted.time }));
      return send(404, 'not found');
    }
    if (req.url === '/latest/meta-data/events/recommendations/rebalance')
      return rebalance === undefined
        ? send(404, 'not found')
        : send(200, JSON.stringify({ noticeTime: rebalance }));
    send(404, 'not found');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    interruptNext(inSeconds = 120) {
      armed = { inSeconds };
    },
    rebalanceAll() {
      rebalance = new Date().toISOString();
    },
    get servedAtMs() {
      return servedAtMs;
    },
    get polls() {
      return polls;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
