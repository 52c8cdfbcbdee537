import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { JobRecord } from '../../src/controller/state-store.js';
import { catalog, rig, type Rig } from './controller-fixtures.js';

/**
 * Job-spec submissions through the real controller over a real socket: a dry run of an array checks what its jobs
 * share once, a JSON body repeating a key is refused as YAML is, and a spec's unused `queue:` fields are warned about.
 */
const ADMIN = 'job-spec-submission-admin-token-0123';

/** Counts the store's job lookups by id: how much a request looks up is what could hold the event loop. */
class CountingStore extends MemoryStateStore {
  readonly lookups = new Map<string, number>();
  override getJob(id: string): JobRecord | undefined {
    this.lookups.set(id, (this.lookups.get(id) ?? 0) + 1);
    return super.getJob(id);
  }
}

let store: CountingStore;
let r: Rig;
let server: ApiServer;

beforeAll(async () => {
  store = new CountingStore();
  r = rig({}, { store });
  server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
});
afterAll(() => server.close());

interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

async function send(path: string, text: string, type = 'application/json', key?: string): Promise<Answer> {
  const response = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ADMIN}`,
      'content-type': type,
      ...(key === undefined ? {} : { 'idempotency-key': key }),
    },
    body: text,
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const post = (path: string, json: unknown, key?: string): Promise<Answer> =>
  send(path, JSON.stringify(json), 'application/json', key);

async function get(path: string): Promise<Record<string, unknown>> {
  const response = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${ADMIN}` } });
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, unknown>;
}

const spec = (name: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  name,
  team: 'genomics',
  tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 1, 2] } }],
  ...extra,
});

async function submitted(name: string, extra: Record<string, unknown> = {}): Promise<Answer> {
  const answer = await post('/v1/jobs', spec(name, extra));
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return answer;
}

describe('a dry run of an array', () => {
  it('looks up what every job of the array waits for once, not once per job', async () => {
    const plain = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => (await submitted(`dep-${i}`)).body['id'] as string),
    );
    const lookupsOfPlain = async (size: number): Promise<number> => {
      const partner = (await submitted(`partner-${size}`, { arrayProperties: { size } })).body[
        'arrayJobIds'
      ] as string[];
      store.lookups.clear();
      const answer = await post(
        '/v1/jobs?dryRun=true',
        spec('wide', {
          arrayProperties: { size },
          dependsOn: [...plain, { jobId: partner[0], type: 'N_TO_N' }, { type: 'SEQUENTIAL' }],
        }),
      );
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      expect(answer.body).toMatchObject({ arraySize: size, waitingFor: [...plain, partner[0]] });
      // Each job of the partner array is looked up for the job of its index, as a submission checks them.
      for (const id of partner) expect(store.lookups.get(id) ?? 0, id).toBeGreaterThan(0);
      return plain.reduce((n, id) => n + (store.lookups.get(id) ?? 0), 0);
    };
    const small = await lookupsOfPlain(2);
    // Checked per job, 40 jobs looked up each of the 20 shared dependencies 40 times at least.
    expect(await lookupsOfPlain(40)).toBe(small);
    expect(small).toBeLessThan(plain.length * 10);
  });

  it('refuses as before: the shared dependencies first, then the job of each index in the paired array', async () => {
    const ended = (await submitted('ended')).body['id'] as string;
    r.controller.cancel(ended);
    const partner = (await submitted('pairs', { arrayProperties: { size: 3 } })).body[
      'arrayJobIds'
    ] as string[];
    r.controller.cancel(partner[2] as string);
    r.controller.cancel(partner[1] as string);
    const refused = await post(
      '/v1/jobs?dryRun=true',
      spec('late', {
        arrayProperties: { size: 3 },
        dependsOn: ['job-9999', ended, { jobId: partner[0], type: 'N_TO_N' }],
      }),
    );
    expect(refused.status).toBe(400);
    expect(refused.body['details']).toEqual([
      'dependsOn: no job job-9999 of team genomics',
      `dependsOn: ${ended} ended cancelled, so this job could never start`,
      `dependsOn: ${partner[1]} ended cancelled, so this job could never start`,
      `dependsOn: ${partner[2]} ended cancelled, so this job could never start`,
    ]);
    // A SEQUENTIAL array waits for its own jobs only: nothing to refuse, and its first job waits for none.
    const steps = await post(
      '/v1/jobs?dryRun=true',
      spec('steps', { arrayProperties: { size: 3 }, dependsOn: [{ type: 'SEQUENTIAL' }] }),
    );
    expect(steps.status).toBe(200);
    expect(steps.body['waitingFor']).toBeUndefined();
  });
});

describe('a JSON body repeating a key', () => {
  const tasks = '[{"name":"main","image":"busybox:latest","demand":{"c7i":[0,1,2]}}]';

  it('is refused naming the key and where it is, as the same text sent as YAML is', async () => {
    const text = `{"name":"twice","team":"genomics","team":"other","tasks":${tasks}}`;
    const before = r.store.listJobs().length;
    for (const path of ['/v1/jobs', '/v1/jobs?dryRun=true']) {
      const json = await send(path, text);
      expect(json.status).toBe(400);
      expect(json.body['details']).toEqual([
        '(root): the key "team" is given more than once (JSON keeps only the last, so the others would be lost)',
      ]);
      expect((await send(path, text, 'application/yaml')).status).toBe(400);
    }
    const nested = await send(
      '/v1/jobs',
      `{"name":"twice","team":"genomics","tasks":[{"name":"a","name":"b","image":"busybox:latest","demand":{"c7i":[0,1,2]}}]}`,
    );
    expect(nested.status).toBe(400);
    expect(nested.body['details']).toEqual([
      'tasks.0: the key "name" is given more than once (JSON keeps only the last, so the others would be lost)',
    ]);
    expect(r.store.listJobs()).toHaveLength(before);
    // The same key in two objects, or inside a string, is no repetition.
    const fine = await send(
      '/v1/jobs',
      `{"name":"once","team":"genomics","description":"\\"team\\":1","tasks":${tasks}}`,
    );
    expect(fine.status, JSON.stringify(fine.body)).toBe(201);
  });
});

describe("a spec's queue section", () => {
  const WARNING =
    'queue.class, queue.priority are not used: the controller classes jobs by size or by team ' +
    "(its queue config's classifyBy and classes) and orders each class by its configured ordering";

  it('is accepted, and its class and priority are said to be unused, on a dry run and a submission', async () => {
    const queue = { queue: { class: 'research', priority: 5 } };
    const dry = await post('/v1/jobs?dryRun=true', spec('classed', queue));
    expect(dry.status).toBe(200);
    expect(dry.body['warnings']).toEqual([WARNING]);
    const job = await submitted('classed', queue);
    expect(job.body['warnings']).toEqual([WARNING]);
    expect((await get(`/v1/jobs/${job.body['id'] as string}`))['warnings']).toEqual([WARNING]);
    // Each job of an array is told so, and a keyed submission still keeps its key.
    const first = await post('/v1/jobs', spec('classes', { ...queue, arrayProperties: { size: 2 } }), 'k-1');
    expect(first.status).toBe(201);
    for (const id of first.body['arrayJobIds'] as string[])
      expect((await get(`/v1/jobs/${id}`))['warnings']).toEqual([WARNING]);
    const again = await post('/v1/jobs', spec('classes', { ...queue, arrayProperties: { size: 2 } }), 'k-1');
    expect(again.body).toMatchObject({ replayed: true, arrayJobIds: first.body['arrayJobIds'] });
  });

  it('names only the fields set, and says nothing of other keys or of a spec without them', async () => {
    const stages = await post('/v1/jobs?dryRun=true', spec('staged', { queue: { stages: [1, 2] } }));
    expect(stages.body['warnings']).toEqual([expect.stringMatching(/^queue\.stages is not used: /)]);
    const other = await submitted('other', { queue: { deadline: '2h' } });
    expect(other.body['warnings']).toEqual([]);
    expect((await submitted('plain')).body['warnings']).toEqual([]);
  });
});
