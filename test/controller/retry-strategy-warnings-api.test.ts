import { afterAll, beforeAll, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { catalog, rig, type Rig } from './controller-fixtures.js';

/**
 * A `retry` rule with attempts left at 1, through the real controller over a real socket: the dry run (what
 * `fleetwise submit --dry-run` prints) and the submission both carry the warning, and the job view keeps it.
 */
const ADMIN = 'retry-strategy-warnings-admin-token-01';
let r: Rig;
let server: ApiServer;

beforeAll(async () => {
  r = rig();
  server = await startApiServer(r.controller, {
    listen: '127.0.0.1:0',
    adminToken: ADMIN,
    catalog,
  });
});
afterAll(() => server.close());

async function call(method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${ADMIN}`,
      'content-type': 'application/json',
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return (await response.json()) as Record<string, unknown>;
}

const spec = (retryStrategy: unknown) => ({
  name: 'flaky',
  team: 'research',
  retryStrategy,
  tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 1, 2] } }],
});

it('warns a dry run and a submission whose retry rule has no attempt to retry in, naming attempts', async () => {
  const noAttempts = spec({
    evaluateOnExit: [{ onExitCode: '7', action: 'retry' }],
  });
  const warning = expect.stringMatching(
    /^retryStrategy\.evaluateOnExit\[0\] \(7: retry\) .*retryStrategy\.attempts is 1/,
  );
  expect((await call('POST', '/v1/jobs?dryRun=true', noAttempts))['warnings']).toEqual([warning]);
  const submitted = await call('POST', '/v1/jobs', noAttempts);
  expect(submitted['warnings']).toEqual([warning]);
  expect((await call('GET', `/v1/jobs/${submitted['id'] as string}`))['warnings']).toEqual([warning]);
  const enough = spec({
    attempts: 2,
    evaluateOnExit: [{ onExitCode: '7', action: 'retry' }],
  });
  expect((await call('POST', '/v1/jobs?dryRun=true', enough))['warnings']).toEqual([]);
});
