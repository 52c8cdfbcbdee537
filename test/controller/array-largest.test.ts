import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { JobArchive } from '../../src/controller/backup/job-archive.js';
import { ManualClock } from '../../src/controller/clock.js';
import { JOB_SPEC_LIMITS } from '../../src/controller/job-spec/spec.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { jobArchiveKeys, jobArchivePrefix } from '../../src/protocol/object-keys.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { keysUnder, readJson, recordingLogger } from './backup-fixtures.js';
import { catalog, rig, type Rig } from './controller-fixtures.js';

/**
 * The largest array AWS Batch takes (10,000 jobs) over the real API, with the state on SQLite and a job archive on
 * disk: answered 201 with every job stored and its spec archived, and a job can wait for all of it; one more is
 * refused, nothing stored; and one request cancels it whole, in one commit.
 */

const ADMIN = 'array-largest-admin-token-0123456789';
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-array-largest-'));
const objects = new FsObjectStore(join(scratch, 'objects'));
const clock = new ManualClock();
const archive = new JobArchive({ objectStore: objects, cluster: 'prod', clock, log: recordingLogger() });
let r: Rig;
let server: ApiServer;

beforeAll(async () => {
  // The state on SQLite, as a controller keeps it: every commit is a disk sync.
  const store = new SqliteStateStore(join(scratch, 'state.db'), { nowSeconds: () => clock.nowSeconds() });
  r = rig({ clusterName: 'prod' }, { clock, store, jobArchive: archive, objectStore: objects });
  server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
});

afterAll(async () => {
  await server.close();
  await archive.stop();
  rmSync(scratch, { recursive: true, force: true });
});

async function submit(body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${server.url}/v1/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const spec = (name: string): Record<string, unknown> => ({
  name,
  team: 'genomics',
  tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 1, 2] } }],
});

it('takes an array of 10,000 jobs whole, each archived, and a job waiting for all of it', async () => {
  const size = JOB_SPEC_LIMITS.maxArraySize;
  expect(size).toBe(10_000);
  const answer = await submit({ ...spec('per-sample'), arrayProperties: { size } });
  expect(answer.status, JSON.stringify(answer.body).slice(0, 300)).toBe(201);
  const ids = answer.body['arrayJobIds'] as string[];
  expect(ids).toHaveLength(size);
  expect(ids.at(-1)).toBe(`job-${size}`);
  expect(r.store.listJobs().filter((j) => j.state === 'queued')).toHaveLength(size);
  const archived = (await keysUnder(objects, jobArchivePrefix('prod'))).filter((k) =>
    k.endsWith('/spec.json'),
  );
  expect(archived).toHaveLength(size);
  const last = (await readJson(objects, jobArchiveKeys('prod', `job-${size}`).spec)) as { spec: unknown };
  expect(last.spec).toMatchObject({ arrayProperties: { size, index: size - 1 } });

  const gather = await submit({ ...spec('gather'), dependsOn: ids });
  expect(gather.status, JSON.stringify(gather.body).slice(0, 300)).toBe(201);
  expect(r.store.getJob(gather.body['id'] as string)?.spec.dependsOn).toHaveLength(size);

  const tooMany = await submit({ ...spec('too-many'), arrayProperties: { size: size + 1 } });
  expect(tooMany.status).toBe(400);
  expect(JSON.stringify(tooMany.body)).toContain(`arrayProperties.size: at most ${size} jobs`);
  expect(r.store.listJobs()).toHaveLength(size + 1);

  const cancelled = await fetch(`${server.url}/v1/jobs/${ids[1234]}/cancel-array`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  expect(cancelled.status).toBe(200);
  expect(((await cancelled.json()) as { cancelled: unknown[] }).cancelled).toHaveLength(size);
  expect(r.store.listJobs().filter((j) => j.state === 'cancelled')).toHaveLength(size);
  // The job waiting for all of them can never start: the next round ends it.
  await r.controller.runRound('after the cancel');
  expect(r.store.getJob(gather.body['id'] as string)?.state).toBe('failed');
}, 120_000);
