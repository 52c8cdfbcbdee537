import { createConnection, createServer, isIP, type Server, type Socket } from 'node:net';
import {
  MAX_RTT_MICROSECONDS,
  type NetworkReport,
  type ProbePeer,
  type RttReport,
} from '../protocol/worker-protocol.js';

/**
 * Round trips between the instances of a job, measured by their workers (latency-aware placement, research digest
 * nomora-latency-placement.md §10.4: each worker probes its peers every `intervalSeconds` and reports max and p99 over
 * a `windowSeconds` window; the scheduler uses the max, as NoMora does, because ECMP sends flows over paths of
 * different lengths).
 *
 * Each worker listens with a TCP echo on its probe port. A probe connects to a peer's listener, sends one byte and
 * waits for it to come back: the connect (SYN → SYN-ACK, answered by the peer's kernel) and the echo (answered by the
 * peer's worker) are each one network round trip, and the smaller of the two is the sample, the one less delayed by
 * either side's event loop. A TCP round trip is enough here: what matters is the path between instances, and it needs
 * neither privileges (ICMP) nor anything on the peer but its worker.
 */

/** The echo answers at most this many bytes per connection and drops idle ones: it cannot be used as a reflector. */
const ECHO_MAX_BYTES = 64;
const ECHO_IDLE_MS = 10_000;
export const DEFAULT_PROBE_PORT = 7071;
export const DEFAULT_PROBE_INTERVAL_SECONDS = 10;
export const DEFAULT_PROBE_WINDOW_SECONDS = 60;

export interface ProbeListener {
  readonly port: number;
  close(): Promise<void>;
}

/** The TCP echo other workers probe. `port` 0 takes any free port (several local workers on one host). */
export async function startProbeListener(port: number, host?: string): Promise<ProbeListener> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.setNoDelay(true);
    socket.setTimeout(ECHO_IDLE_MS, () => socket.destroy());
    let echoed = 0;
    socket.on('data', (chunk: Buffer) => {
      const room = ECHO_MAX_BYTES - echoed;
      if (room > 0) socket.write(chunk.subarray(0, room));
      echoed += chunk.length;
      if (echoed >= ECHO_MAX_BYTES) socket.end();
    });
    socket.on('error', () => socket.destroy());
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, ...(host === undefined ? {} : { host }) }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address !== null ? address.port : port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A probe that got no answer within its timeout: the round trip is at least `timeoutMs`, if there is one at all. */
export class ProbeTimeoutError extends Error {
  constructor(
    message: string,
    readonly timeoutMs: number,
  ) {
    super(message);
    this.name = 'ProbeTimeoutError';
  }
}

/**
 * One probe: the round trip to a peer's echo in microseconds (the smaller of connect and one-byte echo). Rejects with
 * a ProbeTimeoutError when nothing came back in time, with an Error when the connection failed outright.
 */
export function measureRoundTrip(host: string, port: number, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    let connectedAt: bigint | undefined;
    let sentAt: bigint | undefined;
    // Settled once, by whichever comes first (answer, error, close, timeout); the timer runs until then, so a peer
    // that accepts and hangs up without answering cannot leave the probe, and every later one, waiting for ever.
    let settled = false;
    const socket = createConnection({ host, port, noDelay: true });
    const fail = (why: string, timedOut = false): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const message = `probe of ${host}:${port}: ${why}`;
      reject(timedOut ? new ProbeTimeoutError(message, timeoutMs) : new Error(message));
    };
    const timer = setTimeout(() => fail(`no answer within ${timeoutMs} ms`, true), timeoutMs);
    socket.once('connect', () => {
      connectedAt = process.hrtime.bigint();
      sentAt = connectedAt;
      socket.write(Buffer.of(0x2a));
    });
    socket.once('data', () => {
      if (settled) return;
      settled = true;
      const now = process.hrtime.bigint();
      clearTimeout(timer);
      socket.destroy();
      const connect = Number((connectedAt ?? now) - started) / 1000;
      const echo = Number(now - (sentAt ?? now)) / 1000;
      resolve(Math.min(connect, echo));
    });
    socket.once('error', (e) => fail(e.message));
    // Connected or not: a connection that ends before the echo came back is a probe without an answer.
    socket.once('close', () => fail('closed before answering'));
  });
}

/** The nearest-rank percentile `q` (0–1] of ascending `sorted` values. */
export function nearestRank(sorted: readonly number[], q: number): number {
  const index = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length))) - 1;
  return sorted[index] as number;
}

interface PeerSamples {
  /** [when (ms), round trip (µs)], oldest first. */
  readonly samples: [number, number][];
  /** [when probes failed (ms), the least their round trip was (µs; undefined: no figure)], oldest first. */
  readonly failures: [number, number | undefined][];
}

/**
 * Samples per peer over a sliding window, summarized as the heartbeat reports them. A probe that timed out counts in
 * the figures at its timeout, a lower bound of its round trip: left out, a path that drops most probes would look as
 * fast as the few that got through (NoMora takes the maximum; a lost packet is the worst round trip there is). A
 * probe refused outright (no listener) says nothing of the path and only counts as a failure.
 */
export class RttWindow {
  private readonly peers = new Map<string, PeerSamples>();

  constructor(readonly windowSeconds: number) {}

  private of(peer: string): PeerSamples {
    let entry = this.peers.get(peer);
    if (entry === undefined) {
      entry = { samples: [], failures: [] };
      this.peers.set(peer, entry);
    }
    return entry;
  }

  add(peer: string, atMs: number, microseconds: number): void {
    this.of(peer).samples.push([atMs, microseconds]);
  }

  /** A failed probe; `atLeastMicroseconds` when it timed out (its round trip was at least that, if any). */
  fail(peer: string, atMs: number, atLeastMicroseconds?: number): void {
    this.of(peer).failures.push([atMs, atLeastMicroseconds]);
  }

  /** Keep only these peers (the controller's current list). */
  retain(peers: ReadonlySet<string>): void {
    for (const peer of [...this.peers.keys()]) if (!peers.has(peer)) this.peers.delete(peer);
  }

  /**
   * Max and p99 per peer over the window ending at `nowMs`, peers in name order. `samples` counts the figures they are
   * taken over (answers and timeouts), `failures` the probes that got no answer (timeouts and refusals).
   */
  report(nowMs: number): RttReport[] {
    const since = nowMs - this.windowSeconds * 1000;
    const out: RttReport[] = [];
    for (const peer of [...this.peers.keys()].sort()) {
      const entry = this.peers.get(peer) as PeerSamples;
      while (entry.samples.length > 0 && (entry.samples[0] as [number, number])[0] < since)
        entry.samples.shift();
      while (entry.failures.length > 0 && (entry.failures[0] as [number, number | undefined])[0] < since)
        entry.failures.shift();
      if (entry.samples.length === 0 && entry.failures.length === 0) continue;
      const sorted = [
        ...entry.samples.map(([, us]) => us),
        ...entry.failures.flatMap(([, us]) => (us === undefined ? [] : [us])),
      ].sort((a, b) => a - b);
      out.push({
        peerInstanceId: peer,
        ...(sorted.length === 0
          ? {}
          : {
              maxMicroseconds: Math.round(sorted[sorted.length - 1] as number),
              p99Microseconds: Math.round(nearestRank(sorted, 0.99)),
            }),
        samples: sorted.length,
        failures: entry.failures.length,
        windowSeconds: this.windowSeconds,
      });
    }
    return out;
  }
}

export interface LatencyProberOptions {
  /** The port to listen on (0: any free port). */
  readonly port: number;
  /** The address peers should connect to; default: the one the controller sees this worker at. */
  readonly advertisedHost?: string | undefined;
  /** Listen on this address only (default: the advertised host when it is an IP address of this host, else every address). */
  readonly listenHost?: string | undefined;
  readonly intervalSeconds?: number;
  readonly windowSeconds?: number;
  /** A probe not answered within this is a failure, counted as a round trip this long (default: a second). */
  readonly timeoutMs?: number;
  readonly nowMs?: () => number;
}

/**
 * The worker's side: an echo listener, the peers the controller named in its latest answer, a probe of each every
 * interval, and the window's summary for the next heartbeat.
 */
export class LatencyProber {
  private peers: readonly ProbePeer[] = [];
  private readonly window: RttWindow;
  private timer: NodeJS.Timeout | undefined;
  private probing = false;

  private constructor(
    private readonly options: LatencyProberOptions,
    private readonly listener: ProbeListener,
  ) {
    this.window = new RttWindow(options.windowSeconds ?? DEFAULT_PROBE_WINDOW_SECONDS);
  }

  static async start(options: LatencyProberOptions): Promise<LatencyProber> {
    const listener = await LatencyProber.listen(options);
    const prober = new LatencyProber(options, listener);
    const everyMs = (options.intervalSeconds ?? DEFAULT_PROBE_INTERVAL_SECONDS) * 1000;
    prober.timer = setInterval(() => void prober.probeAll(), everyMs);
    prober.timer.unref();
    return prober;
  }

  /**
   * Listen where peers are told to connect when that is an address of this host (nothing else need reach the probe),
   * else on every address: an advertised address may belong to a NAT in front of the host.
   */
  private static async listen(options: LatencyProberOptions): Promise<ProbeListener> {
    const explicit = options.listenHost;
    const advertised = options.advertisedHost;
    if (explicit !== undefined || advertised === undefined || isIP(advertised) === 0)
      return startProbeListener(options.port, explicit);
    try {
      return await startProbeListener(options.port, advertised);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EADDRNOTAVAIL') throw e;
      return startProbeListener(options.port);
    }
  }

  get port(): number {
    return this.listener.port;
  }

  private now(): number {
    return (this.options.nowMs ?? Date.now)();
  }

  /** The controller's current list of peers (level-triggered: peers not named any more are dropped). */
  setPeers(peers: readonly ProbePeer[]): void {
    this.peers = peers;
    this.window.retain(new Set(peers.map((p) => p.instanceId)));
  }

  /** Probe every peer once, one after the other (a handful of peers: no burst on the network). */
  async probeAll(): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    try {
      for (const peer of this.peers) {
        try {
          const us = await measureRoundTrip(peer.host, peer.port, this.options.timeoutMs ?? 1000);
          this.window.add(peer.instanceId, this.now(), us);
        } catch (e) {
          // At most what a report may carry (a timeout beyond a minute would make the report refused).
          const atLeast =
            e instanceof ProbeTimeoutError ? Math.min(e.timeoutMs * 1000, MAX_RTT_MICROSECONDS) : undefined;
          this.window.fail(peer.instanceId, this.now(), atLeast);
        }
      }
    } finally {
      this.probing = false;
    }
  }

  /** What the next heartbeat carries: where this probe listens and the window's round trips. */
  heartbeatReport(): NetworkReport {
    return {
      probe: {
        ...(this.options.advertisedHost === undefined ? {} : { host: this.options.advertisedHost }),
        port: this.listener.port,
      },
      rtts: this.window.report(this.now()),
    };
  }

  async stop(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    await this.listener.close();
  }
}
