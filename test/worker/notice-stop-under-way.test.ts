import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { taskLogPrefix } from '../../src/protocol/object-keys.js';
import type { DesiredTask } from '../../src/protocol/worker-protocol.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readAll } from '../../src/storage/streams.js';
import { WorkerAgent } from '../../src/worker/agent.js';
import { ControllerClient } from '../../src/worker/controller-client.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { imdsNoticeSource, type InterruptionNoticeSource } from '../../src/worker/interruption-notices.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import { startFakeSpotNotices, type FakeSpotNotices } from '../helpers/fake-spot-notices.js';
import { BOOTSTRAP, FakeController, RecordingLogger, until } from './agent-fixtures.js';

/**
 * A checkpoint-stop already under way (a move, a drain: the job's long checkpoint timeout) when a spot interruption
 * notice arrives is cut short to the time the notice leaves less its margin, whether the worker reads the notice
 * itself or the controller's answer carries the capped timeout. Real WorkerAgent and process executor, a fake
 * controller and the metadata service over HTTP.
 */
describe('a spot notice during a checkpoint-stop under way', () => {
  let tmp: string;
  let storeDir: string;
  let controller: FakeController;
  let notices: FakeSpotNotices;
  const cleanups: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'fw-notice-stop-test-'));
    storeDir = join(tmp, 'store');
    controller = new FakeController(storeDir);
    await controller.start();
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });
  afterAll(async () => {
    await controller.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  // On SIGTERM it writes a marked checkpoint at once, then takes a minute to exit: far past any reclaim here.
  const SLOW_TO_EXIT =
    'trap \'echo got TERM; echo at-term > "$FLEETWISE_CHECKPOINT_DIR/state"; ' +
    'touch "$FLEETWISE_CHECKPOINT_DIR/COMPLETE"; sleep 60; exit 0\' TERM; ' +
    'echo started; while true; do sleep 0.1; done';

  function task(taskId: string, action: DesiredTask['action'], timeoutSeconds: number): DesiredTask {
    return {
      taskId,
      jobId: taskId.replace(/\.\d+$/, ''),
      action,
      restore: false,
      attempt: 1,
      launch: {
        command: ['sh', '-c', SLOW_TO_EXIT],
        env: {},
        vcpus: 1,
        memoryGiB: 0,
        gpus: 0,
        shmSizeGiB: 0,
      },
      checkpoint: { signal: 'SIGTERM', timeoutSeconds },
    };
  }

  /**
   * An agent on its own work directory, the task running, then a checkpoint-stop with a 60 s timeout (or
   * `stopTimeoutSeconds`) under way. The agent reads its notices from the fake metadata service, or from `source`.
   */
  async function stopUnderWay(
    name: string,
    taskId: string,
    options: { readonly source?: InterruptionNoticeSource; readonly stopTimeoutSeconds?: number } = {},
  ): Promise<{ agent: WorkerAgent; logger: RecordingLogger; notices: FakeSpotNotices }> {
    notices = await startFakeSpotNotices();
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
      heartbeatSeconds: 0.2,
      checkpointPollMs: 50,
      interruptionNotices: {
        source: options.source ?? imdsNoticeSource({ imdsUrl: notices.url }),
        pollSeconds: 0.1,
      },
      logger,
    });
    const leave = new AbortController();
    const running = agent.run(leave.signal);
    const own = notices;
    cleanups.push(async () => {
      leave.abort();
      await running;
      for (const t of await executor.list()) await executor.remove(t.taskId);
      await own.close();
    });
    controller.answer = [task(taskId, 'run', 60)];
    await until('the task running', () =>
      Promise.resolve(controller.last(taskId)?.state === 'running' ? true : undefined),
    );
    controller.answer = [task(taskId, 'checkpoint-stop', options.stopTimeoutSeconds ?? 60)];
    await until('the checkpoint-stop under way', () =>
      Promise.resolve(controller.last(taskId)?.state === 'checkpointing' ? true : undefined),
    );
    return { agent, logger, notices: own };
  }

  async function storedLog(jobId: string): Promise<string> {
    const store = new FsObjectStore(storeDir);
    const parts: string[] = [];
    for await (const o of store.list(taskLogPrefix(jobId)))
      parts.push((await readAll(await store.get(o.key))).toString('utf8'));
    return parts.join('');
  }

  it('the worker reading the notice kills the task by the notice time less 10 s, uploads what it left, reports it stopped', async () => {
    const { logger, notices: imds } = await stopUnderWay('worker-first', 'mid-1.0');
    // 13 s ahead: 3 s left once the margin for the last heartbeat is kept, against the stop's own 60 s.
    imds.interruptNext(13);
    await until('the notice read', () => Promise.resolve(imds.servedAtMs));
    const servedAt = imds.servedAtMs as number;
    const stopped = await until('the task stopped', () => {
      const r = controller.last('mid-1.0');
      return Promise.resolve(r?.state === 'stopped' ? r : undefined);
    });
    const tookMs = Date.now() - servedAt;
    expect(tookMs).toBeGreaterThan(2000);
    expect(tookMs).toBeLessThan(8000);
    // The rest of the stop as ever: the checkpoint it marked on the signal is stored and reported, its log too.
    expect(stopped.checkpoint).toBeDefined();
    expect(await new FsObjectStore(storeDir).exists(stopped.checkpoint?.key ?? '')).toBe(true);
    expect(await storedLog('mid-1')).toContain('got TERM');
    expect(
      logger.lines.some((l) => /checkpoint-stop of mid-1\.0 under way: killed in at most [23] s/.test(l)),
    ).toBe(true);
    expect(logger.lines.some((l) => /mid-1\.0 checkpointed and stopped \(killed/.test(l))).toBe(true);
  });

  it("a notice whose time cannot be read still cuts a long stop short, counting EC2's two minutes from its sighting", async () => {
    // A source other than the metadata service's checked reader: nothing vouches for its time.
    let armed = false;
    const source: InterruptionNoticeSource = {
      poll: () =>
        Promise.resolve(armed ? { kind: 'spot-interruption', action: 'terminate', time: 'soon' } : undefined),
    };
    const { logger } = await stopUnderWay('unreadable-time', 'mid-3.0', {
      source,
      stopTimeoutSeconds: 900,
    });
    armed = true;
    // 120 s from the sighting less the 10 s margin: far under the stop's own 900 s, which would outlast the reclaim.
    const capped = await until('the stop under way capped', () =>
      Promise.resolve(
        logger.lines.find((l) => l.includes('checkpoint-stop of mid-3.0 under way: killed in at most')),
      ),
    );
    const seconds = Number(/killed in at most (\d+) s/.exec(capped)?.[1]);
    expect(seconds).toBeGreaterThan(100);
    expect(seconds).toBeLessThanOrEqual(110);
  });

  it('a notice only the controller saw cuts the stop short through the capped timeout of its answer', async () => {
    const { notices: imds } = await stopUnderWay('queue-first', 'mid-2.0');
    const cappedAt = Date.now();
    controller.answer = [task('mid-2.0', 'checkpoint-stop', 2)];
    const stopped = await until('the task stopped', () => {
      const r = controller.last('mid-2.0');
      return Promise.resolve(r?.state === 'stopped' ? r : undefined);
    });
    expect(Date.now() - cappedAt).toBeLessThan(8000);
    expect(stopped.checkpoint).toBeDefined();
    expect(await storedLog('mid-2')).toContain('got TERM');
    // The worker itself read no notice here.
    expect(imds.servedAtMs).toBeUndefined();
  });
});
