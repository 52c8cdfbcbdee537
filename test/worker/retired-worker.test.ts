import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readWorkerExit } from '../../src/cloud/local/worker-exit-record.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { ManualClock } from '../../src/controller/clock.js';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { InstanceRecord, StateStore, TaskRecord } from '../../src/controller/state-store.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { WorkerAgent, type AgentExit } from '../../src/worker/agent.js';
import { ControllerClient } from '../../src/worker/controller-client.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import { SavedCredential } from '../../src/worker/saved-credential.js';
import { catalog, CPU_SMALL, rig, workerTaskControlFor } from '../controller/controller-fixtures.js';
import { RecordingLogger, until } from './agent-fixtures.js';

/**
 * A worker the controller has retired (it took the worker for lost, resumed its task elsewhere from its last
 * checkpoint, and is terminating its instance) hears it as a 410 from the controller's API, on a heartbeat or on a
 * registration. Its task must end there, uploading nothing more: the copy that replaced it writes the same checkpoint
 * seqs under the same keys. Real parts: the controller's worker routes over HTTP on 127.0.0.1, the worker agent, the
 * process executor running a shell task that checkpoints ten times a second, and a filesystem object store.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-retired-worker-'));
const TOKEN = 'retired-worker-instance-token-0123456789abcdef';
const ADMIN = 'admin-0123456789abcdef';

/** Checkpoints whenever the worker took the last one; a checkpoint signal (SIGTERM) leaves a mark and a final one. */
const TASK_SCRIPT = [
  'd="$FLEETWISE_CHECKPOINT_DIR"; mkdir -p "$d"; n=0',
  `trap 'echo "$n" > "$d/signalled"; echo "$n" > "$d/counter"; : > "$d/COMPLETE"; sleep 1; exit 0' TERM`,
  'while :; do',
  '  n=$((n + 1)); echo "$(date +%s) $n" >> "$FLEETWISE_PROGRESS_FILE"',
  '  if [ ! -e "$d/COMPLETE" ]; then echo "$n" > "$d/counter"; : > "$d/COMPLETE"; fi',
  '  sleep 0.1',
  'done',
].join('\n');

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface Rig {
  readonly store: StateStore;
  readonly server: ApiServer;
  readonly inst: InstanceRecord;
  readonly task: TaskRecord;
  readonly objects: string;
}

/** A controller serving the worker protocol over HTTP, with a one-task job running on an instance whose token is TOKEN. */
async function controllerWithJob(name: string): Promise<Rig> {
  const clock = new ManualClock();
  const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
  const objects = join(scratch, name, 'objects');
  const workers = workerTaskControlFor(store, clock, { objectStoreLocation: objects });
  const r = rig({}, { store, clock, tasks: workers, workers });
  const spec = validateJobSpec(
    {
      name,
      team: 'research',
      tasks: [
        { name: 'main', image: 'busybox:latest', command: ['sh', '-c', TASK_SCRIPT], demand: CPU_SMALL },
      ],
    },
    name,
    catalog,
  );
  const job = r.controller.submit(spec, 'research');
  await r.controller.runRound();
  await r.controller.reconcile();
  const inst = store.listInstances({ states: ['running'] })[0] as InstanceRecord;
  store.setWorkerToken(inst.id, TOKEN);
  await r.controller.reconcile();
  const task = store.listTasks({ jobId: job.id })[0] as TaskRecord;
  expect(task).toMatchObject({ state: 'running', instanceId: inst.id });
  const server = await startApiServer(r.controller, {
    listen: '127.0.0.1:0',
    adminToken: ADMIN,
    catalog,
    workers,
  });
  return { store, server, inst, task, objects };
}

/** `stopTasksOnExit`: as local mode spawns its workers (a stop by signal checkpoints and stops the tasks). */
function workerOn(
  rig: Rig,
  workDir: string,
  executor: ProcessExecutor,
  logger: RecordingLogger,
  stopTasksOnExit = false,
): WorkerAgent {
  const saved = new SavedCredential(workDir, rig.inst.cloudId as string);
  saved.save(TOKEN, rig.inst.id);
  return new WorkerAgent({
    connection: new ControllerClient(rig.server.url),
    credentials: { saved },
    executor,
    openStore: (location) => new FsObjectStore(location),
    cloudInstanceId: rig.inst.cloudId as string,
    workDir,
    heartbeatSeconds: 0.1,
    checkpointPollMs: 50,
    controllerUrl: rig.server.url,
    stopTasksOnExit,
    logger,
  });
}

/** The task's checkpoints in the object store (seq directories, with what each holds). */
function storedCheckpoints(rig: Rig): string[] {
  const dir = join(rig.objects, 'checkpoints', rig.task.jobId, rig.task.id);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .sort()
    .map((seq) => `${seq}: ${readdirSync(join(dir, seq)).sort().join(' ')}`);
}

/** run() within `ms`, or a failure saying the worker went on. */
async function exited(run: Promise<AgentExit>, ms: number): Promise<AgentExit | 'still running'> {
  return Promise.race([
    run,
    new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), ms)),
  ]);
}

/** Until the task has uploaded checkpoints and the controller recorded one of them. */
async function checkpointed(rig: Rig): Promise<void> {
  await until(
    'a checkpoint the controller recorded',
    async () =>
      storedCheckpoints(rig).length >= 2 && rig.store.getTask(rig.task.id)?.lastCheckpointKey !== undefined
        ? true
        : undefined,
    20_000,
  );
}

/** What a retired worker must have done: killed its task unsignalled, uploaded nothing since, recorded its exit. */
async function expectRetired(
  rig: Rig,
  workDir: string,
  executor: ProcessExecutor,
  logger: RecordingLogger,
): Promise<void> {
  const status = await executor.status(rig.task.id);
  expect(status === undefined || status.state === 'exited').toBe(true);
  // Killed, never asked to checkpoint: the task's SIGTERM trap left no mark.
  expect(existsSync(join(workDir, 'tasks', rig.task.id, 'checkpoint', 'signalled'))).toBe(false);
  const atExit = storedCheckpoints(rig);
  // Ten checkpoints' time: a watcher or a task left running would have uploaded more.
  await new Promise((r) => setTimeout(r, 1000));
  expect(storedCheckpoints(rig)).toEqual(atExit);
  const exit = readWorkerExit(workDir);
  expect(exit?.reason).toBe('retired');
  expect(
    logger.lines.filter((l) =>
      /^warn the controller at http:\/\/127\.0\.0\.1:\d+ retired this instance \(.*HTTP 410: .* is (terminating|terminated)\)/.test(
        l,
      ),
    ),
  ).toHaveLength(1);
  expect(logger.lines).toContain(
    `warn retired: killed 1 task(s) (${rig.task.id}) without a checkpoint; exiting`,
  );
  // Retired is no silence: nothing about the controller not answering, giving up, or checkpointing on the way out.
  expect(logger.lines.filter((l) => /no answer|giving up|checkpointed|stopping:/.test(l))).toEqual([]);
}

describe('a worker the controller retired', () => {
  it('on a heartbeat answered 410 (terminating): kills its task without a checkpoint, uploads nothing more, records it and exits', async () => {
    const rig = await controllerWithJob('heartbeat');
    const workDir = join(scratch, 'heartbeat', 'worker');
    const executor = new ProcessExecutor({ stateDir: join(workDir, 'executor') });
    const logger = new RecordingLogger();
    const stop = new AbortController();
    const run = workerOn(rig, workDir, executor, logger, true).run(stop.signal);
    try {
      await checkpointed(rig);
      // The controller replaces the instance: the terminate call is under way (or failing and retried).
      rig.store.setInstanceState(rig.inst.id, 'terminating', { reason: 'worker stopped heartbeating' });
      expect(await exited(run, 10_000)).toBe('retired');
      await expectRetired(rig, workDir, executor, logger);
    } finally {
      stop.abort();
      await run;
      await executor.kill(rig.task.id);
      await rig.server.close();
    }
  }, 40_000);

  it('on a registration answered 410 (terminated): a restarted worker kills the task it finds, uploading nothing', async () => {
    const rig = await controllerWithJob('registration');
    const workDir = join(scratch, 'registration', 'worker');
    const executor = new ProcessExecutor({ stateDir: join(workDir, 'executor') });
    const first = new AbortController();
    const firstRun = workerOn(rig, workDir, executor, new RecordingLogger()).run(first.signal);
    const logger = new RecordingLogger();
    const stop = new AbortController();
    let run: Promise<AgentExit> | undefined;
    try {
      await checkpointed(rig);
      // The worker stops (its task runs on, for a restarted worker to adopt); meanwhile the controller replaced it.
      first.abort();
      expect(await firstRun).toBe('stopped');
      rig.store.setInstanceState(rig.inst.id, 'terminating', { reason: 'worker stopped heartbeating' });
      rig.store.setInstanceState(rig.inst.id, 'terminated', { reason: 'worker stopped heartbeating' });
      expect((await executor.status(rig.task.id))?.state).toBe('running');
      run = workerOn(rig, workDir, executor, logger).run(stop.signal);
      expect(await exited(run, 10_000)).toBe('retired');
      await expectRetired(rig, workDir, executor, logger);
    } finally {
      first.abort();
      stop.abort();
      await firstRun;
      await run;
      await executor.kill(rig.task.id);
      await rig.server.close();
    }
  }, 40_000);

  it('not on a 410 naming no retirement: a refusal like any, given up on in time, and not called silence', async () => {
    // Not the controller's answer (a proxy's, say): nothing here says the instance was replaced.
    const gone = createServer((_req, res) => {
      res
        .writeHead(410, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: 'this route is gone' }));
    });
    await new Promise<void>((resolve) => gone.listen(0, '127.0.0.1', resolve));
    const address = gone.address();
    const url = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
    const workDir = join(scratch, 'other-410', 'worker');
    mkdirSync(workDir, { recursive: true });
    const logger = new RecordingLogger();
    try {
      const agent = new WorkerAgent({
        connection: new ControllerClient(url),
        credentials: { launch: launchSecretCredential('launch-secret-of-other-410') },
        executor: new ProcessExecutor({ stateDir: join(workDir, 'executor') }),
        openStore: (location) => new FsObjectStore(location),
        cloudInstanceId: 'local-other-410',
        workDir,
        giveUpAfterSeconds: 0.5,
        controllerUrl: url,
        logger,
      });
      expect(await exited(agent.run(new AbortController().signal), 10_000)).toBe('gave-up');
      expect(readWorkerExit(workDir)?.reason).toBe('gave-up');
      expect(logger.lines.filter((l) => /retired/.test(l))).toEqual([]);
      expect(logger.lines[0]).toMatch(
        /^warn registration failed: .*HTTP 410: this route is gone; giving up in \d+ s unless the controller accepts this worker$/,
      );
      expect(logger.lines.at(-1)).toMatch(
        new RegExp(
          `^warn giving up: the controller at ${url} has refused this worker for \\d+ s; no task was running; exiting$`,
        ),
      );
      expect(logger.lines.filter((l) => /no answer/.test(l))).toEqual([]);
    } finally {
      await new Promise((resolve) => gone.close(resolve));
    }
  });
});
