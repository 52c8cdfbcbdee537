import { afterAll, beforeAll, expect, it } from 'vitest';
import { startStandbyServer, type StandbyServer } from '../../src/controller/ha/standby-server.js';

/** A standby's health probes answer HEAD as their GETs do (a load balancer may probe either), without a body. */

let server: StandbyServer;
beforeAll(async () => {
  server = await startStandbyServer({
    host: '127.0.0.1',
    port: 0,
    leadership: () => ({ role: 'standby', epoch: 3, holder: 'box-a', activeUrl: 'http://box-a:7070' }),
    retryAfterSeconds: 5,
  });
});
afterAll(() => server.close());

it('answers HEAD /healthz 200 and HEAD /readyz 503, as their GETs, with no body', async () => {
  for (const [path, status] of [
    ['/healthz', 200],
    ['/readyz', 503],
  ] as const) {
    const get = await fetch(`${server.url}${path}`);
    const head = await fetch(`${server.url}${path}`, { method: 'HEAD' });
    expect(get.status).toBe(status);
    expect(head.status).toBe(status);
    expect(await head.text()).toBe('');
  }
  // Any other request is sent to the active controller.
  const other = await fetch(`${server.url}/v1/jobs`, { method: 'HEAD' });
  expect(other.status).toBe(503);
});
