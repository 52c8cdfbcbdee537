import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProcessWorkerSpawner } from '../../src/cloud/local/worker-spawner.js';
import type { DesiredTask } from '../../src/protocol/worker-protocol.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { WorkerAgent } from '../../src/worker/agent.js';
import { ControllerClient } from '../../src/worker/controller-client.js';
import { readExitRecord } from '../../src/worker/exit-record.js';
import { DockerExecutor, TASK_LABEL } from '../../src/worker/executors/docker.js';
import { DockerTimeoutError, dockerUnreachable } from '../../src/worker/executors/docker-engine.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import { BASE_IMAGE, describeWithDocker } from '../helpers/dockerd.js';
import {
  BOOTSTRAP,
  FakeController,
  offlineLifecycle,
  RecordingLogger,
  shellTask,
  until,
} from './agent-fixtures.js';

/**
 * What the Docker engine does to a worker's tasks and to the worker itself: a `docker stop` (or an engine restart, a
 * host shutdown) stops a task, it does not finish it; an engine that hangs or cannot be reached fails each call in
 * bounded time, and the worker keeps heartbeating with what it last knew, so the controller does not take it for dead.
 */
const tmp = mkdtempSync(join(tmpdir(), 'fw-docker-trouble-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const desired = (taskId: string, script: string, extra: Partial<DesiredTask> = {}): DesiredTask =>
  shellTask(taskId, script, extra, { image: BASE_IMAGE, vcpus: 0.5, memoryGiB: 0.25 });

/** Reports 3 iterations, then on SIGTERM writes a checkpoint and exits 0 (as examples/counter does). */
const CHECKPOINTS_ON_TERM =
  'trap \'echo 3 > "$FLEETWISE_CHECKPOINT_DIR/state"; exit 0\' TERM; ' +
  'echo "$(date +%s) 3" >> "$FLEETWISE_PROGRESS_FILE"; while :; do sleep 0.05; done';

/** Reports 3 iterations and ignores SIGTERM: only a SIGKILL ends it. */
const IGNORES_TERM =
  'trap "" TERM; echo "$(date +%s) 3" >> "$FLEETWISE_PROGRESS_FILE"; while :; do sleep 0.05; done';

/**
 * How long a test waits on a call meeting a hung engine before it fails (and thaws the engine it froze), within the
 * test's own timeout: far past the bounds these tests give the engine's calls (at most 1 s), so only a call waiting
 * on the engine for good reaches it. It measures nothing: that a call gave up at its own bound is what it reports.
 */
const HANG_MS = 30_000;

/** A socket that accepts connections and never answers: an engine hung mid-request, as a client sees it. */
async function hungEngine(path: string): Promise<{ server: Server; close(): Promise<void> }> {
  const held: Socket[] = [];
  const server = createServer((socket) => held.push(socket));
  await new Promise<void>((resolve) => server.listen(path, resolve));
  return {
    server,
    close: async () => {
      for (const s of held) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('an engine that hangs or is not there', () => {
  it('fails each Engine API call, named, within its bound instead of hanging', async () => {
    const socket = join(tmp, 'hung.sock');
    const engine = await hungEngine(socket);
    try {
      const executor = new DockerExecutor({
        docker: new Docker({ socketPath: socket }),
        queryTimeoutMs: 300,
        changeTimeoutMs: 300,
      });
      // Each call ends at its own bound, which its error names.
      const listing = await bounded(
        executor.list().catch((e: unknown) => e),
        HANG_MS,
      );
      expect(listing).toBeInstanceOf(DockerTimeoutError);
      expect((listing as Error).message).toBe(
        'the Docker engine did not answer a container listing within 0.3 s',
      );
      await expect(bounded(executor.kill('x-1.0'), HANG_MS)).rejects.toThrow(
        'the Docker engine did not answer a container listing within 0.3 s',
      );
      // The controller's start-up check, bounded the same way.
      expect(await bounded(dockerUnreachable({ DOCKER_HOST: `unix://${socket}` }, 300), HANG_MS)).toBe(
        'the Docker engine did not answer a ping within 0.3 s',
      );
      expect(await dockerUnreachable({ DOCKER_HOST: `unix://${join(tmp, 'nothing.sock')}` }, 300)).toMatch(
        /ENOENT|connect/,
      );
    } finally {
      await engine.close();
    }
  });

  it('a worker whose engine cannot be reached heartbeats all the same, its recorded tasks as they were', async () => {
    const controller = new FakeController(join(tmp, 'unreachable-store'));
    await controller.start();
    try {
      const workDir = join(tmp, 'unreachable-work');
      // A task this host ran before the worker restarted, as its record says.
      mkdirSync(join(workDir, 'tasks', 'rec-1.0'), { recursive: true });
      writeFileSync(
        join(workDir, 'tasks', 'rec-1.0', 'agent.json'),
        JSON.stringify({
          jobId: 'rec-1',
          phase: 'running',
          startedAtMs: 1,
          stopRequested: false,
          attempt: 2,
        }),
      );
      const logger = new RecordingLogger();
      const agent = new WorkerAgent({
        connection: new ControllerClient(controller.url),
        credentials: { launch: launchSecretCredential(BOOTSTRAP) },
        executor: new DockerExecutor({
          docker: new Docker({ socketPath: join(tmp, 'no-engine.sock') }),
          instanceId: 'local-test',
        }),
        openStore: (location) => new FsObjectStore(location),
        cloudInstanceId: 'local-test',
        workDir,
        heartbeatSeconds: 0.1,
        logger,
      });
      controller.answer = [desired('new-1.0', 'true')];
      await agent.register();
      await agent.tick();
      await agent.tick();
      await agent.settle();
      expect(controller.heartbeats.map((h) => h.tasks)).toEqual([
        [expect.objectContaining({ taskId: 'rec-1.0', state: 'running', attempt: 2 })],
        [expect.objectContaining({ taskId: 'rec-1.0', state: 'running', attempt: 2 })],
      ]);
      // The executor is named as the cause, once; nothing was started (it would only fail for this host's fault).
      const warnings = logger.lines.filter((l) => l.startsWith('warn '));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(
        /^warn the docker executor did not answer: .*heartbeating the tasks' last known/,
      );
      expect(logger.lines.some((l) => l.includes('new-1.0'))).toBe(false);
      await agent.run(AbortSignal.abort());
    } finally {
      await controller.stop();
    }
  });
});

describeWithDocker('a real dockerd stopping and hanging under a worker', (engine) => {
  let store: FsObjectStore;
  beforeAll(() => {
    store = new FsObjectStore(join(tmp, 'store'));
  });

  const containerOf = async (taskId: string): Promise<Docker.Container> => {
    const [found] = await engine.docker.listContainers({
      all: true,
      filters: { label: [`${TASK_LABEL}=${taskId}`] },
    });
    if (found === undefined) throw new Error(`no container for ${taskId}`);
    return engine.docker.getContainer(found.Id);
  };

  it('`docker stop` of a watched task short of its iterations is a stop: reported stopped, no exit recorded', async () => {
    const executor = new DockerExecutor({ docker: engine.docker, instanceId: 'local-stop' });
    const workDir = join(tmp, 'stop-work');
    const tasks = offlineLifecycle(executor, store, workDir, 50);
    tasks.start(desired('dstop-1.0', CHECKPOINTS_ON_TERM, { totalIterations: 100 }));
    await tasks.settle();
    expect(tasks.get('dstop-1.0')?.phase).toBe('running');
    await until(
      'progress to be written',
      async () => readIfThere(join(workDir, 'tasks', 'dstop-1.0', 'progress')).includes(' 3') || undefined,
    );
    await tasks.observe();
    await (await containerOf('dstop-1.0')).stop({ t: 10 });
    await until('the stop to be seen', async () => {
      await tasks.observe();
      await tasks.settle();
      return tasks.get('dstop-1.0')?.phase !== 'running' || undefined;
    });
    const [report] = tasks.reports();
    expect(report).toMatchObject({
      taskId: 'dstop-1.0',
      state: 'stopped',
      exitCode: 0,
      completedIterations: 3,
    });
    expect(report?.reason).toMatch(/short of its declared iterations/);
    // Said as Docker has it, and counted for the controller to show as a restart of the job.
    expect(report?.reason).toMatch(
      /taken as stopped from outside the worker \(a host shutdown, `docker stop`\)/,
    );
    expect(report?.outsideStops).toBe(1);
    expect(report?.checkpoint).toBeDefined();
    expect(await readExitRecord(store, { jobId: 'dstop-1', taskId: 'dstop-1.0' }, 1)).toBeUndefined();
    await tasks.stopWatchers();
    await executor.remove('dstop-1.0');
  });

  it('`docker stop` that has to kill a task ignoring SIGTERM is a stop too: reported stopped, not failed', async () => {
    const executor = new DockerExecutor({ docker: engine.docker, instanceId: 'local-stop-kill' });
    const workDir = join(tmp, 'stop-kill-work');
    const tasks = offlineLifecycle(executor, store, workDir, 50);
    tasks.start(desired('dkill-1.0', IGNORES_TERM, { totalIterations: 100 }));
    await tasks.settle();
    await until(
      'progress to be written',
      async () => readIfThere(join(workDir, 'tasks', 'dkill-1.0', 'progress')).includes(' 3') || undefined,
    );
    await tasks.observe();
    // SIGTERM is ignored: after its 1 s grace, `docker stop` kills it (exit 137), which is not out of memory.
    await (await containerOf('dkill-1.0')).stop({ t: 1 });
    await until('the stop to be seen', async () => {
      await tasks.observe();
      await tasks.settle();
      return tasks.get('dkill-1.0')?.phase !== 'running' || undefined;
    });
    const [report] = tasks.reports();
    expect(report).toMatchObject({ taskId: 'dkill-1.0', state: 'stopped', exitCode: 137 });
    expect(report?.reason).toMatch(/SIGKILL ended it \(exit code 137, not out of memory\)/);
    expect(await readExitRecord(store, { jobId: 'dkill-1', taskId: 'dkill-1.0' }, 1)).toBeUndefined();
    await tasks.stopWatchers();
    await executor.remove('dkill-1.0');
  });

  it('two removals of one container at once both end once it is gone (a termination and a cleanup racing)', async () => {
    const executor = new DockerExecutor({ docker: engine.docker, instanceId: 'local-twice' });
    const tasks = offlineLifecycle(executor, store, join(tmp, 'twice-work'), 50);
    tasks.start(desired('twice-1.0', 'exec sleep 600'));
    await tasks.settle();
    expect(tasks.get('twice-1.0')?.phase).toBe('running');
    await tasks.stopWatchers();
    await Promise.all([
      executor.remove('twice-1.0'),
      executor.remove('twice-1.0'),
      executor.remove('twice-1.0'),
    ]);
    expect(await executor.status('twice-1.0')).toBeUndefined();
  });

  it('a hung dockerd: the worker heartbeats its last known states, a local termination does not wait on it', async () => {
    // Frozen with SIGSTOP, as a hung engine is: the private dockerd this suite starts (not one DOCKER_HOST names).
    const pidFile = join(dirname(engine.host.replace(/^unix:\/\//, '')), 'dockerd.pid');
    if (!existsSync(pidFile))
      throw new Error(`no ${pidFile}: this test freezes its own dockerd (unset DOCKER_HOST)`);
    const pid = Number(readFileSync(pidFile, 'utf8').trim());
    const controller = new FakeController(join(tmp, 'hung-store'));
    await controller.start();
    const workDir = join(tmp, 'hung-work');
    const logger = new RecordingLogger();
    const executor = new DockerExecutor({
      docker: engine.docker,
      instanceId: 'local-hung',
      queryTimeoutMs: 1_000,
    });
    const agent = new WorkerAgent({
      connection: new ControllerClient(controller.url),
      credentials: { launch: launchSecretCredential(BOOTSTRAP) },
      executor,
      openStore: (location) => new FsObjectStore(location),
      cloudInstanceId: 'local-hung',
      workDir,
      heartbeatSeconds: 0.1,
      checkpointPollMs: 50,
      logger,
    });
    try {
      controller.answer = [desired('hung-1.0', CHECKPOINTS_ON_TERM, { totalIterations: 100 })];
      await agent.register();
      await until('the task to run', async () => {
        await agent.tick();
        await agent.settle();
        return controller.last('hung-1.0')?.state === 'running' || undefined;
      });
      process.kill(pid, 'SIGSTOP');
      const before = controller.heartbeats.length;
      // The tick ends while the engine is still frozen: its heartbeat went out with the last known state, and the
      // worker says it gave up on the engine at its own bound (1 s), whichever call met the frozen engine first (the
      // tick's listing or a watcher's inspect, which may come due only after the tick ended).
      await bounded(agent.tick(), HANG_MS);
      expect(controller.heartbeats.slice(before).map((h) => h.tasks)).toEqual([
        [expect.objectContaining({ taskId: 'hung-1.0', state: 'running' })],
      ]);
      const gaveUp =
        /^warn the docker executor did not answer: the Docker engine did not answer (a container listing|the inspect of hung-1\.0's container) within 1 s/;
      await until(
        'the worker to say it gave up on the engine',
        async () => (logger.lines.some((l) => gaveUp.test(l)) ? true : undefined),
        HANG_MS,
      );

      // The local controller's termination of the instance: bounded, its stops go on in the background.
      const warned: string[] = [];
      const spawner = new ProcessWorkerSpawner({
        controllerUrl: controller.url,
        launchSecretKey: 'k',
        executorKind: 'docker',
        executorFor: () => executor,
        taskStopWaitMs: 300,
        warn: (m) => warned.push(m),
      });
      await bounded(
        spawner.kill({
          instanceId: 'local-hung',
          typeName: 't',
          state: 'terminated',
          tags: {},
          launchTimeMs: 0,
          dir: workDir,
        }),
        HANG_MS,
      );
      // It returned at its own wait (0.3 s), before the engine's listing could time out (1 s, a later timer however
      // busy the host): the stops are still under way, so how they end is not yet reported.
      expect(warned).toEqual([
        expect.stringMatching(/^the tasks of local instance local-hung are still being stopped/),
      ]);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    // The engine answers again: so does the worker (and the background stops finish the task).
    await agent.tick();
    expect(logger.lines).toContainEqual(expect.stringMatching(/^info the docker executor answers again/));
    await agent.run(AbortSignal.abort());
    for (const t of await executor.list()) await executor.remove(t.taskId);
    await controller.stop();
  });
});

/** `promise`, or a failure after `ms`: whatever hangs, the test goes on to thaw the engine it froze. */
async function bounded<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function readIfThere(path: string): string {
  return existsSync(path) ? readFileSync(path, 'utf8') : '';
}
