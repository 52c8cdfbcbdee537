import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it, vi } from 'vitest';
import { runDown } from '../../src/cli/commands/down.js';
import { taskStopperFor } from '../../src/cli/commands/local-task-stopper.js';
import { stopLocalFleet } from '../../src/cli/local-fleet-stop.js';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { readLocalInstances } from '../../src/cloud/local/instance-file.js';
import { LocalProvider, type LocalInstance } from '../../src/cloud/local/local-provider.js';
import { isWorkerOf, ProcessWorkerSpawner } from '../../src/cloud/local/worker-spawner.js';
import { containerName, DockerExecutor, INSTANCE_LABEL } from '../../src/worker/executors/docker.js';
import { prepareHostPaths } from '../../src/worker/executors/task-host-paths.js';
import { persistTask } from '../../src/worker/task-record.js';
import { BASE_IMAGE, describeWithDocker, type DockerContext } from '../helpers/dockerd.js';
import { killProcessGroups } from '../helpers/processes-under.js';
import { UNREACHABLE_URL } from '../helpers/unreachable-url.js';

/**
 * After a crash (controller and worker killed; the worker's containers keep running, as they must for a restarted
 * worker to adopt them), `fleetwise down` stops the containers at the Docker engine the worker used, recorded when it
 * was spawned, not at whatever DOCKER_HOST down's own shell has. Where that engine does not answer, down says which
 * containers may still run, fails, and leaves the instance recorded as running: a later down (or controller) stops
 * them, and a restarted controller does not resume their jobs beside them. Real dockerd, real worker processes (a
 * stand-in script for `fleetwise worker`: what matters here is that it is killed), in-process runDown.
 */
const tmp = mkdtempSync(join(tmpdir(), 'fw-down-task-engine-'));
const FAKE_WORKER = join(tmp, 'fake-worker.mjs');
writeFileSync(FAKE_WORKER, 'setInterval(() => {}, 1000);\n');
/** A socket nothing listens on: the engine as down's shell (or a crashed engine) has it. */
const DEAD_HOST = `unix://${join(tmp, 'no-engine.sock')}`;
const spawned: number[] = [];

afterAll(() => {
  killProcessGroups(spawned);
  rmSync(tmp, { recursive: true, force: true });
});

async function withDockerHost<T>(host: string, body: () => Promise<T>): Promise<T> {
  const saved = process.env.DOCKER_HOST;
  process.env.DOCKER_HOST = host;
  try {
    return await body();
  } finally {
    if (saved === undefined) delete process.env.DOCKER_HOST;
    else process.env.DOCKER_HOST = saved;
  }
}

/** runDown with `host` as its DOCKER_HOST: what it printed, and its error if it failed. */
async function down(
  stateDir: string,
  host: string,
  forgetTasks?: boolean | string[],
): Promise<{ readonly stdout: string; readonly error: Error | undefined }> {
  let stdout = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    stdout += String(chunk);
    return true;
  });
  try {
    await withDockerHost(host, () =>
      runDown({ stateDir, graceSeconds: '5', ...(forgetTasks === undefined ? {} : { forgetTasks }) }),
    );
    return { stdout, error: undefined };
  } catch (e) {
    return { stdout, error: e as Error };
  } finally {
    out.mockRestore();
  }
}

function providerOn(stateDir: string, engine: DockerContext): LocalProvider {
  return new LocalProvider({
    stateFile: join(stateDir, 'local-instances.json'),
    instancesDir: join(stateDir, 'instances'),
    catalog: loadCatalogFile(),
    spawner: new ProcessWorkerSpawner({
      controllerUrl: UNREACHABLE_URL,
      launchSecretKey: 'unused-key',
      executorKind: 'docker',
      executorFor: (_dir, instanceId) => new DockerExecutor({ docker: engine.docker, instanceId }),
      main: FAKE_WORKER,
    }),
  });
}

/**
 * A local instance whose worker was spawned with `workerHost` as its DOCKER_HOST and ran `taskId` in a container of
 * the real engine, as the agent does (its record under tasks/<id>/), then was killed (SIGKILL), leaving the container.
 */
async function crashedInstance(
  stateDir: string,
  engine: DockerContext,
  workerHost: string,
  taskId: string,
): Promise<LocalInstance> {
  const provider = providerOn(stateDir, engine);
  const { instanceIds } = await withDockerHost(workerHost, () =>
    provider.launch({
      typeName: 'c7i.large',
      idempotencyToken: `tok-${taskId}`,
      clusterName: 'down-engine',
      planId: 'plan-1',
      instanceKey: 'slot-0',
    }),
  );
  const instance = provider.instances().find((i) => i.instanceId === instanceIds[0]);
  if (instance?.pid === undefined) throw new Error('no worker pid recorded');
  spawned.push(instance.pid);
  const taskDir = join(instance.dir, 'tasks', taskId);
  const launch = {
    taskId,
    jobId: taskId.split('.')[0] ?? taskId,
    image: BASE_IMAGE,
    command: ['sleep', '300'],
    env: {},
    vcpus: 0.5,
    memoryGiB: 0.25,
    gpus: 0,
    shmSizeGiB: 0.0625,
    checkpointDir: join(taskDir, 'checkpoint'),
    progressFile: join(taskDir, 'progress'),
    restoring: false,
  };
  await prepareHostPaths(launch);
  await new DockerExecutor({
    docker: engine.docker,
    instanceId: instance.instanceId,
    evictBuiltImages: false,
  }).start(launch);
  await persistTask(taskDir, {
    taskId,
    jobId: launch.jobId,
    phase: 'running',
    startedAtMs: Date.now(),
    stopRequested: false,
    attempt: 1,
    lastLogUploadMs: 0,
  });
  killProcessGroups([instance.pid]);
  for (let i = 0; isWorkerOf(instance.pid, instance.instanceId); i += 1) {
    if (i > 100) throw new Error(`the worker of ${instance.instanceId} outlived SIGKILL`);
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(await containerState(engine, instance.instanceId, taskId)).toBe('running');
  return instance;
}

/** The state of the instance's container for the task, or 'gone'. */
async function containerState(engine: DockerContext, instanceId: string, taskId: string): Promise<string> {
  const found = await engine.docker.listContainers({
    all: true,
    filters: { label: [`${INSTANCE_LABEL}=${instanceId}`], name: [containerName(taskId, instanceId)] },
  });
  return found[0]?.State ?? 'gone';
}

/** What `body` wrote to stdout. */
async function stdoutOf(body: () => Promise<unknown>): Promise<string> {
  let stdout = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    stdout += String(chunk);
    return true;
  });
  try {
    await body();
    return stdout;
  } finally {
    out.mockRestore();
  }
}

/** The provider as a controller has it: tasks stopped at each worker's recorded engine, failures warned of. */
function controllerProviderOn(stateDir: string, warnings: string[]): LocalProvider {
  return new LocalProvider({
    stateFile: join(stateDir, 'local-instances.json'),
    instancesDir: join(stateDir, 'instances'),
    catalog: loadCatalogFile(),
    taskStopRetryMs: 300,
    spawner: new ProcessWorkerSpawner({
      controllerUrl: UNREACHABLE_URL,
      launchSecretKey: 'unused-key',
      executorKind: 'docker',
      executorFor: taskStopperFor,
      main: FAKE_WORKER,
      taskStopWaitMs: 5_000,
      warn: (message) => warnings.push(message),
    }),
  });
}

function recordOf(stateDir: string, instanceId: string): LocalInstance | undefined {
  return readLocalInstances(join(stateDir, 'local-instances.json')).find((i) => i.instanceId === instanceId);
}

/**
 * A unix socket in front of the engine, as the endpoint a worker was given: closed, the engine is unreachable there
 * (a stopped or restarting dockerd), reopened, it answers again.
 */
function engineEndpoint(path: string, engineHost: string): { open(): Promise<void>; close(): Promise<void> } {
  const target = engineHost.startsWith('unix://')
    ? { path: engineHost.slice('unix://'.length) }
    : (() => {
        const url = new URL(engineHost.replace(/^tcp:/, 'http:'));
        return { host: url.hostname, port: Number(url.port) };
      })();
  let server: Server | undefined;
  const sockets = new Set<Socket>();
  return {
    open: () =>
      new Promise((resolve, reject) => {
        server = createServer((client) => {
          const upstream = connect(target);
          for (const s of [client, upstream]) {
            sockets.add(s);
            s.on('error', () => undefined);
            s.once('close', () => sockets.delete(s));
          }
          client.pipe(upstream).pipe(client);
          client.once('close', () => upstream.destroy());
          upstream.once('close', () => client.destroy());
        });
        server.once('error', reject);
        server.listen(path, () => resolve());
      }),
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        if (server === undefined) resolve();
        else server.close(() => resolve());
      }),
  };
}

describeWithDocker(
  "fleetwise down stops a dead worker's containers at the engine its worker used",
  (engine) => {
    it('reaches them at the recorded engine though its own DOCKER_HOST names a dead socket, and records the instance stopped', async () => {
      const stateDir = join(tmp, 'recorded');
      const instance = await crashedInstance(stateDir, engine, engine.host, 'job-7.0');

      const result = await down(stateDir, DEAD_HOST);
      expect(result.error).toBeUndefined();
      expect(result.stdout).toContain(
        `worker ${instance.instanceId} (pid ${instance.pid}): had already exited; its leftover tasks (if any) are stopped`,
      );
      expect(await containerState(engine, instance.instanceId, 'job-7.0')).toBe('gone');
      expect(recordOf(stateDir, instance.instanceId)).toMatchObject({
        state: 'terminated',
        stoppedBy: 'down',
      });
      // Recorded beside the instance's other files when its worker was spawned.
      expect(JSON.parse(readFileSync(join(instance.dir, 'worker-engine.json'), 'utf8'))).toEqual({
        executor: 'docker',
        dockerHost: engine.host,
      });
    });

    it('with the recorded engine unreachable too: fails naming the instance and its container, leaves it recorded running; a later down stops it', async () => {
      const stateDir = join(tmp, 'unreachable');
      const socket = join(tmp, 'worker-engine.sock');
      const endpoint = engineEndpoint(socket, engine.host);
      await endpoint.open();
      const instance = await crashedInstance(stateDir, engine, `unix://${socket}`, 'job-8.0');
      await endpoint.close();

      const failed = await down(stateDir, DEAD_HOST);
      expect(failed.error?.message).toMatch(
        new RegExp(
          `could not stop the tasks of local instance ${instance.instanceId} .*run fleetwise down again`,
        ),
      );
      expect(failed.stdout).toContain(
        `worker ${instance.instanceId} (pid ${instance.pid}): had already exited, but its tasks could not be stopped (`,
      );
      expect(failed.stdout).toContain(
        `container ${containerName('job-8.0', instance.instanceId)} may still run on the Docker engine at unix://${socket}`,
      );
      expect(failed.stdout).not.toMatch(/are stopped/);
      expect(await containerState(engine, instance.instanceId, 'job-8.0')).toBe('running');
      const kept = recordOf(stateDir, instance.instanceId);
      expect(kept?.state).toBe('running');
      expect(kept?.stoppedBy).toBeUndefined();

      // The engine answers again at the worker's endpoint: the next down stops the container and records the instance.
      await endpoint.open();
      try {
        const retried = await down(stateDir, DEAD_HOST);
        expect(retried.error).toBeUndefined();
        expect(retried.stdout).toContain(
          `worker ${instance.instanceId} (pid ${instance.pid}): had already exited; its leftover tasks (if any) are stopped`,
        );
        expect(await containerState(engine, instance.instanceId, 'job-8.0')).toBe('gone');
        expect(recordOf(stateDir, instance.instanceId)).toMatchObject({
          state: 'terminated',
          stoppedBy: 'down',
        });
      } finally {
        await endpoint.close();
      }
    });

    it("a controller's stop keeps on record the tasks it could not stop, says so, and stops them once their engine answers; down meanwhile fails naming them", async () => {
      const stateDir = join(tmp, 'controller-left');
      const socket = join(tmp, 'left-engine.sock');
      const endpoint = engineEndpoint(socket, engine.host);
      await endpoint.open();
      const instance = await crashedInstance(stateDir, engine, `unix://${socket}`, 'job-9.0');
      await endpoint.close();
      const warnings: string[] = [];
      const provider = controllerProviderOn(stateDir, warnings);
      const name = containerName('job-9.0', instance.instanceId);

      // The controller's clean stop: the instance ends (billing stops), its task stays on record as still to stop.
      const said = await stdoutOf(() =>
        stopLocalFleet(provider, { keepWorkers: false, stateDir, giveUpSeconds: 0, graceSeconds: 2 }),
      );
      expect(said).toContain(
        `warning: local instance ${instance.instanceId} stopped, but its tasks could not be`,
      );
      expect(said).toContain(`container ${name} may still run on the Docker engine at unix://${socket}`);
      expect(said).toMatch(/run twice until those are stopped/);
      expect(said).not.toMatch(/resume from their checkpoints/);
      expect(warnings.join('\n')).toMatch(/their jobs may run twice/);
      expect(recordOf(stateDir, instance.instanceId)).toMatchObject({
        state: 'terminated',
        tasksLeft: ['job-9.0'],
      });

      // down sees the task still to stop, fails naming it, and leaves it on record.
      const failed = await down(stateDir, DEAD_HOST);
      expect(failed.error?.message).toMatch(
        new RegExp(`could not stop the tasks of local instance ${instance.instanceId} .*--forget-tasks`),
      );
      expect(failed.stdout).toContain(
        `container ${name} may still run on the Docker engine at unix://${socket}`,
      );
      expect(recordOf(stateDir, instance.instanceId)?.tasksLeft).toEqual(['job-9.0']);
      expect(await containerState(engine, instance.instanceId, 'job-9.0')).toBe('running');

      // The engine answers again: the controller's next look retries in the background, without holding list() up.
      await endpoint.open();
      try {
        await new Promise((resolve) => setTimeout(resolve, 400));
        const listed = await provider.list('down-engine');
        expect(listed).toEqual([]);
        await provider.leftTaskStopsDone();
        expect(await containerState(engine, instance.instanceId, 'job-9.0')).toBe('gone');
        expect(recordOf(stateDir, instance.instanceId)?.tasksLeft).toBeUndefined();
        expect(recordOf(stateDir, instance.instanceId)?.state).toBe('terminated');
      } finally {
        await endpoint.close();
      }
      const clean = await down(stateDir, DEAD_HOST);
      expect(clean.error).toBeUndefined();
      expect(clean.stdout).toContain('nothing to stop');
    });

    it('--forget-tasks records the tasks of an engine gone for good as stopped without asking it, saying what it forgot', async () => {
      const stateDir = join(tmp, 'forget');
      const socket = join(tmp, 'gone-engine.sock');
      const endpoint = engineEndpoint(socket, engine.host);
      await endpoint.open();
      const instance = await crashedInstance(stateDir, engine, `unix://${socket}`, 'job-10.0');
      await endpoint.close();
      const name = containerName('job-10.0', instance.instanceId);
      try {
        expect((await down(stateDir, DEAD_HOST)).error).toBeDefined();
        const mistyped = await down(stateDir, DEAD_HOST, ['local-000000000000']);
        expect(mistyped.error?.message).toMatch(
          /--forget-tasks.*local-000000000000: no such local instance/s,
        );
        expect(recordOf(stateDir, instance.instanceId)?.state).toBe('running');

        // The user removed the container by hand: down records it stopped, never asking the dead engine.
        await engine.docker.getContainer(name).remove({ force: true });
        const forgot = await down(stateDir, DEAD_HOST, [instance.instanceId]);
        expect(forgot.error).toBeUndefined();
        expect(forgot.stdout).toContain(
          `--forget-tasks: recorded the tasks of ${instance.instanceId} as stopped without asking its engine`,
        );
        expect(forgot.stdout).toContain(name);
        expect(recordOf(stateDir, instance.instanceId)).toMatchObject({
          state: 'terminated',
          stoppedBy: 'down',
        });
        expect((await down(stateDir, DEAD_HOST)).stdout).toContain('nothing to stop');
      } finally {
        await engine.docker
          .getContainer(name)
          .remove({ force: true })
          .catch(() => undefined);
      }
    });
  },
);
