import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { FleetwiseClient } from '../../src/cli/client.js';
import { toHttpError } from '../../src/controller/api/errors.js';
import { StateStoreFaultError } from '../../src/controller/state-store.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { clusterForScope } from '../../src/controller/api/views.js';
import { instanceMarket } from '../../src/controller/instance-market.js';
import { StoredJobLogs, type JobLogReader } from '../../src/controller/job-logs.js';
import { parseJobSpec } from '../../src/controller/job-spec/parse.js';
import type { DecisionRecord } from '../../src/scheduler/types.js';
import { taskLogKey } from '../../src/protocol/object-keys.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { InvalidObjectKeyError } from '../../src/storage/object-key.js';
import { ADMIN_TOKEN, FakeControllerService, NLP_TOKEN, VISION_TOKEN } from './api-fake-service.js';

/**
 * Reading the API over a real socket: the job listing comes a page at a time whether or not the caller asks for one,
 * a team's views of the cluster and of a job's decisions look up only the jobs they name, and a log part name the
 * workers could not have written is a 400.
 */

const RESNET = parseJobSpec(
  readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'resnet.yaml'), 'utf8'),
  'resnet.yaml',
  loadCatalogFile(),
);
/** More than two default pages (500), so paging has a middle and a short last page. */
const JOBS = 1203;

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-api-listing-'));
const objects = new FsObjectStore(join(scratch, 'objects'));

class LoggingService extends FakeControllerService {
  jobLogs = async (): Promise<string> => '';
  jobLogReader = (jobId: string): JobLogReader => new StoredJobLogs(objects, jobId);
}

let service: LoggingService;
let server: ApiServer;

async function get(path: string, token: string): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
  return { status: response.status, body: (await response.json()) as unknown };
}

beforeAll(async () => {
  service = new LoggingService();
  service.store.addTeamToken('vision', VISION_TOKEN, 'test');
  service.store.addTeamToken('nlp', NLP_TOKEN, 'test');
  service.store.transaction(() => {
    for (let i = 0; i < JOBS; i++)
      service.store.submitJob({ ...RESNET, team: i % 3 === 0 ? 'nlp' : 'vision' });
  });
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
});

afterAll(async () => {
  await server.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('GET /v1/jobs pages', () => {
  it('answers 500 jobs and a next when no limit is asked, and the pages after it end with every job once', async () => {
    const first = (await get('/v1/jobs', ADMIN_TOKEN)).body as { jobs: { id: string }[]; next?: string };
    expect(first.jobs).toHaveLength(500);
    expect(first.next).toBe('job-500');
    const ids = first.jobs.map((j) => j.id);
    let next = first.next;
    while (next !== undefined) {
      const page = (await get(`/v1/jobs?after=${next}`, ADMIN_TOKEN)).body as {
        jobs: { id: string }[];
        next?: string;
      };
      ids.push(...page.jobs.map((j) => j.id));
      next = page.next;
    }
    expect(ids).toEqual(Array.from({ length: JOBS }, (_, i) => `job-${i + 1}`));
  });

  it('a team token pages through its own jobs only', async () => {
    const first = (await get('/v1/jobs', NLP_TOKEN)).body as { jobs: { team: string }[]; next?: string };
    expect(first.jobs).toHaveLength(401);
    expect(first.next).toBeUndefined();
    expect(first.jobs.every((j) => j.team === 'nlp')).toBe(true);
  });

  it("the CLI's listing reads every page", async () => {
    const client = new FleetwiseClient(server.url, VISION_TOKEN);
    const jobs = await client.listJobs();
    expect(jobs).toHaveLength(JOBS - 401);
    expect(new Set(jobs.map((j) => j.id)).size).toBe(JOBS - 401);
  });
});

describe("a team's views look up only the jobs they name", () => {
  it('/v1/cluster and /why answer as before without listing the team’s jobs', async () => {
    const store = service.store;
    const instance = store.createInstance({ typeName: 'p3.2xlarge' });
    store.setInstanceState(instance.id, 'launching', { cloudId: 'i-0listing' });
    store.setInstanceState(instance.id, 'running');
    // job-1 is nlp's, job-2 vision's: both run on the one instance.
    for (const jobId of ['job-1', 'job-2']) {
      const task = store.listTasks({ jobId })[0];
      if (task === undefined) throw new Error(`${jobId} has no task`);
      store.setJobState(jobId, 'starting', 'placed by the test');
      store.setTaskState(task.id, 'starting', instance.id);
      store.setTaskState(task.id, 'running', instance.id);
      store.setJobState(jobId, 'running', 'placed by the test');
    }
    const decision: DecisionRecord = {
      scheduler: 'eva',
      nowSeconds: 0,
      candidates: [
        {
          name: 'full',
          costPerHour: 3,
          instances: 1,
          newInstances: 0,
          savingPerSecond: 0,
          migrationCost: 0,
          movedJobs: ['job-1', 'job-2'],
        },
      ],
      chosen: 'full',
      reason: 'test',
      waiting: [
        { jobId: 'job-2', cap: 'maxCostPerHour' },
        { jobId: 'job-1', cap: 'maxInstances' },
      ],
      pinned: [],
    };
    store.recordRound({ configuration: { instances: [] }, decision });
    // What a team saw when its visible jobs were a set of all its job ids.
    const visionIds = new Set(store.listJobs({ team: 'vision' }).map((j) => j.id));
    const expected = JSON.parse(
      JSON.stringify(clusterForScope(service.cluster(), visionIds, (id) => instanceMarket(store, id))),
    ) as unknown;
    const listJobs = vi.spyOn(store, 'listJobs');
    try {
      const cluster = (await get('/v1/cluster', VISION_TOKEN)).body as {
        scope: string;
        instances: { id: string; taskIds: string[] }[];
        tasks: { jobId: string }[];
      };
      expect(cluster).toMatchObject(expected as Record<string, unknown>);
      expect(cluster.scope).toBe('team');
      expect(cluster.instances.find((i) => i.id === instance.id)?.taskIds).toEqual(['job-2.0']);
      expect(cluster.tasks.some((t) => t.jobId === 'job-2')).toBe(true);
      expect(cluster.tasks.every((t) => visionIds.has(t.jobId))).toBe(true);
      const why = (await get('/v1/jobs/job-2/why', VISION_TOKEN)).body as {
        records: { decision: DecisionRecord }[];
      };
      expect(why.records[0]?.decision.waiting).toEqual([{ jobId: 'job-2', cap: 'maxCostPerHour' }]);
      expect(why.records[0]?.decision.candidates[0]?.movedJobs).toEqual(['job-2']);
      // The admin's view is whole.
      const all = (await get('/v1/cluster', ADMIN_TOKEN)).body as { tasks: { jobId: string }[] };
      expect(all.tasks.some((t) => t.jobId === 'job-1')).toBe(true);
      expect(listJobs).not.toHaveBeenCalled();
    } finally {
      listJobs.mockRestore();
    }
  });
});

describe('log parts', () => {
  it('a part name out of the run-name alphabet is a 400 naming the field, never a 500', async () => {
    const runName = '00001712345678-job-2.0-inst-3.log';
    await objects.put(taskLogKey('job-2', 'job-2.0', 1712345678, 'inst-3'), Buffer.from('hello\n'));
    const good = await fetch(`${server.url}/v1/jobs/job-2/logs/bytes?part=${runName}`, {
      headers: { authorization: `Bearer ${VISION_TOKEN}` },
    });
    expect(good.status).toBe(200);
    expect(await good.text()).toBe('hello\n');
    for (const part of ['00001712345678-a\u0000b.log', '00001712345678-a\\b.log', '00001712345678-.log']) {
      const answer = await get(`/v1/jobs/job-2/logs/bytes?part=${encodeURIComponent(part)}`, VISION_TOKEN);
      expect(answer.status, part).toBe(400);
      expect((answer.body as { details: string[] }).details[0]).toMatch(/^part: expected a part name/);
    }
  });

  it('an object key the store refuses is the request at fault: 400 with the reason', () => {
    const http = toHttpError(
      new InvalidObjectKeyError('logs/job-2/a\\b', 'backslashes are not allowed (use "/")'),
      () => 0,
      {} as Parameters<typeof toHttpError>[2],
    );
    expect(http.statusCode).toBe(400);
    expect(http.message).toMatch(/invalid object key .*backslashes are not allowed/);
  });

  it("a damaged state database is the server's fault: 500, logged, its path and remedies kept from the client", () => {
    const http = toHttpError(
      new StateStoreFaultError(
        '/srv/fleetwise/state.db: database disk image is malformed: the state database is damaged. Move it aside',
      ),
      () => 0,
      {} as Parameters<typeof toHttpError>[2],
    );
    expect(http.statusCode).toBe(500);
    expect(http.message).toBe('internal error');
  });
});
