import { createConnection, createServer, type Socket } from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { heartbeatResponseSchema, rttReportSchema } from '../../src/protocol/worker-protocol.js';
import {
  LatencyProber,
  measureRoundTrip,
  nearestRank,
  RttWindow,
  startProbeListener,
  type ProbeListener,
} from '../../src/worker/latency-probe.js';

/** Round trips over real loopback sockets; the window's arithmetic by hand and by property. */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function listener(): Promise<ProbeListener> {
  const l = await startProbeListener(0, '127.0.0.1');
  cleanups.push(() => l.close());
  return l;
}

/** A listener that accepts each connection and at once closes it, answering nothing (not a probe echo). */
async function hangsUp(): Promise<number> {
  // Reading what arrives lets the server's side close too once the prober's has (no connection outlives the test).
  const server = createServer((socket) => socket.resume().end());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
  return (server.address() as { port: number }).port;
}

/** `promise`, or a rejection naming `what` when it has not settled within `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} still pending after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return typeof address === 'object' && address !== null ? address.port : 0;
}

describe('the probe echo and one probe', () => {
  it('measures a loopback round trip in microseconds: positive and far below a millisecond-scale network', async () => {
    const l = await listener();
    expect(l.port).toBeGreaterThan(0);
    const samples: number[] = [];
    for (let i = 0; i < 5; i++) samples.push(await measureRoundTrip('127.0.0.1', l.port, 1000));
    expect(samples.every((us) => us > 0)).toBe(true);
    // Loopback: tens of microseconds; even a loaded 2-core machine stays well under 50 ms.
    expect(Math.min(...samples)).toBeLessThan(50_000);
  });

  it('fails a probe of a port nobody listens on, and one that never answers, within its timeout', async () => {
    await expect(measureRoundTrip('127.0.0.1', await closedPort(), 1000)).rejects.toThrow(
      /probe of 127\.0\.0\.1/,
    );
    // A listener that accepts but never echoes: the probe gives up after its timeout.
    const held: Socket[] = [];
    const silent = createServer((socket) => void held.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    cleanups.push(
      () =>
        new Promise((resolve) => {
          for (const socket of held) socket.destroy();
          silent.close(() => resolve());
        }),
    );
    const port = (silent.address() as { port: number }).port;
    const started = Date.now();
    await expect(measureRoundTrip('127.0.0.1', port, 200)).rejects.toThrow(/no answer within 200 ms/);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('fails a probe of a peer that accepts and hangs up without answering, at once rather than at its timeout', async () => {
    const port = await hangsUp();
    const started = Date.now();
    await expect(within(measureRoundTrip('127.0.0.1', port, 10_000), 3000, 'the probe')).rejects.toThrow(
      /probe of 127\.0\.0\.1:\d+: closed before answering/,
    );
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('takes a peer at a bare IPv6 address and refuses one in brackets, which no probe could connect to', () => {
    const answer = (host: string): ReturnType<typeof heartbeatResponseSchema.safeParse> =>
      heartbeatResponseSchema.safeParse({ tasks: [], peers: [{ instanceId: 'inst-2', host, port: 7071 }] });
    for (const host of ['fd00::5', 'fe80::1%eth0', '10.0.0.5', 'ip-10-0-0-5.ec2.internal'])
      expect(answer(host).success, host).toBe(true);
    const refused = answer('[fd00::5]');
    expect(refused.success).toBe(false);
    expect(refused.error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`)).toEqual([
      'peers.0.host: give an IPv6 address without brackets',
    ]);
  });

  it('echoes at most 64 bytes per connection, then closes it (no reflector)', async () => {
    const l = await listener();
    const received = await new Promise<number>((resolve) => {
      let bytes = 0;
      const socket = createConnection({ host: '127.0.0.1', port: l.port }, () =>
        socket.write(Buffer.alloc(1000, 1)),
      );
      socket.on('data', (chunk: Buffer) => (bytes += chunk.length));
      socket.on('close', () => resolve(bytes));
    });
    expect(received).toBe(64);
  });
});

describe('RttWindow', () => {
  it('reports max and nearest-rank p99 per peer over the window, with failures, peers in order', () => {
    const w = new RttWindow(60);
    // 100 samples 1..100 µs for inst-2: p99 (nearest rank) = the 99th = 99, max = 100.
    for (let i = 1; i <= 100; i++) w.add('inst-2', 1000 + i, i);
    w.add('inst-1', 1000, 250);
    w.fail('inst-1', 1500);
    expect(w.report(2000)).toEqual([
      {
        peerInstanceId: 'inst-1',
        maxMicroseconds: 250,
        p99Microseconds: 250,
        samples: 1,
        failures: 1,
        windowSeconds: 60,
      },
      {
        peerInstanceId: 'inst-2',
        maxMicroseconds: 100,
        p99Microseconds: 99,
        samples: 100,
        failures: 0,
        windowSeconds: 60,
      },
    ]);
  });

  it('forgets what left the window, and peers the controller no longer names', () => {
    const w = new RttWindow(10);
    w.add('inst-2', 0, 9000); // a congestion spike at t=0
    w.add('inst-2', 5_000, 300);
    w.fail('inst-3', 1_000);
    expect(w.report(9_000).map((r) => [r.peerInstanceId, r.maxMicroseconds, r.failures])).toEqual([
      ['inst-2', 9000, 0],
      ['inst-3', undefined, 1],
    ]);
    // 11 s later the spike and the failure are out of the 10 s window.
    expect(w.report(11_500).map((r) => [r.peerInstanceId, r.maxMicroseconds])).toEqual([['inst-2', 300]]);
    w.retain(new Set(['inst-4']));
    expect(w.report(11_000)).toEqual([]);
  });

  it('always reports what the protocol accepts: p99 ≤ max = the largest sample in the window (property)', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(fc.integer({ min: 0, max: 120_000 }), fc.double({ min: 0, max: 1e6, noNaN: true })),
          {
            minLength: 1,
            maxLength: 200,
          },
        ),
        fc.integer({ min: 0, max: 30 }),
        (samples, failures) => {
          const w = new RttWindow(60);
          const sorted = [...samples].sort((a, b) => a[0] - b[0]);
          for (const [at, us] of sorted) w.add('p', at, us);
          for (let i = 0; i < failures; i++) w.fail('p', 119_000);
          const now = 120_000;
          const inWindow = sorted.filter(([at]) => at >= now - 60_000).map(([, us]) => us);
          const [report] = w.report(now);
          if (inWindow.length === 0 && failures === 0) return report === undefined;
          expect(rttReportSchema.safeParse(report).success).toBe(true);
          expect(report?.samples).toBe(inWindow.length);
          if (inWindow.length > 0) {
            expect(report?.maxMicroseconds).toBe(Math.round(Math.max(...inWindow)));
            expect(report?.p99Microseconds).toBeLessThanOrEqual(report?.maxMicroseconds ?? -1);
          }
          return true;
        },
      ),
      { numRuns: 200, seed: 17 },
    );
  });

  it('counts a timed-out probe at its timeout: a path that drops most probes is measured slow, not fast', () => {
    const w = new RttWindow(60);
    // 6 probes in a minute: 2 answer in 90–95 µs, 4 time out after a second (1e6 µs); one more is refused outright.
    w.add('inst-2', 1_000, 90);
    for (const at of [11_000, 21_000, 31_000]) w.fail('inst-2', at, 1_000_000);
    w.add('inst-2', 41_000, 95);
    w.fail('inst-2', 51_000, 1_000_000);
    w.fail('inst-2', 52_000);
    const [report] = w.report(55_000);
    expect(report).toEqual({
      peerInstanceId: 'inst-2',
      maxMicroseconds: 1_000_000,
      p99Microseconds: 1_000_000,
      samples: 6,
      failures: 5,
      windowSeconds: 60,
    });
    expect(rttReportSchema.safeParse(report).success).toBe(true);
    // Every probe timed out: a figure all the same (the pair is measured, and slow); only refusals leave none.
    const dark = new RttWindow(60);
    dark.fail('inst-3', 1_000, 1_000_000);
    dark.fail('inst-4', 1_000);
    expect(
      dark.report(2_000).map((r) => [r.peerInstanceId, r.maxMicroseconds, r.samples, r.failures]),
    ).toEqual([
      ['inst-3', 1_000_000, 1, 1],
      ['inst-4', undefined, 0, 1],
    ]);
  });

  it('takes the nearest rank', () => {
    expect(nearestRank([5], 0.99)).toBe(5);
    expect(nearestRank([1, 2, 3, 4], 0.5)).toBe(2);
    expect(nearestRank([1, 2, 3, 4], 0.99)).toBe(4);
  });
});

describe('LatencyProber', () => {
  it('probes the peers it is given, reports them with its probe endpoint, and drops peers no longer named', async () => {
    const a = await LatencyProber.start({ port: 0, listenHost: '127.0.0.1', intervalSeconds: 3600 });
    const b = await LatencyProber.start({
      port: 0,
      listenHost: '127.0.0.1',
      advertisedHost: '127.0.0.1',
      intervalSeconds: 3600,
    });
    cleanups.push(
      () => a.stop(),
      () => b.stop(),
    );
    const gone = await closedPort();
    a.setPeers([
      { instanceId: 'inst-2', host: '127.0.0.1', port: b.port },
      { instanceId: 'inst-9', host: '127.0.0.1', port: gone },
    ]);
    await a.probeAll();
    await a.probeAll();
    const report = a.heartbeatReport();
    expect(report.probe).toEqual({ port: a.port });
    expect(b.heartbeatReport().probe).toEqual({ host: '127.0.0.1', port: b.port });
    expect(report.rtts?.map((r) => [r.peerInstanceId, r.samples, r.failures])).toEqual([
      ['inst-2', 2, 0],
      ['inst-9', 0, 2],
    ]);
    expect(report.rtts?.[0]?.maxMicroseconds).toBeGreaterThan(0);
    expect(report.rtts?.[1]?.maxMicroseconds).toBeUndefined();
    a.setPeers([{ instanceId: 'inst-2', host: '127.0.0.1', port: b.port }]);
    expect(a.heartbeatReport().rtts?.map((r) => r.peerInstanceId)).toEqual(['inst-2']);
  });

  it('counts a peer that hangs up without answering as a failed probe, and goes on probing the others', async () => {
    const good = await LatencyProber.start({ port: 0, listenHost: '127.0.0.1', intervalSeconds: 3600 });
    const a = await LatencyProber.start({
      port: 0,
      listenHost: '127.0.0.1',
      intervalSeconds: 3600,
      timeoutMs: 5000,
    });
    cleanups.push(
      () => a.stop(),
      () => good.stop(),
    );
    a.setPeers([
      { instanceId: 'inst-4', host: '127.0.0.1', port: await hangsUp() },
      { instanceId: 'inst-5', host: '127.0.0.1', port: good.port },
    ]);
    // Both rounds end well before the probe timeout: the hang-up is an answer of its own.
    await within(a.probeAll(), 3000, 'the first round of probes');
    await within(a.probeAll(), 3000, 'the second round of probes');
    const rtts = a.heartbeatReport().rtts ?? [];
    expect(rtts.map((r) => [r.peerInstanceId, r.maxMicroseconds, r.samples, r.failures])).toEqual([
      ['inst-4', undefined, 0, 2],
      ['inst-5', expect.any(Number), 2, 0],
    ]);
    expect(rtts[1]?.maxMicroseconds).toBeGreaterThan(0);
  });

  it('reports a peer that accepts but never answers as slow as the probe timeout, one refusing as unmeasured', async () => {
    const held: Socket[] = [];
    const silent = createServer((socket) => void held.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    cleanups.push(
      () =>
        new Promise((resolve) => {
          for (const socket of held) socket.destroy();
          silent.close(() => resolve());
        }),
    );
    const a = await LatencyProber.start({
      port: 0,
      listenHost: '127.0.0.1',
      intervalSeconds: 3600,
      timeoutMs: 150,
    });
    cleanups.push(() => a.stop());
    a.setPeers([
      { instanceId: 'inst-5', host: '127.0.0.1', port: (silent.address() as { port: number }).port },
      { instanceId: 'inst-9', host: '127.0.0.1', port: await closedPort() },
    ]);
    await a.probeAll();
    const rtts = a.heartbeatReport().rtts ?? [];
    expect(
      rtts.map((r) => [r.peerInstanceId, r.maxMicroseconds, r.p99Microseconds, r.samples, r.failures]),
    ).toEqual([
      ['inst-5', 150_000, 150_000, 1, 1],
      ['inst-9', undefined, undefined, 0, 1],
    ]);
    for (const r of rtts) expect(rttReportSchema.safeParse(r).success).toBe(true);
  });
});
