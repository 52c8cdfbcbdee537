import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { runCli } from '../helpers/built-cli.js';
import {
  killLocalLeftovers,
  pidAlive,
  startLocalController,
  taskPid,
  until,
  workerAlive,
  type StartedController,
} from '../helpers/local-controller.js';

/**
 * A local controller listening on `127.0.0.1:0` gets another free port each time it starts. SIGKILLed under a running
 * job and started again on its state directory, its surviving worker follows it to the new port (the state directory's
 * address file): the task runs on where it ran, on the same instance and worker process, with no restart and no
 * instance taken for a silent one. Real processes throughout (the CLI as a subprocess, its worker and task).
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-new-port-'));
const stateDir = join(scratch, 'state');
const running: StartedController[] = [];

afterAll(async () => {
  for (const c of running)
    if (c.process.exitCode === null && c.process.signalCode === null) {
      c.process.kill('SIGTERM');
      await c.exited;
    }
  killLocalLeftovers(stateDir);
  rmSync(scratch, { recursive: true, force: true });
});

/** The local heartbeat timeout (config-loading.ts LOCAL_DEFAULTS: 10 s) a worker that stayed behind would exceed. */
const HEARTBEAT_TIMEOUT_SECONDS = 10;

interface JobAnswer {
  readonly id: string;
  readonly state: string;
  readonly restarts?: readonly { readonly cause: string }[];
  readonly instances: readonly { readonly id: string; readonly cloudId?: string }[];
}

/** The worker's log lines saying the controller answers again after failing: one per controller it found. */
function answersAgain(instanceDir: string): string[] {
  const log = join(instanceDir, 'worker.log');
  return existsSync(log)
    ? readFileSync(log, 'utf8')
        .split('\n')
        .filter((l) => /answers again/.test(l))
    : [];
}

it('a controller restarted on another port keeps its running task on its worker, which follows it there', async () => {
  const first = await startLocalController(stateDir, { port: 0 });
  running.push(first);
  const submitted = await first.api('POST', '/v1/jobs', {
    name: 'long-sleep',
    team: 'research',
    tasks: [{ name: 'main', command: ['sh', '-c', 'sleep 600'], demand: { any: [0, 0.25, 1] } }],
  });
  expect(submitted.status, submitted.text).toBe(201);
  const id = (submitted.json as JobAnswer).id;
  const host = await until(
    `${id} running on a worker`,
    async () => {
      if (((await first.api('GET', `/v1/jobs/${id}`)).json as JobAnswer).state !== 'running')
        return undefined;
      return first
        .instances()
        .find((i) => i.state === 'running' && i.pid !== undefined && taskPid(i.dir, `${id}.0`) !== undefined);
    },
    60_000,
    first.diagnostics,
  );
  const workerPid = host.pid as number;
  const task = taskPid(host.dir, `${id}.0`) as number;
  const before = (await first.api('GET', `/v1/jobs/${id}`)).json as JobAnswer;
  const answeredBefore = answersAgain(host.dir).length;

  first.process.kill('SIGKILL');
  await first.exited;
  const restartedAtMs = Date.now();
  const second = await startLocalController(stateDir, { port: 0 });
  running.push(second);
  expect(second.url).not.toBe(first.url);

  // The worker reaches the new controller, or that controller gives it up as silent: whichever comes first.
  const outcome = await until(
    'the worker to reach the restarted controller, or to be given up',
    () =>
      answersAgain(host.dir).length > answeredBefore
        ? 'followed'
        : /stopped heartbeating/.test(second.stderr())
          ? 'given up as silent'
          : undefined,
    60_000,
    second.diagnostics,
  );
  expect(outcome, second.diagnostics()).toBe('followed');
  // Its log names the controller that answers, not the address it was started with.
  expect(answersAgain(host.dir).slice(answeredBefore)[0]).toContain(
    `the controller at ${second.url} answers again`,
  );
  // Past the heartbeat timeout since the restart (and two polls), the worker must still be heard: it stayed there.
  const windowMs = (HEARTBEAT_TIMEOUT_SECONDS + 2) * 1000 - (Date.now() - restartedAtMs);
  if (windowMs > 0) await new Promise((r) => setTimeout(r, windowMs));

  const after = (await second.api('GET', `/v1/jobs/${id}`)).json as JobAnswer;
  expect(after.state).toBe('running');
  expect(after.restarts ?? []).toEqual([]);
  expect(after.instances).toEqual(before.instances);
  const record = second.instances().find((i) => i.instanceId === host.instanceId);
  expect(record?.state).toBe('running');
  expect(record?.pid).toBe(workerPid);
  expect(record !== undefined && workerAlive(record)).toBe(true);
  expect(pidAlive(task)).toBe(true);
  // No other instance was launched to replace it.
  expect(second.instances().map((i) => i.instanceId)).toEqual([host.instanceId]);
  expect(second.stderr()).not.toMatch(/stopped heartbeating/);
  const view = await runCli(['job', id], { ...second.env, FLEETWISE_SERVER: second.url });
  expect(view.code, view.stderr).toBe(0);
  expect(view.stdout).not.toMatch(/restarts|was lost/);
}, 180_000);
