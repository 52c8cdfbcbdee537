import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { catalog, CPU_SMALL, jobSpec, rig, type Rig } from './controller-fixtures.js';

/**
 * Methods over a real socket: a path the API serves asked with a method it does not take answers 405 with an Allow
 * header naming those it does (a path it does not serve stays 404), and every GET route answers HEAD: its status and
 * headers, no body, under the GET's access rule.
 */
const ADMIN = 'api-methods-admin-token-0123456789ab';
let r: Rig;
let server: ApiServer;
let jobId = '';

beforeAll(async () => {
  r = rig({}, { predict: false });
  server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
  jobId = r.controller.submit(jobSpec('one', CPU_SMALL), 'research').id;
});
afterAll(() => server.close());

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

/** `token` null: no Authorization header. */
async function ask(method: string, path: string, token: string | null = ADMIN): Promise<Answer> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: token === null ? {} : { authorization: `Bearer ${token}` },
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

describe('a known path asked with another method', () => {
  it('answers 405 naming the methods it takes in Allow and in the error', async () => {
    const cases: [string, string, string][] = [
      ['DELETE', `/v1/jobs/${jobId}`, 'GET, HEAD'],
      ['PUT', '/v1/jobs', 'GET, HEAD, POST'],
      ['GET', `/v1/jobs/${jobId}/cancel`, 'POST'],
      ['HEAD', `/v1/jobs/${jobId}/cancel`, 'POST'],
      ['PATCH', '/healthz', 'GET, HEAD'],
    ];
    for (const [method, path, allow] of cases) {
      const answer = await ask(method, path);
      expect(answer.status, `${method} ${path}`).toBe(405);
      expect(answer.headers.get('allow'), `${method} ${path}`).toBe(allow);
      if (method !== 'HEAD')
        expect(JSON.parse(answer.text), `${method} ${path}`).toEqual({
          error: `no route ${method} ${path}: ${path} answers ${allow}`,
        });
    }
    // Asked without a token all the same: which methods a path takes is in the public OpenAPI document.
    expect((await ask('DELETE', `/v1/jobs/${jobId}`, null)).status).toBe(405);
  });

  it('leaves a path no route serves 404 whatever the method, an overlong id too; a malformed one stays 400', async () => {
    for (const [method, path] of [
      ['DELETE', '/v1/nope'],
      ['GET', '/v1/jobs/job-1/nope'],
      ['DELETE', `/v1/jobs/${'a'.repeat(200)}`],
    ] as const) {
      const answer = await ask(method, path);
      expect(answer.status, `${method} ${path}`).toBe(404);
      expect(answer.headers.get('allow'), `${method} ${path}`).toBeNull();
      expect(JSON.parse(answer.text)).toEqual({ error: `no route ${method} ${path}` });
    }
    const malformed = await ask('DELETE', '/v1/jobs/%zz');
    expect(malformed.status).toBe(400);
    expect(malformed.headers.get('allow')).toBeNull();
    expect(JSON.parse(malformed.text)).toMatchObject({ error: 'malformed URL' });
  });
});

describe('HEAD', () => {
  it('answers /healthz and /readyz as their GETs do, without a body', async () => {
    for (const path of ['/healthz', '/readyz']) {
      const get = await ask('GET', path, null);
      const head = await ask('HEAD', path, null);
      expect(head.status, path).toBe(200);
      expect(head.status, path).toBe(get.status);
      expect(head.text, path).toBe('');
      expect(head.headers.get('content-type'), path).toBe(get.headers.get('content-type'));
    }
  });

  it('keeps the access rule of its GET', async () => {
    const anonymous = await ask('HEAD', `/v1/jobs/${jobId}`, null);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer realm="fleetwise"');
    expect((await ask('HEAD', `/v1/jobs/${jobId}`, 'not-a-token-0123456789')).status).toBe(401);
    const admin = await ask('HEAD', `/v1/jobs/${jobId}`);
    expect(admin.status).toBe(200);
    expect(admin.text).toBe('');
    expect((await ask('HEAD', '/v1/jobs/job-999')).status).toBe(404);
    // A team's token reads its own job with GET, so with HEAD; the admin's routes stay the admin's.
    const team = 'team-token-api-methods-0123456789abcdef';
    r.store.addTeamToken('research', team, 'api-methods');
    expect((await ask('GET', `/v1/jobs/${jobId}`, team)).status).toBe(200);
    expect((await ask('HEAD', `/v1/jobs/${jobId}`, team)).status).toBe(200);
    expect((await ask('GET', '/v1/tokens', team)).status).toBe(403);
    expect((await ask('HEAD', '/v1/tokens', team)).status).toBe(403);
    expect((await ask('HEAD', '/v1/tokens')).status).toBe(200);
  });
});
