/**
 * A TCP proxy in front of a real server (moto_server, a controller's API) that a test switches between three modes,
 * to reproduce what a real outage looks like from the client's side:
 *
 *   pass    forwards bytes both ways, unchanged
 *   refuse  nothing listens on the port: every connection attempt is refused (ECONNREFUSED), as when the server is down
 *   hang    accepts connections, reads what the client sends and never answers: a hung endpoint, the case a client
 *           without timeouts waits on forever
 *
 * Switching modes cuts every open connection (the client sees a reset), so a kept-alive connection opened in `pass`
 * cannot carry on through a `hang` or a `refuse`; `setMode('hang', { freeze: true })` instead freezes the open ones
 * where they are (nothing more is forwarded either way), as a server that stalls mid-transfer. The proxy keeps its port across modes, so clients keep one endpoint.
 * It counts the connections each mode accepted, so a test can assert how many attempts a client made (each retry of
 * a timed-out call opens a new connection), and can wait until a client is stuck in a hung connection.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { freePort } from './test-ports.js';

export type ProxyMode = 'pass' | 'refuse' | 'hang';

export interface TcpProxy {
  /** `http://127.0.0.1:<port>`: what a client uses instead of the target's URL. */
  readonly url: string;
  readonly port: number;
  readonly mode: ProxyMode;
  /** Switch modes; resolves once the new mode is in force (open connections cut, the port closed or listening). */
  setMode(mode: ProxyMode, options?: { readonly freeze?: boolean }): Promise<void>;
  /** Connections accepted since the start, by the mode that accepted them. */
  accepted(mode: 'pass' | 'hang'): number;
  /** Connections held open right now by `hang`. */
  hanging(): number;
  /** Resolves once at least `count` connections are held hanging at the same time. */
  waitForHanging(count?: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

const LOOPBACK = '127.0.0.1';

/** Start a proxy to `target` (`http://host:port` or `host:port`), listening on a free loopback port. */
export async function startTcpProxy(target: string, initial: ProxyMode = 'pass'): Promise<TcpProxy> {
  const { hostname, port: targetPort } = new URL(target.includes('://') ? target : `tcp://${target}`);
  const upstreamPort = Number(targetPort);
  if (!Number.isInteger(upstreamPort) || upstreamPort <= 0)
    throw new Error(`tcp proxy: no port in target ${target}`);
  const open = new Set<Socket>();
  /** Client side → upstream side of each forwarded connection. */
  const forwarded = new Map<Socket, Socket>();
  const hangingNow = new Set<Socket>();
  const counts = { pass: 0, hang: 0 };
  const hangWaiters: { count: number; resolve: () => void }[] = [];
  let mode: ProxyMode = initial;
  let closed = false;

  const track = (socket: Socket): void => {
    open.add(socket);
    socket.once('close', () => {
      open.delete(socket);
      hangingNow.delete(socket);
    });
    // A reset from either side is how connections end here; it is not a test failure.
    socket.on('error', () => undefined);
  };

  const hang = (client: Socket): void => {
    hangingNow.add(client);
    client.resume(); // read and drop whatever the client sends, so it never blocks on a full window
    for (const waiter of [...hangWaiters])
      if (hangingNow.size >= waiter.count) {
        hangWaiters.splice(hangWaiters.indexOf(waiter), 1);
        waiter.resolve();
      }
  };

  const onConnection = (client: Socket): void => {
    track(client);
    if (mode === 'hang') {
      counts.hang += 1;
      hang(client);
      return;
    }
    counts.pass += 1;
    const upstream = connect(upstreamPort, hostname);
    track(upstream);
    forwarded.set(client, upstream);
    const cut = (): void => {
      forwarded.delete(client);
      client.destroy();
      upstream.destroy();
    };
    client.once('close', cut);
    upstream.once('close', cut);
    client.pipe(upstream);
    upstream.pipe(client);
  };

  const server: Server = createServer(onConnection);
  const listen = (port: number): Promise<number> =>
    new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, LOOPBACK, () => {
        server.removeListener('error', reject);
        const address = server.address();
        resolve(typeof address === 'object' && address !== null ? address.port : port);
      });
    });
  const stopListening = (): Promise<void> =>
    new Promise((resolve) => {
      if (!server.listening) return resolve();
      server.close(() => resolve());
    });
  const cutAll = (): void => {
    for (const socket of open) socket.destroy();
  };

  // A port of its own, not an ephemeral one: in refuse mode nothing listens on it, and an ephemeral port left free
  // that long may be handed to another process before the proxy listens again.
  const port = await listen(await freePort());
  if (initial === 'refuse') await stopListening();

  return {
    url: `http://${LOOPBACK}:${port}`,
    port,
    get mode() {
      return mode;
    },
    async setMode(next, options = {}) {
      if (closed) throw new Error('tcp proxy: closed');
      if (next === mode) return;
      const previous = mode;
      mode = next;
      if (next === 'hang' && options.freeze === true)
        for (const [client, upstream] of forwarded) {
          client.unpipe(upstream);
          upstream.unpipe(client);
          upstream.pause();
          hang(client);
        }
      else cutAll();
      if (next === 'refuse') await stopListening();
      else if (previous === 'refuse') await listen(port);
    },
    accepted: (which) => counts[which],
    hanging: () => hangingNow.size,
    waitForHanging(count = 1, timeoutMs = 20_000) {
      if (hangingNow.size >= count) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const waiter = {
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        };
        const timer = setTimeout(() => {
          hangWaiters.splice(hangWaiters.indexOf(waiter), 1);
          reject(new Error(`tcp proxy: no ${count} hanging connection(s) within ${timeoutMs} ms`));
        }, timeoutMs);
        hangWaiters.push(waiter);
      });
    },
    async close() {
      if (closed) return;
      closed = true;
      cutAll();
      await stopListening();
    },
  };
}
