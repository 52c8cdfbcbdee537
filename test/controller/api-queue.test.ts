import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import type { PredictFn } from '../../src/controller/eta-predictions.js';
import type { TaskControl, TaskStatus } from '../../src/controller/seams.js';
import type { TaskRecord } from '../../src/controller/state-store.js';
import { catalog, CPU_SMALL, jobSpec, liveRecords, rig, type Rig } from './controller-fixtures.js';

/**
 * The queue layer through the HTTP API of a real controller (memory store, in-memory cloud), on a real socket:
 * queue places and ETAs in the job views, and ending a job as unsuccessful.
 */

const ADMIN = 'admin-token-for-queue-tests-0123456789';
const RESEARCH = 'research-token-0123456789abcdef';
const VISION = 'vision-token-0123456789abcdefgh';

/** Every job starts at the world's first round and runs its declared duration, one after another. */
const sequential: PredictFn = ({ world }) => {
  let at = world.events.find((e) => e.kind === 'round')?.timeSeconds ?? world.nowSeconds;
  return new Map(
    world.jobs.map((j) => {
      const start = j.startSeconds ?? at;
      at = Math.max(at, start) + (j.spec.totalIterations - j.completedIterations) / j.spec.fullThroughput;
      return [j.spec.id, { startSeconds: start, endSeconds: at }];
    }),
  );
};

/** Tasks report `failed` with exit code 3 once marked. */
class ExitingTaskControl implements TaskControl {
  readonly name = 'exiting';
  readonly exited = new Map<string, number>();
  async start(): Promise<void> {}
  async stop(): Promise<'stopped'> {
    return 'stopped';
  }
  async status(task: TaskRecord): Promise<TaskStatus> {
    return this.exited.has(task.id) ? 'failed' : 'running';
  }
  exitCode(task: TaskRecord): number | undefined {
    return this.exited.get(task.id);
  }
  failureReason(task: TaskRecord): string | undefined {
    const code = this.exited.get(task.id);
    return code === undefined ? undefined : `exit code ${code}`;
  }
}

let r: Rig;
let server: ApiServer;
const control = new ExitingTaskControl();

async function call(
  method: 'GET' | 'POST',
  path: string,
  token: string,
  json?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(json === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(json === undefined ? {} : { body: JSON.stringify(json) }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  r = rig(
    { caps: { quotas: [{ group: 'standard', maxVcpus: 8 }] } },
    { tasks: control, predict: sequential },
  );
  r.store.addTeamToken('research', RESEARCH);
  r.store.addTeamToken('vision', VISION);
  server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
});

afterAll(async () => {
  await server.close();
});

const spec = (name: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  name,
  tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 4, 8] } }],
  expectedDurationSeconds: 3600,
  ...extra,
});

describe('controller API over HTTP: queue places, ETAs and unsuccessful jobs', () => {
  it('shows class, position, wait reason and ETA in the job views; the submission ETA is kept', async () => {
    const ids: string[] = [];
    for (const name of ['a', 'b', 'c']) {
      const answer = await call('POST', '/v1/jobs', RESEARCH, spec(name));
      expect(answer.status).toBe(201);
      // The submission answers at once: its prediction runs apart from it, and the view says it is pending.
      expect(answer.body).toMatchObject({ eta: null, etaPending: true });
      ids.push(answer.body['id'] as string);
    }
    await r.controller.predictionsSettled();
    const predicted = await call('GET', `/v1/jobs/${ids[0]}`, RESEARCH);
    expect(predicted.body).toMatchObject({
      etaPending: false,
      eta: { computedAtSeconds: r.clock.nowSeconds() },
    });
    await r.controller.runRound('test');
    await r.controller.predictionsSettled();
    const list = await call('GET', '/v1/jobs', RESEARCH);
    const jobs = list.body['jobs'] as Record<string, unknown>[];
    expect(jobs.map((j) => j['state'])).toEqual(['running', 'running', 'queued']);
    expect(jobs[2]?.['queue']).toMatchObject({
      classId: 'all',
      status: 'waiting',
      position: 1,
      reason: 'caps',
    });
    expect(jobs[0]?.['queue']).toMatchObject({ status: 'admitted' });
    const doc = await call('GET', `/v1/jobs/${ids[2]}`, RESEARCH);
    expect(doc.status).toBe(200);
    expect((doc.body['queue'] as { detail: string }).detail).toContain('quota standard maxVcpus');
    // `why` carries the same place: what says why a job waits when no recorded round has.
    const why = await call('GET', `/v1/jobs/${ids[2]}/why`, RESEARCH);
    expect(why.body['queue']).toEqual(doc.body['queue']);
    expect((await call('GET', `/v1/jobs/${ids[0]}/why`, RESEARCH)).body['queue']).toMatchObject({
      status: 'admitted',
    });
    const eta = doc.body['eta'] as { completionSeconds: number; computedAtSeconds: number; basis: string };
    expect(eta.basis).toContain('no future arrivals');
    expect(doc.body['etaSeconds']).toBe(eta.completionSeconds - eta.computedAtSeconds);
    expect((doc.body['submissionEta'] as { basis: string }).basis).toMatch(/^at submission: /);
    expect(doc.body['predictionError']).toBeNull();
  });

  it('ends a job as unsuccessful at a stage through the API, frees its capacity, and admits the next', async () => {
    const staged = await call(
      'POST',
      '/v1/jobs',
      VISION,
      spec('staged', {
        success: { kind: 'stages', stageSeconds: [600, 3000], continueProbabilities: [0.5] },
      }),
    );
    expect(staged.status).toBe(201);
    const id = staged.body['id'] as string;
    const running = (await call('GET', '/v1/jobs?state=running', ADMIN)).body['jobs'] as { id: string }[];
    const victim = running[0]?.id as string;

    // Another team's job is not found; a stage the job does not declare is a 400 naming the field.
    expect((await call('POST', `/v1/jobs/${victim}/unsuccessful`, VISION, {})).status).toBe(404);
    const tooFar = await call('POST', `/v1/jobs/${id}/unsuccessful`, VISION, { stage: 3 });
    expect(tooFar.status).toBe(400);
    expect(tooFar.body['details']).toEqual(['stage: the job declares 2 stage(s), got 3']);
    const badBody = await call('POST', `/v1/jobs/${id}/unsuccessful`, VISION, { stage: 0, why: 'x' });
    expect(badBody.status).toBe(400);

    // A job that declares no stages (none at all, or only a success probability) is refused any stage, and runs on.
    const stageless = await call('POST', `/v1/jobs/${victim}/unsuccessful`, RESEARCH, { stage: 1 });
    expect(stageless.status).toBe(400);
    expect(stageless.body['details']).toEqual([`stage: ${victim} declares no success stages`]);
    expect(r.store.getJob(victim)?.state).toBe('running');
    const probable = await call(
      'POST',
      '/v1/jobs',
      VISION,
      spec('probable', { success: { kind: 'success', successProbability: 0.5, expectedSizeSeconds: 600 } }),
    );
    expect(probable.status).toBe(201);
    const other = probable.body['id'] as string;
    const noStages = await call('POST', `/v1/jobs/${other}/unsuccessful`, VISION, { stage: 1 });
    expect(noStages.status).toBe(400);
    expect(noStages.body['details']).toEqual([`stage: ${other} declares no success stages`]);
    expect(r.store.getJob(other)?.state).toBe('queued');

    const ended = await call('POST', `/v1/jobs/${victim}/unsuccessful`, RESEARCH, { reason: 'diverged' });
    expect(ended.status).toBe(200);
    expect(ended.body).toMatchObject({
      id: victim,
      state: 'unsuccessful',
      reason: 'stopped as unsuccessful: diverged',
      queue: null,
    });
    // The staged job is still queued: it reached no stage, so it is refused one, and ends without one.
    const notRun = await call('POST', `/v1/jobs/${id}/unsuccessful`, VISION, {
      stage: 2,
      reason: 'plateaued',
    });
    expect(notRun.status).toBe(400);
    expect(notRun.body['details']).toEqual([
      `stage: ${id} has not run yet, so it reached no stage (mark it without one)`,
    ]);
    expect(r.store.getJob(id)?.state).toBe('queued');
    const atStage = await call('POST', `/v1/jobs/${id}/unsuccessful`, VISION, { reason: 'plateaued' });
    expect(atStage.status).toBe(200);
    expect(atStage.body).toMatchObject({
      id,
      state: 'unsuccessful',
      reason: 'stopped as unsuccessful: plateaued',
    });
    // Idempotent with no stage and reason, or the same ones; another reason is a conflict, and the first one stays.
    expect((await call('POST', `/v1/jobs/${victim}/unsuccessful`, ADMIN)).status).toBe(200);
    expect(
      (await call('POST', `/v1/jobs/${victim}/unsuccessful`, ADMIN, { reason: 'diverged' })).status,
    ).toBe(200);
    const remarked = await call('POST', `/v1/jobs/${victim}/unsuccessful`, ADMIN, { reason: 'too slow' });
    expect(remarked.status).toBe(409);
    expect(remarked.body['error']).toContain(
      `${victim} is already unsuccessful (stopped as unsuccessful: diverged)`,
    );
    expect(r.store.getJob(victim)?.reason).toBe('stopped as unsuccessful: diverged');
    // A job that ended otherwise cannot become unsuccessful.
    const cancelled = await call('POST', `/v1/jobs/${other}/cancel`, VISION);
    expect(cancelled.body['state']).toBe('cancelled');
    expect((await call('POST', `/v1/jobs/${other}/unsuccessful`, VISION, {})).status).toBe(409);

    const before = r.store.listJobs({ states: ['queued'] }).map((j) => j.id);
    await r.controller.runRound('unsuccessful');
    await r.controller.runRound('period');
    expect(r.store.getJob(before[0] as string)?.state).toBe('running');
    expect(r.store.listTasks({ jobId: victim }).every((t) => t.instanceId === undefined)).toBe(true);
    const vcpus = liveRecords(r.store).reduce(
      (n, i) => n + (catalog.types.find((t) => t.name === i.typeName)?.capacity[1] ?? 0),
      0,
    );
    expect(vcpus).toBeLessThanOrEqual(8);
  });

  it('a task exiting with one of the job’s unsuccessfulExitCodes ends it unsuccessful, other codes fail it', async () => {
    const running = r.store.listJobs({ states: ['running'] });
    expect(running.length).toBeGreaterThanOrEqual(2);
    // Make room under the quota for the jobs below.
    for (const job of running) r.controller.cancel(job.id);
    const coded = r.controller.submit(
      { ...jobSpec('coded', CPU_SMALL, { expectedDurationSeconds: 60 }), unsuccessfulExitCodes: [3] },
      'research',
    );
    await r.controller.runRound('room');
    await r.controller.runRound('period');
    expect(r.store.getJob(coded.id)?.state).toBe('running');
    control.exited.set(`${coded.id}.0`, 3);
    await r.controller.reconcile();
    expect(r.store.getJob(coded.id)).toMatchObject({
      state: 'unsuccessful',
      reason: `task ${coded.id}.0 exited with 3, one of the job's unsuccessfulExitCodes`,
    });
    const plain = r.controller.submit(
      jobSpec('plain', CPU_SMALL, { expectedDurationSeconds: 60 }),
      'research',
    );
    await r.controller.runRound('room');
    control.exited.set(`${plain.id}.0`, 3);
    await r.controller.reconcile();
    expect(r.store.getJob(plain.id)?.state).toBe('failed');
  });
});
