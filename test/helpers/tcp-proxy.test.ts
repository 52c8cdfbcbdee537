import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

/** The outage proxy other tests build on: each mode does what it says to a real HTTP client over real sockets. */
describe('tcp proxy (pass / refuse / hang)', () => {
  let server: Server;
  let proxy: TcpProxy;

  beforeAll(async () => {
    server = createServer((_req, res) => res.end('hello'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    proxy = await startTcpProxy(
      `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`,
    );
  });
  afterAll(async () => {
    await proxy.close();
    await new Promise((resolve) => server.close(resolve));
  });

  const get = (timeoutMs = 2_000): Promise<Response> =>
    fetch(proxy.url, { signal: AbortSignal.timeout(timeoutMs) });
  const causeCode = async (request: Promise<Response>): Promise<string | undefined> => {
    try {
      await request;
      return 'answered';
    } catch (e) {
      const cause = (e as { cause?: { code?: string } }).cause;
      return cause?.code ?? (e as Error).name;
    }
  };

  it('passes, hangs and refuses on one port, and cuts open connections when switching', async () => {
    expect(await (await get()).text()).toBe('hello');
    expect(proxy.accepted('pass')).toBeGreaterThanOrEqual(1);

    await proxy.setMode('hang');
    const hung = get(60_000);
    await proxy.waitForHanging(1);
    expect(proxy.hanging()).toBe(1);
    expect(proxy.accepted('hang')).toBe(1);
    // Switching cuts the hung connection: the client sees the connection end instead of an answer.
    await proxy.setMode('refuse');
    expect(await causeCode(hung)).not.toBe('answered');
    expect(proxy.hanging()).toBe(0);
    expect(await causeCode(get())).toBe('ECONNREFUSED');

    await proxy.setMode('pass');
    expect(await (await get()).text()).toBe('hello');
  });

  it('a client with a deadline gives up on a hung connection', async () => {
    await proxy.setMode('hang');
    try {
      expect(await causeCode(get(300))).toBe('TimeoutError');
    } finally {
      await proxy.setMode('pass');
    }
  });

  it('from refused to frozen and back: the port listens again once it hangs, and passes after', async () => {
    await proxy.setMode('refuse');
    expect(await causeCode(get())).toBe('ECONNREFUSED');
    await proxy.setMode('hang', { freeze: true });
    const before = proxy.accepted('hang');
    expect(await causeCode(get(300))).toBe('TimeoutError');
    expect(proxy.accepted('hang')).toBeGreaterThan(before);
    await proxy.setMode('pass');
    // The switch cut the client's pooled connections; a request may meet one before the pool notices (the client's
    // own race), the next one is answered.
    expect(await (await get().catch(() => get())).text()).toBe('hello');
  });
});
