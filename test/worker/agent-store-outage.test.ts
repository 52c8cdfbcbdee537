import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from 'vitest';
import { checkpointKeys, checkpointPrefix, taskLogPrefix } from '../../src/protocol/object-keys.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { openObjectStore } from '../../src/storage/open-object-store.js';
import type { S3Timeouts } from '../../src/storage/s3-store.js';
import { createS3Client } from '../../src/storage/s3-store.js';
import { readAll } from '../../src/storage/streams.js';
import { WorkerAgent } from '../../src/worker/agent.js';
import { uploadCheckpoint } from '../../src/worker/checkpoints.js';
import { ControllerClient } from '../../src/worker/controller-client.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { describeWithMoto, type MotoContext } from '../helpers/moto.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import {
  BOOTSTRAP,
  FakeController,
  RecordingLogger,
  runTask,
  storeCounterContext,
  until,
} from './agent-fixtures.js';

/**
 * The worker agent while its object store (S3: moto_server behind the outage proxy) is down or hung, with the real
 * process executor and a fake controller over HTTP. The heartbeat never waits for the store; a move (checkpoint-stop)
 * or a restore that meets an outage waits for the store and completes once it is back, never half-done.
 */
const BUCKET = 'fleetwise-agent-outage';
const STORE = `s3://${BUCKET}/cluster`;
/** Short: a refused call fails fast and is retried by the agent. */
const SHORT: Partial<S3Timeouts> = { connectTimeoutMs: 1_000, requestTimeoutMs: 1_000, idleTimeoutMs: 1_000 };
/** Long: a call to a hung store stays stuck for the whole test, as one without timeouts would. */
const LONG: Partial<S3Timeouts> = {
  connectTimeoutMs: 60_000,
  requestTimeoutMs: 60_000,
  idleTimeoutMs: 60_000,
};

describeWithMoto(
  'worker agent through an object-store outage',
  (moto: MotoContext) => {
    let tmp: string;
    let proxy: TcpProxy;
    let controller: FakeController;
    /** The test's own view of the store, straight to moto (never through the proxy). */
    let direct: ObjectStore;
    const running: { stop: AbortController; done: Promise<unknown> }[] = [];
    const executors: ProcessExecutor[] = [];

    beforeAll(async () => {
      tmp = mkdtempSync(join(tmpdir(), 'fw-agent-outage-'));
      proxy = await startTcpProxy(moto.endpoint);
      await createS3Client(moto.clientOptions).send(new CreateBucketCommand({ Bucket: BUCKET }));
      direct = await openObjectStore(STORE, moto.clientOptions);
      await storeCounterContext(direct);
      controller = new FakeController(STORE);
      await controller.start();
    });
    beforeEach(async () => {
      await proxy.setMode('pass');
    });
    /** Each test's agent is stopped after it: agents share the fake controller, so they would all act on its answers. */
    afterEach(async () => {
      await proxy.setMode('pass');
      controller.answer = [];
      for (const r of running.splice(0)) {
        r.stop.abort();
        await r.done;
      }
    });
    afterAll(async () => {
      for (const e of executors) for (const t of await e.list()) await e.remove(t.taskId);
      await controller.stop();
      await proxy.close();
      rmSync(tmp, { recursive: true, force: true });
    });

    /** An agent running its heartbeat loop, whose store goes through the proxy with these timeouts. */
    function startAgent(
      name: string,
      timeouts: Partial<S3Timeouts>,
    ): { logger: RecordingLogger; executor: ProcessExecutor } {
      const logger = new RecordingLogger();
      const workDir = join(tmp, name);
      const executor = new ProcessExecutor({ stateDir: join(workDir, 'executor') });
      const agent = new WorkerAgent({
        connection: new ControllerClient(controller.url),
        credentials: { launch: launchSecretCredential(BOOTSTRAP) },
        executor,
        openStore: (location) =>
          openObjectStore(location, { ...moto.clientOptions, endpoint: proxy.url, maxAttempts: 2, timeouts }),
        cloudInstanceId: `local-${name}`,
        workDir,
        heartbeatSeconds: 0.1,
        checkpointPollMs: 50,
        logUploadSeconds: 0.2,
        throughputWindowSeconds: 5,
        logger,
      });
      const stop = new AbortController();
      running.push({ stop, done: agent.run(stop.signal) });
      executors.push(executor);
      return { logger, executor };
    }

    const report = (taskId: string, accept: (state: string | undefined) => boolean, what: string) =>
      until(what, async () => {
        const r = controller.last(taskId);
        return accept(r?.state) ? r : undefined;
      });

    async function newestManifest(jobId: string, taskId: string): Promise<string | undefined> {
      const keys: string[] = [];
      for await (const o of direct.list(checkpointPrefix({ jobId, taskId })))
        if (o.key.endsWith('manifest.json')) keys.push(o.key);
      return keys.sort().at(-1);
    }

    it('keeps heartbeating while the store hangs (uploads never hold up the heartbeat)', async () => {
      startAgent('heartbeat', LONG);
      controller.answer = [runTask('beat-1.0', ['sh', 'counter.sh'])];
      await report('beat-1.0', (s) => s === 'running', 'the task to run');
      await proxy.setMode('hang');
      // Log uploads are due every 0.2 s and checkpoints every second: one is soon stuck in the hung store.
      await proxy.waitForHanging(1);
      const before = controller.heartbeats.length;
      await until('ten more heartbeats while an upload hangs', () =>
        Promise.resolve(controller.heartbeats.length >= before + 10 ? true : undefined),
      );
      expect(proxy.hanging()).toBeGreaterThanOrEqual(1);
      expect(controller.last('beat-1.0')?.state).toBe('running');
      controller.answer = [];
    });

    it('a drain during an outage waits for the store, then stops the task with its last checkpoint and log', async () => {
      const { logger, executor } = startAgent('drain', SHORT);
      const wanted = runTask('drain-2.0', ['sh', 'counter.sh']);
      controller.answer = [wanted];
      const uploaded = await until('a checkpoint upload', async () => {
        const r = controller.last('drain-2.0');
        return r?.state === 'running' && r.checkpoint !== undefined ? r : undefined;
      });
      expect(uploaded.checkpoint?.key).toMatch(/^checkpoints\/drain-2\/drain-2\.0\//);

      await proxy.setMode('refuse');
      controller.answer = [{ ...wanted, action: 'checkpoint-stop' }];
      // The task is signalled, exits (or is killed after its 1 s timeout), and the stop waits for the store.
      await until('the task to be gone from the host', async () =>
        (await executor.status('drain-2.0'))?.state === 'exited' ? true : undefined,
      );
      await until('the stop to retry its uploads', () =>
        Promise.resolve(
          logger.lines.some((l) => /the object store failed \(2 times in a row\)/.test(l)) || undefined,
        ),
      );
      expect(controller.last('drain-2.0')?.state).toBe('checkpointing'); // not stopped: its uploads are not in yet

      await proxy.setMode('pass');
      const stopped = await report(
        'drain-2.0',
        (s) => s === 'stopped',
        'the stop to complete once the store is back',
      );
      // Reported with the newest complete checkpoint in the store, and the run's whole log is there.
      expect(stopped.checkpoint?.key).toBe(await newestManifest('drain-2', 'drain-2.0'));
      const logs: string[] = [];
      for await (const o of direct.list(taskLogPrefix('drain-2'))) logs.push(o.key);
      expect(logs, logs.join(', ')).toHaveLength(1);
      const log = (await direct.getBuffer(logs[0] ?? '')).toString('utf8');
      expect(log).toMatch(/starting at 0/);
      const localLog = (await readAll(await executor.logs('drain-2.0'))).toString('utf8');
      expect(log).toBe(localLog);
    });

    it('a restore during an outage waits for the store instead of starting from zero', async () => {
      const ref = { jobId: 'restore-3', taskId: 'restore-3.0' };
      const saved = join(tmp, 'saved-checkpoint');
      mkdirSync(saved, { recursive: true });
      writeFileSync(join(saved, 'counter'), '42\n');
      await uploadCheckpoint(direct, ref, saved, 1);

      const { logger } = startAgent('restore', SHORT);
      await proxy.setMode('refuse');
      controller.answer = [{ ...runTask('restore-3.0', ['sh', 'counter.sh']), restore: true }];
      await until(
        'the restore to retry',
        () =>
          Promise.resolve(
            logger.lines.some((l) => l.includes('restore of restore-3.0: the object store failed')) ||
              undefined,
          ),
        45_000,
      ).catch((e: unknown) => {
        throw new Error(`${(e as Error).message}; the agent said:\n${logger.lines.join('\n')}`);
      });
      // Neither failed nor started from zero: still starting, heartbeat after heartbeat.
      const seen = controller.heartbeats.length;
      await until('two more heartbeats', () =>
        Promise.resolve(controller.heartbeats.length >= seen + 2 ? true : undefined),
      );
      expect(controller.last('restore-3.0')?.state).toBe('starting');

      await proxy.setMode('pass');
      const started = await report(
        'restore-3.0',
        (s) => s === 'running',
        'the task to start from its checkpoint',
      );
      expect(started.restoredFrom).toBe(checkpointKeys(ref, 1).manifest);
      await until('the task to resume at 42', async () => {
        const r = controller.last('restore-3.0');
        return (r?.completedIterations ?? 0) > 42 ? r : undefined;
      });
      controller.answer = [];
    });
  },
  { resetBeforeEach: false },
);
