import { expect, it } from 'vitest';
import { runCli } from '../helpers/built-cli.js';
import { oneLocalController, pidAlive, taskPid, until } from '../helpers/local-controller.js';

/**
 * `maxRunSeconds` through a real local controller (its API, a worker process, the task's own process): a job that
 * runs past its limit is stopped (its process is gone), ends failed without another attempt, says why in the API and
 * in `fleetwise job`, and its instance is terminated.
 */
const local = oneLocalController('fleetwise-run-limit-');

interface JobAnswer {
  readonly id: string;
  readonly state: string;
  readonly reason?: string;
  readonly attempts: number;
}

it('stops a job past its maxRunSeconds, ends it failed without a retry, says why, and lets its instance go', async () => {
  const controller = await local.start();
  const submitted = await controller.api('POST', '/v1/jobs', {
    name: 'runaway',
    team: 'research',
    maxRunSeconds: '3s',
    retryStrategy: { attempts: 3 },
    tasks: [
      { name: 'main', command: ['sh', '-c', 'echo started; sleep 600'], demand: { any: [0, 0.25, 1] } },
    ],
  });
  expect(submitted.status, submitted.text).toBe(201);
  const id = (submitted.json as JobAnswer).id;
  const job = async (): Promise<JobAnswer> =>
    (await controller.api('GET', `/v1/jobs/${id}`)).json as JobAnswer;

  await until(
    `${id} running`,
    async () => ((await job()).state === 'running' ? true : undefined),
    60_000,
    controller.diagnostics,
  );
  // The task's own process, once its worker has started it.
  const pid = await until(
    `the process of ${id}.0`,
    () => {
      for (const i of controller.instances()) {
        const found = taskPid(i.dir, `${id}.0`);
        if (found !== undefined) return found;
      }
      return undefined;
    },
    30_000,
    controller.diagnostics,
  );
  expect(pidAlive(pid)).toBe(true);

  const ended = await until(
    `${id} to end`,
    async () => {
      const now = await job();
      return now.state === 'running' ? undefined : now;
    },
    60_000,
    controller.diagnostics,
  );
  expect(ended).toMatchObject({ state: 'failed', attempts: 1 });
  expect(ended.reason).toMatch(
    /^ran \d+ s, past its maxRunSeconds \(3 s\): stopped without a checkpoint, not retried$/,
  );
  await until(
    'the task process to be gone',
    () => (pidAlive(pid) ? undefined : true),
    30_000,
    controller.diagnostics,
  );
  const view = await runCli(['job', id], controller.env);
  expect(view.code, view.stderr).toBe(0);
  expect(view.stdout).toMatch(/past its maxRunSeconds \(3 s\)/);
  await until(
    'its instance to be terminated',
    () => (controller.instances().every((i) => i.state === 'terminated') ? true : undefined),
    60_000,
    controller.diagnostics,
  );
  // Not retried: it stays failed, on its first attempt.
  expect(await job()).toMatchObject({ state: 'failed', attempts: 1 });
}, 150_000);
