import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { WorkerAgent } from '../../src/worker/agent.js';
import { ControllerClient } from '../../src/worker/controller-client.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import { BOOTSTRAP, FakeController, until } from './agent-fixtures.js';

/**
 * A worker numbers its heartbeats (1, 2, …) under an id of its process, so that the controller can tell one that
 * arrives late from a newer one; a restarted worker is another process, with another id, numbering from 1 again.
 */
const tmp = mkdtempSync(join(tmpdir(), 'fw-heartbeat-numbers-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('heartbeat numbers', () => {
  it('go up by one in a worker process, under one boot id; a restarted worker has another and starts at 1', async () => {
    const controller = new FakeController(join(tmp, 'objects'));
    await controller.start();
    const workDir = join(tmp, 'worker');
    const agent = (): WorkerAgent =>
      new WorkerAgent({
        connection: new ControllerClient(controller.url),
        credentials: { launch: launchSecretCredential(BOOTSTRAP) },
        executor: new ProcessExecutor({ stateDir: join(workDir, 'executor') }),
        openStore: (location) => new FsObjectStore(location),
        cloudInstanceId: 'local-numbers',
        workDir,
        heartbeatSeconds: 0.05,
      });
    try {
      for (let run = 0; run < 2; run++) {
        const stop = new AbortController();
        const running = agent().run(stop.signal);
        const from = controller.heartbeats.length;
        await until('three heartbeats', async () =>
          controller.heartbeats.length >= from + 3 ? true : undefined,
        );
        stop.abort();
        await running;
        const beats = controller.heartbeats.slice(from);
        expect(beats.map((b) => b.seq)).toEqual(beats.map((_, i) => i + 1));
        expect(new Set(beats.map((b) => b.bootId)).size).toBe(1);
        expect(beats[0]?.bootId).toMatch(/^[A-Za-z0-9_-]{16,64}$/);
      }
      const first = controller.heartbeats[0]?.bootId;
      expect(controller.heartbeats.at(-1)?.bootId).not.toBe(first);
    } finally {
      await controller.stop();
    }
  });
});
