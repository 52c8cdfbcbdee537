import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readAll } from '../../src/storage/streams.js';
import { restoreLatestCheckpoint } from '../../src/worker/checkpoints.js';
import { CheckpointWatcher } from '../../src/worker/checkpoint-watcher.js';
import { checkpointAndStop } from '../../src/worker/checkpoint-stop.js';
import type { TaskLaunch } from '../../src/worker/executor.js';
import { UnknownTaskError } from '../../src/worker/executors/docker.js';
import { ProcessExecutor, recordedTaskAlive } from '../../src/worker/executors/process.js';
import { ProgressTracker } from '../../src/worker/progress.js';
import { ensureBuiltCli } from '../helpers/built-cli.js';

const COUNTER_CONTEXT = join(PROJECT_ROOT, 'examples', 'counter');

async function until<T>(probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('process executor (the counter run by /bin/sh, the process variant)', () => {
  let tmp: string;
  let executor: ProcessExecutor;
  beforeAll(() => {
    tmp = mkdtempSync(join(tmpdir(), 'fw-proc-test-'));
    executor = new ProcessExecutor({ stateDir: join(tmp, 'state') });
  });
  afterAll(async () => {
    for (const t of await executor.list()) await executor.remove(t.taskId);
    rmSync(tmp, { recursive: true, force: true });
  });

  const launch = (taskId: string, env: Record<string, string>, restoring = false): TaskLaunch => ({
    taskId,
    jobId: taskId.split('.')[0] ?? taskId,
    // The same spec as Docker: the command runs in the (fetched) build context.
    build: { contextDir: COUNTER_CONTEXT, contentHash: '0'.repeat(64) },
    command: ['sh', 'counter.sh'],
    env: { STEP_SECONDS: '0.05', CHECKPOINT_SECONDS: '1', ...env },
    vcpus: 1,
    memoryGiB: 1,
    gpus: 0,
    shmSizeGiB: 0,
    checkpointDir: join(tmp, taskId, 'checkpoint'),
    progressFile: join(tmp, taskId, 'progress'),
    restoring,
  });

  it('prepares a task without starting it, refusing one it could not start (no command) before its release', async () => {
    await executor.prepare(launch('prep-1.0', {}));
    expect(await executor.status('prep-1.0')).toBeUndefined();
    await expect(executor.prepare({ ...launch('prep-2.0', {}), command: [] })).rejects.toThrow(
      /task prep-2\.0: the process executor needs a command/,
    );
  });

  it('starts, is adopted by a restarted executor without a duplicate, signals to a checkpoint, logs', async () => {
    const store = new FsObjectStore(join(tmp, 'store'));
    const ref = { jobId: 'p-1', taskId: 'p-1.0' };
    const first = launch('p-1.0', { COUNT_TO: '100000' });
    await executor.start(first);
    const pid = JSON.parse(readFileSync(join(tmp, 'state', 'p-1.0', 'pid.json'), 'utf8')) as { pid: number };
    const restarted = new ProcessExecutor({ stateDir: join(tmp, 'state') }); // the worker came back
    await restarted.start(first);
    expect(JSON.parse(readFileSync(join(tmp, 'state', 'p-1.0', 'pid.json'), 'utf8'))).toMatchObject({
      pid: pid.pid,
    });
    expect((await restarted.list()).map((t) => [t.taskId, t.state, t.limitsEnforced])).toEqual([
      ['p-1.0', 'running', false],
    ]);
    expect(await recordedTaskAlive(join(tmp, 'state', 'p-1.0'))).toBe(true);

    const tracker = new ProgressTracker(first.progressFile);
    await until(async () => ((await tracker.poll()).completed >= 10 ? true : undefined));
    const watcher = new CheckpointWatcher({ store, ref, dir: first.checkpointDir, pollMs: 50 });
    await watcher.start();
    const stop = await checkpointAndStop({
      executor: restarted,
      taskId: 'p-1.0',
      signal: 'SIGTERM',
      timeoutSeconds: 10,
      watcher,
    });
    expect(stop).toMatchObject({ outcome: 'exited', exitCode: 0 });
    expect(await recordedTaskAlive(join(tmp, 'state', 'p-1.0'))).toBe(false);
    // A live pid that is not the process recorded (a pid come round again) is not the task either.
    const recycled = join(tmp, 'recycled');
    mkdirSync(recycled);
    writeFileSync(
      join(recycled, 'pid.json'),
      JSON.stringify({ pid: process.pid, startTicks: 1, startedAt: new Date(0).toISOString() }),
    );
    expect(await recordedTaskAlive(recycled)).toBe(false);
    const k = Number(readFileSync(join(first.checkpointDir, 'counter'), 'utf8'));
    expect(k).toBeGreaterThanOrEqual(10);
    const logs = (await readAll(await restarted.logs('p-1.0'))).toString();
    expect(logs).toContain('starting at 0');
    expect(logs).toContain(`checkpointed at ${k} on SIGTERM`);
    await restarted.remove('p-1.0');
    expect(await executor.status('p-1.0')).toBeUndefined();

    const target = {
      ...launch('p-1.0', { COUNT_TO: String(k + 5) }, true),
      checkpointDir: join(tmp, 'target-ck'),
    };
    expect((await restoreLatestCheckpoint(store, ref, target.checkpointDir)).manifest?.seq).toBe(
      stop.lastManifest?.seq,
    );
    await executor.start(target);
    const done = await until(async () => {
      const s = await executor.status('p-1.0');
      return s?.state === 'exited' ? s : undefined;
    });
    expect(done.exitCode).toBe(0);
    const resumed = (await readAll(await executor.logs('p-1.0'))).toString();
    expect(resumed).toContain(`resumed at ${k}`);
    expect(resumed).toContain(`finished ${k + 5}`);
  });

  it('reports a failing command’s exit code, kills a task that ignores the signal (137), and errors clearly', async () => {
    await executor.start({ ...launch('p-2.0', {}), command: ['sh', '-c', 'echo oops >&2; exit 7'] });
    const failed = await until(async () => {
      const s = await executor.status('p-2.0');
      return s?.state === 'exited' ? s : undefined;
    });
    expect(failed.exitCode).toBe(7);
    expect((await readAll(await executor.logs('p-2.0'))).toString()).toBe('oops\n');

    await executor.start(launch('p-3.0', { COUNT_TO: '100000', IGNORE_TERM: '1' }));
    // Signal once it runs its loop (its SIGTERM trap is set by then).
    const tracker = new ProgressTracker(join(tmp, 'p-3.0', 'progress'));
    await until(async () => ((await tracker.poll()).completed >= 1 ? true : undefined));
    const stop = await checkpointAndStop({
      executor,
      taskId: 'p-3.0',
      signal: 'SIGTERM',
      timeoutSeconds: 0.5,
    });
    expect(stop).toMatchObject({ outcome: 'killed', exitCode: 137 });

    await expect(executor.signal('nope.0', 'SIGTERM')).rejects.toBeInstanceOf(UnknownTaskError);
    await expect(executor.start({ ...launch('p-4.0', {}), command: [] })).rejects.toThrow(/needs a command/);
    await expect(executor.start(launch('../evil', {}))).rejects.toThrow(/not a safe file name/);
  });
  it("gives a task only its spec's env, its FLEETWISE_ variables and a minimal base, never the worker's secrets", async () => {
    const secrets: Record<string, string> = {
      FLEETWISE_ADMIN_TOKEN: 'admin-secret',
      FLEETWISE_WORKER_TOKEN: 'worker-secret',
      FLEETWISE_TOKEN: 'client-secret',
      AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE',
      AWS_SECRET_ACCESS_KEY: 'aws-secret',
      AWS_SESSION_TOKEN: 'aws-session',
      SOME_WORKER_SETTING: 'worker-only',
    };
    const saved = Object.fromEntries(Object.keys(secrets).map((k) => [k, process.env[k]]));
    Object.assign(process.env, secrets);
    try {
      const spec = { ...launch('p-5.0', { MY_SETTING: 'from-spec' }, true), command: ['env'] };
      await executor.start(spec);
      const done = await until(async () => {
        const s = await executor.status('p-5.0');
        return s?.state === 'exited' ? s : undefined;
      });
      expect(done.exitCode).toBe(0);
      const lines = (await readAll(await executor.logs('p-5.0'))).toString().split('\n');
      const env = new Map(
        lines
          .filter((l) => l.includes('='))
          .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
      );
      const output = lines.join('\n');
      for (const [name, value] of Object.entries(secrets)) {
        expect(env.has(name), name).toBe(false);
        expect(output).not.toContain(value);
      }
      expect(Object.fromEntries([...env].filter(([k]) => !k.startsWith('FLEETWISE_')))).toMatchObject({
        MY_SETTING: 'from-spec',
        STEP_SECONDS: '0.05',
      });
      expect(env.get('FLEETWISE_TASK_ID')).toBe('p-5.0');
      expect(env.get('FLEETWISE_JOB_ID')).toBe('p-5');
      expect(env.get('FLEETWISE_CHECKPOINT_DIR')).toBe(spec.checkpointDir);
      expect(env.get('FLEETWISE_PROGRESS_FILE')).toBe(spec.progressFile);
      expect(env.get('FLEETWISE_RESTORE')).toBe('1');
      expect(env.get('PATH')).toBeTruthy();
      expect(env.get('HOME')).toBeTruthy();
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
});

/** Processes whose process group is `pgid` (the wrapper of a task leads its own group). */
function groupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // Field 3 is the state (Z: a zombie, already dead), field 5 the process group.
      if (Number(fields[2]) === pgid && fields[0] !== 'Z') members.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return members;
}

describe('process executor: tasks that end with their worker (local instances)', () => {
  it('a task runs while the process that started it lives and dies with it, even by SIGKILL; one that exits leaves nothing', async () => {
    ensureBuiltCli(['worker/executors/process.ts']);
    const tmp = mkdtempSync(join(tmpdir(), 'fw-proc-tied-'));
    const stateDir = join(tmp, 'state');
    // The "worker": a process that starts two tied tasks and stays alive until killed.
    const script = join(tmp, 'worker.mjs');
    const task = (taskId: string, command: string[]): TaskLaunch => ({
      taskId,
      jobId: taskId.split('.')[0] ?? taskId,
      command,
      env: {},
      vcpus: 1,
      memoryGiB: 0,
      gpus: 0,
      shmSizeGiB: 0,
      checkpointDir: join(tmp, taskId, 'checkpoint'),
      progressFile: join(tmp, taskId, 'progress'),
      restoring: false,
    });
    writeFileSync(
      script,
      [
        `import { ProcessExecutor } from ${JSON.stringify(join(PROJECT_ROOT, 'dist', 'worker', 'executors', 'process.js'))};`,
        `const executor = new ProcessExecutor({ stateDir: ${JSON.stringify(stateDir)}, tasksEndWithThisProcess: true });`,
        `await executor.start(${JSON.stringify(task('long-1.0', ['sleep', '60']))});`,
        `await executor.start(${JSON.stringify(task('short-2.0', ['true']))});`,
        `process.stdout.write('started\\n');`,
        'setInterval(() => undefined, 1000);',
      ].join('\n'),
    );
    const worker = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await new Promise<void>((resolve, reject) => {
        worker.stdout.on('data', (d: Buffer) => (d.toString().includes('started') ? resolve() : undefined));
        worker.once('exit', (code) => reject(new Error(`the worker exited (${code})`)));
      });
      const executor = new ProcessExecutor({ stateDir });
      const pidOf = (taskId: string): number =>
        (JSON.parse(readFileSync(join(stateDir, taskId, 'pid.json'), 'utf8')) as { pid: number }).pid;
      // The short task exits on its own with its code, and its guard goes with it.
      const short = await until(async () => {
        const s = await executor.status('short-2.0');
        return s?.state === 'exited' ? s : undefined;
      });
      expect(short.exitCode).toBe(0);
      await until(async () => (groupMembers(pidOf('short-2.0')).length === 0 ? true : undefined));
      // The long one runs on while its worker lives.
      await new Promise((r) => setTimeout(r, 1000));
      expect((await executor.status('long-1.0'))?.state).toBe('running');
      worker.kill('SIGKILL');
      const long = await until(async () => {
        const s = await executor.status('long-1.0');
        return s?.state === 'exited' ? s : undefined;
      });
      expect(long.exitCode).toBeUndefined(); // killed with its wrapper: no exit code was written
      await until(async () => (groupMembers(pidOf('long-1.0')).length === 0 ? true : undefined));
    } finally {
      worker.kill('SIGKILL');
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
