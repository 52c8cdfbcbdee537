import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readAll } from '../../src/storage/streams.js';
import { WorkerAgent } from '../../src/worker/agent.js';
import { ControllerClient } from '../../src/worker/controller-client.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { imdsNoticeSource } from '../../src/worker/interruption-notices.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import { startFakeSpotNotices, type FakeSpotNotices } from '../helpers/fake-spot-notices.js';
import {
  BOOTSTRAP,
  FakeController,
  RecordingLogger,
  runTask,
  storeCounterContext,
  until,
} from './agent-fixtures.js';

/**
 * Spot interruption notices: the metadata service's answers as the worker reads them, and the agent's reaction to
 * one (real process executor running examples/counter, a fake controller over HTTP, notices over HTTP with IMDSv2).
 */
describe('spot interruption notices', () => {
  let tmp: string;
  let storeDir: string;
  let controller: FakeController;
  let notices: FakeSpotNotices;

  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'fw-notices-test-'));
    storeDir = join(tmp, 'store');
    controller = new FakeController(storeDir);
    await controller.start();
    await storeCounterContext(new FsObjectStore(storeDir));
    notices = await startFakeSpotNotices();
  });
  afterAll(async () => {
    await controller.stop();
    await notices.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('reads nothing, then a rebalance recommendation, then an interruption (which wins) over IMDSv2', async () => {
    const own = await startFakeSpotNotices();
    try {
      const source = imdsNoticeSource({ imdsUrl: own.url });
      expect(await source.poll()).toBeUndefined();
      own.rebalanceAll();
      expect(await source.poll()).toMatchObject({ kind: 'rebalance-recommendation' });
      own.interruptNext(90);
      const notice = await source.poll();
      expect(notice).toMatchObject({ kind: 'spot-interruption', action: 'terminate' });
      const leftMs = Date.parse(notice?.time ?? '') - Date.now();
      expect(leftMs).toBeGreaterThan(80_000);
      expect(leftMs).toBeLessThanOrEqual(90_000);
      // Another session (another instance) is not interrupted.
      expect(await imdsNoticeSource({ imdsUrl: own.url }).poll()).toMatchObject({
        kind: 'rebalance-recommendation',
      });
    } finally {
      await own.close();
    }
  });

  it('a malformed notice is an error naming the field, never a notice', async () => {
    const server = createServer((req, res) => {
      if (req.method === 'PUT') return void res.end('token');
      if (req.url === '/latest/meta-data/spot/instance-action')
        return void res.end(JSON.stringify({ action: 'explode', time: 'soon' }));
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    try {
      await expect(imdsNoticeSource({ imdsUrl: `http://127.0.0.1:${port}` }).poll()).rejects.toThrow(
        /spot\/instance-action: action: /,
      );
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('a notice whose time is not one (a word, a day that does not exist) is an error naming the field', async () => {
    let action: Record<string, string> | undefined;
    let rebalance: Record<string, string> | undefined;
    const server = createServer((req, res) => {
      if (req.method === 'PUT') return void res.end('token');
      const body =
        req.url === '/latest/meta-data/spot/instance-action'
          ? action
          : req.url === '/latest/meta-data/events/recommendations/rebalance'
            ? rebalance
            : undefined;
      if (body === undefined) return void res.writeHead(404).end();
      res.end(JSON.stringify(body));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    const source = imdsNoticeSource({ imdsUrl: `http://127.0.0.1:${port}` });
    try {
      // Date.parse reads it as March 2: the worker would count two days to a reclaim two minutes off.
      action = { action: 'terminate', time: '2026-02-30T10:00:00Z' };
      await expect(source.poll()).rejects.toThrow(
        /spot\/instance-action: time: a date and time that exist \(2026-02-30T10:00:00 is not on the calendar\)/,
      );
      action = { action: 'terminate', time: 'soon' };
      await expect(source.poll()).rejects.toThrow(/spot\/instance-action: time: an ISO 8601 date-time/);
      action = undefined;
      rebalance = { noticeTime: '3000-01-01T00:00:00Z' };
      await expect(source.poll()).rejects.toThrow(
        /recommendations\/rebalance: noticeTime: a real date between 2000 and 2200/,
      );
      // A time that exists, with its fractional seconds, is read.
      action = { action: 'stop', time: '2026-11-24T13:02:00.123Z' };
      expect(await source.poll()).toEqual({
        kind: 'spot-interruption',
        action: 'stop',
        time: '2026-11-24T13:02:00.123Z',
      });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('on an interruption notice the agent checkpoints and uploads at once, tells the controller, and starts nothing more', async () => {
    const workDir = join(tmp, 'agent');
    const logger = new RecordingLogger();
    const executor = new ProcessExecutor({ stateDir: join(workDir, 'executor') });
    const agent = new WorkerAgent({
      connection: new ControllerClient(controller.url),
      credentials: { launch: launchSecretCredential(BOOTSTRAP) },
      executor,
      openStore: (location) => new FsObjectStore(location),
      cloudInstanceId: 'local-spot',
      workDir,
      heartbeatSeconds: 1,
      checkpointPollMs: 50,
      throughputWindowSeconds: 5,
      interruptionNotices: { source: imdsNoticeSource({ imdsUrl: notices.url }), pollSeconds: 0.1 },
      logger,
    });
    // No periodic checkpoint in this test's time: the only checkpoint is the one the notice makes.
    const wanted = runTask('spot-1.0', ['sh', 'counter.sh'], { CHECKPOINT_SECONDS: '3600' });
    controller.answer = [wanted];
    const stop = new AbortController();
    const running = agent.run(stop.signal);
    try {
      await until('progress', () =>
        Promise.resolve((controller.last('spot-1.0')?.completedIterations ?? 0) >= 5 ? true : undefined),
      );
      expect(controller.last('spot-1.0')?.checkpoint).toBeUndefined();
      notices.interruptNext(120);
      const before = controller.heartbeats.length;
      const stopped = await until('the task checkpointed and stopped', () => {
        const r = controller.last('spot-1.0');
        return Promise.resolve(r?.state === 'stopped' && r.checkpoint !== undefined ? r : undefined);
      });
      const servedAt = notices.servedAtMs as number;
      // Reported well within the notice: a heartbeat is one second apart here, the stop took less than that.
      expect(Date.now() - servedAt).toBeLessThan(5000);
      // The controller heard of the notice in the heartbeats since it was served.
      const told = controller.heartbeats.slice(before).find((h) => h.interruption !== undefined);
      expect(told?.interruption).toMatchObject({ kind: 'spot-interruption', action: 'terminate' });
      // The checkpoint is in the store, and it holds the work done up to the notice.
      const store = new FsObjectStore(storeDir);
      expect(await store.exists(stopped.checkpoint?.key ?? '')).toBe(true);
      const log = (await readAll(await executor.logs('spot-1.0'))).toString('utf8');
      const at = Number(/checkpointed at (\d+) on SIGTERM/.exec(log)?.[1]);
      expect(at).toBeGreaterThanOrEqual(5);
      expect(at).toBeGreaterThanOrEqual(stopped.completedIterations ?? 0);
      // The controller still answers "run" (it has not moved the task yet): nothing starts again on this instance.
      const heartbeats = controller.heartbeats.length;
      await until('two more heartbeats', () =>
        Promise.resolve(controller.heartbeats.length >= heartbeats + 2 ? true : undefined),
      );
      expect(controller.last('spot-1.0')?.state).toBe('stopped');
      expect(logger.lines.filter((l) => l.startsWith('info started spot-1.0'))).toHaveLength(1);
      expect(controller.heartbeats.at(-1)?.interruption?.kind).toBe('spot-interruption');
      expect(agent.interruption?.kind).toBe('spot-interruption');
    } finally {
      stop.abort();
      await running;
      for (const t of await executor.list()) await executor.remove(t.taskId);
    }
  });
});
