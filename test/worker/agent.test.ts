import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readAll } from '../../src/storage/streams.js';
import { WorkerAgent } from '../../src/worker/agent.js';
import { checkpointPrefix } from '../../src/protocol/object-keys.js';
import type { TaskReport } from '../../src/protocol/worker-protocol.js';
import { ControllerClient } from '../../src/worker/controller-client.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { readExitRecord } from '../../src/worker/exit-record.js';
import { StoreWithOutage } from '../controller/backup-fixtures.js';
import {
  BOOTSTRAP,
  FakeController,
  RecordingLogger,
  runTask,
  storeCounterContext,
  until,
} from './agent-fixtures.js';

/**
 * The worker agent against a small fake controller speaking the real protocol over HTTP (127.0.0.1:0, the real
 * ControllerClient) and the real process executor running examples/counter/counter.sh. Ticks are driven by hand
 * (register → tick → settle) so the tests do not depend on heartbeat timing, except the one about `run()` surviving
 * a bad answer.
 */

describe('worker agent (fake controller over HTTP, real process executor)', () => {
  let tmp: string;
  let storeDir: string;
  let controller: FakeController;
  const agents: WorkerAgent[] = [];
  const executors: ProcessExecutor[] = [];

  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'fw-agent-test-'));
    storeDir = join(tmp, 'store');
    controller = new FakeController(storeDir);
    await controller.start();
    await storeCounterContext(new FsObjectStore(storeDir));
  });
  afterAll(async () => {
    for (const a of agents) await a.run(AbortSignal.abort()); // stops checkpoint watchers
    for (const e of executors) for (const t of await e.list()) await e.remove(t.taskId);
    await controller.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  /** A fresh agent on `workDir` (a second one on the same directory is a restarted worker). */
  function agentOn(
    workDir: string,
    logger = new RecordingLogger(),
  ): {
    agent: WorkerAgent;
    executor: ProcessExecutor;
    logger: RecordingLogger;
  } {
    const executor = new ProcessExecutor({ stateDir: join(workDir, 'executor') });
    const agent = new WorkerAgent({
      connection: new ControllerClient(controller.url),
      credentials: { launch: launchSecretCredential(BOOTSTRAP) },
      executor,
      openStore: (location) => new FsObjectStore(location),
      cloudInstanceId: 'local-test',
      workDir,
      heartbeatSeconds: 0.1,
      checkpointPollMs: 50,
      throughputWindowSeconds: 5,
      logger,
    });
    agents.push(agent);
    executors.push(executor);
    return { agent, executor, logger };
  }

  async function tickUntil(
    agent: WorkerAgent,
    what: string,
    accept: (report: TaskReport | undefined) => boolean,
    taskId: string,
  ): Promise<TaskReport> {
    return until(what, async () => {
      await agent.tick();
      await agent.settle();
      const report = controller.last(taskId);
      return report !== undefined && accept(report) ? report : undefined;
    });
  }

  /** One tick, the report of `taskId` its heartbeat sent, and the window it was made in (this host's clock). */
  async function timedTick(agent: WorkerAgent, taskId: string) {
    const before = controller.heartbeats.length;
    const fromMs = Date.now();
    await agent.tick();
    const toMs = Date.now();
    const sent = controller.heartbeats.slice(before);
    expect(sent).toHaveLength(1);
    return { report: sent[0]?.tasks.find((r) => r.taskId === taskId), fromMs, toMs };
  }

  /** The report says the task exited at `exitedAtMs`, as an age as of when it was made. */
  function expectAgedSince(
    exitedAtMs: number,
    made: { readonly report: TaskReport | undefined; readonly fromMs: number; readonly toMs: number },
  ): void {
    const age = made.report?.exitedSecondsAgo;
    expect(age).toBeGreaterThanOrEqual((made.fromMs - exitedAtMs) / 1000);
    expect(age).toBeLessThanOrEqual((made.toMs - exitedAtMs) / 1000);
  }

  it('a restarted agent adopts its running task instead of starting a duplicate', async () => {
    const workDir = join(tmp, 'adopt');
    const first = agentOn(workDir);
    controller.answer = [runTask('adopt-1.0', ['sh', 'counter.sh'])];
    await first.agent.register();
    const running = await tickUntil(
      first.agent,
      'the task to run',
      (r) => r?.state === 'running',
      'adopt-1.0',
    );
    expect(running.state).toBe('running');
    const pidFile = join(workDir, 'executor', 'adopt-1.0', 'pid.json');
    const pidBefore = readFileSync(pidFile, 'utf8');
    await first.agent.run(AbortSignal.abort()); // the old agent is gone (its watchers stopped); the task lives on

    const second = agentOn(workDir);
    await second.agent.register();
    const heartbeatsBefore = controller.heartbeats.length;
    await second.agent.tick(); // adopt → report → reconcile (the controller still wants it running)
    await second.agent.settle();
    // The very first report of the new agent already has the task running: it was adopted, not (re)started.
    expect(controller.heartbeats[heartbeatsBefore]?.tasks.map((t) => [t.taskId, t.state])).toEqual([
      ['adopt-1.0', 'running'],
    ]);
    await second.agent.tick();
    await second.agent.settle();
    expect(second.logger.lines.some((l) => l.includes('adopted task adopt-1.0'))).toBe(true);
    expect(second.logger.lines.some((l) => l.startsWith('info started adopt-1.0'))).toBe(false);
    const tasks = await second.executor.list();
    expect(tasks.map((t) => [t.taskId, t.state])).toEqual([['adopt-1.0', 'running']]);
    expect(readFileSync(pidFile, 'utf8')).toBe(pidBefore); // same process
    // On a busy host the shell may not have printed its first line yet: wait for it, then count.
    const log = await until("the task's first output", async () => {
      const text = (await readAll(await second.executor.logs('adopt-1.0'))).toString('utf8');
      return text.includes('starting at 0') ? text : undefined;
    });
    expect(log.match(/starting at 0/g)).toHaveLength(1); // started once, never twice
    // Progress keeps flowing to the adopted agent.
    const progressed = await tickUntil(
      second.agent,
      'progress after adoption',
      (r) => (r?.completedIterations ?? 0) > (running.completedIterations ?? 0),
      'adopt-1.0',
    );
    expect(progressed.state).toBe('running');
    controller.answer = [];
    await tickUntil(second.agent, 'the unwanted task to stop', (r) => r?.state === 'stopped', 'adopt-1.0');
  });

  it('a held task is prepared and reported ready without running; the answer without the hold starts it', async () => {
    const workDir = join(tmp, 'hold');
    const { agent, executor } = agentOn(workDir);
    controller.answer = [{ ...runTask('hold-1.0', ['sh', 'counter.sh']), hold: true }];
    await agent.register();
    await tickUntil(agent, 'the task to be ready', (r) => r?.state === 'ready', 'hold-1.0');
    // Prepared (its build context fetched) but not started: nothing runs, however many heartbeats pass.
    await agent.tick();
    await agent.settle();
    expect(controller.last('hold-1.0')?.state).toBe('ready');
    expect(await executor.list()).toEqual([]);
    // Released: the same task runs, from what was prepared.
    controller.answer = [runTask('hold-1.0', ['sh', 'counter.sh'])];
    await tickUntil(agent, 'the released task to run', (r) => r?.state === 'running', 'hold-1.0');
    expect((await executor.list()).map((t) => [t.taskId, t.state])).toEqual([['hold-1.0', 'running']]);
    controller.answer = [];
    await tickUntil(agent, 'the unwanted task to stop', (r) => r?.state === 'stopped', 'hold-1.0');
  });

  it('a task held ready in an earlier attempt is prepared again when its retried job holds it here again', async () => {
    const workDir = join(tmp, 'hold-retry');
    const { agent, executor } = agentOn(workDir);
    const command = ['sh', '-c', 'echo "attempt $FLEETWISE_ATTEMPT"; sleep 30'];
    controller.answer = [{ ...runTask('hold-3.0', command), attempt: 1, hold: true }];
    await agent.register();
    await tickUntil(agent, 'ready in attempt 1', (r) => r?.state === 'ready' && r.attempt === 1, 'hold-3.0');
    // A sibling failed while being prepared: the job is retried and this task placed here again, still held.
    controller.answer = [{ ...runTask('hold-3.0', command), attempt: 2, hold: true }];
    await tickUntil(agent, 'ready in attempt 2', (r) => r?.state === 'ready' && r.attempt === 2, 'hold-3.0');
    expect(await executor.list()).toEqual([]);
    // Released in attempt 2: the launch that runs is attempt 2's.
    controller.answer = [{ ...runTask('hold-3.0', command), attempt: 2 }];
    const running = await tickUntil(
      agent,
      'the released task to run',
      (r) => r?.state === 'running',
      'hold-3.0',
    );
    expect(running.attempt).toBe(2);
    const log = await until('its first output', async () => {
      const text = (await readAll(await executor.logs('hold-3.0'))).toString('utf8');
      return text === '' ? undefined : text;
    });
    expect(log).toBe('attempt 2\n');
    controller.answer = [];
    await tickUntil(agent, 'the unwanted task to stop', (r) => r?.state === 'stopped', 'hold-3.0');
  });

  it('a held task no longer wanted is dropped without ever running', async () => {
    const workDir = join(tmp, 'hold-drop');
    const { agent, executor } = agentOn(workDir);
    controller.answer = [{ ...runTask('hold-2.0', ['sh', 'counter.sh']), hold: true }];
    await agent.register();
    await tickUntil(agent, 'the task to be ready', (r) => r?.state === 'ready', 'hold-2.0');
    controller.answer = [];
    const before = controller.heartbeats.length;
    await agent.tick();
    await agent.settle();
    await agent.tick();
    await agent.settle();
    expect(controller.heartbeats.at(-1)?.tasks.map((t) => t.taskId)).toEqual([]);
    expect(controller.heartbeats.length).toBeGreaterThan(before);
    expect(await executor.list()).toEqual([]);
  });

  it('a task ignoring the checkpoint signal is killed after its timeout and reported stopped with its last upload', async () => {
    const { agent, executor, logger } = agentOn(join(tmp, 'stubborn'));
    const wanted = runTask('stubborn-2.0', ['sh', 'counter.sh'], { IGNORE_TERM: '1' });
    controller.answer = [wanted];
    await agent.register();
    const uploaded = await tickUntil(
      agent,
      'a checkpoint upload',
      (r) => r?.state === 'running' && r.checkpoint !== undefined,
      'stubborn-2.0',
    );
    expect(uploaded.checkpoint?.key).toMatch(/^checkpoints\/stubborn-2\/stubborn-2\.0\/\d+\/manifest\.json$/);

    controller.answer = [{ ...wanted, action: 'checkpoint-stop' }];
    const askedAt = Date.now();
    const stopped = await tickUntil(
      agent,
      'the task to be stopped',
      (r) => r?.state === 'stopped',
      'stubborn-2.0',
    );
    expect(Date.now() - askedAt).toBeGreaterThanOrEqual(1000); // it waited the 1 s timeout before killing
    const status = await executor.status('stubborn-2.0');
    expect(status?.state).toBe('exited');
    expect(status?.exitCode).toBe(137); // SIGKILL, not a clean exit
    const log = (await readAll(await executor.logs('stubborn-2.0'))).toString('utf8');
    expect(log).toMatch(/ignoring SIGTERM/);
    expect(logger.lines.some((l) => /no exit within 1 s, killed/.test(l))).toBe(true);
    // Reported with the newest checkpoint that is complete in the store (its manifest exists).
    const manifests: string[] = [];
    const store = new FsObjectStore(storeDir);
    for await (const o of store.list(checkpointPrefix({ jobId: 'stubborn-2', taskId: 'stubborn-2.0' })))
      if (o.key.endsWith('manifest.json')) manifests.push(o.key);
    expect(manifests.length).toBeGreaterThan(0);
    expect(stopped.checkpoint?.key).toBe(manifests.sort().at(-1));
    expect(await store.exists(stopped.checkpoint?.key ?? '')).toBe(true);
    expect(stopped.state).toBe('stopped');
  });

  it('a task exiting non-zero is reported failed with its exit code and last output', async () => {
    const { agent } = agentOn(join(tmp, 'failing'));
    controller.answer = [
      runTask('fail-3.0', ['sh', '-c', 'echo "loading data"; echo "boom: no such file" >&2; exit 3']),
    ];
    await agent.register();
    const failed = await tickUntil(agent, 'the failure', (r) => r?.state === 'failed', 'fail-3.0');
    expect(failed.exitCode).toBe(3);
    expect(failed.reason).toMatch(/^exit code 3; last output:\n/);
    expect(failed.reason).toContain('boom: no such file');
    expect(failed.reason).toContain('loading data');
  });

  it('a task that exited where no controller heard of it is not run again: the next worker reports its recorded exit', async () => {
    const runs = join(tmp, 'exit-record-runs');
    const command = ['sh', '-c', `echo "run $FLEETWISE_ATTEMPT" >> ${runs}; exit "$EXIT"`];
    for (const [taskId, exit, state] of [
      ['once-6.0', '0', 'succeeded'],
      ['once-7.0', '3', 'failed'],
    ] as const) {
      // The first worker runs the task to its end, then dies before any controller records it.
      const first = agentOn(join(tmp, `${taskId}-first`));
      controller.answer = [runTask(taskId, command, { EXIT: exit })];
      await first.agent.register();
      await tickUntil(first.agent, `${taskId} to end`, (r) => r?.state === state, taskId);
      // Its end is dated by its exit record: each heartbeat says how long before it the task exited.
      const record = await readExitRecord(
        new FsObjectStore(storeDir),
        { jobId: taskId.slice(0, -2), taskId },
        1,
      );
      const exitedAtMs = Date.parse(record?.exitedAt ?? '');
      const ended = await timedTick(first.agent, taskId);
      expect(ended.report?.state).toBe(state);
      expectAgedSince(exitedAtMs, ended);
      await first.agent.run(AbortSignal.abort());
      // Another worker is asked to run it again, from its checkpoints: it reports the end instead.
      const second = agentOn(join(tmp, `${taskId}-second`));
      controller.answer = [{ ...runTask(taskId, command, { EXIT: exit }), restore: true, attempt: 1 }];
      await second.agent.register();
      const heard = await until(`${taskId} reported by the second worker`, async () => {
        const tick = await timedTick(second.agent, taskId);
        await second.agent.settle();
        return tick.report?.state === state ? tick : undefined;
      });
      const reported = heard.report;
      expect(reported).toMatchObject({ state, exitCode: Number(exit), attempt: 1 });
      // The exit record's time, aged to this worker's heartbeat.
      expectAgedSince(exitedAtMs, heard);
      if (state === 'failed') expect(reported?.reason).toMatch(/^exit code 3/);
      expect(await second.executor.list()).toEqual([]); // nothing was started
      expect(second.logger.lines.some((l) => l.includes(`task ${taskId} already ${state}`))).toBe(true);
    }
    expect(readFileSync(runs, 'utf8')).toBe('run 1\nrun 1\n'); // each task ran once
    // A new attempt of the job (a retry) runs the task again.
    const third = agentOn(join(tmp, 'once-7.0-retry'));
    controller.answer = [{ ...runTask('once-7.0', command, { EXIT: '0' }), restore: true, attempt: 2 }];
    await third.agent.register();
    await tickUntil(third.agent, 'the retry to succeed', (r) => r?.state === 'succeeded', 'once-7.0');
    expect(readFileSync(runs, 'utf8')).toBe('run 1\nrun 1\nrun 2\n');
  });

  it("stores a task's exit before its log: a worker that dies while the log upload fails leaves the exit for the next", async () => {
    const workDir = join(tmp, 'exit-before-log');
    const store = new StoreWithOutage(new FsObjectStore(storeDir));
    store.failing = (key) => key.startsWith('logs/');
    const agent = new WorkerAgent({
      connection: new ControllerClient(controller.url),
      credentials: { launch: launchSecretCredential(BOOTSTRAP) },
      executor: new ProcessExecutor({ stateDir: join(workDir, 'executor') }),
      openStore: () => store,
      cloudInstanceId: 'local-test',
      workDir,
      heartbeatSeconds: 0.1,
      checkpointPollMs: 50,
      throughputWindowSeconds: 5,
      logger: new RecordingLogger(),
    });
    agents.push(agent);
    controller.answer = [runTask('exit-9.0', ['sh', '-c', 'echo "all done"'])];
    await agent.register();
    const ref = { jobId: 'exit-9', taskId: 'exit-9.0' };
    // The log cannot be stored; the exit is, already.
    const recorded = await until('the exit record', async () => {
      await agent.tick();
      return readExitRecord(new FsObjectStore(storeDir), ref, 1);
    });
    expect(recorded).toMatchObject({ state: 'succeeded', exitCode: 0 });
    expect(store.puts.some((key) => key.startsWith('logs/'))).toBe(false);
    // Not reported while its log is missing: a report means everything of the run is stored.
    await agent.tick();
    expect(controller.last('exit-9.0')?.state).not.toBe('succeeded');
    store.failing = () => false;
    await tickUntil(agent, 'the end reported', (r) => r?.state === 'succeeded', 'exit-9.0');
    expect(store.puts.some((key) => key.startsWith('logs/'))).toBe(true);
  });

  it('refuses a malformed or unrunnable task spec with a clear message and keeps running', async () => {
    const logger = new RecordingLogger();
    const { agent, executor } = agentOn(join(tmp, 'bad'), logger);
    const stop = new AbortController();
    // Unknown action and a task id that is not a safe name: the client's schema refuses the answer.
    controller.answer = [
      { ...runTask('bad-4.0', ['true']), action: 'explode' },
      { ...runTask('ok-4.0', ['true']), taskId: '../../etc' },
    ];
    const running = agent.run(stop.signal);
    try {
      await until('the refusal', async () =>
        logger.lines.some((l) => l.startsWith("warn refused the controller's answer")) ? true : undefined,
      );
      const refusal = logger.lines.find((l) => l.startsWith("warn refused the controller's answer")) ?? '';
      expect(refusal).toMatch(/tasks\.0\.action: /);
      expect(refusal).toMatch(/tasks\.1\.taskId: .*task id like job-7\.0/);
      expect(await executor.list()).toEqual([]); // nothing was started
      // Still heartbeating: a later, valid but unrunnable spec (no command for the process executor) fails that task
      // with the executor's reason, and the agent goes on to run a good one.
      controller.answer = [runTask('nocmd-4.0', []), runTask('good-4.0', ['sh', '-c', 'echo fine'])];
      const failed = await until('the unrunnable task to fail', async () => {
        const r = controller.last('nocmd-4.0');
        return r?.state === 'failed' ? r : undefined;
      });
      expect(failed.reason).toMatch(
        /^could not start: task nocmd-4\.0: the process executor needs a command/,
      );
      const good = await until('the good task to succeed', async () => {
        const r = controller.last('good-4.0');
        return r?.state === 'succeeded' ? r : undefined;
      });
      expect(good.exitCode).toBe(0);
    } finally {
      stop.abort();
      await running;
    }
  });
});
