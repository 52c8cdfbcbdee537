import { createServer, type Server, type ServerResponse } from 'node:http';
import { HEALTH_FEATURES } from '../api/health-features.js';
import type { LeadershipView } from './leader-elector.js';

/**
 * What a standby controller serves on its API address while it waits for the lease: /healthz (200: it is alive, as a
 * standby, with the lease's epoch and holder), /readyz (503: not the one to send work to) and, for anything else, 503
 * with a Retry-After and the active controller's address, so a client or worker that reached it directly learns where
 * to go. It runs no cluster, so it answers nothing from the state; the active controller's full API replaces it once
 * the lease is taken.
 */
export interface StandbyServer {
  readonly url: string;
  close(): Promise<void>;
}

export async function startStandbyServer(options: {
  readonly host: string;
  readonly port: number;
  /** The lease as this standby sees it (read from the database at each request). */
  readonly leadership: () => LeadershipView;
  readonly retryAfterSeconds: number;
}): Promise<StandbyServer> {
  const send = (response: ServerResponse, status: number, body: object): void => {
    const text = JSON.stringify(body);
    response.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(text),
      ...(status === 503 ? { 'retry-after': String(Math.ceil(options.retryAfterSeconds)) } : {}),
    });
    response.end(text);
  };
  const server: Server = createServer((request, response) => {
    // Bodies are never read: drain whatever arrives so the connection can be reused.
    request.resume();
    let leadership: LeadershipView;
    try {
      leadership = options.leadership();
    } catch {
      return send(response, 503, {
        status: 'unavailable',
        error: 'the state store is unavailable',
        ...HEALTH_FEATURES,
      });
    }
    const path = (request.url ?? '/').split('?')[0];
    if ((request.method === 'GET' || request.method === 'HEAD') && path === '/healthz')
      return send(response, 200, { status: 'ok', latestRound: null, ...leadership, ...HEALTH_FEATURES });
    if ((request.method === 'GET' || request.method === 'HEAD') && path === '/readyz')
      return send(response, 503, { status: 'standby', ...leadership });
    const active =
      leadership.holder === null
        ? 'no controller holds the lease right now'
        : `the active controller is ${leadership.holder}${leadership.activeUrl === null ? '' : ` at ${leadership.activeUrl}`} (epoch ${leadership.epoch ?? '?'})`;
    return send(response, 503, {
      error: `this controller is a standby: ${active}; retry there or through the load balancer`,
      ...leadership,
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  return {
    url: `http://${options.host.includes(':') ? `[${options.host}]` : options.host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
