import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import { catalog, rig, type Rig } from './controller-fixtures.js';

/**
 * An array's dependencies through the real controller over a real socket: N_TO_N gives each job of an array the job
 * of its index in the array it names, SEQUENTIAL the one before it; a named job that is no array's, or one of
 * another size, is refused (400) naming it, and nothing is stored; a dry run predicts the array's first job with what
 * it would wait for.
 */
const ADMIN = 'array-dependencies-admin-token-0123';
let r: Rig;
let server: ApiServer;

beforeAll(async () => {
  r = rig();
  server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
});
afterAll(() => server.close());

async function post(path: string, json: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify(json),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const spec = (name: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  name,
  team: 'genomics',
  tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 1, 2] } }],
  ...extra,
});

async function submitArray(name: string, extra: Record<string, unknown>): Promise<string[]> {
  const answer = await post('/v1/jobs', spec(name, extra));
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return answer.body['arrayJobIds'] as string[];
}

const dependsOnOf = (id: string): readonly string[] | undefined => r.store.getJob(id)?.spec.dependsOn;

describe("an array's dependencies", () => {
  it('pairs each job with the job of its index (N_TO_N), or with the one before it (SEQUENTIAL)', async () => {
    const align = await submitArray('align', { arrayProperties: { size: 3 } });
    const plain = (await post('/v1/jobs', spec('reference'))).body['id'] as string;
    // Any job of the array names it; plain dependencies stay for every job.
    const call = await submitArray('call', {
      arrayProperties: { size: 3 },
      dependsOn: [plain, { jobId: align[2], type: 'N_TO_N' }],
    });
    expect(call.map(dependsOnOf)).toEqual(align.map((a) => [plain, a]));
    expect(call.map((id) => r.store.getJob(id)?.spec.arrayProperties)).toEqual([
      { size: 3, index: 0 },
      { size: 3, index: 1 },
      { size: 3, index: 2 },
    ]);
    const answer = await post(
      '/v1/jobs',
      spec('steps', { arrayProperties: { size: 3 }, dependsOn: [{ type: 'SEQUENTIAL' }] }),
    );
    const steps = answer.body['arrayJobIds'] as string[];
    expect(steps.map(dependsOnOf)).toEqual([undefined, [steps[0]], [steps[1]]]);
    // The answer says what each waits for.
    expect(answer.body['arrayWaitingFor']).toEqual([[], [steps[0]], [steps[1]]]);
    // Both at once: the job of its index in the other array, then the one before it.
    const both = await submitArray('both', {
      arrayProperties: { size: 3 },
      dependsOn: [{ type: 'SEQUENTIAL' }, { jobId: call[0], type: 'N_TO_N' }],
    });
    expect(both.map(dependsOnOf)).toEqual([[call[0]], [call[1], both[0]], [call[2], both[1]]]);
  });

  it('refuses a job of no array, an array of another size, and an unknown job, storing nothing', async () => {
    const four = await submitArray('four', { arrayProperties: { size: 4 } });
    const lone = (await post('/v1/jobs', spec('lone'))).body['id'] as string;
    const before = r.store.listJobs().length;
    const refused = async (jobId: string): Promise<string> => {
      const answer = await post(
        '/v1/jobs',
        spec('pairs', { arrayProperties: { size: 3 }, dependsOn: [{ jobId, type: 'N_TO_N' }] }),
      );
      expect(answer.status).toBe(400);
      return JSON.stringify(answer.body);
    };
    expect(await refused(four[1] as string)).toContain(
      `dependsOn: ${four[1]}'s array has 4 jobs, this one 3: N_TO_N pairs arrays of one size`,
    );
    expect(await refused(lone)).toContain(
      `dependsOn: ${lone} (lone) is not a job of an array: N_TO_N pairs the jobs of two arrays`,
    );
    expect(await refused('job-999')).toContain('dependsOn: no job job-999 of team genomics');
    // A plain dependency of every job is checked too (once for the array).
    const plainUnknown = await post(
      '/v1/jobs',
      spec('pairs', { arrayProperties: { size: 3 }, dependsOn: ['job-998'] }),
    );
    expect(plainUnknown.status).toBe(400);
    expect(JSON.stringify(plainUnknown.body)).toContain('dependsOn: no job job-998 of team genomics');
    expect(r.store.listJobs()).toHaveLength(before);
  });

  it('stores an array only as its jobs: submitted as one job, it is refused', () => {
    const array = validateJobSpec(spec('whole', { arrayProperties: { size: 2 } }), 'spec', catalog);
    const before = r.store.listJobs().length;
    expect(() => r.controller.submit(array, 'genomics')).toThrow(
      'whole: an array (arrayProperties.size without an index) is submitted with submitArray',
    );
    expect(r.store.listJobs()).toHaveLength(before);
  });

  it('dry-runs an array as its first job, with what that one would wait for', async () => {
    const first = await submitArray('first', { arrayProperties: { size: 2 } });
    const answer = await post(
      '/v1/jobs?dryRun=true',
      spec('second', { arrayProperties: { size: 2 }, dependsOn: [{ jobId: first[1], type: 'N_TO_N' }] }),
    );
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ dryRun: true, arraySize: 2, waitingFor: [first[0]] });
    // Every job is checked, as a submission checks them: the second's partner can no longer succeed.
    r.controller.cancel(first[1] as string);
    const refused = await post(
      '/v1/jobs?dryRun=true',
      spec('second', { arrayProperties: { size: 2 }, dependsOn: [{ jobId: first[0], type: 'N_TO_N' }] }),
    );
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toContain(
      `dependsOn: ${first[1]} ended cancelled, so this job could never start`,
    );
  });
});
