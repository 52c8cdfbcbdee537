import { request as httpRequest, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FleetwiseClient, type FetchLike } from '../../src/cli/client.js';
import { buildApiApp, ControllerMetrics } from '../../src/controller/api/server.js';
import type { RouteTable } from '../../src/controller/api/routing.js';
import { catalog, rig, type Rig } from './controller-fixtures.js';

/**
 * Query parameters over a real socket, on a real controller: a route refuses a parameter it does not take (naming it
 * and those it takes) and a single-valued one given twice, before it reads the body, so a misspelled `dryRun` submits
 * nothing; a submission with two Idempotency-Key headers is told to give one. The CLI's client sends only parameters
 * the routes take, and the OpenAPI document lists exactly those.
 */

const ADMIN = 'query-admin-token-0123456789abcdef';

let r: Rig;
let routes: RouteTable;
let baseUrl: string;
let close: () => Promise<unknown>;

beforeAll(async () => {
  r = rig();
  const built = buildApiApp(r.controller, { adminToken: ADMIN, catalog, metrics: new ControllerMetrics() });
  routes = built.routes;
  baseUrl = await built.app.listen({ host: '127.0.0.1', port: 0 });
  close = () => built.app.close();
});

afterAll(async () => {
  await close();
});

interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: { readonly error?: string; readonly details?: readonly string[] } & Record<string, unknown>;
}

/** One request on its own connection, headers sent as given (an array value goes as one header line per value). */
function send(
  method: 'GET' | 'HEAD' | 'POST',
  target: string,
  options: {
    readonly json?: unknown;
    readonly archive?: Buffer;
    readonly headers?: OutgoingHttpHeaders;
    readonly token?: string | null;
  } = {},
): Promise<Answer> {
  const body = options.json === undefined ? options.archive : Buffer.from(JSON.stringify(options.json));
  const type = options.json === undefined ? 'application/gzip' : 'application/json';
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: hostname,
      port: Number(port),
      method,
      path: target,
      agent: false,
      headers: {
        ...(options.token === null ? {} : { authorization: `Bearer ${options.token ?? ADMIN}` }),
        ...(body === undefined ? {} : { 'content-type': type, 'content-length': String(body.length) }),
        ...options.headers,
      },
    });
    req.once('error', reject);
    req.once('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (c: Buffer) => chunks.push(c));
      response.once('error', reject);
      response.once('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({
          status: response.statusCode ?? 0,
          headers: response.headers,
          body: text === '' ? {} : (JSON.parse(text) as Answer['body']),
        });
      });
    });
    req.end(body);
  });
}

const spec = (name: string): Record<string, unknown> => ({
  name,
  team: 'research',
  tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 4, 8] } }],
});

const jobsNamed = (name: string): number => r.store.listJobs().filter((j) => j.name === name).length;

describe('a query parameter the route does not take', () => {
  it('refuses a misspelled dryRun on a submission, naming both, and submits nothing', async () => {
    for (const misspelled of ['dryrun', 'dry-run']) {
      const refused = await send('POST', `/v1/jobs?${misspelled}=true`, { json: spec('misspelled') });
      expect(refused.status).toBe(400);
      expect(refused.body.error).toBe('invalid query');
      expect(refused.body.details).toEqual([
        `${misspelled}: unknown query parameter, did you mean dryRun? (known: dryRun)`,
      ]);
    }
    await r.controller.runRound('test');
    expect(jobsNamed('misspelled')).toBe(0);
    expect(r.cloud.calls.launch).toBe(0);
    // Spelled right, a dry run; without it, a submission the next round launches capacity for.
    expect((await send('POST', '/v1/jobs?dryRun=true', { json: spec('misspelled') })).status).toBe(200);
    expect(jobsNamed('misspelled')).toBe(0);
    expect((await send('POST', '/v1/jobs', { json: spec('misspelled') })).status).toBe(201);
    await r.controller.runRound('test');
    expect(jobsNamed('misspelled')).toBe(1);
    expect(r.cloud.calls.launch).toBe(1);
  });

  it('refuses one on a listing instead of answering everything, suggesting the parameter meant', async () => {
    for (const [target, given, meant, known] of [
      ['/v1/jobs?status=running', 'status', 'state', 'state, team, endedSince, limit, after, withCost'],
      ['/v1/jobs?teams=beta', 'teams', 'team', 'state, team, endedSince, limit, after, withCost'],
      ['/v1/costs?sinse=24h', 'sinse', 'since', 'since, until'],
      ['/v1/tokens?teem=research', 'teem', 'team', 'team'],
      ['/v1/jobs/job-1/why?limti=3', 'limti', 'limit', 'limit'],
    ] as const) {
      const refused = await send('GET', target);
      expect(refused.status, target).toBe(400);
      expect(refused.body.details, target).toEqual([
        `${given}: unknown query parameter, did you mean ${meant}? (known: ${known})`,
      ]);
    }
  });

  it('refuses any on a route that takes none, and so cancels nothing', async () => {
    const job = (await send('POST', '/v1/jobs', { json: spec('kept') })).body as { id: string };
    const refused = await send('POST', `/v1/jobs/${job.id}/cancel?dryRun=true`);
    expect(refused.status).toBe(400);
    expect(refused.body.details).toEqual(['dryRun: unknown query parameter (this route takes none)']);
    expect(r.store.getJob(job.id)?.state).toBe('queued');
    expect((await send('GET', '/v1/cluster?verbose=1')).status).toBe(400);
    expect((await send('GET', '/v1/cluster')).status).toBe(200);
  });

  it('names ten unknown parameters and counts the rest; a key that is no name is quoted', async () => {
    const many = Array.from({ length: 13 }, (_, i) => `p${i}=1`).join('&');
    const refused = await send('GET', `/v1/jobs?${many}&a%20b=1`);
    expect(refused.status).toBe(400);
    expect(refused.body.details).toHaveLength(11);
    expect(refused.body.details?.[0]).toMatch(/^p0: unknown query parameter \(known: state, /);
    expect(refused.body.details?.at(-1)).toBe('(root): 4 more unknown query parameters');
    const quoted = await send('GET', '/v1/jobs?a%20b=1');
    expect(quoted.body.details?.[0]).toMatch(/^\["a b"\]: unknown query parameter/);
  });

  it('is refused after the token is checked, and on HEAD too', async () => {
    expect((await send('GET', '/v1/jobs?status=running', { token: null })).status).toBe(401);
    expect((await send('HEAD', '/v1/jobs?status=running')).status).toBe(400);
    expect((await send('HEAD', '/v1/jobs?state=running')).status).toBe(200);
  });

  it('ends the connection of an upload it refuses, before reading the archive', async () => {
    const refused = await send('POST', `/v1/contexts?sha265=${'a'.repeat(64)}`, {
      archive: Buffer.alloc(64 * 1024),
    });
    expect(refused.status).toBe(400);
    expect(refused.body.details).toEqual([
      'sha265: unknown query parameter, did you mean sha256? (known: sha256)',
    ]);
    expect(refused.headers.connection).toBe('close');
  });
});

describe('a single-valued query parameter given twice', () => {
  it('is refused, naming it, where it was read as no number', async () => {
    for (const target of ['/v1/jobs?limit=2&limit=3', '/v1/jobs/job-1/why?limit=2&limit=3']) {
      const refused = await send('GET', target);
      expect(refused.status, target).toBe(400);
      expect(refused.body.details, target).toEqual(['limit: give limit once']);
    }
    const twice = await send('POST', '/v1/jobs?dryRun=true&dryRun=false', { json: spec('twice') });
    expect(twice.body.details).toEqual(['dryRun: give dryRun once']);
    expect(jobsNamed('twice')).toBe(0);
  });

  it('is taken where the parameter is a list (state)', async () => {
    const listed = await send('GET', '/v1/jobs?state=queued&state=running');
    expect(listed.status).toBe(200);
    expect((listed.body['jobs'] as unknown[]).length).toBeGreaterThan(0);
  });
});

describe('a submission with two Idempotency-Key headers', () => {
  it('is told to give one, and submits nothing', async () => {
    const refused = await send('POST', '/v1/jobs', {
      json: spec('two-keys'),
      headers: { 'idempotency-key': ['K9', 'K8'] },
    });
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual({
      error: 'invalid headers',
      details: ['idempotency-key: give one Idempotency-Key'],
    });
    // One header holding a comma is one key, which the key's rule refuses.
    const joined = await send('POST', '/v1/jobs', {
      json: spec('two-keys'),
      headers: { 'idempotency-key': 'K9, K8' },
    });
    expect(joined.status).toBe(400);
    expect(joined.body.details?.[0]).toMatch(/^idempotency-key: 1–255 characters/);
    expect(jobsNamed('two-keys')).toBe(0);
    expect(
      (await send('POST', '/v1/jobs', { json: spec('two-keys'), headers: { 'idempotency-key': 'K9' } }))
        .status,
    ).toBe(201);
  });
});

/** The served route of a request path (`/v1/jobs/job-3/why` → `/v1/jobs/:id/why`). */
function routeOf(method: string, path: string): { readonly url: string; readonly query: readonly string[] } {
  const found = routes.routes.find(
    (route) =>
      route.method === method && new RegExp(`^${route.url.replace(/:[A-Za-z]+/g, '[^/]+')}$`).test(path),
  );
  if (found === undefined) throw new Error(`no route ${method} ${path}`);
  return found;
}

describe('what clients are told of the parameters', () => {
  it("the CLI's client sends only parameters the routes take, each once", async () => {
    const sent: { method: string; url: URL; status: number }[] = [];
    const recording: FetchLike = async (input, init) => {
      const response = await fetch(input, init);
      sent.push({ method: init.method ?? 'GET', url: new URL(input), status: response.status });
      return response;
    };
    const client = new FleetwiseClient(baseUrl, ADMIN, recording);
    const job = await client.submitJob(spec('client'));
    const settle = (call: Promise<unknown>): Promise<unknown> => call.catch((e: unknown) => e);
    await settle(client.dryRunJob(spec('client')));
    await settle(
      client.listJobsPage({
        states: ['queued', 'running'],
        team: 'research',
        endedSince: '24h',
        withCost: true,
        limit: 2,
        after: job.id,
      }),
    );
    await settle(client.why(job.id, 5));
    await settle(client.logBytes(job.id, '01712345678901-job-1.0-inst-3.log', 10));
    // Times before the controller's (manual) clock: its answer is what matters, not the host's clock.
    await settle(client.costs('1699900000', '1699990000'));
    await settle(client.listTokens('research'));
    await settle(client.uploadContext(Buffer.from('not really an archive')));
    const queried = sent.filter((s) => s.url.search !== '');
    expect(new Set(queried.map((s) => routeOf(s.method, s.url.pathname).url))).toEqual(
      new Set(routes.routes.filter((route) => route.query.length > 0).map((route) => route.url)),
    );
    for (const { method, url, status } of sent) {
      const what = `${method} ${url.pathname}${url.search} answered ${status}`;
      const names = [...url.searchParams.keys()];
      expect(
        names.filter((n) => !routeOf(method, url.pathname).query.includes(n)),
        what,
      ).toEqual([]);
      expect(new Set(names).size, what).toBe(names.length);
      expect(status, what).not.toBe(400);
    }
  });

  it('the OpenAPI document lists, for every route, the query parameters it takes', async () => {
    const document = (await send('GET', '/openapi.json', { token: null })).body as {
      paths: Record<string, Record<string, { parameters?: { name: string; in: string }[] }>>;
    };
    for (const route of routes.routes) {
      const path = route.url.replace(/:([A-Za-z]+)/g, '{$1}');
      const operation = document.paths[path]?.[route.method.toLowerCase()];
      expect(operation, `${route.method} ${path}`).toBeDefined();
      const documented = (operation?.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name);
      expect([...documented].sort(), `${route.method} ${path}`).toEqual([...route.query].sort());
    }
  });
});
