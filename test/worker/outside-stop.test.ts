import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { DesiredTask } from '../../src/protocol/worker-protocol.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readExitRecord } from '../../src/worker/exit-record.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { readPersistedTask } from '../../src/worker/task-record.js';
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
    // Said as the process executor has it: no `docker stop` ended a process task.
    for (const id of ['short-1.0', 'killed-1.0']) {
      expect(byId.get(id)?.reason).toMatch(/taken as killed from outside \(a signal not from the worker\)/);
      expect(byId.get(id)?.reason).not.toMatch(/docker/);
      // Counted, for the controller to show as the job's restarts.
      expect(byId.get(id)?.outsideStops).toBe(1);
    }
    expect(byId.get('undeclared-1.0')?.outsideStops).toBeUndefined();
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

  it('a task that starts over, uploads a checkpoint in every run and ends short of its total is taken at its word after 3', async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'over-executor') });
    const store = new FsObjectStore(join(tmp, 'over-store'));
    const tasks = offlineLifecycle(executor, store, join(tmp, 'over-work'), 20);
    // Early stopping: every run counts 1..5 of the 100 it declares, uploads a checkpoint (waiting for the worker to
    // take it) and exits 0 on its own.
    const script =
      'for i in 1 2 3 4 5; do echo "$(date +%s) $i" >> "$FLEETWISE_PROGRESS_FILE"; done; ' +
      'date +%s%N > "$FLEETWISE_CHECKPOINT_DIR/state"; : > "$FLEETWISE_CHECKPOINT_DIR/COMPLETE"; ' +
      'while [ -e "$FLEETWISE_CHECKPOINT_DIR/COMPLETE" ]; do sleep 0.02; done';
    const d = shellTask('over-1.0', script, { totalIterations: 100 });
    const phases: string[] = [];
    for (let run = 0; run < 4; run++) {
      tasks.start({ ...d, restore: run > 0 });
      await tasks.settle();
      await untilTaskEnded(tasks, 'over-1.0');
      const t = tasks.get('over-1.0');
      // Each run uploaded a checkpoint of its own: no sign of progress for a job that declares its iterations.
      expect(t?.checkpoint?.atSeconds).toBeGreaterThanOrEqual(Math.floor((t?.startedAtMs ?? 0) / 1000));
      phases.push(String(t?.phase));
      await executor.remove('over-1.0');
    }
    expect(phases).toEqual(['stopped', 'stopped', 'stopped', 'succeeded']);
    expect(await readExitRecord(store, { jobId: 'over-1', taskId: 'over-1.0' }, 1)).toMatchObject({
      state: 'succeeded',
      completedIterations: 5,
    });
    await tasks.stopWatchers();
  });

  it('a task that writes back the checkpoint it restored and exits 143 by itself fails after 3 such stops', async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'same-executor') });
    const store = new FsObjectStore(join(tmp, 'same-store'));
    const tasks = offlineLifecycle(executor, store, join(tmp, 'same-work'), 20);
    // Marks a checkpoint of what it restored (its first run writes it), waits for the upload, then exits 143.
    const script =
      '[ -f "$FLEETWISE_CHECKPOINT_DIR/state" ] || echo x > "$FLEETWISE_CHECKPOINT_DIR/state"; ' +
      ': > "$FLEETWISE_CHECKPOINT_DIR/COMPLETE"; ' +
      'while [ -e "$FLEETWISE_CHECKPOINT_DIR/COMPLETE" ]; do sleep 0.02; done; exit 143';
    const d = shellTask('same-1.0', script);
    const phases: string[] = [];
    const keys = new Set<string>();
    for (let run = 0; run < 4; run++) {
      tasks.start({ ...d, restore: run > 0 });
      await tasks.settle();
      await untilTaskEnded(tasks, 'same-1.0');
      keys.add(String(tasks.get('same-1.0')?.checkpoint?.key));
      phases.push(String(tasks.get('same-1.0')?.phase));
      await executor.remove('same-1.0');
    }
    // A checkpoint uploaded by every run, the same content each time: no progress.
    expect(keys.size).toBe(4);
    expect(phases).toEqual(['stopped', 'stopped', 'stopped', 'failed']);
    expect(tasks.reports()[0]).toMatchObject({ state: 'failed', exitCode: 143, outsideStops: 3 });
    await tasks.stopWatchers();
  });

  it('a task that gets a little further in every run and ends short of its total runs at most 10 more times', async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'creep-executor') });
    const store = new FsObjectStore(join(tmp, 'creep-store'));
    const tasks = offlineLifecycle(executor, store, join(tmp, 'creep-work'), 20);
    // Each run reports one iteration more than the last (kept in a file of the test's) and exits 0: 1, 2, 3, … of 100.
    const runs = join(tmp, 'creep-runs');
    const script =
      `n=$(cat ${runs} 2>/dev/null || echo 0); n=$((n+1)); echo $n > ${runs}; ` +
      'echo "$(date +%s) $n" >> "$FLEETWISE_PROGRESS_FILE"';
    const d = shellTask('creep-1.0', script, { totalIterations: 100 });
    const seen: [string, number | undefined][] = [];
    for (let run = 0; run < 11; run++) {
      tasks.start({ ...d, restore: run > 0 });
      await tasks.settle();
      await untilTaskEnded(tasks, 'creep-1.0');
      const [report] = tasks.reports();
      seen.push([String(report?.state), report?.outsideStops]);
      await executor.remove('creep-1.0');
    }
    // Every run got further, so the bound of 3 without progress never applies; the bound of 10 per attempt does.
    expect(seen).toEqual([
      ...Array.from({ length: 10 }, (_, i): [string, number] => ['stopped', i + 1]),
      ['succeeded', 10],
    ]);
    expect(tasks.reports()[0]).toMatchObject({ completedIterations: 11 });
    // A new attempt here counts from 0 again.
    tasks.start({ ...d, attempt: 2, restore: true });
    await tasks.settle();
    await untilTaskEnded(tasks, 'creep-1.0');
    expect(tasks.reports()[0]).toMatchObject({ state: 'stopped', attempt: 2, outsideStops: 1 });
    await executor.remove('creep-1.0');
    await tasks.stopWatchers();
  });

  it('a task that never reports progress has ended at its exit 0, whatever its job declares; one that did is short', async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'quiet-executor') });
    const store = new FsObjectStore(join(tmp, 'quiet-store'));
    const workDir = join(tmp, 'quiet-work');
    const tasks = offlineLifecycle(executor, store, workDir, 20);
    // A gang's coordinator: it writes no progress, and ends (exit 0) once its peers are done.
    tasks.start(shellTask('quiet-1.1', 'sleep 0.2', { totalIterations: 25 }));
    await tasks.settle();
    await untilTaskEnded(tasks, 'quiet-1.1');
    const [quiet] = tasks.reports();
    expect(quiet).toMatchObject({ taskId: 'quiet-1.1', state: 'succeeded', exitCode: 0 });
    // No count is reported for it: it has not done 0 of its job's iterations.
    expect(quiet?.completedIterations).toBeUndefined();
    expect(await readExitRecord(store, { jobId: 'quiet-1', taskId: 'quiet-1.1' }, 1)).toMatchObject({
      state: 'succeeded',
    });
    await executor.remove('quiet-1.1');

    // A task that did report, stopped from outside, then stopped again before its rerun reported anything: short.
    const d = shellTask('told-1.0', CHECKPOINTS_ON_TERM, { totalIterations: 100 });
    tasks.start(d);
    await tasks.settle();
    const progress = join(workDir, 'tasks', 'told-1.0', 'progress');
    await until('progress to be written', async () => readIfThere(progress).includes(' 3') || undefined);
    await tasks.observe();
    await executor.signal('told-1.0', 'SIGTERM');
    await untilTaskEnded(tasks, 'told-1.0');
    expect(tasks.get('told-1.0')?.phase).toBe('stopped');
    await executor.remove('told-1.0');
    tasks.start({ ...d, restore: true, launch: { ...d.launch, command: ['sh', '-c', 'exit 0'] } });
    await tasks.settle();
    await untilTaskEnded(tasks, 'told-1.0');
    expect(tasks.get('told-1.0')?.phase).toBe('stopped');
    await executor.remove('told-1.0');
    await tasks.stopWatchers();
  });

  it('a task resumed on a fresh worker after a move, stopped from outside before it reports in that run, is stopped', async () => {
    const store = new FsObjectStore(join(tmp, 'moved-store'));
    const loading = join(tmp, 'moved-loading');
    // On SIGTERM it saves its count and exits 0, as the contract asks. Fresh, it reports 500 of 1000; resumed, it loads
    // its state first (until a file that never comes), and only then would report.
    const script =
      `trap 'echo "$N" > "$FLEETWISE_CHECKPOINT_DIR/state"; exit 0' TERM; ` +
      'if [ -f "$FLEETWISE_CHECKPOINT_DIR/state" ]; then ' +
      `  : > ${loading}; while [ ! -e "$FLEETWISE_CHECKPOINT_DIR/never" ]; do sleep 0.02; done; ` +
      'else N=500; fi; ' +
      'echo "$(date +%s) $N" >> "$FLEETWISE_PROGRESS_FILE"; while :; do sleep 0.02; done';
    const d = shellTask('moved-1.0', script, { totalIterations: 1000 });
    // The first worker runs it to 500, then moves it: a checkpoint-stop it asks for.
    const before = new ProcessExecutor({ stateDir: join(tmp, 'moved-executor-1') });
    const first = offlineLifecycle(before, store, join(tmp, 'moved-work-1'), 20);
    first.start(d);
    await first.settle();
    await until('500 reported', async () => {
      await first.observe();
      return first.get('moved-1.0')?.completed === 500 || undefined;
    });
    await first.stop(first.get('moved-1.0') as NonNullable<ReturnType<typeof first.get>>, true, {
      signal: 'SIGTERM',
      timeoutSeconds: 5,
    });
    expect(first.reports()[0]).toMatchObject({ state: 'stopped', checkpoint: expect.anything() });
    await first.stopWatchers();
    await before.remove('moved-1.0');

    // The move's target, a worker that never ran it: a host shutdown's SIGTERM reaches it while it loads its state.
    const after = new ProcessExecutor({ stateDir: join(tmp, 'moved-executor-2') });
    const second = offlineLifecycle(after, store, join(tmp, 'moved-work-2'), 20);
    second.start({ ...d, restore: true });
    await second.settle();
    expect(second.get('moved-1.0')?.restoredFrom).toBeDefined();
    await until('the resumed run to load', async () => existsSync(loading) || undefined);
    await after.signal('moved-1.0', 'SIGTERM');
    await untilTaskEnded(second, 'moved-1.0');
    // Half its work undone: not its end, but a stop it resumes from.
    const [report] = second.reports();
    expect(report).toMatchObject({ taskId: 'moved-1.0', state: 'stopped', exitCode: 0, outsideStops: 1 });
    expect(report?.reason).toMatch(/short of its declared iterations \(0 of 1000\)/);
    expect(await readExitRecord(store, { jobId: 'moved-1', taskId: 'moved-1.0' }, 1)).toBeUndefined();
    await second.stopWatchers();
    await after.remove('moved-1.0');
  });

  it('a restarted worker goes on counting the stops from outside of the attempt: each is a new one', async () => {
    const stateDir = join(tmp, 'reboot-executor');
    const store = new FsObjectStore(join(tmp, 'reboot-store'));
    const workDir = join(tmp, 'reboot-work');
    const d = shellTask('reboot-1.0', CHECKPOINTS_ON_TERM, { totalIterations: 100 });
    const counts: (number | undefined)[] = [];
    // A host rebooted every night: each time a shutdown's SIGTERM, then a new worker process that adopts the task.
    for (let night = 1; night <= 3; night++) {
      const executor = new ProcessExecutor({ stateDir });
      const tasks = offlineLifecycle(executor, store, workDir, 20);
      if (night > 1) {
        await tasks.adopt();
        // What the worker before it counted, it reports still.
        expect(tasks.reports()[0]).toMatchObject({ state: 'stopped', outsideStops: night - 1 });
      }
      tasks.start({ ...d, restore: night > 1 });
      await tasks.settle();
      const progress = join(workDir, 'tasks', 'reboot-1.0', 'progress');
      await until('progress to be written', async () => readIfThere(progress).includes(' 3') || undefined);
      await tasks.observe();
      await executor.signal('reboot-1.0', 'SIGTERM');
      await untilTaskEnded(tasks, 'reboot-1.0');
      counts.push(tasks.reports()[0]?.outsideStops);
      await tasks.stopWatchers();
    }
    expect(counts).toEqual([1, 2, 3]);
    // Kept with the task's record on the host, for the next worker.
    expect(await readPersistedTask(join(workDir, 'tasks', 'reboot-1.0'))).toMatchObject({
      attempt: 1,
      attemptOutsideStops: 3,
    });
    await new ProcessExecutor({ stateDir }).remove('reboot-1.0');
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
