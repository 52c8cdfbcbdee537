import { pino } from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { ADMIN_TOKEN, fakeWithTeams } from './api-fake-service.js';

/**
 * The API logs to the controller's pino logger: each 5xx with its error, so a failure is in the controller's log;
 * ordinary requests leave nothing there (fastify logs them at info, the API's child logger is at warn).
 */

const lines: Record<string, unknown>[] = [];
let server: ApiServer;

beforeAll(async () => {
  const service = fakeWithTeams();
  service.writeReport = () => Promise.reject(new Error('the report writer broke'));
  const log = pino(
    { level: 'info', base: { component: 'controller' } },
    { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN, logger: log });
});
afterAll(async () => {
  await server.close();
});

it("a 5xx leaves an error line with its error in the controller's log; a request that succeeds leaves none", async () => {
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
  const fine = await fetch(`${server.url}/v1/cluster`, { headers: admin });
  expect(fine.status).toBe(200);
  expect(lines).toEqual([]);

  const failed = await fetch(`${server.url}/v1/reports`, { method: 'POST', headers: admin });
  expect(failed.status).toBe(500);
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatchObject({
    level: 50,
    component: 'controller',
    err: { message: 'writing the report failed: the report writer broke' },
  });
  expect(lines[0]?.['reqId']).toBeDefined();
});
