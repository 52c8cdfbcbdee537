import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readAll } from '../../src/storage/streams.js';
import { listCheckpoints, restoreLatestCheckpoint } from '../../src/worker/checkpoints.js';
import { CheckpointWatcher } from '../../src/worker/checkpoint-watcher.js';
import { checkpointAndStop } from '../../src/worker/checkpoint-stop.js';
import type { TaskLaunch } from '../../src/worker/executor.js';
import {
  CONTAINER_CHECKPOINT_DIR,
  demuxLogs,
  containerName,
  DockerExecutor,
  INSTANCE_LABEL,
  JOB_LABEL,
  TASK_LABEL,
} from '../../src/worker/executors/docker.js';
import { prepareHostPaths } from '../../src/worker/executors/task-host-paths.js';
import {
  buildTag,
  hashBuildContext,
  ImageBuildError,
  ImageCache,
  ImagePullError,
} from '../../src/worker/image-cache.js';
import { hostFaultOf } from '../../src/worker/host-fault.js';
import { ProgressTracker } from '../../src/worker/progress.js';
import { persistTask } from '../../src/worker/task-record.js';
import { BASE_IMAGE, describeWithDocker } from '../helpers/dockerd.js';
import { offlineLifecycle } from './agent-fixtures.js';

const COUNTER_CONTEXT = join(PROJECT_ROOT, 'examples', 'counter');
const GIB = 1024 ** 3;

async function until<T>(
  probe: () => Promise<T | undefined>,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('docker executor: pure parts', () => {
  it('requests GPUs only when the task has some, and sets limits from the launch', () => {
    const executor = new DockerExecutor({ docker: undefined });
    const launch = (gpus: number): TaskLaunch => ({
      taskId: 'j-1.0',
      jobId: 'j-1',
      image: 'x',
      command: [],
      env: { A: '1' },
      vcpus: 1.5,
      memoryGiB: 2,
      gpus,
      shmSizeGiB: 0,
      checkpointDir: '/ck',
      progressFile: '/p/progress',
      restoring: true,
    });
    const withGpu = executor.containerSpec(launch(2), 'img');
    expect(withGpu.HostConfig?.DeviceRequests).toEqual([
      { Driver: 'nvidia', Count: 2, Capabilities: [['gpu']] },
    ]);
    expect(withGpu.HostConfig?.NanoCpus).toBe(1_500_000_000);
    expect(withGpu.HostConfig?.ShmSize).toBeUndefined();
    expect(withGpu.Cmd).toBeUndefined(); // the image's default command
    expect(withGpu.Env).toContain('FLEETWISE_RESTORE=1');
    expect(executor.containerSpec(launch(0), 'img').HostConfig?.DeviceRequests).toBeUndefined();
    expect(withGpu.HostConfig?.NetworkMode).toBe('bridge');
    // Memory and swap together at the demand, no swap on top; never under the 6 MiB the engine takes at least.
    expect(withGpu.HostConfig).toMatchObject({ Memory: 2 * 1024 ** 3, MemorySwap: 2 * 1024 ** 3 });
    const tiny = executor.containerSpec({ ...launch(0), memoryGiB: 0.004 }, 'img').HostConfig;
    expect(tiny).toMatchObject({ Memory: 6 * 1024 ** 2, MemorySwap: 6 * 1024 ** 2 });
    const unlimited = executor.containerSpec({ ...launch(0), memoryGiB: 0 }, 'img').HostConfig;
    expect(unlimited?.Memory).toBeUndefined();
  });

  it('demultiplexes Docker log frames and passes TTY output through', () => {
    const frame = (kind: number, text: string): Buffer => {
      const header = Buffer.alloc(8);
      header[0] = kind;
      header.writeUInt32BE(Buffer.byteLength(text), 4);
      return Buffer.concat([header, Buffer.from(text)]);
    };
    expect(demuxLogs(Buffer.concat([frame(1, 'out\n'), frame(2, 'err\n')])).toString()).toBe('out\nerr\n');
    expect(demuxLogs(Buffer.from('plain tty output\n')).toString()).toBe('plain tty output\n');
  });

  it('tags builds by content hash and rejects something that is not a digest', async () => {
    const hash = await hashBuildContext(COUNTER_CONTEXT);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(buildTag(hash)).toBe(`fleetwise-build:${hash.slice(0, 32)}`);
    expect(() => buildTag('latest')).toThrow(/not a hex digest/);
  });

  it('tags a build by its Dockerfile too: one context holds several images', () => {
    const hash = 'ab'.repeat(32);
    // The default Dockerfile keeps the content hash's own tag (images built before stay valid).
    expect(buildTag(hash, 'Dockerfile')).toBe(buildTag(hash));
    expect(buildTag(hash, './Dockerfile.gpu')).toBe(buildTag(hash, 'Dockerfile.gpu'));
    const tags = ['Dockerfile.gpu', 'Dockerfile.cpu', 'docker/Dockerfile'].map((f) => buildTag(hash, f));
    expect(new Set([buildTag(hash), ...tags]).size).toBe(4);
    for (const tag of tags) expect(tag).toMatch(/^fleetwise-build:[0-9a-f]{32}$/);
  });
});

describeWithDocker('docker executor against a real dockerd', (engine) => {
  let tmp: string;
  let executor: DockerExecutor;
  let contentHash: string;
  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'fw-docker-test-'));
    executor = new DockerExecutor({ docker: engine.docker });
    contentHash = await hashBuildContext(COUNTER_CONTEXT);
  });
  afterAll(async () => {
    for (const t of await executor.list()) await executor.remove(t.taskId);
    rmSync(tmp, { recursive: true, force: true });
  });

  const counterLaunch = (taskId: string, env: Record<string, string>, restoring = false): TaskLaunch => ({
    taskId,
    jobId: taskId.split('.')[0] ?? taskId,
    build: { contextDir: COUNTER_CONTEXT, contentHash },
    command: ['sh', 'counter.sh'],
    env: { STEP_SECONDS: '0.05', CHECKPOINT_SECONDS: '1', ...env },
    vcpus: 0.5,
    memoryGiB: 0.25,
    gpus: 0,
    shmSizeGiB: 0.0625,
    checkpointDir: join(tmp, taskId, 'checkpoint'),
    progressFile: join(tmp, taskId, 'progress'),
    restoring,
  });

  it('builds the counter image once per content hash (FROM busybox:1.36, the imported busybox tagged so)', async () => {
    const cache = new ImageCache(engine.docker);
    const started = Date.now();
    const tag = await cache.ensureBuilt({ contextDir: COUNTER_CONTEXT, contentHash });
    const buildMs = Date.now() - started;
    const image = await engine.docker.getImage(tag).inspect();
    expect(image.Config.WorkingDir).toBe('/app');
    const again = Date.now();
    const [a, b] = await Promise.all([
      cache.ensureBuilt({ contextDir: COUNTER_CONTEXT, contentHash }),
      new ImageCache(engine.docker).ensureBuilt({ contextDir: COUNTER_CONTEXT, contentHash }),
    ]);
    expect([a, b]).toEqual([tag, tag]);
    expect((await engine.docker.getImage(tag).inspect()).Id).toBe(image.Id);
    process.stderr.write(`[docker] build ${buildMs} ms, cached lookup ${Date.now() - again} ms\n`);
  });

  it('builds each Dockerfile of one context into its own image, also when both start at once', async () => {
    const ctx = join(tmp, 'two-dockerfiles');
    mkdirSync(ctx);
    writeFileSync(join(ctx, 'Dockerfile.gpu'), 'FROM base:local\nLABEL flavour=gpu\n');
    writeFileSync(join(ctx, 'Dockerfile.cpu'), 'FROM base:local\nLABEL flavour=cpu\n');
    writeFileSync(join(ctx, 'app.py'), 'print(1)\n');
    const hash = await hashBuildContext(ctx);
    const cache = new ImageCache(engine.docker);
    const [gpu, cpu] = await Promise.all([
      cache.ensureBuilt({ contextDir: ctx, dockerfile: 'Dockerfile.gpu', contentHash: hash }),
      cache.ensureBuilt({ contextDir: ctx, dockerfile: 'Dockerfile.cpu', contentHash: hash }),
    ]);
    expect(gpu).not.toBe(cpu);
    const flavour = async (tag: string): Promise<string | undefined> =>
      (await engine.docker.getImage(tag).inspect()).Config.Labels?.['flavour'];
    expect(await flavour(gpu)).toBe('gpu');
    expect(await flavour(cpu)).toBe('cpu');
    // Found again by its Dockerfile, on this host, without a second build.
    expect(
      await new ImageCache(engine.docker).ensureBuilt({
        contextDir: ctx,
        dockerfile: './Dockerfile.cpu',
        contentHash: hash,
      }),
    ).toBe(cpu);
  });

  it('builds a context whose only Dockerfile is a lower-case dockerfile, as fleetwise submit accepts', async () => {
    const ctx = join(tmp, 'lower-case');
    mkdirSync(ctx);
    writeFileSync(join(ctx, 'dockerfile'), 'FROM base:local\nLABEL lower=yes\n');
    const tag = await new ImageCache(engine.docker).ensureBuilt({
      contextDir: ctx,
      contentHash: await hashBuildContext(ctx),
    });
    expect((await engine.docker.getImage(tag).inspect()).Config.Labels?.['lower']).toBe('yes');
  });

  it('names the image and the pull when the engine refuses a pull outright', async () => {
    const cache = new ImageCache(engine.docker);
    // A registry nothing listens on: the engine answers the pull request itself with an error.
    const error = await cache.ensurePulled('127.0.0.1:1/team/trainer:2.1').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ImagePullError);
    expect((error as Error).message).toMatch(
      /^pulling image 127\.0\.0\.1:1\/team\/trainer:2\.1 failed: \S.*\S$/s,
    );
    // Not the host's fault: the job's image is wrong, not the engine.
    expect(hostFaultOf(error)).toBeUndefined();
  });

  it('reports a failing build with the daemon message', async () => {
    const ctx = join(tmp, 'bad-context');
    mkdirSync(ctx);
    writeFileSync(join(ctx, 'Dockerfile'), 'FROM base:local\nRUN exit 3\n');
    const cache = new ImageCache(engine.docker);
    const error = await cache
      .ensureBuilt({ contextDir: ctx, contentHash: await hashBuildContext(ctx) })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ImageBuildError);
    expect((error as Error).message).toMatch(/returned a non-zero code: 3/);
  });

  it('starts with labels, limits, mounts and env; a second executor adopts instead of duplicating', async () => {
    const launch = counterLaunch('lim-1.0', { COUNT_TO: '100000' });
    await executor.start(launch);
    const other = new DockerExecutor({ docker: engine.docker }); // a restarted worker
    await other.start(launch);
    await executor.start(launch);
    const containers = await engine.docker.listContainers({
      all: true,
      filters: { label: [`${TASK_LABEL}=lim-1.0`] },
    });
    expect(containers).toHaveLength(1);
    const info = await engine.docker.getContainer(containers[0]?.Id ?? '').inspect();
    expect(info.Config.Labels).toMatchObject({ [TASK_LABEL]: 'lim-1.0', [JOB_LABEL]: 'lim-1' });
    expect(info.HostConfig.NanoCpus).toBe(500_000_000);
    expect(info.HostConfig.Memory).toBe(0.25 * GIB);
    expect(info.HostConfig.ShmSize).toBe(0.0625 * GIB);
    expect(info.HostConfig.NetworkMode).not.toBe('host');
    expect(info.Config.Env).toEqual(
      expect.arrayContaining([
        `FLEETWISE_CHECKPOINT_DIR=${CONTAINER_CHECKPOINT_DIR}`,
        'FLEETWISE_RESTORE=0',
        'FLEETWISE_TASK_ID=lim-1.0',
      ]),
    );
    expect((await other.list()).map((t) => [t.taskId, t.state])).toContainEqual(['lim-1.0', 'running']);
    // The progress file is a bind mount: the host sees the container's lines.
    const tracker = new ProgressTracker(launch.progressFile, 100000);
    const progress = await until(async () => {
      const p = await tracker.poll();
      return p.completed >= 5 ? p : undefined;
    });
    expect(progress.total).toBe(100000);
    const logs = (await readAll(await other.logs('lim-1.0'))).toString();
    expect(logs).toContain('starting at 0');
    await other.kill('lim-1.0');
    const killed = await executor.status('lim-1.0');
    expect(killed).toMatchObject({ state: 'exited', exitCode: 137 });
    await executor.remove('lim-1.0');
    expect(await executor.status('lim-1.0')).toBeUndefined();
  });

  it('signal → the counter checkpoints and exits 0; the restored task resumes at K and finishes', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    const ref = { jobId: 'mig-1', taskId: 'mig-1.0' };
    const launch = counterLaunch('mig-1.0', { COUNT_TO: '60' });
    await executor.start(launch);
    const watcher = new CheckpointWatcher({ store, ref, dir: launch.checkpointDir, pollMs: 100 });
    await watcher.start();
    const tracker = new ProgressTracker(launch.progressFile);
    await until(async () => ((await tracker.poll()).completed >= 10 ? true : undefined));
    const stop = await checkpointAndStop({
      executor,
      taskId: 'mig-1.0',
      signal: 'SIGTERM',
      timeoutSeconds: 10,
      watcher,
    });
    expect(stop).toMatchObject({ outcome: 'exited', exitCode: 0 });
    const k = Number(readFileSync(join(launch.checkpointDir, 'counter'), 'utf8'));
    expect(k).toBeGreaterThanOrEqual(10);
    expect(stop.lastManifest?.files).toEqual(['counter']);
    const logs = (await readAll(await executor.logs('mig-1.0'))).toString();
    expect(logs).toContain(`checkpointed at ${k} on SIGTERM`);
    await executor.remove('mig-1.0');

    // "Another instance": a fresh checkpoint dir restored from the store.
    const target = {
      ...counterLaunch('mig-1.0', { COUNT_TO: '60' }, true),
      checkpointDir: join(tmp, 'target', 'ck'),
    };
    const restored = await restoreLatestCheckpoint(store, ref, target.checkpointDir);
    expect(restored.manifest?.seq).toBe(stop.lastManifest?.seq);
    await executor.start(target);
    const done = await until(async () => {
      const s = await executor.status('mig-1.0');
      return s?.state === 'exited' ? s : undefined;
    });
    expect(done.exitCode).toBe(0);
    const resumed = (await readAll(await executor.logs('mig-1.0'))).toString();
    expect(resumed).toContain(`resumed at ${k}`);
    expect(resumed).toContain('finished 60');
    await executor.remove('mig-1.0');
  });

  it('a task that ignores the signal is killed after the timeout; its last upload is the restore point', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    const ref = { jobId: 'deaf-1', taskId: 'deaf-1.0' };
    const launch = counterLaunch('deaf-1.0', { COUNT_TO: '100000', IGNORE_TERM: '1' });
    await executor.start(launch);
    const watcher = new CheckpointWatcher({ store, ref, dir: launch.checkpointDir, pollMs: 100 });
    await watcher.start();
    await until(async () => ((await listCheckpoints(store, ref)).some((c) => c.complete) ? true : undefined));
    const started = Date.now();
    const stop = await checkpointAndStop({
      executor,
      taskId: 'deaf-1.0',
      signal: 'SIGTERM',
      timeoutSeconds: 1,
      watcher,
    });
    expect(stop.outcome).toBe('killed');
    expect(stop.exitCode).toBe(137);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(Date.now() - started).toBeLessThan(5000);
    const restored = await restoreLatestCheckpoint(store, ref, join(tmp, 'deaf-target'));
    expect(restored.manifest?.seq).toBe(stop.lastManifest?.seq);
    expect(Number(readFileSync(join(tmp, 'deaf-target', 'counter'), 'utf8'))).toBeGreaterThan(0);
    expect((await readAll(await executor.logs('deaf-1.0'))).toString()).toContain('ignoring SIGTERM');
    await executor.remove('deaf-1.0');
  });
  it('scopes containers per instance: same task id on two instances of one engine, never seen or adopted across', async () => {
    const a = new DockerExecutor({ docker: engine.docker, instanceId: 'local-aaa' });
    const b = new DockerExecutor({ docker: engine.docker, instanceId: 'local-bbb' });
    const launch = counterLaunch('scope-1.0', { COUNT_TO: '100000' });
    try {
      await a.start(launch);
      await b.start({
        ...launch,
        checkpointDir: join(tmp, 'b', 'checkpoint'),
        progressFile: join(tmp, 'b', 'progress'),
      });
      const containers = await engine.docker.listContainers({
        all: true,
        filters: { label: [`${TASK_LABEL}=scope-1.0`] },
      });
      expect(containers.map((c) => [c.Names[0], c.Labels[INSTANCE_LABEL]]).sort()).toEqual([
        ['/fleetwise-local-aaa-scope-1.0', 'local-aaa'],
        ['/fleetwise-local-bbb-scope-1.0', 'local-bbb'],
      ]);
      expect(containerName('scope-1.0', 'local-aaa')).toBe('fleetwise-local-aaa-scope-1.0');
      // Each sees only its own; the unscoped executor sees neither.
      expect((await a.list()).map((t) => t.taskId)).toEqual(['scope-1.0']);
      expect((await executor.list()).map((t) => t.taskId)).not.toContain('scope-1.0');
      expect(await executor.status('scope-1.0')).toBeUndefined();
      // Killing and removing on b leaves a's container running.
      await b.kill('scope-1.0');
      expect((await b.status('scope-1.0'))?.state).toBe('exited');
      expect((await a.status('scope-1.0'))?.state).toBe('running');
      await b.remove('scope-1.0');
      expect(await b.status('scope-1.0')).toBeUndefined();
      expect((await a.status('scope-1.0'))?.state).toBe('running');
      // A restarted worker of instance a adopts its container (no second one).
      await new DockerExecutor({ docker: engine.docker, instanceId: 'local-aaa' }).start(launch);
      expect(
        await engine.docker.listContainers({ all: true, filters: { label: [`${TASK_LABEL}=scope-1.0`] } }),
      ).toHaveLength(1);
    } finally {
      await a.remove('scope-1.0');
      await b.remove('scope-1.0');
    }
  });
  it("gives a container only its spec's env and FLEETWISE_ variables, never on the host's network", async () => {
    const secrets: Record<string, string> = {
      FLEETWISE_ADMIN_TOKEN: 'admin-secret',
      FLEETWISE_WORKER_TOKEN: 'worker-secret',
      AWS_SECRET_ACCESS_KEY: 'aws-secret',
    };
    const saved = Object.fromEntries(Object.keys(secrets).map((k) => [k, process.env[k]]));
    Object.assign(process.env, secrets);
    try {
      const launch: TaskLaunch = {
        ...counterLaunch('env-1.0', {}),
        build: undefined,
        image: BASE_IMAGE,
        command: ['env'],
        env: { MY_SETTING: 'from-spec' },
      };
      await executor.start(launch);
      const done = await until(async () => {
        const s = await executor.status('env-1.0');
        return s?.state === 'exited' ? s : undefined;
      });
      expect(done.exitCode).toBe(0);
      const output = (await readAll(await executor.logs('env-1.0'))).toString();
      for (const [name, value] of Object.entries(secrets)) {
        expect(output).not.toContain(`${name}=`);
        expect(output).not.toContain(value);
      }
      expect(output).toContain('MY_SETTING=from-spec');
      expect(output).toContain('FLEETWISE_TASK_ID=env-1.0');
      expect(output).toContain('FLEETWISE_JOB_ID=env-1');
      expect(output).toContain(`FLEETWISE_CHECKPOINT_DIR=${CONTAINER_CHECKPOINT_DIR}`);
      expect(output).toContain('FLEETWISE_RESTORE=0');
      const info = await engine.docker.getContainer(containerName('env-1.0')).inspect();
      // This engine runs with --bridge=none (it must not touch the host's network), so: no network at all.
      expect(info.HostConfig.NetworkMode).toBe('none');
      await executor.remove('env-1.0');
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });

  it('a container created and never started (its worker died in between) is adopted stopped, then started afresh', async () => {
    const taskId = 'created-9.0';
    const workDir = join(tmp, 'created-work');
    const store = new FsObjectStore(join(tmp, 'created-store'));
    const taskDir = join(workDir, 'tasks', taskId);
    const launch: TaskLaunch = {
      ...counterLaunch(taskId, {}),
      build: undefined,
      image: BASE_IMAGE,
      command: ['sh', '-c', 'echo started; sleep 30'],
      checkpointDir: join(taskDir, 'checkpoint'),
      progressFile: join(taskDir, 'progress'),
    };
    // What a worker killed between createContainer and start leaves: the container, and its record still `starting`.
    await prepareHostPaths(launch);
    await engine.docker.createContainer(executor.containerSpec(launch, BASE_IMAGE, 'none'));
    await persistTask(taskDir, {
      taskId,
      jobId: launch.jobId,
      phase: 'starting',
      startedAtMs: Date.now(),
      stopRequested: false,
      attempt: 1,
      lastLogUploadMs: 0,
    });
    expect(await executor.status(taskId)).toMatchObject({ state: 'starting' });

    const tasks = offlineLifecycle(executor, store, workDir);
    await tasks.adopt();
    await tasks.observe();
    await tasks.settle();
    // Nothing of it ran: not reported running (it never would be), but stopped, for a `run` to start it again.
    expect(tasks.reports()).toEqual([{ taskId, state: 'stopped', attempt: 1 }]);
    tasks.start({
      taskId,
      jobId: launch.jobId,
      action: 'run',
      restore: false,
      attempt: 1,
      launch: {
        image: BASE_IMAGE,
        command: [...launch.command],
        env: {},
        vcpus: 0.5,
        memoryGiB: 0,
        gpus: 0,
        shmSizeGiB: 0,
      },
      checkpoint: { signal: 'SIGTERM', timeoutSeconds: 1 },
    });
    await tasks.settle();
    expect(tasks.get(taskId)?.phase).toBe('running');
    expect(await executor.status(taskId)).toMatchObject({ state: 'running' });
    await until(async () =>
      (await readAll(await executor.logs(taskId))).toString() === 'started\n' ? true : undefined,
    );
    await tasks.stopWatchers();
    await executor.remove(taskId);
  });
});
