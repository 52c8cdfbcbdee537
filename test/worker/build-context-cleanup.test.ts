import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { packContext } from '../../src/cli/context-archive.js';
import type { DesiredTask } from '../../src/protocol/worker-protocol.js';
import { buildContextKey } from '../../src/protocol/object-keys.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readAll } from '../../src/storage/streams.js';
import { fetchBuildContext } from '../../src/worker/build-context.js';
import { DockerExecutor } from '../../src/worker/executors/docker.js';
import { buildTag, hashBuildContext, ImageBuildError, ImageCache } from '../../src/worker/image-cache.js';
import { describeWithDocker } from '../helpers/dockerd.js';
import { offlineLifecycle, until } from './agent-fixtures.js';

/** A filesystem store that counts the archives fetched from it. */
class CountingStore extends FsObjectStore {
  fetches = 0;
  override async get(key: string): Promise<Readable> {
    this.fetches++;
    return super.get(key);
  }
}

describeWithDocker('unpacked build contexts are removed once their images are built', (engine) => {
  let tmp: string;
  let store: CountingStore;
  let executor: DockerExecutor;
  beforeAll(() => {
    tmp = mkdtempSync(join(tmpdir(), 'fw-ctx-cleanup-'));
    store = new CountingStore(join(tmp, 'store'));
    executor = new DockerExecutor({ docker: engine.docker });
  });
  afterAll(async () => {
    for (const t of await executor.list()) await executor.remove(t.taskId);
    rmSync(tmp, { recursive: true, force: true });
  });

  /** A project directory unique to this run (its images were never built before), uploaded as `fleetwise submit` does. */
  const upload = async (
    name: string,
    files: Record<string, string | Buffer>,
    dockerfile?: string,
  ): Promise<{ ref: string; hash: string }> => {
    const dir = join(tmp, 'projects', name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'nonce'), `${process.pid}-${Date.now()}-${Math.random()}\n`);
    for (const [file, content] of Object.entries(files)) writeFileSync(join(dir, file), content);
    const { archive } = await packContext(dir, undefined, dockerfile);
    const hash = createHash('sha256').update(archive).digest('hex');
    const ref = buildContextKey(hash, 'gzip');
    await store.put(ref, archive);
    return { ref, hash };
  };

  it('keeps no unpacked copy of any edit of a project once its image is built', async () => {
    const workDir = join(tmp, 'edits');
    const cache = new ImageCache(engine.docker);
    for (let edit = 1; edit <= 4; edit++) {
      const { ref, hash } = await upload(`edit-${edit}`, {
        Dockerfile: 'FROM base:local\nCOPY . /app\n',
        'train.py': `# edit ${edit}\n`,
        'data.bin': randomBytes(256 * 1024),
      });
      const build = await fetchBuildContext({ context: ref }, workDir, () => store);
      expect(existsSync(join(build.contextDir, 'train.py'))).toBe(true);
      const tag = await cache.ensureBuilt(build);
      expect(tag).toBe(buildTag(hash));
      expect((await engine.docker.getImage(tag).inspect()).Id).toMatch(/^sha256:/);
      expect(readdirSync(join(workDir, 'contexts'))).toEqual([]);
    }
  });

  it('removes a context only after every task handed it is built, whatever Dockerfile each builds', async () => {
    const workDir = join(tmp, 'shared');
    const { ref, hash } = await upload(
      'shared',
      {
        'Dockerfile.cpu': 'FROM base:local\nCOPY app.sh /app.sh\nLABEL flavour=cpu\n',
        'Dockerfile.gpu': 'FROM base:local\nCOPY app.sh /app.sh\nRUN sleep 1\nLABEL flavour=gpu\n',
        'app.sh': 'echo hi\n',
      },
      'Dockerfile.cpu',
    );
    store.fetches = 0;
    const contexts = join(workDir, 'contexts');
    // Three tasks of two jobs sharing the context, started together: one extraction, two builds reading it.
    const builds = await Promise.all(
      ['Dockerfile.cpu', 'Dockerfile.gpu', 'Dockerfile.cpu'].map((dockerfile) =>
        fetchBuildContext({ context: ref, dockerfile }, workDir, () => store),
      ),
    );
    expect(store.fetches).toBe(1);
    const cache = new ImageCache(engine.docker);
    const [cpu, gpu, cpuAgain] = await Promise.all(builds.map((b) => cache.ensureBuilt(b)));
    expect(cpuAgain).toBe(cpu);
    for (const [tag, flavour] of [
      [cpu, 'cpu'],
      [gpu, 'gpu'],
    ] as const)
      expect((await engine.docker.getImage(tag ?? '').inspect()).Config.Labels?.['flavour']).toBe(flavour);
    expect(readdirSync(contexts)).toEqual([]);

    // A later task of the same context fetches it again (nothing on disk says it is whole), finds its image built,
    // and the copy goes again.
    const later = await fetchBuildContext(
      { context: ref, dockerfile: 'Dockerfile.gpu' },
      workDir,
      () => store,
    );
    expect(store.fetches).toBe(2);
    expect(readdirSync(contexts)).toEqual([hash, `${hash}.complete`]);
    expect(await cache.ensureBuilt(later)).toBe(gpu);
    expect(readdirSync(contexts)).toEqual([]);
  });

  it('leaves alone a context one task still holds while another is built from it', async () => {
    const workDir = join(tmp, 'held');
    const { ref, hash } = await upload('held', { Dockerfile: 'FROM base:local\nCOPY . /app\n' });
    const first = await fetchBuildContext({ context: ref }, workDir, () => store);
    const second = await fetchBuildContext({ context: ref }, workDir, () => store);
    const cache = new ImageCache(engine.docker);
    const tag = await cache.ensureBuilt(first);
    // The second task has not been built from it yet: a process task, say, runs inside it.
    expect(readdirSync(join(workDir, 'contexts'))).toEqual([hash, `${hash}.complete`]);
    // The first one's start builds again (a look-up): its context is released once, never the other task's.
    expect(await cache.ensureBuilt(first)).toBe(tag);
    expect(existsSync(join(second.contextDir, 'Dockerfile'))).toBe(true);
    expect(await cache.ensureBuilt(second)).toBe(tag);
    expect(readdirSync(join(workDir, 'contexts'))).toEqual([]);

    // Its image gone after that (pruned on the host): said so, not a build of a missing directory.
    await engine.docker.getImage(tag).remove();
    const error = await cache.ensureBuilt(second).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ImageBuildError);
    expect((error as Error).message).toContain(
      `image ${tag} is not on this host and its build context is gone (a context is removed once its image is ` +
        'built; a new start of the task fetches it again)',
    );
  });

  it('never removes a directory it did not unpack, and removes a context whose build failed', async () => {
    const own = join(tmp, 'own');
    mkdirSync(own);
    writeFileSync(join(own, 'Dockerfile'), `FROM base:local\nLABEL nonce=${Date.now()}-${Math.random()}\n`);
    await new ImageCache(engine.docker).ensureBuilt({
      contextDir: own,
      contentHash: await hashBuildContext(own),
    });
    expect(readdirSync(own)).toEqual(['Dockerfile']);

    const workDir = join(tmp, 'broken');
    const { ref } = await upload('broken', { Dockerfile: 'FROM base:local\nRUN exit 3\n' });
    const build = await fetchBuildContext({ context: ref }, workDir, () => store);
    await expect(new ImageCache(engine.docker).ensureBuilt(build)).rejects.toThrow(/non-zero code: 3/);
    expect(readdirSync(join(workDir, 'contexts'))).toEqual([]);
  });

  it('a task started and a held task released through the lifecycle keep no context, and run from their images', async () => {
    const workDir = join(tmp, 'lifecycle');
    const files = (n: number): Record<string, string> => ({
      Dockerfile: `FROM base:local\nCOPY . /app\nWORKDIR /app\nLABEL n=${n}\n`,
      'app.sh': `echo ran-${n}\n`,
    });
    const task = (taskId: string, context: string, hold: boolean): DesiredTask => ({
      taskId,
      jobId: taskId.split('.')[0] ?? taskId,
      action: 'run',
      restore: false,
      attempt: 1,
      hold,
      launch: {
        build: { context },
        command: ['sh', 'app.sh'],
        env: {},
        vcpus: 0.5,
        memoryGiB: 0,
        gpus: 0,
        shmSizeGiB: 0,
      },
      checkpoint: { signal: 'SIGTERM', timeoutSeconds: 1 },
    });
    const direct = await upload('direct', files(1));
    const held = await upload('held-start', files(2));
    const tasks = offlineLifecycle(executor, store, workDir);
    tasks.start(task('direct-1.0', direct.ref, false));
    tasks.start(task('held-1.0', held.ref, true));
    await tasks.settle();
    expect(tasks.get('direct-1.0')?.phase).toBe('running');
    expect(tasks.get('held-1.0')?.phase).toBe('ready');
    expect(readdirSync(join(workDir, 'contexts'))).toEqual([]);
    const heldTask = tasks.get('held-1.0');
    if (heldTask === undefined) throw new Error('the held task is gone');
    tasks.release(heldTask);
    await tasks.settle();
    expect(tasks.get('held-1.0')?.phase).toBe('running');
    for (const [taskId, line] of [
      ['direct-1.0', 'ran-1\n'],
      ['held-1.0', 'ran-2\n'],
    ] as const) {
      const exited = await until(`${taskId} to exit`, async () => {
        const s = await executor.status(taskId);
        return s?.state === 'exited' ? s : undefined;
      });
      expect(exited.exitCode).toBe(0);
      expect((await readAll(await executor.logs(taskId))).toString()).toBe(line);
    }
    expect(readdirSync(join(workDir, 'contexts'))).toEqual([]);
    await tasks.stopWatchers();
  });

  it('builds a context whose Dockerfile is a symlink inside it, as fleetwise submit accepts', async () => {
    const dir = join(tmp, 'projects', 'linked');
    mkdirSync(join(dir, 'docker'), { recursive: true });
    writeFileSync(join(dir, 'docker', 'Dockerfile.api'), `FROM base:local\nLABEL linked=${Date.now()}\n`);
    symlinkSync('docker/Dockerfile.api', join(dir, 'Dockerfile'));
    const { archive } = await packContext(dir);
    const hash = createHash('sha256').update(archive).digest('hex');
    const ref = buildContextKey(hash, 'gzip');
    await store.put(ref, archive);
    const build = await fetchBuildContext({ context: ref }, join(tmp, 'linked'), () => store);
    const tag = await new ImageCache(engine.docker).ensureBuilt(build);
    expect((await engine.docker.getImage(tag).inspect()).Config.Labels?.['linked']).toMatch(/^\d+$/);
  });
});
