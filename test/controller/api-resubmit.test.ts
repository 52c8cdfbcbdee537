import { afterAll, beforeAll, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import {
  ADMIN_TOKEN,
  fakeWithTeams,
  NLP_TOKEN,
  VISION_TOKEN,
  type FakeControllerService,
} from './api-fake-service.js';

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
  token = ADMIN_TOKEN,
): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
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

it('cancels a whole array by any of its jobs, for its own team only, and says when a job is of no array', async () => {
  const submitted = await call(
    'POST',
    '/v1/jobs',
    {
      name: 'sweep',
      team: 'vision',
      tasks: [{ image: 'busybox', demand: { c7i: [0, 1, 2] } }],
      arrayProperties: { size: 3 },
    },
    VISION_TOKEN,
  );
  expect(submitted.status, JSON.stringify(submitted.body)).toBe(201);
  const ids = (submitted.body as { arrayJobIds: string[] }).arrayJobIds;
  // Another team's array is not found, exactly like a missing job.
  expect((await call('POST', `/v1/jobs/${ids[1]}/cancel-array`, undefined, NLP_TOKEN)).status).toBe(404);
  const cancelled = await call('POST', `/v1/jobs/${ids[1]}/cancel-array`, undefined, VISION_TOKEN);
  expect(cancelled.status).toBe(200);
  expect(
    (cancelled.body as { cancelled: { id: string; state: string }[] }).cancelled.map((j) => [j.id, j.state]),
  ).toEqual(ids.map((id) => [id, 'cancelled']));
  expect((await call('POST', `/v1/jobs/${ids[0]}/cancel-array`, undefined, VISION_TOKEN)).body).toEqual({
    cancelled: [],
  });
  const lone = (
    await call(
      'POST',
      '/v1/jobs',
      { name: 'lone', team: 'vision', tasks: [{ image: 'busybox', demand: { c7i: [0, 1, 2] } }] },
      VISION_TOKEN,
    )
  ).body as { id: string };
  const refused = await call('POST', `/v1/jobs/${lone.id}/cancel-array`, undefined, VISION_TOKEN);
  expect(refused.status).toBe(409);
  expect(JSON.stringify(refused.body)).toContain(
    `${lone.id} (lone) is not a job of an array: cancel it by its id`,
  );
  expect(service.store.getJob(lone.id)?.state).toBe('queued');
});
