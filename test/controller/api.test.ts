import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { openApiPath } from '../../src/controller/api/openapi.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import type { ControllerService } from '../../src/controller/service.js';
import type { DecisionRecord } from '../../src/scheduler/types.js';
import {
  ADMIN_TOKEN,
  fakeWithTeams,
  FakeWorkerEndpoint,
  NLP_TOKEN,
  VISION_TOKEN,
  WORKER_BOOTSTRAP_TOKEN,
  WORKER_INSTANCE_TOKEN,
  type FakeControllerService,
} from './api-fake-service.js';
import { craftTar } from '../helpers/tar.js';

const RESNET_YAML = readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'resnet.yaml'), 'utf8');
const GPT2_YAML = readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'gpt2.yaml'), 'utf8');

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: unknown;
  readonly text: string;
}

let server: ApiServer;
let service: FakeControllerService;
let workers: FakeWorkerEndpoint;

async function call(
  method: 'GET' | 'POST',
  path: string,
  options: {
    token?: string;
    json?: unknown;
    body?: string | Uint8Array;
    contentType?: string;
    authorization?: string;
  } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (options.authorization !== undefined) headers['authorization'] = options.authorization;
  else if (options.token !== undefined) headers['authorization'] = `Bearer ${options.token}`;
  let body: string | Uint8Array | undefined = options.body;
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    headers['content-type'] = 'application/json';
  }
  if (options.contentType !== undefined) headers['content-type'] = options.contentType;
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body }),
  });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, body: parsed, text };
}

const submitYaml = (token: string, yaml: string): Promise<Answer> =>
  call('POST', '/v1/jobs', { token, body: yaml, contentType: 'application/yaml' });

function errorOf(answer: Answer): { error: string; details?: string[] } {
  return answer.body as { error: string; details?: string[] };
}

beforeAll(async () => {
  service = fakeWithTeams();
  workers = new FakeWorkerEndpoint();
  // With the worker routes, so the documentation check below covers them too.
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN, workers });
});

afterAll(async () => {
  await server.close();
});

describe('controller API: basics', () => {
  it('listens on the port it reports and answers /healthz without a token', async () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(server.port).toBeGreaterThan(0);
    const health = await call('GET', '/healthz');
    expect(health.status).toBe(200);
    expect(health.body).toEqual({
      status: 'ok',
      latestRound: null,
      role: 'active',
      epoch: null,
      holder: null,
      activeUrl: null,
      // Says it takes idempotency keys: clients resend a lost submission only to a controller that does.
      idempotencyKeys: true,
    });
    // A controller with a state of its own (no lease) is the active one, ready for a load balancer.
    const ready = await call('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({ status: 'active', role: 'active', epoch: null });
  });

  it('documents every route it serves in /openapi.json', async () => {
    const answer = await call('GET', '/openapi.json');
    expect(answer.status).toBe(200);
    const doc = JSON.parse(answer.text) as {
      openapi: string;
      paths: Record<string, Record<string, unknown>>;
    };
    expect(doc.openapi).toMatch(/^3\./);
    const served = server.routes.map((r) => `${r.method.toLowerCase()} ${openApiPath(r.url)}`).sort();
    const documented = Object.entries(doc.paths)
      .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`))
      .sort();
    expect(documented).toEqual(served);
    for (const path of [
      '/v1/jobs',
      '/v1/jobs/{id}',
      '/v1/jobs/{id}/cancel',
      '/v1/cluster',
      '/v1/jobs/{id}/why',
      '/v1/instances/{id}/drain',
      '/v1/costs',
      '/v1/reports',
      '/v1/contexts',
      '/healthz',
      '/metrics',
      '/v1/workers/register',
      '/v1/workers/heartbeat',
    ])
      expect(doc.paths).toHaveProperty([path]);
    // Every $ref resolves.
    const schemas = (JSON.parse(answer.text) as { components: { schemas: Record<string, unknown> } })
      .components.schemas;
    for (const m of answer.text.matchAll(/"#\/components\/schemas\/([A-Za-z]+)"/g))
      expect(schemas).toHaveProperty([m[1] as string]);
  });

  it('documents the worker protocol with the schemas the routes validate with', async () => {
    const doc = JSON.parse((await call('GET', '/openapi.json')).text) as {
      components: { schemas: Record<string, { required?: string[]; properties?: Record<string, unknown> }> };
    };
    const register = doc.components.schemas.WorkerRegisterRequest;
    expect(register?.required).toEqual(['instanceId', 'executor']);
    expect(register?.properties?.executor).toMatchObject({ enum: ['docker', 'process'] });
    expect(doc.components.schemas.WorkerHeartbeatResponse?.required).toEqual(['tasks']);
    // The documented routes are the served ones: register, then heartbeat with the issued token.
    const registered = await call('POST', '/v1/workers/register', {
      token: WORKER_BOOTSTRAP_TOKEN,
      json: { instanceId: 'local-abc', executor: 'process' },
    });
    expect(registered.status).toBe(200);
    expect(registered.body).toMatchObject({ instanceId: 'inst-1', workerToken: WORKER_INSTANCE_TOKEN });
    const beat = await call('POST', '/v1/workers/heartbeat', {
      token: WORKER_INSTANCE_TOKEN,
      json: { tasks: [{ taskId: 'job-1.0', state: 'running' }] },
    });
    expect(beat.status).toBe(200);
    expect(beat.body).toEqual({ tasks: [] });
    expect(workers.heartbeats).toHaveLength(1);
    const bad = await call('POST', '/v1/workers/register', {
      token: WORKER_BOOTSTRAP_TOKEN,
      json: { instanceId: 'local-abc', executor: 'kubernetes' },
    });
    expect(bad.status).toBe(400);
    expect(bad.text).toMatch(/executor/);
    expect(
      (await call('POST', '/v1/workers/heartbeat', { token: ADMIN_TOKEN, json: { tasks: [] } })).status,
    ).toBe(401);
  });

  it('answers unknown routes with a JSON 404', async () => {
    const answer = await call('GET', '/v1/nope?x=1', { token: ADMIN_TOKEN });
    expect(answer.status).toBe(404);
    expect(errorOf(answer).error).toBe('no route GET /v1/nope');
  });
});

describe('controller API: authentication and team isolation', () => {
  let visionJob = '';
  let nlpJob = '';

  beforeAll(async () => {
    const a = await submitYaml(VISION_TOKEN, RESNET_YAML);
    const b = await submitYaml(NLP_TOKEN, GPT2_YAML);
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    visionJob = (a.body as { id: string }).id;
    nlpJob = (b.body as { id: string }).id;
  });

  it('refuses requests without a token, with a malformed header or with an unknown token (401)', async () => {
    for (const options of [{}, { authorization: 'Basic abc' }, { token: 'not-a-real-token-at-all' }]) {
      const answer = await call('GET', '/v1/jobs', options);
      expect(answer.status).toBe(401);
      expect(errorOf(answer).error).toMatch(/token|Authorization/);
    }
    const revoked = 'revoked-token-0123456789abcdef';
    service.store.addTeamToken('vision', revoked);
    expect((await call('GET', '/v1/jobs', { token: revoked })).status).toBe(200);
    service.store.revokeTeamToken(revoked);
    expect((await call('GET', '/v1/jobs', { token: revoked })).status).toBe(401);
  });

  it('submits: 201 with the job, a Location header, and an early round requested', async () => {
    const answer = await submitYaml(
      VISION_TOKEN,
      RESNET_YAML.replace('name: resnet18-cifar10', 'name: resnet-two'),
    );
    expect(answer.status).toBe(201);
    const job = answer.body as { id: string; name: string; team: string; state: string; taskCount: number };
    expect(job).toMatchObject({ name: 'resnet-two', team: 'vision', state: 'queued', taskCount: 1 });
    expect(answer.headers.get('location')).toBe(`/v1/jobs/${job.id}`);
    expect(service.roundRequests).toContain(`submitted ${job.id}`);
  });

  it('a team lists only its own jobs; the admin lists all', async () => {
    const ids = async (token: string, query = ''): Promise<string[]> =>
      (
        (await call('GET', `/v1/jobs${query}`, { token })).body as { jobs: { id: string; team: string }[] }
      ).jobs.map((j) => j.id);
    expect(await ids(VISION_TOKEN)).toContain(visionJob);
    expect(await ids(VISION_TOKEN)).not.toContain(nlpJob);
    expect(await ids(NLP_TOKEN)).toEqual([nlpJob]);
    expect(await ids(ADMIN_TOKEN)).toEqual(expect.arrayContaining([visionJob, nlpJob]));
    expect(await ids(ADMIN_TOKEN, '?team=nlp')).toEqual([nlpJob]);
    expect(await ids(VISION_TOKEN, '?team=vision')).toContain(visionJob);
    // Asking for another team's jobs is refused, not answered "none": nlp does have jobs.
    const foreign = await call('GET', '/v1/jobs?team=nlp&state=queued', { token: VISION_TOKEN });
    expect(foreign.status).toBe(403);
    expect(errorOf(foreign).error).toBe(
      'this token is for team vision: it sees that team\'s jobs only, not those of team "nlp"',
    );
  });

  it("another team's job is 404, indistinguishable from a job that does not exist", async () => {
    const foreign = await call('GET', `/v1/jobs/${visionJob}`, { token: NLP_TOKEN });
    const missing = await call('GET', '/v1/jobs/job-999', { token: NLP_TOKEN });
    expect(foreign.status).toBe(404);
    expect(missing.status).toBe(404);
    expect(errorOf(foreign).error).toBe(`job ${visionJob} not found`);
    expect(errorOf(missing).error).toBe('job job-999 not found');
    for (const path of [`/v1/jobs/${visionJob}/why`, `/v1/jobs/${visionJob}/logs`])
      expect((await call('GET', path, { token: NLP_TOKEN })).status).toBe(404);
  });

  it("a team cannot cancel another team's job; its owner and the admin can", async () => {
    const refused = await call('POST', `/v1/jobs/${visionJob}/cancel`, { token: NLP_TOKEN });
    expect(refused.status).toBe(404);
    expect(service.store.getJob(visionJob)?.state).toBe('queued');
    // A route that takes no body refuses fields a caller may take for options, rather than acting without them.
    const withOptions = await call('POST', `/v1/jobs/${visionJob}/cancel`, {
      token: VISION_TOKEN,
      json: { array: true, reason: 'x' },
    });
    expect(withOptions.status).toBe(400);
    expect(errorOf(withOptions).details).toEqual([
      'array: unknown field: this request takes no body',
      'reason: unknown field: this request takes no body',
    ]);
    const asYaml = await call('POST', `/v1/jobs/${visionJob}/cancel`, {
      token: VISION_TOKEN,
      body: 'array: true\n',
      contentType: 'application/yaml',
    });
    expect(asYaml.status).toBe(415);
    expect(service.store.getJob(visionJob)?.state).toBe('queued');
    // No body under a JSON type is no body: many clients name JSON on every POST.
    const typedEmpty = await call('POST', `/v1/instances/inst-404/drain`, {
      token: ADMIN_TOKEN,
      contentType: 'application/json',
    });
    expect(typedEmpty.status).toBe(404);
    const drain = await call('POST', '/v1/instances/inst-404/drain', {
      token: ADMIN_TOKEN,
      json: { force: true },
    });
    expect(drain.status).toBe(400);
    expect(errorOf(drain).details).toEqual(['force: unknown field: this request takes no body']);

    const mine = await call('POST', `/v1/jobs/${visionJob}/cancel`, { token: VISION_TOKEN, json: {} });
    expect(mine.status).toBe(200);
    expect(mine.body).toMatchObject({ id: visionJob, state: 'cancelled' });
    expect(service.store.getJob(visionJob)?.state).toBe('cancelled');

    const byAdmin = await call('POST', `/v1/jobs/${nlpJob}/cancel`, { token: ADMIN_TOKEN });
    expect(byAdmin.status).toBe(200);
    expect(service.store.getJob(nlpJob)?.state).toBe('cancelled');
  });

  it('the job document has state, progress, migrations, tasks, instances and a null ETA', async () => {
    const answer = await submitYaml(
      ADMIN_TOKEN,
      GPT2_YAML.replace('name: gpt2-finetune-wikitext', 'name: gpt2-doc'),
    );
    const id = (answer.body as { id: string }).id;
    const instance = service.store.createInstance({ typeName: 'p3.8xlarge' });
    service.store.setInstanceState(instance.id, 'launching', { cloudId: 'i-0abc' });
    service.store.setInstanceState(instance.id, 'running');
    service.store.setJobState(id, 'starting');
    service.store.setTaskState(`${id}.0`, 'starting', instance.id);
    service.store.recordJobProgress(id, 100);
    const doc = (await call('GET', `/v1/jobs/${id}`, { token: NLP_TOKEN })).body as Record<string, unknown>;
    expect(doc).toMatchObject({
      id,
      team: 'nlp',
      state: 'starting',
      migrations: 0,
      progress: { completed: 100, total: 10824 },
      etaSeconds: null,
      instances: [
        {
          id: instance.id,
          cloudId: 'i-0abc',
          typeName: 'p3.8xlarge',
          state: 'running',
          taskIds: [`${id}.0`],
        },
      ],
      tasks: [{ id: `${id}.0`, state: 'starting', instanceId: instance.id }],
    });
  });

  it('a team token submits for its own team: team filled in when absent, 403 when another is named', async () => {
    const noTeam = { name: 'cpu-job', tasks: [{ image: 'busybox', command: ['true'], demand: [0, 1, 1] }] };
    const filled = await call('POST', '/v1/jobs', { token: VISION_TOKEN, json: noTeam });
    expect(filled.status).toBe(201);
    expect(filled.body).toMatchObject({ team: 'vision', name: 'cpu-job' });

    const foreign = await call('POST', '/v1/jobs', { token: VISION_TOKEN, json: { ...noTeam, team: 'nlp' } });
    expect(foreign.status).toBe(403);
    expect(errorOf(foreign).error).toContain('team vision');

    const adminNoTeam = await call('POST', '/v1/jobs', { token: ADMIN_TOKEN, json: noTeam });
    expect(adminNoTeam.status).toBe(400);
    expect(errorOf(adminNoTeam).details).toEqual([expect.stringMatching(/^team: required/)]);
  });

  it("a team token's YAML spec without team: keeps the line numbers of its problems", async () => {
    const yaml = [
      'name: cpu-job',
      'tasks:',
      '  - image: busybox',
      '    command: [sh]',
      '    demand: [0, 1, x]',
      '',
    ];
    const answer = await submitYaml(VISION_TOKEN, yaml.join('\n'));
    expect(answer.status).toBe(400);
    expect(errorOf(answer).details).toEqual([expect.stringMatching(/^tasks\.0\.demand.*\(line 5\)$/)]);
  });

  it('a team sees every instance but only its own tasks in the cluster view', async () => {
    const admin = (await call('GET', '/v1/cluster', { token: ADMIN_TOKEN })).body as {
      scope: string;
      costPerHour: number;
      instances: { taskIds: string[] }[];
      tasks: { jobId: string }[];
    };
    const vision = (await call('GET', '/v1/cluster', { token: VISION_TOKEN })).body as typeof admin;
    expect(admin.scope).toBe('all');
    expect(vision.scope).toBe('team');
    expect(admin.costPerHour).toBeCloseTo(12.24, 6); // the p3.8xlarge above (bundled catalog)
    expect(vision.costPerHour).toBe(admin.costPerHour);
    expect(vision.instances).toHaveLength(admin.instances.length);
    expect(admin.instances.flatMap((i) => i.taskIds)).toHaveLength(1);
    expect(vision.instances.flatMap((i) => i.taskIds)).toEqual([]);
    const visionJobs = new Set(service.store.listJobs({ team: 'vision' }).map((j) => j.id));
    expect(vision.tasks.length).toBeGreaterThan(0);
    expect(vision.tasks.every((t) => visionJobs.has(t.jobId))).toBe(true);
  });

  it('the cluster view and a drain answer carry no launch token or worker token hash, for any caller', async () => {
    const instance = service.store.createInstance({ typeName: 'c7i.large' });
    service.store.setInstanceState(instance.id, 'launching', { cloudId: 'i-0secret' });
    service.store.setWorkerToken(instance.id, 'worker-secret-token-0123456789abcdef');
    const stored = service.store.getInstance(instance.id);
    expect(stored?.workerTokenHash).toBeDefined();
    for (const token of [VISION_TOKEN, ADMIN_TOKEN]) {
      const answer = await call('GET', '/v1/cluster', { token });
      expect(answer.status).toBe(200);
      const mine = (answer.body as { instances: Record<string, unknown>[] }).instances.find(
        (i) => i['id'] === instance.id,
      );
      expect(mine).toMatchObject({ id: instance.id, cloudId: 'i-0secret' });
      expect(mine).not.toHaveProperty('launchToken');
      expect(mine).not.toHaveProperty('workerTokenHash');
      expect(answer.text).not.toContain(stored?.workerTokenHash ?? '?');
      expect(answer.text).not.toContain(instance.launchToken);
    }
    const drained = await call('POST', `/v1/instances/${instance.id}/drain`, { token: ADMIN_TOKEN });
    expect(drained.status).toBe(200);
    expect(drained.body).toMatchObject({ id: instance.id, state: 'draining' });
    expect(drained.body).not.toHaveProperty('launchToken');
    expect(drained.body).not.toHaveProperty('workerTokenHash');
    service.store.setInstanceState(instance.id, 'terminating');
    service.store.setInstanceState(instance.id, 'terminated');
  });

  it("decision records name only the caller team's jobs", async () => {
    const a = (await submitYaml(VISION_TOKEN, RESNET_YAML.replace('resnet18-cifar10', 'why-a'))).body as {
      id: string;
    };
    const b = (await submitYaml(NLP_TOKEN, GPT2_YAML.replace('gpt2-finetune-wikitext', 'why-b'))).body as {
      id: string;
    };
    const decision: DecisionRecord = {
      scheduler: 'eva',
      nowSeconds: 0,
      candidates: [
        {
          name: 'full',
          costPerHour: 3,
          instances: 1,
          newInstances: 1,
          savingPerSecond: 0,
          migrationCost: 0,
          movedJobs: [a.id, b.id],
        },
      ],
      chosen: 'full',
      reason: 'full saves more than it costs',
      waiting: [
        { jobId: a.id, cap: 'maxCostPerHour' },
        { jobId: b.id, cap: 'maxInstances' },
      ],
      pinned: [{ jobId: b.id, why: 'no-move window' }],
    };
    service.store.recordRound({ configuration: { instances: [] }, decision });
    const why = await call('GET', `/v1/jobs/${a.id}/why?limit=5`, { token: VISION_TOKEN });
    expect(why.status).toBe(200);
    expect(why.text).not.toContain(b.id);
    const body = why.body as { jobId: string; records: { summary: string; decision: DecisionRecord }[] };
    expect(body.jobId).toBe(a.id);
    expect(body.records[0]?.summary).toBe('waiting: cap maxCostPerHour');
    expect(body.records[0]?.decision.waiting).toEqual([{ jobId: a.id, cap: 'maxCostPerHour' }]);
    expect(body.records[0]?.decision.candidates[0]?.movedJobs).toEqual([a.id]);
    const asAdmin = (await call('GET', `/v1/jobs/${a.id}/why`, { token: ADMIN_TOKEN })).body as typeof body;
    expect(asAdmin.records[0]?.decision.waiting).toHaveLength(2);
    expect((await call('GET', `/v1/jobs/${a.id}/why?limit=0`, { token: ADMIN_TOKEN })).status).toBe(400);
  });

  it('drain is admin-only, accepts our id or the cloud id, and 404s unknown instances', async () => {
    const instance = service.store.createInstance({ typeName: 'c7i.large' });
    service.store.setInstanceState(instance.id, 'launching', { cloudId: 'i-0drain' });
    service.store.setInstanceState(instance.id, 'running');
    const team = await call('POST', `/v1/instances/${instance.id}/drain`, { token: VISION_TOKEN });
    expect(team.status).toBe(403);
    expect(errorOf(team).error).toContain('admin token');
    expect(service.store.getInstance(instance.id)?.state).toBe('running');
    const byCloudId = await call('POST', '/v1/instances/i-0drain/drain', { token: ADMIN_TOKEN });
    expect(byCloudId.status).toBe(200);
    expect(byCloudId.body).toMatchObject({ id: instance.id, state: 'draining' });
    expect((await call('POST', '/v1/instances/inst-999/drain', { token: ADMIN_TOKEN })).status).toBe(404);
  });

  it('costs: the admin sees all lines, a team its own jobs with cluster-wide lines withheld', async () => {
    const [first] = service.store.listJobs({ team: 'vision' });
    const [other] = service.store.listJobs({ team: 'nlp' });
    service.jobCosts.set(first?.id ?? '', 1.25);
    service.jobCosts.set(other?.id ?? '', 2);
    const admin = (await call('GET', '/v1/costs', { token: ADMIN_TOKEN })).body as Record<string, unknown>;
    expect(admin).toMatchObject({ scope: 'all', totalCost: 3.75, idleCost: 0.5 });
    const team = (await call('GET', '/v1/costs?since=24h', { token: VISION_TOKEN })).body as {
      scope: string;
      totalCost: number;
      byJob: { team: string }[];
      byTeam: { id: string }[];
      byInstance: unknown[];
      idleCost: null;
      sinceSeconds: number;
    };
    expect(team).toMatchObject({
      scope: 'team',
      totalCost: 1.25,
      byInstance: [],
      idleCost: null,
      byTeam: [{ id: 'vision', cost: 1.25 }],
    });
    expect(team.byJob.every((j) => j.team === 'vision')).toBe(true);
    expect(Math.abs(team.sinceSeconds - (Date.now() / 1000 - 86400))).toBeLessThan(60);
    const bad = await call('GET', '/v1/costs?since=yesterday', { token: ADMIN_TOKEN });
    expect(bad.status).toBe(400);
    expect(errorOf(bad).details?.[0]).toContain('since:');
    // A period that begins after now has nothing billed in it: a 400, not an answer whose start follows its end.
    const future = new Date(Date.now() + 7 * 86_400_000).toISOString();
    const ahead = await call('GET', `/v1/costs?since=${future}`, { token: ADMIN_TOKEN });
    expect(ahead.status).toBe(400);
    expect(errorOf(ahead).details?.[0]).toMatch(/^since: .* is after now/);
  });

  it('costs over a period: until is passed on after since, in the same forms, and must come after it', async () => {
    const oct = Date.UTC(2026, 9, 1) / 1000;
    const nov = Date.UTC(2026, 10, 1) / 1000;
    const month = await call('GET', '/v1/costs?since=2026-10-01T00:00:00Z&until=2026-11-01T00:00:00Z', {
      token: VISION_TOKEN,
    });
    expect(month.status).toBe(200);
    expect(service.costPeriods.at(-1)).toEqual([oct, nov]);
    expect(month.body).toMatchObject({ scope: 'team', sinceSeconds: oct, generatedAtSeconds: nov });
    expect((await call('GET', `/v1/costs?until=${nov}`, { token: ADMIN_TOKEN })).status).toBe(200);
    expect(service.costPeriods.at(-1)).toEqual([0, nov]);
    const backwards = await call('GET', `/v1/costs?since=${nov}&until=${oct}`, { token: ADMIN_TOKEN });
    expect(backwards.status).toBe(400);
    expect(errorOf(backwards).details?.[0]).toBe(`until: must come after since (${nov} s), got ${oct} s`);
    const bad = await call('GET', '/v1/costs?until=next+week', { token: ADMIN_TOKEN });
    expect(bad.status).toBe(400);
    expect(errorOf(bad).details?.[0]).toContain('until: expected epoch seconds');
  });

  it('jobs: a window of the work still to end and what ended since, with each job cost when asked', async () => {
    const ended = service.submit(
      { ...service.store.listJobs({ team: 'vision' })[0]!.spec, name: 'ended' },
      'vision',
    );
    service.store.setJobState(ended.id, 'cancelled');
    service.jobCosts.set(ended.id, 0.75);
    type Listing = { jobs: { id: string; state: string; cost?: number | null }[]; endedEarlier?: number };
    const list = async (query: string, token = ADMIN_TOKEN): Promise<Listing> => {
      const answer = await call('GET', `/v1/jobs${query}`, { token });
      expect(answer.status).toBe(200);
      return answer.body as Listing;
    };
    const all = await list('');
    expect(all.endedEarlier).toBeUndefined();
    expect(all.jobs.every((j) => j.cost === undefined)).toBe(true);
    // Everything ended up to now is in a day's window; from a minute ahead, only the work still to end.
    const day = await list('?endedSince=24h&withCost=true');
    expect(day.jobs.map((j) => j.id)).toEqual(all.jobs.map((j) => j.id));
    expect(day.endedEarlier).toBe(0);
    expect(day.jobs.find((j) => j.id === ended.id)?.cost).toBe(0.75);
    expect(day.jobs.every((j) => typeof j.cost === 'number')).toBe(true);
    const ahead = await list(`?endedSince=${Math.ceil(Date.now() / 1000) + 60}`);
    const toEnd = service.store.listJobs().filter((j) => j.finishedAtSeconds === undefined);
    expect(ahead.jobs.map((j) => j.id)).toEqual(toEnd.map((j) => j.id));
    expect(ahead.endedEarlier).toBe(all.jobs.length - toEnd.length);
    expect(ahead.endedEarlier).toBeGreaterThan(0);
    // A team sees its own jobs only, and counts only its own ended ones.
    const team = await list(`?endedSince=${Math.ceil(Date.now() / 1000) + 60}&withCost=true`, VISION_TOKEN);
    const visionToEnd = toEnd.filter((j) => j.team === 'vision');
    expect(team.jobs.map((j) => j.id)).toEqual(visionToEnd.map((j) => j.id));
    expect(team.endedEarlier).toBe(service.store.countJobs({ team: 'vision' }) - visionToEnd.length);
    // A controller whose cost accounting fails still lists its jobs, each cost null.
    const costs = service.costs.bind(service);
    service.costs = () => {
      throw new Error('accounting down');
    };
    try {
      const unpriced = await list('?withCost=true');
      expect(unpriced.jobs.length).toBe(all.jobs.length);
      expect(unpriced.jobs.every((j) => j.cost === null)).toBe(true);
    } finally {
      service.costs = costs;
    }
    const bad = await call('GET', '/v1/jobs?endedSince=last-week', { token: ADMIN_TOKEN });
    expect(bad.status).toBe(400);
    expect(errorOf(bad).details?.[0]).toMatch(/^endedSince: expected epoch seconds/);
    const badCost = await call('GET', '/v1/jobs?withCost=yes', { token: ADMIN_TOKEN });
    expect(badCost.status).toBe(400);
    expect(errorOf(badCost).details?.[0]).toMatch(/^withCost: expected true or false/);
  });

  it('jobs: a page at a time with limit, after the next of the page before', async () => {
    type Page = { jobs: { id: string }[]; next?: string; endedEarlier?: number };
    const page = async (query: string): Promise<Page> => {
      const answer = await call('GET', `/v1/jobs${query}`, { token: ADMIN_TOKEN });
      expect(answer.status).toBe(200);
      return answer.body as Page;
    };
    const all = (await page('')).jobs.map((j) => j.id);
    expect(all.length).toBeGreaterThan(3);
    const walked: string[] = [];
    let after: string | undefined;
    let pages = 0;
    do {
      const p = await page(`?limit=2${after === undefined ? '' : `&after=${after}`}`);
      expect(p.jobs.length).toBeLessThanOrEqual(2);
      walked.push(...p.jobs.map((j) => j.id));
      // next names the last job of a full page that has more after it.
      if (p.next !== undefined) expect(p.next).toBe(p.jobs.at(-1)?.id);
      after = p.next;
      pages += 1;
    } while (after !== undefined);
    expect(walked).toEqual(all);
    expect(pages).toBe(Math.ceil(all.length / 2));
    // A page that ends exactly at the last job says no next.
    expect((await page(`?limit=${all.length}`)).next).toBeUndefined();
    // The window's count of what it left out is the whole filter's, whichever page.
    const ahead = Math.ceil(Date.now() / 1000) + 60;
    const windowed = await page(`?endedSince=${ahead}&limit=1`);
    expect(windowed.endedEarlier).toBe(
      service.store.countJobs() - service.store.countJobs({ endedSince: ahead }),
    );
    for (const [query, field, message] of [
      ['limit=0', 'limit', 'at least 1'],
      ['limit=1001', 'limit', 'at most 1000'],
      ['limit=2.5', 'limit', 'a whole number'],
      ['after=7', 'after', 'expected a job id like job-12'],
    ] as const) {
      const bad = await call('GET', `/v1/jobs?${query}`, { token: ADMIN_TOKEN });
      expect(bad.status).toBe(400);
      expect(errorOf(bad).details?.[0]).toMatch(new RegExp(`^${field}: ${message}`));
    }
  });

  it('reports: admin writes one now; a team may not', async () => {
    expect((await call('POST', '/v1/reports', { token: VISION_TOKEN })).status).toBe(403);
    const written = await call('POST', '/v1/reports', { token: ADMIN_TOKEN });
    expect(written.status).toBe(201);
    expect(written.body).toEqual({ location: 'memory://reports/1.json' });
  });

  it('logs answer 501 until the worker exists', async () => {
    const [job] = service.store.listJobs({ team: 'vision' });
    const answer = await call('GET', `/v1/jobs/${job?.id ?? ''}/logs`, { token: VISION_TOKEN });
    expect(answer.status).toBe(501);
    expect(errorOf(answer).error).toMatch(/^no worker yet/);
  });
});

describe('controller API: malformed and oversized requests', () => {
  it('a spec nested deeper than 64 levels is a 400 naming the field, in JSON and YAML, before validation', async () => {
    const nested = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);
    const json = (depth: number): string =>
      JSON.stringify({
        name: 'deep',
        team: 'vision',
        tasks: [{ image: 'x', demand: { any: [0, 1, 1] } }],
      }).replace(/}$/, `,"queue":{"stages":${nested(depth)}}}`);
    const yaml = (depth: number): string => `${RESNET_YAML}\nqueue:\n  stages: ${nested(depth)}\n`;
    // YAML as deep as its node limit lets it be (each bracket a node), JSON as its byte limit does.
    for (const [jsonDepth, yamlDepth] of [
      [500_000, 4_900],
      [70, 70],
    ] as const) {
      for (const answer of [
        await call('POST', '/v1/jobs', {
          token: VISION_TOKEN,
          body: json(jsonDepth),
          contentType: 'application/json',
        }),
        await submitYaml(VISION_TOKEN, yaml(yamlDepth)),
      ]) {
        expect(answer.status, answer.text.slice(0, 300)).toBe(400);
        const { error, details } = errorOf(answer);
        expect(error).toMatch(/^invalid (job spec|request body)$/);
        expect(details).toEqual([expect.stringMatching(/^queue\.stages: nested deeper than 64 levels/)]);
      }
    }
    // Block nesting too: compact sequences (`- - - …`, two characters a level) and one key per indented line.
    const compact = `${RESNET_YAML}\nqueue:\n  stages:\n    ${'- '.repeat(2_000)}x\n`;
    const indented = `${RESNET_YAML}\nqueue:\n${Array.from({ length: 70 }, (_, i) => `${' '.repeat(i + 2)}k${i}:`).join('\n')} 1\n`;
    for (const [body, field] of [
      [compact, /^queue\.stages: nested deeper than 64 levels \(line \d+\)$/],
      [indented, /^queue\.k0\.k1\.k2\.k3\.k4\.k5\.k6…: nested deeper than 64 levels \(line \d+\)$/],
    ] as const) {
      const answer = await submitYaml(VISION_TOKEN, body);
      expect(answer.status, answer.text.slice(0, 300)).toBe(400);
      expect(errorOf(answer).details).toEqual([expect.stringMatching(field)]);
    }
    // A shallow nesting is left to the spec's own validation.
    const shallow = await call('POST', '/v1/jobs?dryRun=true', {
      token: VISION_TOKEN,
      body: json(3),
      contentType: 'application/json',
    });
    expect(shallow.status, shallow.text).toBe(200);
  });

  it('a spec with bad fields is 400 with each field path (and its line, for YAML)', async () => {
    const bad = RESNET_YAML.replace('any: [1, 4, 24]', 'any: [1, 4]').replace(
      'shmSizeGiB: 4',
      'shmSizeGib: 4',
    );
    const answer = await submitYaml(VISION_TOKEN, bad);
    expect(answer.status).toBe(400);
    const { error, details } = errorOf(answer);
    expect(error).toBe('invalid job spec');
    expect(details).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^tasks\.0\.demand\.any: expected \[gpus, vcpus, memoryGiB\].*\(line \d+\)$/),
        expect.stringMatching(/^tasks\.0\.shmSizeGib: unknown field, did you mean shmSizeGiB\?/),
      ]),
    );
  });

  it('a JSON spec names field paths; a demand no instance can host is refused', async () => {
    const answer = await call('POST', '/v1/jobs', {
      token: ADMIN_TOKEN,
      json: { name: 'Bad Name', team: 'vision', tasks: [{ image: 'x', demand: { p3: [16, 4, 24] } }] },
    });
    expect(answer.status).toBe(400);
    const details = errorOf(answer).details ?? [];
    expect(details.some((d) => d.startsWith('name: '))).toBe(true);
    expect(details.every((d) => !/\(line/.test(d))).toBe(true);
    const unhostable = await call('POST', '/v1/jobs', {
      token: ADMIN_TOKEN,
      json: { name: 'big', team: 'vision', tasks: [{ image: 'x', demand: { p3: [16, 4, 24] } }] },
    });
    expect(errorOf(unhostable).details).toEqual([
      expect.stringMatching(/^tasks\.0\.demand: no instance type/),
    ]);
  });

  it('a key that is not a plain name is quoted in the field path, so it cannot pass for another field or line', async () => {
    const answer = await call('POST', '/v1/jobs', {
      token: ADMIN_TOKEN,
      json: {
        name: 'odd-keys',
        team: 'vision',
        tasks: [
          {
            image: 'x',
            env: { 'A: b\ntasks.0.image: forged': '1', ['K-'.repeat(50)]: '2' },
            demand: { 'p3: x': [0, 1, 1] },
          },
        ],
      },
    });
    expect(answer.status).toBe(400);
    expect(errorOf(answer).details).toEqual([
      'tasks.0.env["A: b\\ntasks.0.image: forged"]: environment names are letters, digits and _, not starting with a digit',
      `tasks.0.env["${'K-'.repeat(32)}…"]: environment names are letters, digits and _, not starting with a digit`,
      'tasks.0.demand["p3: x"]: not a family name (e.g. p3, c7i, r7i or any)',
    ]);
  });

  it('malformed JSON and YAML are 400 naming the problem', async () => {
    const json = await call('POST', '/v1/jobs', {
      token: ADMIN_TOKEN,
      body: '{"name": "x",',
      contentType: 'application/json',
    });
    expect(json.status).toBe(400);
    expect(errorOf(json).error).toMatch(/^malformed JSON body: /);
    const yaml = await submitYaml(ADMIN_TOKEN, 'name: x\n  team: [unclosed\n');
    expect(yaml.status).toBe(400);
    expect(errorOf(yaml).details?.[0]).toMatch(/^not valid YAML\/JSON: /);
    const empty = await call('POST', '/v1/jobs', {
      token: ADMIN_TOKEN,
      body: '',
      contentType: 'application/json',
    });
    expect(empty.status).toBe(400);
    const list = await call('POST', '/v1/jobs', { token: ADMIN_TOKEN, json: [1, 2] });
    expect(errorOf(list).details?.[0]).toMatch(/^\(root\): expected a job spec/);
  });

  it('a path that is not valid percent-encoding, or an overlong path parameter, is an API error, not fastify’s', async () => {
    for (const path of ['/v1/tokens/%ff%fe%fd/revoke', '/v1/jobs/%C0%AF']) {
      const answer = await call('GET', path, { token: ADMIN_TOKEN });
      expect(answer.status, answer.text).toBe(400);
      expect(answer.body).toEqual({
        error: 'malformed URL',
        details: [expect.stringMatching(/^path: not valid percent-encoding/)],
      });
    }
    const long = await call('GET', `/v1/jobs/${'j'.repeat(129)}`, { token: ADMIN_TOKEN });
    expect(long.status, long.text).toBe(414);
    expect(long.body).toEqual({ error: expect.stringMatching(/longer than 128 characters/) });
    // The longest id a route takes still reaches the route (and is not found).
    expect((await call('GET', `/v1/jobs/${'j'.repeat(128)}`, { token: ADMIN_TOKEN })).status).toBe(404);
  });

  it('a body over 1 MiB is 413 with a clear message; other content types 415', async () => {
    const huge = JSON.stringify({
      name: 'x',
      team: 'vision',
      description: 'y'.repeat(1024 * 1024 + 100),
      tasks: [],
    });
    const answer = await call('POST', '/v1/jobs', {
      token: ADMIN_TOKEN,
      body: huge,
      contentType: 'application/json',
    });
    expect(answer.status).toBe(413);
    expect(errorOf(answer).error).toBe('request body too large: this route accepts at most 1 MiB');
    const form = await call('POST', '/v1/jobs', {
      token: ADMIN_TOKEN,
      body: 'a=b',
      contentType: 'application/x-www-form-urlencoded',
    });
    expect(form.status).toBe(415);
    expect(errorOf(form).error).toContain('unsupported content type');
  });

  it('an unauthenticated oversized body is refused as 401 before it is read', async () => {
    const huge = 'x'.repeat(2 * 1024 * 1024);
    const answer = await call('POST', '/v1/jobs', { body: huge, contentType: 'application/yaml' });
    expect(answer.status).toBe(401);
  });

  it('build contexts: a tar is stored and its reference returned; garbage is 400', async () => {
    const tar = await craftTar([{ name: 'Dockerfile', content: 'FROM busybox\n' }]);
    const sha256 = createHash('sha256').update(tar).digest('hex');
    const stored = await call('POST', `/v1/contexts?sha256=${sha256}`, {
      token: VISION_TOKEN,
      body: new Uint8Array(tar),
      contentType: 'application/x-tar',
    });
    expect(stored.status, stored.text).toBe(201);
    const { ref, sizeBytes } = stored.body as { ref: string; sha256: string; sizeBytes: number };
    expect(sizeBytes).toBe(tar.length);
    expect(ref).toBe(`contexts/${sha256}.tar.gz`);
    expect(service.contexts.get(ref)?.info).toMatchObject({ team: 'vision', encoding: 'tar', sha256 });
    const garbage = await call('POST', `/v1/contexts?sha256=${'0'.repeat(64)}`, {
      token: VISION_TOKEN,
      body: 'not a tar',
      contentType: 'application/x-tar',
    });
    expect(garbage.status).toBe(400);
    expect(errorOf(garbage).error).toMatch(/^not a tar archive: /);
  });
});

describe('controller API: /metrics', () => {
  it('exposes the gauges computed from the store and the controller counters', async () => {
    server.metrics.observeRound(0.25);
    server.metrics.countMigrations(2);
    server.metrics.countCapHit('maxCostPerHour');
    const answer = await call('GET', '/metrics');
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toContain('text/plain');
    const text = answer.text;
    for (const name of [
      'fleetwise_cost_per_hour_dollars',
      'fleetwise_instances',
      'fleetwise_jobs',
      'fleetwise_rounds_total',
      'fleetwise_round_duration_seconds_bucket',
      'fleetwise_migrations_total',
      'fleetwise_caps_hit_total',
    ])
      expect(text).toContain(name);
    expect(text).toMatch(/^fleetwise_rounds_total 1$/m);
    expect(text).toMatch(/^fleetwise_migrations_total 2$/m);
    expect(text).toMatch(/^fleetwise_caps_hit_total\{cap="maxCostPerHour"\} 1$/m);
    expect(text).toMatch(/^fleetwise_instances\{type="p3\.8xlarge",state="running",market="on-demand"\} 1$/m);
    const cancelled = service.store.listJobs({ states: ['cancelled'] }).length;
    expect(cancelled).toBeGreaterThan(0);
    expect(text).toContain(`fleetwise_jobs{state="cancelled"} ${cancelled}`);
    const cost = service.cluster().costPerHour;
    expect(text).toContain(`fleetwise_cost_per_hour_dollars ${cost}`);
    // The rate as billed (explain.ts clusterView), spot instances at their spot price: not the on-demand list rate.
    expect(text).toMatch(
      /^# HELP fleetwise_cost_per_hour_dollars .*as billed: spot ones at their pool spot price/m,
    );
    // The value of time the latest round planned with (learned by default, so it changes from round to round).
    const latest = service.store.latestRound();
    if (latest === undefined) throw new Error('the fixture recorded a round earlier in this file');
    expect(text).toMatch(
      new RegExp(
        `^fleetwise_value_of_time_dollars_per_job_hour ${latest.decision.valueOfTimePerJobHour ?? 0}$`,
        'm',
      ),
    );
    service.store.recordRound({
      configuration: { instances: [] },
      decision: { ...latest.decision, valueOfTimePerJobHour: 1.4142135623730951 },
    });
    expect((await call('GET', '/metrics')).text).toMatch(
      /^fleetwise_value_of_time_dollars_per_job_hour 1\.4142135623730951$/m,
    );
  });
});

describe('controller API: /metrics behind the metrics token', () => {
  it('answers the metrics token and the admin token only; a team token, another token or none is a 401', async () => {
    const METRICS_TOKEN = 'metrics-token-0123456789abcdef';
    const guarded = await startApiServer(service, {
      listen: '127.0.0.1:0',
      adminToken: ADMIN_TOKEN,
      metricsToken: METRICS_TOKEN,
    });
    const scrape = async (authorization?: string): Promise<{ status: number; text: string }> => {
      const response = await fetch(`${guarded.url}/metrics`, {
        headers: authorization === undefined ? {} : { authorization },
      });
      return { status: response.status, text: await response.text() };
    };
    try {
      for (const token of [METRICS_TOKEN, ADMIN_TOKEN]) {
        const answer = await scrape(`Bearer ${token}`);
        expect(answer.status).toBe(200);
        expect(answer.text).toContain('fleetwise_cost_per_hour_dollars');
      }
      const missing = await scrape();
      expect(missing.status).toBe(401);
      expect(JSON.parse(missing.text)).toEqual({
        error:
          'missing bearer token: /metrics needs the metrics token (FLEETWISE_METRICS_TOKEN or the metrics-token file)',
      });
      // A team sees its own jobs; the metrics show every team's spend.
      for (const wrong of [`Bearer ${VISION_TOKEN}`, 'Bearer not-a-token', `Basic ${METRICS_TOKEN}`]) {
        const refused = await scrape(wrong);
        expect(refused.status, wrong).toBe(401);
        expect(refused.text).not.toContain('fleetwise_');
      }
      // The metrics token is for /metrics only, and health stays open to a load balancer.
      expect(
        (await fetch(`${guarded.url}/v1/jobs`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } }))
          .status,
      ).toBe(401);
      expect((await fetch(`${guarded.url}/healthz`)).status).toBe(200);
    } finally {
      await guarded.close();
    }
  });
});

describe('controller API: optional capabilities', () => {
  it('without writeReport/storeContext the routes answer 501 saying so; a failing report is a 500 with the reason', async () => {
    const plain = fakeWithTeams();
    const bare: ControllerService = {
      store: plain.store,
      submit: (spec, team) => plain.submit(spec, team),
      submitArray: (spec, team) => plain.submitArray(spec, team),
      cancel: (id) => plain.cancel(id),
      cancelMany: (ids, reason) => plain.cancelMany(ids, reason),
      drain: (id) => plain.drain(id),
      cluster: () => plain.cluster(),
      why: (id, limit) => plain.why(id, limit),
      costs: (since, until) => plain.costs(since, until),
      requestRound: (reason) => plain.requestRound(reason),
    };
    const other = await startApiServer(bare, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
    try {
      const post = (path: string, init: RequestInit = {}): Promise<Response> =>
        fetch(`${other.url}${path}`, {
          method: 'POST',
          ...init,
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(init.headers ?? {}) },
        });
      const report = await post('/v1/reports');
      expect(report.status).toBe(501);
      expect(((await report.json()) as { error: string }).error).toBe(
        'this controller does not write cost reports',
      );
      const tar = Buffer.alloc(1024);
      tar.write('ustar\0', 257, 'latin1');
      const context = await post(`/v1/contexts?sha256=${'0'.repeat(64)}`, {
        body: new Uint8Array(tar),
        headers: { 'content-type': 'application/x-tar' },
      });
      expect(context.status).toBe(501);
      expect(((await context.json()) as { error: string }).error).toMatch(/does not accept build contexts/);
      // A byte body gets no Content-Type from fetch (a string body would be sent as text/plain, read as YAML).
      const noType = await post('/v1/jobs', { body: new TextEncoder().encode('name: x') });
      expect(noType.status).toBe(415);
      expect(((await noType.json()) as { error: string }).error).toMatch(/^missing Content-Type header/);
    } finally {
      await other.close();
    }

    const failing = fakeWithTeams();
    failing.writeReport = async () => {
      throw new Error('no object store configured for reports');
    };
    const third = await startApiServer(failing, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
    try {
      const answer = await fetch(`${third.url}/v1/reports`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      expect(answer.status).toBe(500);
      expect(await answer.json()).toEqual({
        error: 'writing the report failed: no object store configured for reports',
      });
    } finally {
      await third.close();
    }
  });
});
