import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DesiredTask } from '../../src/protocol/worker-protocol.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { WorkerAgent, type AgentExit } from '../../src/worker/agent.js';
import { ControllerClient } from '../../src/worker/controller-client.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import { BOOTSTRAP, FakeController, RecordingLogger, shellTask, until } from './agent-fixtures.js';

/**
 * A controller whose answers this worker refuses (a newer controller: an action the worker does not know) has
 * answered all the same: the worker keeps heartbeating past its give-up time, its tasks running, and logs the refusal
 * once while it repeats. A desired task it cannot use is refused alone, the rest carried out, unless it names a task
 * on this host (the rest carried out would take that one for unwanted and stop it). Real WorkerAgent,
 * ControllerClient and process executor; a fake controller over HTTP.
 */
const GIVE_UP_SECONDS = 1.5;
const REFUSAL = "warn refused the controller's answer";

let tmp = '';
let controller: FakeController;
beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'fleetwise-refused-answer-'));
  mkdirSync(join(tmp, 'store'));
  controller = new FakeController(join(tmp, 'store'));
  await controller.start();
});
afterAll(async () => {
  await controller.stop();
  rmSync(tmp, { recursive: true, force: true });
});

/** A worker on its own directory, running until the test ends it; `exit` is set once run() returns. */
function startWorker(name: string): {
  logger: RecordingLogger;
  executor: ProcessExecutor;
  outcome: () => AgentExit | undefined;
  end: () => Promise<void>;
} {
  const workDir = join(tmp, name);
  const logger = new RecordingLogger();
  const executor = new ProcessExecutor({ stateDir: join(workDir, 'executor') });
  const agent = new WorkerAgent({
    connection: new ControllerClient(controller.url),
    credentials: { launch: launchSecretCredential(BOOTSTRAP) },
    executor,
    openStore: (location) => new FsObjectStore(location),
    cloudInstanceId: `local-${name}`,
    workDir,
    heartbeatSeconds: 0.1,
    giveUpAfterSeconds: GIVE_UP_SECONDS,
    logger,
  });
  const leave = new AbortController();
  let exit: AgentExit | undefined;
  const running = agent.run(leave.signal).then((e) => {
    exit = e;
  });
  return {
    logger,
    executor,
    outcome: () => exit,
    end: async () => {
      leave.abort();
      await running;
      for (const t of await executor.list()) await executor.remove(t.taskId);
    },
  };
}

/** Heartbeats keep being answered (as `controller.answer` says) for twice the worker's give-up time from now. */
async function answeredPastGiveUp(): Promise<number> {
  const from = Date.now();
  const before = controller.heartbeats.length;
  await until(
    'heartbeats past the give-up time',
    async () => (Date.now() - from > 2 * GIVE_UP_SECONDS * 1000 ? true : undefined),
    30_000,
  );
  return controller.heartbeats.length - before;
}

const runs = (taskId: string, script = 'while :; do sleep 0.1; done'): DesiredTask =>
  shellTask(taskId, script);
/** What a newer controller might ask: an action this worker does not know. */
const suspend = (d: DesiredTask): Record<string, unknown> => ({ ...d, action: 'suspend' });

describe('a controller answer the worker refuses', () => {
  it('is contact: heartbeats go on past the give-up time, the task running, each refusal logged once', async () => {
    const worker = startWorker('contact');
    try {
      const good = runs('busy-1.0');
      controller.answer = [good];
      await until('busy-1.0 running', async () =>
        controller.last('busy-1.0')?.state === 'running' ? true : undefined,
      );

      // A task it does not know, in every answer.
      controller.answer = [good, suspend(runs('other-2.0'))];
      expect(await answeredPastGiveUp()).toBeGreaterThan(5);
      expect(worker.outcome()).toBeUndefined();
      expect(controller.last('busy-1.0')?.state).toBe('running');

      // An answer it cannot read at all (its tasks not a list).
      controller.answer = 'tasks of a protocol to come' as unknown as unknown[];
      expect(await answeredPastGiveUp()).toBeGreaterThan(5);
      expect(worker.outcome()).toBeUndefined();
      expect(controller.last('busy-1.0')?.state).toBe('running');

      const refusals = worker.logger.lines.filter((l) => l.startsWith(REFUSAL));
      // One line for each refusal, however many heartbeats it lasted.
      expect(refusals).toHaveLength(2);
      expect(refusals[0]).toMatch(
        /for 1 task\(s\) \(other-2\.0 left alone, the others carried out\): tasks\.1\.action: /,
      );
      expect(refusals[1]).toMatch(/\(nothing changed on this host\): tasks: /);
      expect(worker.logger.lines.some((l) => /giving up|no answer/.test(l))).toBe(false);

      controller.answer = [good];
      await until('the answers taken again', async () =>
        worker.logger.lines.includes("info the controller's answers are taken again") ? true : undefined,
      );
      expect(worker.outcome()).toBeUndefined();
    } finally {
      await worker.end();
    }
  }, 60_000);

  it('refuses a task it cannot use alone, carrying out the rest; not when that task is on this host', async () => {
    const worker = startWorker('per-task');
    try {
      const good = runs('keep-1.0');
      controller.answer = [good];
      await until('keep-1.0 running', async () =>
        controller.last('keep-1.0')?.state === 'running' ? true : undefined,
      );

      // A new task beside one this worker cannot use: the new one runs.
      controller.answer = [good, suspend(runs('new-2.0')), runs('fresh-3.0', 'echo fresh')];
      await until('fresh-3.0 succeeded', async () =>
        controller.last('fresh-3.0')?.state === 'succeeded' ? true : undefined,
      );
      expect(controller.last('keep-1.0')?.state).toBe('running');
      expect(controller.last('new-2.0')).toBeUndefined();
      expect((await worker.executor.list()).map((t) => t.taskId).sort()).toEqual(['fresh-3.0', 'keep-1.0']);

      // The task running here in a form it cannot use: carrying out the rest would take it for unwanted and stop it,
      // so nothing changes here (the new task in the same answer waits for an answer the worker can take whole).
      controller.answer = [suspend(good), runs('later-4.0')];
      const before = controller.heartbeats.length;
      await until('heartbeats answered', async () =>
        controller.heartbeats.length > before + 10 ? true : undefined,
      );
      expect(controller.last('keep-1.0')?.state).toBe('running');
      expect(controller.last('later-4.0')).toBeUndefined();
      expect((await worker.executor.list()).map((t) => t.taskId).sort()).toEqual(['fresh-3.0', 'keep-1.0']);
      expect(
        worker.logger.lines.filter((l) =>
          l.startsWith(`${REFUSAL} for 1 task(s) (nothing changed on this host: keep-1.0 is on this host)`),
        ),
      ).toHaveLength(1);
    } finally {
      await worker.end();
    }
  }, 60_000);
});
