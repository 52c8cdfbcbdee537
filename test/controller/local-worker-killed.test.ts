import { expect, it } from 'vitest';
import { runCli } from '../helpers/built-cli.js';
import { oneLocalController, pidAlive, taskPid, until } from '../helpers/local-controller.js';

/**
 * A local worker SIGKILLed under a running job, through a real local controller (the CLI as a subprocess, its worker
 * and task processes) at the local heartbeat timeout (10 s): the controller notices that the worker process is gone
 * when it lists its instances, before that timeout would take the worker for a silent one, and says so in the job's
 * restarts, in `fleetwise job`, and in its log.
 */
const local = oneLocalController('fleetwise-worker-killed-');

interface JobAnswer {
  readonly id: string;
  readonly state: string;
  readonly restarts?: readonly { readonly atSeconds: number; readonly cause: string }[];
}

it('a SIGKILLed local worker’s instance is lost because its worker process is gone, not as a silent worker', async () => {
  const controller = await local.start();
  const submitted = await controller.api('POST', '/v1/jobs', {
    name: 'long-sleep',
    team: 'research',
    tasks: [{ name: 'main', command: ['sh', '-c', 'sleep 600'], demand: { any: [0, 0.25, 1] } }],
  });
  expect(submitted.status, submitted.text).toBe(201);
  const id = (submitted.json as JobAnswer).id;
  const job = async (): Promise<JobAnswer> =>
    (await controller.api('GET', `/v1/jobs/${id}`)).json as JobAnswer;

  // Running, its task's process started by the worker: the instance and worker that run it.
  const victim = await until(
    `${id} running on a worker`,
    async () => {
      if ((await job()).state !== 'running') return undefined;
      return controller
        .instances()
        .find((i) => i.state === 'running' && i.pid !== undefined && taskPid(i.dir, `${id}.0`) !== undefined);
    },
    60_000,
    controller.diagnostics,
  );
  const workerPid = victim.pid as number;
  const task = taskPid(victim.dir, `${id}.0`) as number;
  process.kill(workerPid, 'SIGKILL');

  const restarted = await until(
    `${id} to go back to the queue`,
    async () => {
      const now = await job();
      return (now.restarts?.length ?? 0) > 0 ? now : undefined;
    },
    60_000,
    controller.diagnostics,
  );
  expect(restarted.restarts?.map((r) => r.cause)).toEqual([
    expect.stringMatching(/^inst-\d+ was lost: its worker process is gone$/),
  ]);
  const lostId = /^(inst-\d+)/.exec(restarted.restarts?.[0]?.cause ?? '')?.[1] as string;
  const view = await runCli(['job', id], controller.env);
  expect(view.code, view.stderr).toBe(0);
  expect(view.stdout).toMatch(new RegExp(`restarts +1 \\(${lostId} was lost: its worker process is gone\\)`));
  // The instance ended with its worker: its task was stopped with it, not left to run on unbilled.
  await until('the killed worker’s task to be stopped', () => (pidAlive(task) ? undefined : true), 30_000);
  expect(controller.instances().find((i) => i.instanceId === victim.instanceId)?.state).toBe('terminated');
  expect(controller.stderr()).not.toMatch(/stopped heartbeating/);
}, 150_000);
