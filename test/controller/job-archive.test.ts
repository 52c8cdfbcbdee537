import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { JobArchive, JobArchiveConflictError } from '../../src/controller/backup/job-archive.js';
import { ManualClock } from '../../src/controller/clock.js';
import { jobArchiveKeys } from '../../src/protocol/object-keys.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readJson, recordingLogger, StoreWithOutage, until } from './backup-fixtures.js';
import { catalog, rig, type Rig } from './controller-fixtures.js';

/**
 * The job archive over the real API: a submission is answered 201 only once its spec is in the object store, and
 * refused with a 503 (the job withdrawn, never run) when the store does not take it; how a job ended follows it into
 * the store, retried through an outage.
 */

const ADMIN = 'job-archive-admin-token-0123456789';
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-job-archive-'));
const objects = new StoreWithOutage(new FsObjectStore(join(scratch, 'objects')));
const clock = new ManualClock();
const log = recordingLogger();
const archive = new JobArchive({ objectStore: objects, cluster: 'prod', clock, log, retrySeconds: 5 });
let r: Rig;
let server: ApiServer;

beforeAll(async () => {
  r = rig({ clusterName: 'prod' }, { clock, jobArchive: archive, objectStore: objects, logger: log });
  server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
});

afterAll(async () => {
  await server.close();
  await archive.stop();
  rmSync(scratch, { recursive: true, force: true });
});

async function call(
  method: string,
  path: string,
  json?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${ADMIN}`,
      ...(json === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(json === undefined ? {} : { body: JSON.stringify(json) }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const spec = (name: string): Record<string, unknown> => ({
  name,
  team: 'research',
  tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 4, 8] } }],
});

describe('the job archive behind submissions', () => {
  it('answers 201 only once the spec is stored, with the id and submission time a restore keeps', async () => {
    const answer = await call('POST', '/v1/jobs', spec('kept'));
    expect(answer.status).toBe(201);
    const id = answer.body['id'] as string;
    const stored = await readJson(objects, jobArchiveKeys('prod', id).spec);
    const job = r.store.getJob(id);
    expect(stored).toEqual({
      version: 1,
      id,
      submittedAtSeconds: job?.submittedAtSeconds,
      spec: JSON.parse(JSON.stringify(job?.spec)) as unknown,
      ofArraySubmission: false,
    });
  });

  it('refuses a submission with a 503 when the store does not take the spec; the job is withdrawn and never runs', async () => {
    objects.failing = (key) => key.endsWith('/spec.json');
    const answer = await call('POST', '/v1/jobs', spec('refused'));
    objects.failing = () => false;
    expect(answer.status).toBe(503);
    expect(answer.body['error']).toMatch(
      /could not be made durable \(the object store did not take its spec: injected outage.*\); job-\d+ was withdrawn, nothing will run: submit it again/,
    );
    const withdrawn = r.store.listJobs().find((j) => j.name === 'refused');
    expect(withdrawn?.state).toBe('cancelled');
    expect(withdrawn?.reason).toMatch(/^withdrawn at submission: the object store did not take its spec/);
    await r.controller.runRound('test');
    expect(r.store.listTasks({ jobId: withdrawn?.id }).every((t) => t.instanceId === undefined)).toBe(true);
    expect(log.lines).toContainEqual(
      expect.objectContaining({
        level: 'error',
        message: `${withdrawn?.id} withdrawn: its spec could not be stored in the job archive`,
      }),
    );
  });

  it("never replaces another controller's spec under the same job id, and says another controller writes the archive", async () => {
    const answer = await call('POST', '/v1/jobs', spec('ours'));
    expect(answer.status).toBe(201);
    const id = answer.body['id'] as string;
    const job = r.store.getJob(id);
    if (job === undefined) throw new Error(`${id} not in the state`);
    const before = await readJson(objects, jobArchiveKeys('prod', id).spec);
    // A resend of the same submission finds its own spec: stored, nothing to say.
    await archive.keepSubmitted(job);
    // Another controller of cluster prod numbers its jobs the same way: its job of that id is another submission.
    const otherLog = recordingLogger();
    const other = new JobArchive({ objectStore: objects, cluster: 'prod', clock, log: otherLog });
    const theirs = {
      ...job,
      submittedAtSeconds: job.submittedAtSeconds + 60,
      spec: { ...job.spec, name: 'theirs' },
    };
    await expect(other.keepSubmitted(theirs)).rejects.toBeInstanceOf(JobArchiveConflictError);
    expect(otherLog.lines).toContainEqual(
      expect.objectContaining({
        level: 'error',
        message: expect.stringMatching(
          new RegExp(
            `^${id}'s spec is already in the job archive .* another controller is writing the job archive of cluster prod`,
          ),
        ) as unknown,
      }),
    );
    expect(await readJson(objects, jobArchiveKeys('prod', id).spec)).toEqual(before);
    await other.stop();
  });

  it('replaces a spec an earlier cluster of the same name archived before this state began (a start with --init)', async () => {
    const answer = await call('POST', '/v1/jobs', spec('earlier-cluster'));
    expect(answer.status).toBe(201);
    const id = answer.body['id'] as string;
    const job = r.store.getJob(id);
    if (job === undefined) throw new Error(`${id} not in the state`);
    // A cluster started anew on the same store numbers its jobs from the start again: this state began after the
    // archived submission, so it is history, not a controller writing beside this one.
    const laterLog = recordingLogger();
    const later = new JobArchive({
      objectStore: objects,
      cluster: 'prod',
      clock,
      log: laterLog,
      stateBeganAtSeconds: () => job.submittedAtSeconds + 30,
    });
    const ours = {
      ...job,
      submittedAtSeconds: job.submittedAtSeconds + 60,
      spec: { ...job.spec, name: 'anew' },
    };
    await later.keepSubmitted(ours);
    expect(await readJson(objects, jobArchiveKeys('prod', id).spec)).toMatchObject({
      submittedAtSeconds: ours.submittedAtSeconds,
      spec: { name: 'anew' },
    });
    expect(laterLog.lines).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        message: expect.stringContaining('an earlier cluster named prod used the same store') as unknown,
      }),
    );
    // One submitted since this state began is another controller's: refused as before.
    const since = new JobArchive({
      objectStore: objects,
      cluster: 'prod',
      clock,
      log: recordingLogger(),
      stateBeganAtSeconds: () => job.submittedAtSeconds + 30,
    });
    await expect(
      since.keepSubmitted({
        ...job,
        submittedAtSeconds: job.submittedAtSeconds + 90,
        spec: { ...job.spec, name: 'x' },
      }),
    ).rejects.toBeInstanceOf(JobArchiveConflictError);
    await later.stop();
    await since.stop();
  });

  it('answers an array 201 once every one of its jobs is stored, each with its index', async () => {
    const answer = await call('POST', '/v1/jobs', { ...spec('sweep'), arrayProperties: { size: 3 } });
    expect(answer.status).toBe(201);
    const ids = answer.body['arrayJobIds'] as string[];
    expect(ids).toHaveLength(3);
    expect(answer.body['id']).toBe(ids[0]);
    expect(answer.body['array']).toEqual({ index: 0, size: 3 });
    // Ids follow one another in index order, and each job's archived spec says its index.
    const first = Number((ids[0] as string).slice('job-'.length));
    expect(ids).toEqual([0, 1, 2].map((i) => `job-${first + i}`));
    for (const [index, id] of ids.entries()) {
      const stored = (await readJson(objects, jobArchiveKeys('prod', id).spec)) as { spec: unknown };
      expect(stored.spec).toMatchObject({ name: 'sweep', arrayProperties: { size: 3, index } });
      expect((stored as { ofArraySubmission?: boolean }).ofArraySubmission).toBe(true);
      expect(r.store.getJob(id)?.state).toBe('queued');
    }
  });

  it('withdraws the whole array with a 503 when the store does not take one of its specs', async () => {
    let puts = 0;
    objects.failing = (key) => key.endsWith('/spec.json') && ++puts === 2;
    const answer = await call('POST', '/v1/jobs', { ...spec('half-sweep'), arrayProperties: { size: 4 } });
    objects.failing = () => false;
    expect(answer.status).toBe(503);
    expect(answer.body['error']).toMatch(
      /^the array could not be made durable \(the object store did not take the spec of job-\d+: injected outage.*\); all 4 of its jobs \(job-\d+ … job-\d+\) were withdrawn, nothing will run: submit it again$/,
    );
    const jobs = r.store.listJobs().filter((j) => j.name === 'half-sweep');
    expect(jobs).toHaveLength(4);
    expect(jobs.every((j) => j.state === 'cancelled')).toBe(true);
    expect(jobs.filter((j) => /of its array could not be made durable/.test(j.reason ?? ''))).toHaveLength(3);
    await r.controller.runRound('test');
    for (const j of jobs)
      expect(r.store.listTasks({ jobId: j.id }).every((t) => t.instanceId === undefined)).toBe(true);
  });

  it('stores how a job ended, and retries through an outage until it is stored', async () => {
    const first = await call('POST', '/v1/jobs', spec('cancelled-now'));
    const firstId = first.body['id'] as string;
    expect((await call('POST', `/v1/jobs/${firstId}/cancel`)).status).toBe(200);
    const end = await until('the end record', async () =>
      (await objects.exists(jobArchiveKeys('prod', firstId).end))
        ? readJson(objects, jobArchiveKeys('prod', firstId).end)
        : undefined,
    );
    expect(end).toMatchObject({
      version: 1,
      id: firstId,
      state: 'cancelled',
      reason: 'cancelled by request',
    });

    objects.failing = (key) => key.endsWith('/end.json');
    const second = await call('POST', '/v1/jobs', spec('cancelled-in-outage'));
    const secondId = second.body['id'] as string;
    await call('POST', `/v1/jobs/${secondId}/cancel`);
    await until('the failed attempt and its retry timer', () =>
      clock.pendingSleeps > 0 && archive.pendingEndCount > 0 ? true : undefined,
    );
    expect(await objects.exists(jobArchiveKeys('prod', secondId).end)).toBe(false);
    expect(log.lines.some((l) => l.level === 'warn' && l.message.includes(`how ${secondId} ended`))).toBe(
      true,
    );
    objects.failing = () => false;
    clock.advance(5);
    await until('the retried end record', () => (archive.pendingEndCount === 0 ? true : undefined));
    expect(await readJson(objects, jobArchiveKeys('prod', secondId).end)).toMatchObject({
      state: 'cancelled',
    });
  });

  it("stores a whole array's ends several at a time, and each of them", async () => {
    const answer = await call('POST', '/v1/jobs', {
      ...spec('cancelled-array'),
      arrayProperties: { size: 40 },
    });
    const ids = answer.body['arrayJobIds'] as string[];
    let inFlight = 0;
    let most = 0;
    const put = objects.put.bind(objects);
    objects.put = async (key, body) => {
      if (!key.endsWith('/end.json')) return put(key, body);
      most = Math.max(most, ++inFlight);
      try {
        await new Promise((resolve) => setTimeout(resolve, 5));
        return await put(key, body);
      } finally {
        inFlight -= 1;
      }
    };
    try {
      expect((await call('POST', `/v1/jobs/${ids[0]}/cancel-array`)).status).toBe(200);
      await until('every end record', () => (archive.pendingEndCount === 0 ? true : undefined));
    } finally {
      objects.put = put;
    }
    // One after another before; at most 16 at once, within the SDK's sockets.
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(16);
    for (const id of ids)
      expect(await readJson(objects, jobArchiveKeys('prod', id).end)).toMatchObject({
        id,
        state: 'cancelled',
      });
  });
});
