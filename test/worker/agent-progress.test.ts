import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heartbeatRequestSchema } from '../../src/protocol/worker-protocol.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { WorkerAgent } from '../../src/worker/agent.js';
import { ControllerClient } from '../../src/worker/controller-client.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import {
  BOOTSTRAP,
  FakeController,
  RecordingLogger,
  runTask,
  storeCounterContext,
  until,
} from './agent-fixtures.js';

/**
 * A task's progress file is the task's to write, and anything in it is one task's problem: the heartbeat that
 * reports every task of the instance must go out, and be one the controller accepts, whatever a task writes there.
 * Real process executor, fake controller over HTTP (agent-fixtures.ts).
 */
describe('worker agent: progress files written by hostile or buggy tasks', () => {
  let tmp: string;
  let controller: FakeController;
  let executor: ProcessExecutor;
  let agent: WorkerAgent;

  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'fw-agent-progress-'));
    const storeDir = join(tmp, 'store');
    controller = new FakeController(storeDir);
    await controller.start();
    await storeCounterContext(new FsObjectStore(storeDir));
    executor = new ProcessExecutor({ stateDir: join(tmp, 'work', 'executor') });
    agent = new WorkerAgent({
      connection: new ControllerClient(controller.url),
      credentials: { launch: launchSecretCredential(BOOTSTRAP) },
      executor,
      openStore: (location) => new FsObjectStore(location),
      cloudInstanceId: 'local-test',
      workDir: join(tmp, 'work'),
      heartbeatSeconds: 0.1,
      checkpointPollMs: 50,
      throughputWindowSeconds: 5,
      logger: new RecordingLogger(),
    });
  });
  afterAll(async () => {
    await agent.run(AbortSignal.abort());
    for (const t of await executor.list()) await executor.remove(t.taskId);
    await controller.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('a 10 GiB progress file or counts past the protocol bounds leave the other tasks reported', async () => {
    const progressOf = (taskId: string): string => join(tmp, 'work', 'tasks', taskId, 'progress');
    controller.answer = [
      runTask('good-1.0', ['sh', 'counter.sh']),
      // A 2e15 token counter, at a rate over microsecond timestamps (1e21 per second).
      runTask('huge-2.0', [
        'sh',
        '-c',
        'now=$(date +%s); echo "$now.000000 0" >> "$FLEETWISE_PROGRESS_FILE"; ' +
          'echo "$now.000002 2000000000000000" >> "$FLEETWISE_PROGRESS_FILE"; sleep 60',
      ]),
      // Sparse, instant: reading it whole was a 10 GiB allocation on every poll.
      runTask('sparse-3.0', ['sh', '-c', 'truncate -s 10G "$FLEETWISE_PROGRESS_FILE"; sleep 60']),
    ];
    await agent.register();
    await until('every task running, the good one progressing', async () => {
      await agent.tick();
      await agent.settle();
      const sparse = statSync(progressOf('sparse-3.0'), { throwIfNoEntry: false });
      const huge = statSync(progressOf('huge-2.0'), { throwIfNoEntry: false });
      const states = ['good-1.0', 'huge-2.0', 'sparse-3.0'].map((id) => controller.last(id)?.state);
      return states.every((s) => s === 'running') &&
        (controller.last('good-1.0')?.completedIterations ?? 0) > 0 &&
        (sparse?.size ?? 0) >= 10 * 1024 ** 3 &&
        (huge?.size ?? 0) > 0
        ? true
        : undefined;
    });
    // Several more heartbeats go out, each carrying all three tasks and accepted by the controller's schema.
    const before = controller.heartbeats.length;
    for (let i = 0; i < 3; i++) await agent.tick();
    const later = controller.heartbeats.slice(before);
    expect(later).toHaveLength(3);
    for (const beat of later) {
      expect(beat.tasks.map((t) => t.taskId).sort()).toEqual(['good-1.0', 'huge-2.0', 'sparse-3.0']);
      const parsed = heartbeatRequestSchema.safeParse(beat);
      expect(parsed.error?.issues).toBeUndefined();
    }
    // The counts past the bounds are left out of the report rather than sent.
    const huge = controller.last('huge-2.0');
    expect(huge?.completedIterations).toBeUndefined();
    expect(huge?.throughputPerSecond).toBeUndefined();
  });
});
