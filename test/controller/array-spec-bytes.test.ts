import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { ValidationError } from '../../src/core/validation.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { arraySpecBytesProblem, storedSpecBytes } from '../../src/controller/job-spec/array.js';
import { parseJobSpec, validateJobSpec } from '../../src/controller/job-spec/parse.js';
import { JOB_SPEC_LIMITS, type JobSpec } from '../../src/controller/job-spec/spec.js';
import { catalog, rig, type Rig } from './controller-fixtures.js';

/**
 * Each job of an array stores its own copy of the spec, so an array's size × its spec's bytes is bounded in all
 * (JOB_SPEC_LIMITS.maxArraySpecBytes): such an array is refused naming both numbers and the limit, by the check
 * itself, by the controller's submitArray (nothing stored) and by the API (a submission and its dry run alike), while
 * realistic arrays (10,000 jobs of a bundled example, or of a few KiB) pass.
 */
const LIMIT = JOB_SPEC_LIMITS.maxArraySpecBytes;
const ADMIN = 'array-spec-bytes-admin-token-0123456';

const raw = (size: number, queueBytes = 0): Record<string, unknown> => ({
  name: 'sweep',
  team: 'genomics',
  tasks: [
    { name: 'main', image: 'busybox:latest', command: ['sh', '-c', 'true'], demand: { c7i: [0, 1, 2] } },
  ],
  arrayProperties: { size },
  ...(queueBytes === 0 ? {} : { queue: { notes: 'x'.repeat(queueBytes) } }),
});

const arraySpec = (size: number, queueBytes = 0): JobSpec =>
  validateJobSpec(raw(size, queueBytes), 'array', catalog);

describe("an array's size × its spec's bytes", () => {
  it('passes 10,000 jobs of a bundled example and of a few KiB, up to the limit exactly', () => {
    const sweep = parseJobSpec(
      readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'sweep.yaml'), 'utf8').replace(
        'size: 4',
        'size: 10000',
      ),
      'sweep.yaml',
      catalog,
    );
    expect(sweep.arrayProperties?.size).toBe(10_000);
    expect(arraySpecBytesProblem(sweep)).toBeUndefined();
    const fewKiB = arraySpec(10_000, 6 * 1024);
    expect(storedSpecBytes(fewKiB)).toBeGreaterThan(6 * 1024);
    expect(arraySpecBytesProblem(fewKiB)).toBeUndefined();
    // At the limit passes, one job more does not (sizes of four digits: the spec's bytes count the size too).
    const each = storedSpecBytes(arraySpec(1000, 40 * 1024));
    const most = Math.floor(LIMIT / each);
    expect(String(most)).toHaveLength(4);
    expect(arraySpecBytesProblem(arraySpec(most, 40 * 1024))).toBeUndefined();
    expect(arraySpecBytesProblem(arraySpec(most + 1, 40 * 1024))).toMatch(/^arrayProperties\.size: /);
  });

  it('refuses 10,000 jobs of a 40 KiB spec, naming the size, the bytes of each, their product and the limit', () => {
    const spec = arraySpec(10_000, 40 * 1024);
    const each = storedSpecBytes(spec);
    expect(each).toBe(Buffer.byteLength(JSON.stringify(spec)));
    expect(arraySpecBytesProblem(spec)).toBe(
      `arrayProperties.size: 10000 jobs × ${each} bytes of spec each make ${10_000 * each} bytes, at most ` +
        `${LIMIT} (64 MiB) in one array, so at most ${Math.floor(LIMIT / each)} jobs of this spec: keep large ` +
        'values (env, command, the queue section) out of the spec, e.g. in a file the tasks read, or submit fewer ' +
        'jobs per array',
    );
    // One job of that spec (alone, or one of an array with its index) is no array: the spec limit alone bounds it.
    const { arrayProperties: _array, ...alone } = spec;
    expect(arraySpecBytesProblem(alone)).toBeUndefined();
    expect(arraySpecBytesProblem({ ...spec, arrayProperties: { size: 10_000, index: 3 } })).toBeUndefined();
  });

  it("the controller's submitArray refuses it and stores none of its jobs", () => {
    const r = rig();
    const spec = arraySpec(10_000, 40 * 1024);
    let thrown: unknown;
    try {
      r.controller.submitArray(spec, 'genomics');
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(ValidationError);
    expect((thrown as ValidationError).problems).toEqual([arraySpecBytesProblem(spec)]);
    expect(r.store.listJobs()).toEqual([]);
    // A small array of the same spec is taken.
    expect(r.controller.submitArray(arraySpec(3, 40 * 1024), 'genomics')).toHaveLength(3);
  });
});

describe('the API', () => {
  let r: Rig;
  let server: ApiServer;
  beforeAll(async () => {
    r = rig();
    server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
  });
  afterAll(() => server.close());

  async function post(
    path: string,
    json: unknown,
  ): Promise<{ status: number; body: Record<string, unknown> }> {
    const response = await fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify(json),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }

  it('answers a submission and a dry run of such an array 400 with the problem, storing nothing', async () => {
    const expected = arraySpecBytesProblem(arraySpec(10_000, 40 * 1024));
    expect(expected).toBeDefined();
    for (const path of ['/v1/jobs', '/v1/jobs?dryRun=true']) {
      const answer = await post(path, raw(10_000, 40 * 1024));
      expect(answer.status, path).toBe(400);
      expect(answer.body, path).toEqual({ error: 'invalid job spec', details: [expected] });
    }
    expect(r.store.listJobs()).toEqual([]);
    const small = await post('/v1/jobs', raw(3, 40 * 1024));
    expect(small.status).toBe(201);
    expect(small.body['arrayJobIds']).toHaveLength(3);
  });
});
