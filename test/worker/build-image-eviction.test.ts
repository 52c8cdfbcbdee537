import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { afterAll, afterEach, beforeAll, expect, it, vi } from 'vitest';
import { packContext } from '../../src/cli/context-archive.js';
import { buildContextKey } from '../../src/protocol/object-keys.js';
import type { DesiredTask } from '../../src/protocol/worker-protocol.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { DockerExecutor } from '../../src/worker/executors/docker.js';
import { dockerFromEnv } from '../../src/worker/executors/docker-engine.js';
import {
  BUILD_REPOSITORY,
  buildTag,
  hashBuildContext,
  ImageCache,
  type BuildRequest,
} from '../../src/worker/image-cache.js';
import { BASE_IMAGE, describeWithDocker } from '../helpers/dockerd.js';
import { offlineLifecycle, RecordingLogger, untilTaskEnded } from './agent-fixtures.js';

/**
 * Built images (fleetwise-build:<hash>) that no task needs any more are removed after a task's container is, the
 * three most recently used excepted; nothing else on the engine is touched, and nothing a start has or is getting.
 */
describeWithDocker('built images no task needs are removed', (engine) => {
  let tmp: string;
  let docker: Docker;
  let contexts = 0;
  /** What this file made on the engine, removed after each test so that no test ranks another's images. */
  const madeImages = new Set<string>();
  const madeContainers = new Set<string>();

  beforeAll(() => {
    tmp = mkdtempSync(join(tmpdir(), 'fw-image-eviction-'));
    docker = dockerFromEnv({ DOCKER_HOST: engine.host });
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    for (const id of madeContainers) await docker.getContainer(id).remove({ force: true }).catch(gone);
    for (const image of madeImages) await docker.getImage(image).remove({ force: true }).catch(gone);
    madeContainers.clear();
    madeImages.clear();
  });
  afterAll(() => {
    rmSync(tmp, { recursive: true, force: true });
  });

  const gone = (e: unknown): void => {
    if ((e as { statusCode?: number }).statusCode !== 404) throw e;
  };

  /** A build context never built before (its own nonce), as a fetched context is handed to the image cache. */
  const context = async (): Promise<BuildRequest> => {
    const dir = join(tmp, `context-${++contexts}`);
    mkdirSync(dir);
    writeFileSync(join(dir, 'Dockerfile'), 'FROM base:local\nCOPY nonce /nonce\n');
    writeFileSync(join(dir, 'nonce'), `${process.pid}-${contexts}-${Math.random()}\n`);
    const contentHash = await hashBuildContext(dir);
    madeImages.add(buildTag(contentHash));
    return { contextDir: dir, contentHash };
  };

  /** `count` images built one after the other by `cache`, oldest use first. */
  const buildSome = async (cache: ImageCache, count: number): Promise<string[]> => {
    const tags: string[] = [];
    for (let i = 0; i < count; i++) tags.push(await cache.ensureBuilt(await context()));
    return tags;
  };

  /** Every fleetwise-build tag on the engine, sorted. */
  const builtTags = async (): Promise<string[]> =>
    (await docker.listImages({ filters: { reference: [BUILD_REPOSITORY] } }))
      .flatMap((i) => i.RepoTags ?? [])
      .filter((t) => t.startsWith(`${BUILD_REPOSITORY}:`))
      .sort();

  const imageId = async (name: string): Promise<string> => (await docker.getImage(name).inspect()).Id;

  /** An executor whose passes run at once, and whose images are old as soon as a start has them. */
  const executorOf = (cache: ImageCache): DockerExecutor =>
    new DockerExecutor({ docker, images: cache, imageReleaseDelayMs: 0 });

  it('keeps the images stopped containers use and the three most recently used of the rest', async () => {
    const cache = new ImageCache(docker, { recentlyReturnedMs: 0 });
    const executor = executorOf(cache);
    const unused = await buildSome(cache, 4);
    // Used last of all, yet not among the three kept: what a container uses is kept whatever the count.
    const used = await buildSome(cache, 2);
    // Tasks that ended and are not forgotten yet: stopped containers, one created by its image's tag, one by its id.
    const containers: Docker.Container[] = [];
    for (const [i, tag] of used.entries()) {
      const container = await docker.createContainer({
        Image: i === 0 ? tag : await imageId(tag),
        Cmd: ['true'],
        HostConfig: { NetworkMode: 'none' },
      });
      madeContainers.add(container.id);
      await container.start();
      await container.wait();
      containers.push(container);
    }
    const log = new RecordingLogger();

    executor.releaseImages(() => [], log);
    await executor.imagesReleased();

    expect(await builtTags()).toEqual([...used, ...unused.slice(1)].sort());
    expect(log.lines).toEqual([`info removed 1 built image no task uses: ${unused[0] ?? ''}`]);
    // The stopped containers still have their images: they can still be inspected, their logs read.
    for (const [i, container] of containers.entries())
      expect((await container.inspect()).Image).toBe(await imageId(used[i] ?? ''));
  });

  it('removes none with evictBuiltImages off (workers sharing one engine, as in local mode)', async () => {
    const cache = new ImageCache(docker, { keepUnused: 0, recentlyReturnedMs: 0 });
    const keeping = new DockerExecutor({
      docker,
      images: cache,
      imageReleaseDelayMs: 0,
      evictBuiltImages: false,
    });
    const tags = await buildSome(cache, 2);
    const log = new RecordingLogger();
    keeping.releaseImages(() => [], log);
    await keeping.imagesReleased();
    expect(await builtTags()).toEqual([...tags].sort());
    expect(log.lines).toEqual([]);
    // The same images, released by an executor that evicts: both go.
    const evicting = executorOf(cache);
    evicting.releaseImages(() => [], log);
    await evicting.imagesReleased();
    expect(await builtTags()).toEqual([]);
  });

  it('never removes the image of a task held prepared, not started yet', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    /** A build context uploaded as `fleetwise submit` does; its image's tag. */
    const upload = async (name: string): Promise<{ ref: string; tag: string }> => {
      const dir = join(tmp, name);
      mkdirSync(dir);
      writeFileSync(join(dir, 'Dockerfile'), 'FROM base:local\nCOPY nonce /nonce\n');
      writeFileSync(join(dir, 'nonce'), `${process.pid}-${name}-${Math.random()}\n`);
      const { archive } = await packContext(dir);
      const hash = createHash('sha256').update(archive).digest('hex');
      const ref = buildContextKey(hash, 'gzip');
      await store.put(ref, archive);
      madeImages.add(buildTag(hash));
      return { ref, tag: buildTag(hash) };
    };
    const desired = (taskId: string, context: string, hold: boolean): DesiredTask => ({
      taskId,
      jobId: taskId.replace(/\.\d+$/, ''),
      action: 'run',
      restore: false,
      attempt: 1,
      hold,
      launch: {
        build: { context },
        command: ['true'],
        env: {},
        vcpus: 0.5,
        memoryGiB: 0,
        gpus: 0,
        shmSizeGiB: 0,
      },
      checkpoint: { signal: 'SIGTERM', timeoutSeconds: 1 },
    });
    const cache = new ImageCache(docker, { recentlyReturnedMs: 0 });
    const executor = executorOf(cache);
    const tasks = offlineLifecycle(executor, store, join(tmp, 'work'));
    const held = await upload('held');
    const ends = await upload('ends');

    // Held first, so its image is the least recently used of all: only being held keeps it.
    tasks.start(desired('held-1.0', held.ref, true));
    await tasks.settle();
    expect(tasks.get('held-1.0')?.phase).toBe('ready');
    const others = await buildSome(cache, 4);
    tasks.start(desired('ends-1.0', ends.ref, false));
    await tasks.settle();
    await untilTaskEnded(tasks, 'ends-1.0');
    const ended = tasks.get('ends-1.0');
    expect(ended?.phase).toBe('succeeded');
    if (ended === undefined) throw new Error('the task is gone');

    await tasks.forget(ended);
    await executor.imagesReleased();

    // The held one, and of the rest the three used last (the ended task's, then the last two built).
    expect(await builtTags()).toEqual([held.tag, ends.tag, ...others.slice(2)].sort());
    await tasks.stopWatchers();
  });

  it('never touches an image outside the fleetwise-build repository', async () => {
    const cache = new ImageCache(docker, { recentlyReturnedMs: 0 });
    const executor = executorOf(cache);
    const baseId = await imageId(BASE_IMAGE);
    // One built image a user also tagged other:1, and one tagged only other:2: both older than every built image.
    const [alsoOther, onlyOther] = await buildSome(cache, 2);
    if (alsoOther === undefined || onlyOther === undefined) throw new Error('nothing was built');
    await docker.getImage(alsoOther).tag({ repo: 'other', tag: '1' });
    await docker.getImage(onlyOther).tag({ repo: 'other', tag: '2' });
    madeImages.add('other:1').add('other:2');
    const onlyOtherId = await imageId(onlyOther);
    await docker.getImage(onlyOther).remove();
    const alsoOtherId = await imageId(alsoOther);
    const built = await buildSome(cache, 4);
    const log = new RecordingLogger();

    executor.releaseImages(() => [], log);
    await executor.imagesReleased();

    // The two least recently used built tags went (other:1's only as a tag: the image is other:1's still).
    expect(await builtTags()).toEqual(built.slice(1).sort());
    expect(log.lines).toEqual([`info removed 2 built images no task uses: ${built[0] ?? ''}, ${alsoOther}`]);
    expect(await imageId('other:1')).toBe(alsoOtherId);
    expect(await imageId('other:2')).toBe(onlyOtherId);
    expect(await imageId(BASE_IMAGE)).toBe(baseId);
  });

  it('does not remove an image a build of the same tag is in flight for', async () => {
    // A client of its own: its image inspects are held back, as an engine slow to answer would.
    const slow = dockerFromEnv({ DOCKER_HOST: engine.host });
    const cache = new ImageCache(slow, { recentlyReturnedMs: 0 });
    const first = await context();
    const inFlight = await cache.ensureBuilt(first);
    const rest = await buildSome(cache, 4);
    let letGo = (): void => undefined;
    const gate = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    let asked = (): void => undefined;
    const looking = new Promise<void>((resolve) => {
      asked = resolve;
    });
    const getImage = slow.getImage.bind(slow);
    vi.spyOn(slow, 'getImage').mockImplementation((name: string) => {
      const image = getImage(name);
      if (name !== inFlight) return image;
      const inspect = image.inspect.bind(image) as () => Promise<Docker.ImageInspectInfo>;
      image.inspect = async () => {
        asked();
        await gate;
        return inspect();
      };
      return image;
    });
    // A start of a task with the oldest image: its build is in flight, looking for the image on the engine.
    const building = cache.ensureBuilt(first);
    await looking;

    const pass = await cache.evictBuilt([]);

    // Kept, though the least recently used: the next oldest went instead.
    expect(pass).toEqual({ removed: [rest[0]], failed: [] });
    letGo();
    expect(await building).toBe(inFlight);
    expect(await builtTags()).toEqual([inFlight, ...rest.slice(1)].sort());
  });

  it('does not remove an image just returned to a start, even past the number kept', async () => {
    // Images another worker on this engine (or this one before a restart) built: known by when they were built.
    const earlier = await buildSome(new ImageCache(docker), 2);
    const cache = new ImageCache(docker, { keepUnused: 0 });
    const [returned] = await buildSome(cache, 1);

    const pass = await cache.evictBuilt([]);

    expect(pass.removed.slice().sort()).toEqual(earlier.slice().sort());
    expect(await builtTags()).toEqual([returned]);
  });
});
