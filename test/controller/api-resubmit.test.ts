import { afterAll, beforeAll, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { ADMIN_TOKEN, fakeWithTeams, type FakeControllerService } from './api-fake-service.js';

/**
 * A job's spec as the API shows it (`GET /v1/jobs/ID`) is one a submission takes: posted again over a real socket, it
 * makes the same job, including the fields validation converts (spotMaxDelayMinutes, network.root) and a job of an
 * array (its index kept: the one job again).
 */
let server: ApiServer;
let service: FakeControllerService;

beforeAll(async () => {
  service = fakeWithTeams();
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
});
afterAll(() => server.close());

async function call(
  method: string,
  path: string,
  json?: unknown,
): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${ADMIN_TOKEN}`,
      ...(json === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(json === undefined ? {} : { body: JSON.stringify(json) }),
  });
  return { status: response.status, body: (await response.json()) as unknown };
}

it('shows a spec that, submitted again, makes the same job', async () => {
  const first = await call('POST', '/v1/jobs', {
    name: 'loadtest',
    team: 'vision',
    tasks: [
      { name: 'server', image: 'memcached:1.6', demand: { c7i: [0, 2, 4] } },
      { name: 'client', image: 'busybox', replicas: 2, demand: { c7i: [0, 1, 2] } },
    ],
    network: { sensitivity: 'memcached', root: 'server', gibPerHour: 4 },
    spot: 'allowed',
    spotMaxDelayMinutes: 20,
    expectedDurationSeconds: '1h',
    arrayProperties: { size: 2 },
  });
  expect(first.status).toBe(201);
  const ids = (first.body as { arrayJobIds: string[] }).arrayJobIds;
  const shown = (await call('GET', `/v1/jobs/${ids[1]}`)).body as { spec: Record<string, unknown> };
  expect(shown.spec).toMatchObject({
    spotMaxDelayMinutes: 20,
    network: { root: 'server' },
    arrayProperties: { size: 2, index: 1 },
  });
  const again = await call('POST', '/v1/jobs', shown.spec);
  expect(again.status, JSON.stringify(again.body)).toBe(201);
  const id = (again.body as { id: string; arrayJobIds?: unknown }).id;
  expect((again.body as { arrayJobIds?: unknown }).arrayJobIds).toBeUndefined();
  expect(service.store.getJob(id)?.spec).toEqual(service.store.getJob(ids[1] as string)?.spec);
});
