import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { packContext } from '../../src/cli/context-archive.js';
import type { DesiredTask } from '../../src/protocol/worker-protocol.js';
import { buildContextKey } from '../../src/protocol/object-keys.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readAll } from '../../src/storage/streams.js';
import { DockerExecutor } from '../../src/worker/executors/docker.js';
import { dockerFromEnv } from '../../src/worker/executors/docker-engine.js';
import { buildTag } from '../../src/worker/image-cache.js';
import { TaskLifecycle } from '../../src/worker/task-lifecycle.js';
import { describeWithDocker } from '../helpers/dockerd.js';
import { offlineLifecycle, until } from './agent-fixtures.js';

describeWithDocker('a held task is prepared with its image (co-start)', (engine) => {
  let tmp: string;
  let store: FsObjectStore;
  let docker: Docker;
  let executor: DockerExecutor;
  beforeAll(() => {
    tmp = mkdtempSync(join(tmpdir(), 'fw-docker-held-'));
    store = new FsObjectStore(join(tmp, 'store'));
    // A client of its own, so counting its builds counts only this file's.
    docker = dockerFromEnv({ DOCKER_HOST: engine.host });
    executor = new DockerExecutor({ docker });
  });
  afterAll(async () => {
    for (const t of await executor.list()) await executor.remove(t.taskId);
    rmSync(tmp, { recursive: true, force: true });
  });

  /** A build context unique to this run (never an image built before), uploaded as `fleetwise submit` does. */
  const upload = async (name: string, dockerfile: string): Promise<{ ref: string; hash: string }> => {
    const dir = join(tmp, name);
    mkdirSync(dir);
    writeFileSync(join(dir, 'Dockerfile'), dockerfile);
    writeFileSync(join(dir, 'nonce'), `${process.pid}-${Date.now()}-${Math.random()}\n`);
    const { archive } = await packContext(dir);
    const hash = createHash('sha256').update(archive).digest('hex');
    const ref = buildContextKey(hash, 'gzip');
    await store.put(ref, archive);
    return { ref, hash };
  };

  const lifecycle = (): TaskLifecycle => offlineLifecycle(executor, store, join(tmp, 'work'));

  const held = (taskId: string, context: string, command: string[]): DesiredTask => ({
    taskId,
    jobId: taskId.split('.')[0] ?? taskId,
    action: 'run',
    restore: false,
    attempt: 1,
    hold: true,
    launch: {
      build: { context },
      command,
      env: {},
      vcpus: 0.5,
      memoryGiB: 0,
      gpus: 0,
      shmSizeGiB: 0,
    },
    checkpoint: { signal: 'SIGTERM', timeoutSeconds: 1 },
  });

  it('is ready only once its image is built, and its release starts it without building', async () => {
    const { ref, hash } = await upload('builds', 'FROM base:local\nRUN echo built > /built\n');
    const builds = vi.spyOn(docker, 'buildImage');
    const tasks = lifecycle();
    tasks.start(held('held-1.0', ref, ['cat', '/built']));
    await tasks.settle();
    expect(tasks.get('held-1.0')?.phase).toBe('ready');
    // The image is on the host when the task says it is ready, and nothing of it runs yet.
    expect((await docker.getImage(buildTag(hash)).inspect()).Id).toMatch(/^sha256:/);
    expect(builds).toHaveBeenCalledTimes(1);
    expect(await executor.status('held-1.0')).toBeUndefined();

    const task = tasks.get('held-1.0');
    if (task === undefined) throw new Error('the task is gone');
    tasks.release(task);
    await tasks.settle();
    expect(tasks.get('held-1.0')?.phase).toBe('running');
    expect(builds).toHaveBeenCalledTimes(1);
    const exited = await until('the released task to exit', async () => {
      const s = await executor.status('held-1.0');
      return s?.state === 'exited' ? s : undefined;
    });
    expect(exited.exitCode).toBe(0);
    expect((await readAll(await executor.logs('held-1.0'))).toString()).toBe('built\n');
    builds.mockRestore();
    await tasks.stopWatchers();
    await executor.remove('held-1.0');
  });

  it('fails, never ready, when its image does not build, with the build log', async () => {
    const { ref } = await upload('fails', 'FROM base:local\nRUN echo broken-step-output && exit 3\n');
    const tasks = lifecycle();
    tasks.start(held('held-2.0', ref, ['true']));
    await tasks.settle();
    const t = tasks.get('held-2.0');
    expect(t?.phase).toBe('failed');
    expect(t?.reason).toMatch(/^could not start: building .* failed: /);
    expect(t?.reason).toContain('broken-step-output');
    expect(tasks.reports()).toMatchObject([{ taskId: 'held-2.0', state: 'failed' }]);
    expect(await executor.status('held-2.0')).toBeUndefined();
    await tasks.stopWatchers();
  });
});
