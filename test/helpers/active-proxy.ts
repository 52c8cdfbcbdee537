import { createServer, request as httpRequest, type Server } from 'node:http';

/**
 * A load balancer in front of several controllers, as an active/standby deployment has one: it health-checks each
 * backend's /readyz (200 only on the active controller) every `checkMs` and forwards every request, body and all, to
 * the one that answered 200; with none ready it answers 503, as a balancer with no healthy target does. Workers and
 * clients of an HA test talk to it only, so they follow a takeover without knowing which controller is active.
 *
 * Like a real balancer it takes a target out only after UNHEALTHY_THRESHOLD checks in a row found no backend ready
 * (or at once when another backend answers 200, or the target's process is gone): one probe answered late by an
 * active controller on a loaded host must not make the balancer answer 503 in between.
 */
export interface ActiveProxy {
  readonly url: string;
  /** The backend requests go to now, if any. */
  active(): string | undefined;
  close(): Promise<void>;
}

/** Checks in a row that found no backend ready before the target is taken out (an ALB's default is 2). */
const UNHEALTHY_THRESHOLD = 3;

export async function startActiveProxy(
  backends: () => readonly string[],
  checkMs = 100,
): Promise<ActiveProxy> {
  let active: string | undefined;
  let failedChecks = 0;
  let closed = false;
  const check = async (): Promise<void> => {
    let found: string | undefined;
    const candidates = backends();
    for (const backend of candidates) {
      try {
        const response = await fetch(`${backend}/readyz`, { signal: AbortSignal.timeout(1000) });
        await response.arrayBuffer();
        if (response.status === 200) {
          found = backend;
          break;
        }
      } catch {
        // down or starting: not a target
      }
    }
    if (found !== undefined) {
      active = found;
      failedChecks = 0;
      return;
    }
    failedChecks += 1;
    if (failedChecks >= UNHEALTHY_THRESHOLD || (active !== undefined && !candidates.includes(active)))
      active = undefined;
  };
  const poll = async (): Promise<void> => {
    while (!closed) {
      await check();
      await new Promise((r) => setTimeout(r, checkMs));
    }
  };
  void poll();

  const server: Server = createServer((incoming, outgoing) => {
    const target = active;
    if (target === undefined) {
      incoming.resume();
      outgoing.writeHead(503, { 'content-type': 'application/json' });
      outgoing.end(JSON.stringify({ error: 'no active controller behind the load balancer' }));
      return;
    }
    const upstream = new URL(target);
    const forwarded = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: incoming.method,
        path: incoming.url,
        headers: incoming.headers,
      },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    forwarded.on('error', () => {
      if (!outgoing.headersSent) outgoing.writeHead(502, { 'content-type': 'application/json' });
      outgoing.end(JSON.stringify({ error: `the active controller ${target} did not answer` }));
    });
    incoming.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    active: () => active,
    close: () =>
      new Promise<void>((resolve) => {
        closed = true;
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
