import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { JobArchive } from '../../src/controller/backup/job-archive.js';
import { ManualClock } from '../../src/controller/clock.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import {
  findSubmission,
  recordSubmissionKey,
  requestHashOf,
  WITHDRAWN_AT_SUBMISSION,
} from '../../src/controller/submission-keys.js';
import { jobArchiveKeys } from '../../src/protocol/object-keys.js';
import { readJson, recordingLogger, StoreWithOutage } from './backup-fixtures.js';
import { catalog, rig, type Rig } from './controller-fixtures.js';

/**
 * Idempotent submission over the real API, the state on SQLite and a job archive in front of the answer: a submission
 * sent again with its Idempotency-Key is answered with the job(s) the first made, never a second copy, whether it
 * comes after the answer, while the first is still being made durable, or after the controller restarted; the same key
 * with another spec is refused; a submission withdrawn for the archive leaves its key free for the retry it asks for.
 */

const ADMIN = 'idempotency-admin-token-0123456789';
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-idempotency-'));
const objects = new StoreWithOutage(new FsObjectStore(join(scratch, 'objects')));
const clock = new ManualClock();
const log = recordingLogger();
const dbPath = join(scratch, 'state.db');
let archive: JobArchive;
let r: Rig;
let server: ApiServer;
let teamToken: string;

async function start(): Promise<void> {
  archive = new JobArchive({ objectStore: objects, cluster: 'prod', clock, log });
  const store = new SqliteStateStore(dbPath, { nowSeconds: () => clock.nowSeconds() });
  r = rig({ clusterName: 'prod' }, { clock, store, jobArchive: archive, objectStore: objects, logger: log });
  server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
}

async function stop(): Promise<void> {
  await server.close();
  await archive.stop();
  r.store.close();
}

beforeAll(async () => {
  await start();
  teamToken = (
    (await call('POST', '/v1/tokens', { json: { team: 'physics', label: 'idempotency' } })).body as {
      token: string;
    }
  ).token;
});

afterAll(async () => {
  await stop();
  rmSync(scratch, { recursive: true, force: true });
});

interface Answer {
  readonly status: number;
  readonly replayedHeader: string | null;
  readonly body: Record<string, unknown>;
}

async function call(
  method: string,
  path: string,
  options: { readonly json?: unknown; readonly key?: string; readonly token?: string } = {},
): Promise<Answer> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${options.token ?? ADMIN}`,
      ...(options.json === undefined ? {} : { 'content-type': 'application/json' }),
      ...(options.key === undefined ? {} : { 'idempotency-key': options.key }),
    },
    ...(options.json === undefined ? {} : { body: JSON.stringify(options.json) }),
  });
  return {
    status: response.status,
    replayedHeader: response.headers.get('idempotent-replayed'),
    body: (await response.json()) as Record<string, unknown>,
  };
}

const spec = (name: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  name,
  team: 'research',
  tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 4, 8] } }],
  ...extra,
});

const submit = (body: unknown, key?: string, token?: string): Promise<Answer> =>
  call('POST', '/v1/jobs', {
    json: body,
    ...(key === undefined ? {} : { key }),
    ...(token === undefined ? {} : { token }),
  });

const jobsNamed = (name: string): number => r.store.listJobs().filter((j) => j.name === name).length;

describe('a submission sent again with its Idempotency-Key', () => {
  it('is answered with the job the first made, flagged as replayed, and makes no second job', async () => {
    const first = await submit(spec('nightly'), 'nightly/2026-12-02');
    expect(first.status).toBe(201);
    expect(first.replayedHeader).toBeNull();
    expect(first.body['replayed']).toBeUndefined();
    const puts = objects.puts.length;
    const again = await submit(spec('nightly'), 'nightly/2026-12-02');
    // Answered by the run that made it durable: nothing written again.
    expect(objects.puts.length).toBe(puts);
    expect(again.status).toBe(201);
    expect(again.replayedHeader).toBe('true');
    expect(again.body).toMatchObject({ id: first.body['id'], name: 'nightly', replayed: true });
    expect(jobsNamed('nightly')).toBe(1);
    // The job archive keeps the key with the spec, so a state restored from a backup answers a resend too.
    const archived = (await readJson(objects, jobArchiveKeys('prod', first.body['id'] as string).spec)) as {
      submissionKey?: unknown;
    };
    expect(archived.submissionKey).toEqual({
      key: 'nightly/2026-12-02',
      requestHash: expect.stringMatching(/^[0-9a-f]{64}$/) as unknown,
    });
    // The same spec with its keys in another order is the same request.
    const reordered = await submit(
      { tasks: spec('nightly')['tasks'], team: 'research', name: 'nightly' },
      'nightly/2026-12-02',
    );
    expect(reordered.body['id']).toBe(first.body['id']);
    // Without a key, or with another, it is a new submission.
    expect((await submit(spec('nightly'))).body['id']).not.toBe(first.body['id']);
    expect((await submit(spec('nightly'), 'nightly/2026-12-03')).body['id']).not.toBe(first.body['id']);
    expect(jobsNamed('nightly')).toBe(3);
  });

  it('refuses the same key with another spec (422), making nothing', async () => {
    const first = await submit(spec('sweep-a'), 'reused-key');
    expect(first.status).toBe(201);
    const other = await submit(spec('sweep-b'), 'reused-key');
    expect(other.status).toBe(422);
    expect(JSON.stringify(other.body)).toContain(`used for another submission (${String(first.body['id'])})`);
    expect(jobsNamed('sweep-b')).toBe(0);
  });

  it("keeps each team's keys its own", async () => {
    const mine = await submit(spec('calibrate', { team: 'physics' }), 'calibrate-1', teamToken);
    expect(mine.status).toBe(201);
    // The admin submitting for another team with the same key makes that team's own job.
    const theirs = await submit(spec('calibrate'), 'calibrate-1');
    expect(theirs.status).toBe(201);
    expect(theirs.body['id']).not.toBe(mine.body['id']);
    expect(theirs.body['replayed']).toBeUndefined();
    // The team token's spec without `team` is its team's: the same request as the first.
    const again = await submit(
      { name: 'calibrate', tasks: spec('calibrate')['tasks'] },
      'calibrate-1',
      teamToken,
    );
    expect(again.body).toMatchObject({ id: mine.body['id'], replayed: true });
  });

  it('answers concurrent sends of one key with one job', async () => {
    const answers = await Promise.all(Array.from({ length: 6 }, () => submit(spec('burst'), 'burst-1')));
    expect(answers.map((a) => a.status)).toEqual(Array<number>(6).fill(201));
    expect(new Set(answers.map((a) => a.body['id'])).size).toBe(1);
    expect(answers.filter((a) => a.body['replayed'] === true)).toHaveLength(5);
    expect(jobsNamed('burst')).toBe(1);
  });

  it('answers an array sent again with every job the first made', async () => {
    const body = spec('shards', { arrayProperties: { size: 3 } });
    const first = await submit(body, 'shards-1');
    const again = await submit(body, 'shards-1');
    expect(again.status).toBe(201);
    expect(again.body['arrayJobIds']).toEqual(first.body['arrayJobIds']);
    expect(again.body['replayed']).toBe(true);
    expect(jobsNamed('shards')).toBe(3);
    // Kept as a run of ids (its first and its count), whatever the array's size.
    expect(r.store.getValue('submission-key/research/shards-1')).toMatchObject({
      firstJobId: (first.body['arrayJobIds'] as string[])[0],
      jobCount: 3,
    });
    expect(findSubmission(r.store, 'research', 'shards-1')?.jobIds).toEqual(first.body['arrayJobIds']);
  });

  it('refuses a key that is not one, naming the header', async () => {
    const answer = await submit(spec('badkey'), 'has spaces in it');
    expect(answer.status).toBe(400);
    expect(JSON.stringify(answer.body)).toContain('idempotency-key');
    expect((await submit(spec('badkey'), 'x'.repeat(256))).status).toBe(400);
    expect(jobsNamed('badkey')).toBe(0);
  });

  it('leaves the key of a withdrawn submission free, so the retry it asks for submits', async () => {
    objects.failing = (key) => key.endsWith('/spec.json');
    const refused = await submit(spec('flaky-store'), 'flaky-1');
    objects.failing = () => false;
    expect(refused.status).toBe(503);
    const retried = await submit(spec('flaky-store'), 'flaky-1');
    expect(retried.status).toBe(201);
    expect(retried.body['replayed']).toBeUndefined();
    const made = r.store.listJobs().filter((j) => j.name === 'flaky-store');
    expect(made.map((j) => j.state)).toEqual(['cancelled', 'queued']);
    expect(retried.body['id']).toBe(made[1]?.id);
    // And now the key answers for the job that was kept.
    expect((await submit(spec('flaky-store'), 'flaky-1')).body).toMatchObject({
      id: made[1]?.id,
      replayed: true,
    });
  });

  /** Holds the archive's spec writes until released, then lets them through or fails them. */
  function holdSpecWrites(): { release: (fail: boolean) => void; restore: () => void } {
    let release: (fail: boolean) => void = () => undefined;
    const held = new Promise<boolean>((resolve) => (release = resolve));
    const put = objects.put.bind(objects);
    objects.put = async (key, body) => {
      if (key.endsWith('/spec.json') && (await held)) throw new Error(`injected outage: cannot store ${key}`);
      return put(key, body);
    };
    return { release, restore: () => (objects.put = put) };
  }

  const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 200));

  it('waits for a first send still being made durable, and answers its job once it is', async () => {
    const hold = holdSpecWrites();
    try {
      const first = submit(spec('slow-store'), 'slow-1');
      await settle();
      // The resend arrives while the first waits for the object store (a client that timed out).
      let answered = false;
      const resent = submit(spec('slow-store'), 'slow-1').finally(() => (answered = true));
      await settle();
      expect(answered).toBe(false);
      hold.release(false);
      const [a, b] = await Promise.all([first, resent]);
      expect(a.status).toBe(201);
      expect(b.body).toMatchObject({ id: a.body['id'], replayed: true });
      expect(jobsNamed('slow-store')).toBe(1);
    } finally {
      hold.restore();
    }
  });

  it('submits the resend anew when the first it waited for was withdrawn', async () => {
    const hold = holdSpecWrites();
    let outcomes: Answer[];
    try {
      const first = submit(spec('lost-store'), 'lost-1');
      await settle();
      const resent = submit(spec('lost-store'), 'lost-1');
      await settle();
      // The first fails to be made durable: withdrawn, its client told to retry. The resend must not be told of it.
      const failing = first;
      hold.restore();
      hold.release(true);
      outcomes = await Promise.all([failing, resent]);
    } finally {
      hold.restore();
    }
    const [a, b] = outcomes;
    expect(a?.status).toBe(503);
    expect(b?.status).toBe(201);
    expect(b?.body['replayed']).toBeUndefined();
    const made = r.store.listJobs().filter((j) => j.name === 'lost-store');
    expect(made.map((j) => j.state)).toEqual(['cancelled', 'queued']);
    expect(b?.body['id']).toBe(made[1]?.id);
  });

  /** A submission as a controller that stopped between its commit and the archive leaves it: job and key, no spec. */
  function madeButNotDurable(name: string, key: string): string {
    const made = validateJobSpec(spec(name), 'spec', catalog);
    return r.store.transaction(() => {
      const job = r.store.submitJob(made);
      recordSubmissionKey(r.store, { team: 'research', key, requestHash: requestHashOf(made) }, [job], {
        madeBy: 'a run of the controller that stopped',
      });
      return job.id;
    });
  }

  it('makes jobs an earlier run made durable before answering a resend, withdrawing none', async () => {
    const id = madeButNotDurable('stopped-midway', 'midway-1');
    objects.failing = (key) => key.endsWith('/spec.json');
    const refused = await submit(spec('stopped-midway'), 'midway-1');
    objects.failing = () => false;
    expect(refused.status).toBe(503);
    expect(String(refused.body['error'])).toContain('send it again with the same Idempotency-Key');
    expect(r.store.getJob(id)?.state).toBe('queued');
    expect(await objects.exists(jobArchiveKeys('prod', id).spec)).toBe(false);
    const again = await submit(spec('stopped-midway'), 'midway-1');
    expect(again.body).toMatchObject({ id, replayed: true });
    expect(await objects.exists(jobArchiveKeys('prod', id).spec)).toBe(true);
    expect(jobsNamed('stopped-midway')).toBe(1);
  });

  it('submits anew when the key names a withdrawn job (the controller stopped before forgetting it)', async () => {
    const id = madeButNotDurable('withdrawn-kept', 'withdrawn-1');
    r.controller.cancel(id, `${WITHDRAWN_AT_SUBMISSION}: the object store did not take its spec (test)`);
    const again = await submit(spec('withdrawn-kept'), 'withdrawn-1');
    expect(again.status).toBe(201);
    expect(again.body['replayed']).toBeUndefined();
    expect(again.body['id']).not.toBe(id);
    expect(findSubmission(r.store, 'research', 'withdrawn-1')?.jobIds).toEqual([again.body['id']]);
  });

  it('withdraws the rest of a submission found partly withdrawn, then submits anew', async () => {
    const body = spec('half-withdrawn', { arrayProperties: { size: 3 } });
    const made = validateJobSpec(body, 'spec', catalog);
    const ids = r.controller
      .submitArray(made, 'research', (jobs) =>
        recordSubmissionKey(
          r.store,
          { team: 'research', key: 'half-1', requestHash: requestHashOf(made) },
          jobs,
          {
            madeBy: 'a run of the controller that stopped',
          },
        ),
      )
      .map((j) => j.id);
    // Stopped after withdrawing one of them.
    r.controller.cancel(
      ids[1] as string,
      `${WITHDRAWN_AT_SUBMISSION}: the object store did not take its spec`,
    );
    const again = await submit(body, 'half-1');
    expect(again.status).toBe(201);
    expect(again.body['replayed']).toBeUndefined();
    expect(ids.map((id) => r.store.getJob(id)?.state)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(r.store.getJob(ids[0] as string)?.reason).toMatch(new RegExp(`^${WITHDRAWN_AT_SUBMISSION}`));
    expect(again.body['arrayJobIds']).toHaveLength(3);
    expect(jobsNamed('half-withdrawn')).toBe(6);
  });

  it('is answered with the first job after the controller restarted on its state', async () => {
    const first = await submit(spec('across-restart'), 'restart-1');
    await stop();
    await start();
    const again = await submit(spec('across-restart'), 'restart-1');
    expect(again.body).toMatchObject({ id: first.body['id'], replayed: true });
    expect(jobsNamed('across-restart')).toBe(1);
  });
});
