import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { formatEta, queueFieldsOf } from '../../src/cli/commands/job.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { WorkerThreadPredictionEngine } from '../../src/controller/prediction-worker-engine.js';
import { readQueueRecord } from '../../src/controller/queue-records.js';
import { ensureBuiltCli } from '../helpers/built-cli.js';
import { killLocalLeftovers, startLocalController, until } from '../helpers/local-controller.js';
import { catalog, CPU_SMALL, jobSpec, rig } from './controller-fixtures.js';

/**
 * Completion-time predictions run off the API's and the loop's path: a submission returns at once (its ETA pending),
 * the prediction runs in a worker thread from a snapshot, and nothing a job spec says can make it long (numeric
 * bounds, a horizon, a time budget) or keep the controller from stopping. A prediction is made heavy on purpose
 * here (a year's horizon, rounds every second or five minutes, jobs queued behind one instance): the tests assert
 * what answers while it runs, never how long anything takes.
 */

const ADMIN = 'admin-token-predictions-0123456789abcdef';
const WORKER_URL = pathToFileURL(join(PROJECT_ROOT, 'dist', 'controller', 'prediction-worker.js'));
const YEAR = 365 * 86_400;

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-predictions-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

beforeAll(() => ensureBuiltCli(['controller/prediction-worker.ts', 'cli/main.ts']), 240_000);

async function call(
  server: ApiServer,
  method: 'GET' | 'POST',
  path: string,
  json?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${ADMIN}`,
      ...(json === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(json === undefined ? {} : { body: typeof json === 'string' ? json : JSON.stringify(json) }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const longJob = (name: string, days: number): Record<string, unknown> => ({
  name,
  team: 'research',
  tasks: [{ name: 'main', image: 'busybox:latest', command: ['sleep', '1'], demand: { c7i: [0, 4, 8] } }],
  expectedDurationSeconds: days * 86_400,
});

describe('predictions off the request and round path', () => {
  it('while a heavy prediction runs in its worker thread, /healthz, submissions and rounds answer; stop abandons it', async () => {
    const r = rig(
      { caps: { maxInstances: 1 }, predictionHorizonSeconds: YEAR, predictionBudgetSeconds: 300 },
      { predict: new WorkerThreadPredictionEngine({ url: WORKER_URL }) },
    );
    const server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
    try {
      // 30 jobs of 300 days behind one instance: the prediction simulates a year of rounds, up to its 300 s budget.
      for (let i = 0; i < 30; i++) {
        const answer = await call(server, 'POST', '/v1/jobs', longJob(`long-${i}`, 300));
        expect(answer.status).toBe(201);
        expect(answer.body).toMatchObject({ eta: null, etaPending: true });
      }
      let settled = false;
      void r.controller.predictionsSettled().then(() => (settled = true));
      await new Promise((resolve) => setTimeout(resolve, 300));
      for (let i = 0; i < 5; i++) {
        const health = await call(server, 'GET', '/healthz');
        expect(health.status).toBe(200);
      }
      const another = await call(server, 'POST', '/v1/jobs', longJob('another', 1));
      expect(another.status).toBe(201);
      await r.controller.runRound('while predicting');
      expect(r.store.latestRound()).toBeDefined();
      // All of that answered while the prediction was still running.
      expect(settled).toBe(false);
      expect(readQueueRecord(r.store, 'job-1')?.eta).toBeUndefined();

      await r.controller.stop();
      await r.controller.predictionsSettled();
      // The abandoned prediction wrote nothing: the jobs still wait for their first ETA.
      const view = await call(server, 'GET', '/v1/jobs/job-1');
      expect(view.body).toMatchObject({ eta: null, etaPending: true });
      expect(formatEta(queueFieldsOf(view.body))).toBe('pending');
    } finally {
      await r.controller.stop();
      await server.close();
    }
  });

  it('the controller process answers while it predicts, and SIGTERM stops it mid-prediction', async () => {
    const stateDir = join(scratch, 'sigterm');
    const controller = await startLocalController(stateDir, {
      args: ['--dry-run'],
      config: ['caps: { maxInstances: 1 }', 'predictions: { horizonDays: 365, budgetSeconds: 600 }'],
    });
    try {
      for (let i = 0; i < 20; i++)
        expect((await controller.api('POST', '/v1/jobs', longJob(`long-${i}`, 300))).status).toBe(201);
      await new Promise((resolve) => setTimeout(resolve, 500));
      for (let i = 0; i < 5; i++) expect((await controller.api('GET', '/healthz')).status).toBe(200);
      const job = await controller.api('GET', '/v1/jobs/job-1');
      // Still predicting: rounds every second over a year's horizon, with a 600 s budget.
      expect(job.json).toMatchObject({ eta: null, etaPending: true });
      controller.process.kill('SIGTERM');
      // Well before the prediction's budget would end it.
      const code = await until(
        'the controller to exit',
        () => controller.process.exitCode ?? undefined,
        30_000,
      );
      expect(code).toBe(0);
    } finally {
      controller.process.kill('SIGKILL');
      killLocalLeftovers(stateDir);
    }
  });

  it('an ETA past the horizon says "beyond N days", whether the job alone or the queue reaches past it', async () => {
    const r = rig({ caps: { maxInstances: 1 }, predictionHorizonSeconds: 2 * 86_400 });
    const server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
    try {
      const first = r.controller.submit(
        jobSpec('first', CPU_SMALL, { expectedDurationSeconds: 1.5 * 86_400 }),
        'research',
      );
      const second = r.controller.submit(
        jobSpec('second', CPU_SMALL, { expectedDurationSeconds: 1.5 * 86_400 }),
        'research',
      );
      const alone = r.controller.submit(
        jobSpec('alone', CPU_SMALL, { expectedDurationSeconds: 3 * 86_400 }),
        'research',
      );
      await r.controller.predictionsSettled();
      const now = r.clock.nowSeconds();
      const views = await Promise.all(
        [first, second, alone].map(async (j) => (await call(server, 'GET', `/v1/jobs/${j.id}`)).body),
      );
      const [a, b, c] = views.map((v) => v['eta'] as Record<string, unknown>);
      expect(a?.['completionSeconds']).toEqual(expect.any(Number));
      // Behind the first on the one instance allowed: it would end after 3 days, past the 2-day horizon.
      expect(b).toMatchObject({ completionSeconds: null, completesAfterSeconds: now + 2 * 86_400 });
      expect(b?.['basis']).toMatch(
        /^beyond 2 days: not completed within the 2 days prediction horizon with eva/,
      );
      // Three days of work alone reach past it: answered without simulating.
      expect(c).toMatchObject({ completionSeconds: null, completesAfterSeconds: now + 2 * 86_400 });
      expect(c?.['basis']).toMatch(
        /^beyond 2 days: its remaining work at full throughput alone reaches past/,
      );
      expect(views.map((v) => formatEta(queueFieldsOf(v)))).toEqual([
        expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/),
        'beyond 2 days',
        'beyond 2 days',
      ]);
      expect(views[1]?.['etaSeconds']).toBeNull();
    } finally {
      await server.close();
      await r.controller.stop();
    }
  });

  it('a prediction that runs out of its time budget says how far it got', async () => {
    const r = rig({ caps: { maxInstances: 1 }, predictionHorizonSeconds: YEAR, predictionBudgetSeconds: 0 });
    const job = r.controller.submit(
      jobSpec('one', CPU_SMALL, { expectedDurationSeconds: 86_400 }),
      'research',
    );
    await r.controller.predictionsSettled();
    const eta = readQueueRecord(r.store, job.id)?.eta;
    expect(eta).toMatchObject({ completionSeconds: null, completesAfterSeconds: r.clock.nowSeconds() });
    expect(eta?.basis).toMatch(
      /^beyond 0 min: the prediction's 0 s time budget ran out 0 min ahead with eva/,
    );
    await r.controller.stop();
  });

  it('refuses numbers past their bounds with a 400 naming the field, before anything is stored or predicted', async () => {
    const r = rig();
    const server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
    try {
      const cases: [unknown, string][] = [
        [longJob('huge', 1e300 / 86_400), 'expectedDurationSeconds: at most 31536000 s (365 days)'],
        [longJob('year', 366), 'expectedDurationSeconds: at most 31536000 s (365 days)'],
        // JSON reads 1e400 as Infinity.
        [JSON.stringify(longJob('inf', 1)).replace('86400', '1e400'), 'expectedDurationSeconds:'],
        [{ ...longJob('nomove', 1), noMoveSeconds: 1e300 }, 'noMoveSeconds: at most 31536000 s'],
        [{ ...longJob('iter', 1), totalIterations: 1e300 }, 'totalIterations: at most 1000000000000000'],
        [{ ...longJob('prio', 1), queue: { priority: 1e300 } }, 'queue.priority: at most 1000000'],
        [
          {
            ...longJob('stage', 1),
            success: { kind: 'stages', stageSeconds: [1e300], continueProbabilities: [] },
          },
          'success.stageSeconds.0: at most 31536000 s (365 days)',
        ],
        [
          { ...longJob('restore', 1), checkpoint: { restoreDelaySeconds: 1e300 } },
          'checkpoint.restoreDelaySeconds: at most 86400 s (a day)',
        ],
      ];
      for (const [body, problem] of cases) {
        const answer = await call(server, 'POST', '/v1/jobs', body);
        expect(answer.status).toBe(400);
        expect(
          (answer.body['details'] as string[]).some((d) => d.startsWith(problem)),
          problem,
        ).toBe(true);
      }
      const stage = await call(server, 'POST', '/v1/jobs', longJob('staged', 1));
      const unsuccessful = await call(server, 'POST', `/v1/jobs/${stage.body['id'] as string}/unsuccessful`, {
        stage: 1e300,
      });
      expect(unsuccessful.status).toBe(400);
      expect(unsuccessful.body['details']).toContain('stage: at most 64 (a job declares no more stages)');
      expect(r.store.listJobs()).toHaveLength(1);
    } finally {
      await server.close();
      await r.controller.stop();
    }
  });
});
