import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { DesiredTask } from '../../src/protocol/worker-protocol.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readExitRecord } from '../../src/worker/exit-record.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { offlineLifecycle, shellTask, until, untilTaskEnded } from './agent-fixtures.js';

/**
 * A running task the worker watches is sent SIGTERM by someone else (a host shutting down, `docker stop`, a restarted
 * Docker engine). Its exit is a stop, not the task's end: it resumes from its checkpoint, and no exit is recorded.
 * Only an exit 0 with every declared iteration done (or with none declared) is a success.
 */
const tmp = mkdtempSync(join(tmpdir(), 'fw-outside-stop-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Reports 3 iterations, then on SIGTERM writes a checkpoint and exits 0 (as examples/counter does). */
const CHECKPOINTS_ON_TERM =
  'trap \'echo 3 > "$FLEETWISE_CHECKPOINT_DIR/state"; exit 0\' TERM; ' +
  'echo "$(date +%s) 3" >> "$FLEETWISE_PROGRESS_FILE"; while :; do sleep 0.02; done';
/** Reports 3 iterations and leaves SIGTERM to end it (exit 143). */
const DIES_ON_TERM = 'echo "$(date +%s) 3" >> "$FLEETWISE_PROGRESS_FILE"; exec sleep 600';

describe('a task the worker watches, stopped from outside', () => {
  it('is reported stopped (it resumes from its checkpoint), not succeeded or failed, short of its iterations', async () => {
    const stateDir = join(tmp, 'executor');
    const store = new FsObjectStore(join(tmp, 'store'));
    const workDir = join(tmp, 'work');
    const executor = new ProcessExecutor({ stateDir });
    const tasks = offlineLifecycle(executor, store, workDir, 20);
    tasks.start(shellTask('short-1.0', CHECKPOINTS_ON_TERM, { totalIterations: 100 }));
    tasks.start(shellTask('killed-1.0', DIES_ON_TERM, { totalIterations: 100 }));
    tasks.start(shellTask('undeclared-1.0', CHECKPOINTS_ON_TERM));
    await tasks.settle();
    const ids = ['short-1.0', 'killed-1.0', 'undeclared-1.0'];
    for (const id of ids) expect(tasks.get(id)?.phase).toBe('running');
    await until(
      'progress to be written',
      async () =>
        ids.every((id) => readIfThere(join(workDir, 'tasks', id, 'progress')).includes(' 3')) || undefined,
    );
    await tasks.observe();
    // `docker stop` / a shutdown: SIGTERM from outside, while the worker watches.
    for (const id of ids) await executor.signal(id, 'SIGTERM');
    for (const id of ids) await untilTaskEnded(tasks, id);

    const byId = new Map(tasks.reports().map((r) => [r.taskId, r]));
    expect(byId.get('short-1.0')).toMatchObject({ state: 'stopped', exitCode: 0, completedIterations: 3 });
    expect(byId.get('short-1.0')?.reason).toMatch(/short of its declared iterations \(3 of 100\)/);
    expect(byId.get('killed-1.0')).toMatchObject({ state: 'stopped', exitCode: 143 });
    expect(byId.get('killed-1.0')?.reason).toMatch(/SIGTERM ended it/);
    // No iterations declared: nothing tells a shutdown's exit 0 from the task's end.
    expect(byId.get('undeclared-1.0')).toMatchObject({ state: 'succeeded', exitCode: 0 });
    // A stop is not the task's end: nothing recorded, so the next run resumes it (its checkpoint is in the store).
    for (const id of ['short-1.0', 'killed-1.0'])
      expect(await readExitRecord(store, { jobId: id.replace('.0', ''), taskId: id }, 1)).toBeUndefined();
    expect(byId.get('short-1.0')?.checkpoint).toBeDefined();
    await tasks.stopWatchers();
    for (const id of ids) await executor.remove(id);
  });

  it('an exit 0 with every declared iteration done is a success', async () => {
    const stateDir = join(tmp, 'done-executor');
    const store = new FsObjectStore(join(tmp, 'done-store'));
    const workDir = join(tmp, 'done-work');
    const executor = new ProcessExecutor({ stateDir });
    const tasks = offlineLifecycle(executor, store, workDir, 20);
    tasks.start(
      shellTask('whole-1.0', 'echo "$(date +%s) 100" >> "$FLEETWISE_PROGRESS_FILE"', {
        totalIterations: 100,
      }),
    );
    await tasks.settle();
    await untilTaskEnded(tasks, 'whole-1.0');
    expect(tasks.reports()).toEqual([
      expect.objectContaining({ taskId: 'whole-1.0', state: 'succeeded', completedIterations: 100 }),
    ]);
    expect(await readExitRecord(store, { jobId: 'whole-1', taskId: 'whole-1.0' }, 1)).toMatchObject({
      state: 'succeeded',
    });
    await tasks.stopWatchers();
    await executor.remove('whole-1.0');
  });

  it('a task that, resumed after such a stop, ends again no further on its own has ended: succeeded, not rerun forever', async () => {
    const stateDir = join(tmp, 'early-executor');
    const store = new FsObjectStore(join(tmp, 'early-store'));
    const workDir = join(tmp, 'early-work');
    const executor = new ProcessExecutor({ stateDir });
    const tasks = offlineLifecycle(executor, store, workDir, 20);
    // Stops early on its own (early stopping) at 3 of the 100 iterations its job declares.
    const d = shellTask('early-1.0', 'echo "$(date +%s) 3" >> "$FLEETWISE_PROGRESS_FILE"', {
      totalIterations: 100,
    });
    // Nothing tells its exit from a shutdown's SIGTERM: stopped, and run again here, as long as stops in a row that get
    // it no further stay within the bound (3); the next such exit is taken at its word.
    for (let run = 0; run < 3; run++) {
      tasks.start(run === 0 ? d : { ...d, restore: true });
      await tasks.settle();
      await untilTaskEnded(tasks, 'early-1.0');
      expect(tasks.reports()).toEqual([
        expect.objectContaining({ state: 'stopped', completedIterations: 3 }),
      ]);
      await executor.remove('early-1.0');
    }
    tasks.start({ ...d, restore: true });
    await tasks.settle();
    await untilTaskEnded(tasks, 'early-1.0');
    expect(tasks.reports()).toEqual([
      expect.objectContaining({
        taskId: 'early-1.0',
        state: 'succeeded',
        exitCode: 0,
        completedIterations: 3,
      }),
    ]);
    expect(await readExitRecord(store, { jobId: 'early-1', taskId: 'early-1.0' }, 1)).toMatchObject({
      state: 'succeeded',
    });
    await tasks.stopWatchers();
    await executor.remove('early-1.0');
  });

  it('a rerun stopped from outside again short of where the last stop got is stopped again, not succeeded', async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'twice-executor') });
    const store = new FsObjectStore(join(tmp, 'twice-store'));
    const workDir = join(tmp, 'twice-work');
    const tasks = offlineLifecycle(executor, store, workDir, 20);
    const running = (n: number): string =>
      `trap 'exit 0' TERM; echo "$(date +%s) ${n}" >> "$FLEETWISE_PROGRESS_FILE"; while :; do sleep 0.02; done`;
    const d = shellTask('twice-1.0', running(50), { totalIterations: 100 });
    const progress = join(workDir, 'tasks', 'twice-1.0', 'progress');
    // The first run gets to 50; the rerun resumes from an older checkpoint and is at 45 when stopped again.
    const rerun: DesiredTask = {
      ...d,
      restore: true,
      launch: { ...d.launch, command: ['sh', '-c', running(45)] },
    };
    const runs: [number, DesiredTask][] = [
      [50, d],
      [45, rerun],
    ];
    for (const [n, task] of runs) {
      tasks.start(task);
      await tasks.settle();
      await until(`progress ${n}`, async () =>
        existsSync(progress) && readFileSync(progress, 'utf8').includes(` ${n}`) ? true : undefined,
      );
      await tasks.observe();
      await executor.signal('twice-1.0', 'SIGTERM');
      await untilTaskEnded(tasks, 'twice-1.0');
      expect(tasks.get('twice-1.0')?.phase).toBe('stopped');
      await executor.remove('twice-1.0');
    }
    expect(await readExitRecord(store, { jobId: 'twice-1', taskId: 'twice-1.0' }, 1)).toBeUndefined();
    await tasks.stopWatchers();
  });

  it('a task that exits 143 by itself, again and again, fails once the bound is reached instead of rerunning for ever', async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'self-executor') });
    const tasks = offlineLifecycle(
      executor,
      new FsObjectStore(join(tmp, 'self-store')),
      join(tmp, 'self-work'),
      20,
    );
    const d = shellTask('self-1.0', 'exit 143');
    const phases: string[] = [];
    for (let run = 0; run < 4; run++) {
      tasks.start({ ...d, restore: run > 0 });
      await tasks.settle();
      await untilTaskEnded(tasks, 'self-1.0');
      phases.push(String(tasks.get('self-1.0')?.phase));
      await executor.remove('self-1.0');
    }
    expect(phases).toEqual(['stopped', 'stopped', 'stopped', 'failed']);
    await tasks.stopWatchers();
  });

  it('a job that reports no iterations but checkpoints in every run is stopped from outside again and again, not failed', async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'nightly-executor') });
    const tasks = offlineLifecycle(
      executor,
      new FsObjectStore(join(tmp, 'nightly-store')),
      join(tmp, 'nightly-work'),
      20,
    );
    // Each run checkpoints new work once, then keeps its directory quiet (so the watcher uploads it); SIGTERM ends it.
    const script =
      'n=0; [ -f "$FLEETWISE_CHECKPOINT_DIR/state" ] && n=$(cat "$FLEETWISE_CHECKPOINT_DIR/state"); ' +
      'echo $((n+1)) > "$FLEETWISE_CHECKPOINT_DIR/state"; exec sleep 600';
    const d = shellTask('nightly-1.0', script);
    const phases: string[] = [];
    for (let run = 0; run < 5; run++) {
      tasks.start({ ...d, restore: run > 0 });
      await tasks.settle();
      await until('its own checkpoint uploaded', async () => {
        await tasks.observe();
        const t = tasks.get('nightly-1.0');
        return t?.checkpoint !== undefined && t.checkpoint.atSeconds * 1000 >= t.startedAtMs
          ? true
          : undefined;
      });
      await executor.signal('nightly-1.0', 'SIGTERM');
      await untilTaskEnded(tasks, 'nightly-1.0');
      phases.push(String(tasks.get('nightly-1.0')?.phase));
      await executor.remove('nightly-1.0');
    }
    expect(phases).toEqual(['stopped', 'stopped', 'stopped', 'stopped', 'stopped']);
    await tasks.stopWatchers();
  });

  it("takes no task's environment for its declared iterations (a COUNT_TO of 0 is the task's own business)", async () => {
    const stateDir = join(tmp, 'env-executor');
    const store = new FsObjectStore(join(tmp, 'env-store'));
    const workDir = join(tmp, 'env-work');
    const executor = new ProcessExecutor({ stateDir });
    const tasks = offlineLifecycle(executor, store, workDir, 20);
    const d = shellTask('env-1.0', 'exit 0', { totalIterations: 100 });
    tasks.start({ ...d, launch: { ...d.launch, env: { COUNT_TO: '0' } } });
    const e = shellTask('countto-1.0', 'exit 0');
    tasks.start({ ...e, launch: { ...e.launch, env: { COUNT_TO: '40' } } });
    await tasks.settle();
    await tasks.stopWatchers();
    for (const id of ['env-1.0', 'countto-1.0']) await executor.remove(id);
    expect(tasks.get('env-1.0')?.total).toBe(100);
    expect(tasks.get('countto-1.0')?.total).toBeUndefined();
  });
});

function readIfThere(path: string): string {
  return existsSync(path) ? readFileSync(path, 'utf8') : '';
}
