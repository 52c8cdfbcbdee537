import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  constants,
  mkdirSync,
  mkdtempSync,
  openSync,
  closeSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readAll } from '../../src/storage/streams.js';
import type { TaskLaunch, TaskRunStatus } from '../../src/worker/executor.js';
import { containerName, DockerExecutor } from '../../src/worker/executors/docker.js';
import { imageUser } from '../../src/worker/executors/task-host-paths.js';
import { ImageCache } from '../../src/worker/image-cache.js';
import { BASE_IMAGE, describeWithDocker } from '../helpers/dockerd.js';
import { offlineLifecycle, until } from './agent-fixtures.js';

const GIB = 1024 ** 3;

/** A content hash unique to this run, so every context here is really built (never an image from before). */
let hashes = 0;
const freshHash = (): string =>
  `${Date.now().toString(16)}${(++hashes).toString(16).padStart(4, '0')}`.padEnd(64, 'a');

/** `promise`, or a failure naming `what` once `ms` pass (then `onTimeout` runs, to unblock whatever hangs). */
async function within<T>(
  promise: Promise<T>,
  ms: number,
  what: string,
  onTimeout = (): void => undefined,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onTimeout();
      reject(new Error(`${what} did not finish within ${ms} ms`));
    }, ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether some process has `fifo` open for reading (opening its write end without blocking fails otherwise). */
function fifoHasReader(fifo: string): boolean {
  try {
    closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENXIO') return false;
    throw e;
  }
}

describe('image users', () => {
  it("reads the image's USER: root, numeric ids, or a name only the image resolves", () => {
    for (const root of [undefined, '', 'root', '0', '0:0', 'root:root'])
      expect(imageUser(root)).toEqual({ kind: 'root' });
    expect(imageUser('1000')).toEqual({ kind: 'id', uid: 1000 });
    expect(imageUser('1000:2000')).toEqual({ kind: 'id', uid: 1000, gid: 2000 });
    expect(imageUser('1000:staff')).toEqual({ kind: 'id', uid: 1000 });
    expect(imageUser('app')).toEqual({ kind: 'named' });
    expect(imageUser('app:1000')).toEqual({ kind: 'named' });
  });
});

describeWithDocker('docker builds, users and limits against a real dockerd', (engine) => {
  let tmp: string;
  let executor: DockerExecutor;
  beforeAll(() => {
    tmp = mkdtempSync(join(tmpdir(), 'fw-docker-ctx-test-'));
    executor = new DockerExecutor({ docker: engine.docker });
  });
  afterAll(async () => {
    for (const t of await executor.list()) await executor.remove(t.taskId);
    rmSync(tmp, { recursive: true, force: true });
  });

  const context = (name: string, files: Record<string, string>): string => {
    const dir = join(tmp, name);
    mkdirSync(dir);
    for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
    return dir;
  };

  const launchOf = (taskId: string, image: string, command: string[], memoryGiB = 0.25): TaskLaunch => ({
    taskId,
    jobId: taskId.split('.')[0] ?? taskId,
    image,
    command,
    env: {},
    vcpus: 0.5,
    memoryGiB,
    gpus: 0,
    shmSizeGiB: 0,
    checkpointDir: join(tmp, taskId, 'checkpoint'),
    progressFile: join(tmp, taskId, 'progress'),
    restoring: false,
  });

  const exited = (taskId: string): Promise<TaskRunStatus> =>
    until(`${taskId} to exit`, async () => {
      const s = await executor.status(taskId);
      return s?.state === 'exited' ? s : undefined;
    });

  const output = async (taskId: string): Promise<string> =>
    (await readAll(await executor.logs(taskId))).toString();

  it('builds a context whose .dockerignore links to /dev/zero without reading it', async () => {
    const ctx = context('zero-ignore', {
      Dockerfile: 'FROM base:local\nCOPY app.sh /app.sh\n',
      'app.sh': 'echo hi\n',
    });
    symlinkSync('/dev/zero', join(ctx, '.dockerignore'));
    const tag = await within(
      new ImageCache(engine.docker).ensureBuilt({ contextDir: ctx, contentHash: freshHash() }),
      20_000,
      'the build',
    );
    expect((await engine.docker.getImage(tag).inspect()).Id).toMatch(/^sha256:/);
  });

  it('builds a context whose .dockerignore links to a FIFO (and that holds one) without opening either', async () => {
    const fifo = join(tmp, 'outside-fifo');
    execFileSync('mkfifo', [fifo]);
    const ctx = context('fifo-ignore', {
      Dockerfile: 'FROM base:local\nCOPY app.sh /app.sh\n',
      'app.sh': 'echo hi\n',
    });
    symlinkSync(fifo, join(ctx, '.dockerignore'));
    execFileSync('mkfifo', [join(ctx, 'pipe')]);
    // Should a reader block on one of them, opening and closing its write end lets it go (it reads an end of file).
    const release = (): void => {
      for (const f of [fifo, join(ctx, 'pipe')])
        if (fifoHasReader(f)) closeSync(openSync(f, constants.O_WRONLY));
    };
    const tag = await within(
      new ImageCache(engine.docker).ensureBuilt({ contextDir: ctx, contentHash: freshHash() }),
      20_000,
      'the build',
      release,
    );
    expect(fifoHasReader(fifo)).toBe(false);
    expect((await engine.docker.getImage(tag).inspect()).Id).toMatch(/^sha256:/);
  });

  it('builds a context whose .dockerignore excludes its Dockerfile: the Dockerfile is always sent', async () => {
    // What `fleetwise submit` packs of such a directory: the Dockerfile and .dockerignore kept, as docker keeps them.
    const ctx = context('ignores-dockerfile', {
      '.dockerignore': '*\n!app.sh\n',
      Dockerfile: 'FROM base:local\nCOPY app.sh /app.sh\n',
      'app.sh': 'echo hello-ign\n',
    });
    const tag = await new ImageCache(engine.docker).ensureBuilt({
      contextDir: ctx,
      contentHash: freshHash(),
    });
    await executor.start(launchOf('ign-1.0', tag, ['sh', '/app.sh']));
    expect((await exited('ign-1.0')).exitCode).toBe(0);
    expect(await output('ign-1.0')).toBe('hello-ign\n');
    await executor.remove('ign-1.0');
  });

  const script =
    'id -u; echo 5 >> "$FLEETWISE_PROGRESS_FILE" && echo x > "$FLEETWISE_CHECKPOINT_DIR/state" && ' +
    'echo y > "$FLEETWISE_CHECKPOINT_DIR/restored" && echo y > "$FLEETWISE_CHECKPOINT_DIR/sub/deeper"';

  const outsider = join(tmpdir(), `fw-docker-outsider-${process.pid}`);
  /** A checkpoint directory as a restore leaves it: written by the worker (root here), read-only to others. */
  const restoredInto = (launch: TaskLaunch): void => {
    mkdirSync(join(launch.checkpointDir, 'sub'), { recursive: true });
    writeFileSync(join(launch.checkpointDir, 'restored'), 'old\n');
    chmodSync(join(launch.checkpointDir, 'restored'), 0o644);
    writeFileSync(join(launch.checkpointDir, 'sub', 'deeper'), 'old\n');
    // Outside the directory (a checkpoint may not hold such a link; what grants access must not follow one anyway).
    symlinkSync(outsider, join(launch.checkpointDir, 'link'));
  };

  it.each([
    ['a numeric USER', 'USER 1000', '1000'],
    ['a numeric USER with its group', 'USER 1000:1000', '1000'],
    ['a named USER', "RUN echo 'app:x:1001:1001::/tmp:/bin/sh' >> /etc/passwd\nUSER app", '1001'],
  ])(
    'lets %s write its checkpoint directory, what was restored there, and its progress file',
    async (_, user, uid) => {
      const ctx = context(`user-${uid}-${hashes}`, { Dockerfile: `FROM base:local\n${user}\n` });
      const tag = await new ImageCache(engine.docker).ensureBuilt({
        contextDir: ctx,
        contentHash: freshHash(),
      });
      const taskId = `user-${hashes}.0`;
      const launch = launchOf(taskId, tag, ['sh', '-c', script]);
      restoredInto(launch);
      writeFileSync(outsider, 'host file\n', { mode: 0o600 });
      await executor.start(launch);
      expect((await exited(taskId)).exitCode).toBe(0);
      expect(await output(taskId)).toBe(`${uid}\n`);
      expect(readFileSync(launch.progressFile, 'utf8')).toBe('5\n');
      expect(readFileSync(join(launch.checkpointDir, 'state'), 'utf8')).toBe('x\n');
      expect(readFileSync(join(launch.checkpointDir, 'restored'), 'utf8')).toBe('y\n');
      expect(readFileSync(join(launch.checkpointDir, 'sub', 'deeper'), 'utf8')).toBe('y\n');
      // What a link in the directory names on the host is left as it was.
      expect(statSync(outsider)).toMatchObject({ uid: process.getuid?.(), mode: 0o100600 });
      rmSync(outsider);
      await executor.remove(taskId);
    },
  );

  it('reports an out-of-memory kill as one, with its limit; memory comes without swap on top', async () => {
    const taskId = 'oom-1.0';
    const workDir = join(tmp, 'oom-work');
    const store = new FsObjectStore(join(tmp, 'oom-store'));
    const tasks = offlineLifecycle(executor, store, workDir);
    tasks.start({
      taskId,
      jobId: 'oom-1',
      action: 'run',
      restore: false,
      attempt: 1,
      launch: {
        image: BASE_IMAGE,
        // A 300 MiB buffer under a 64 MiB limit.
        command: ['dd', 'if=/dev/zero', 'of=/dev/null', 'bs=300M', 'count=1'],
        env: {},
        vcpus: 0.5,
        memoryGiB: 0.0625,
        gpus: 0,
        shmSizeGiB: 0,
      },
      checkpoint: { signal: 'SIGTERM', timeoutSeconds: 1 },
    });
    await tasks.settle();
    const info = await engine.docker.getContainer(containerName(taskId)).inspect();
    expect(info.HostConfig.Memory).toBe(0.0625 * GIB);
    expect(info.HostConfig.MemorySwap).toBe(0.0625 * GIB);
    const failed = await until('the task to fail', async () => {
      await tasks.observe();
      await tasks.settle();
      const t = tasks.get(taskId);
      return t?.phase === 'failed' ? t : undefined;
    });
    expect(await executor.status(taskId)).toMatchObject({
      exitCode: 137,
      oomKilled: true,
      memoryLimitGiB: 0.0625,
    });
    expect(failed.reason).toMatch(/^killed: out of memory \(limit 0\.0625 GiB\), exit code 137/);
    await tasks.stopWatchers();
    await executor.remove(taskId);
  });
});
