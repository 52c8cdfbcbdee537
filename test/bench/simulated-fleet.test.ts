import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { SimulatedFleet } from '../../src/bench/simulated-fleet.js';
import { WORKER_ROUTES } from '../../src/protocol/worker-protocol.js';

/**
 * A controller's worker API on a real socket that registers every worker and holds each heartbeat until the test
 * answers it: what is in flight, and when, is the test's to decide.
 */
async function holdingController(): Promise<{
  url: string;
  held: ServerResponse[];
  answerAll: () => void;
  close: () => Promise<void>;
}> {
  const held: ServerResponse[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      if (req.url === WORKER_ROUTES.register)
        res.end(
          JSON.stringify({
            instanceId: 'inst-1',
            workerToken: 'w'.repeat(32),
            heartbeatSeconds: 1,
            objectStore: '/tmp',
          }),
        );
      else if (req.url === WORKER_ROUTES.heartbeat) held.push(res);
      else res.writeHead(404).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    held,
    answerAll: () => {
      for (const res of held.splice(0)) res.end(JSON.stringify({ tasks: [] }));
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function until(what: string, ok: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

describe('simulated fleet', () => {
  const cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it('keeps one heartbeat timer per worker when the period changes while a beat is in flight', async () => {
    const controller = await holdingController();
    cleanup.push(controller.close);
    const fleet = new SimulatedFleet({
      url: controller.url,
      workerToken: 'cluster-token',
      instances: () => [{ instanceId: 'local-1', state: 'running' }],
      heartbeatMs: 20,
      taskSeconds: Number.POSITIVE_INFINITY,
    });
    cleanup.push(() => fleet.stop());
    fleet.start();
    await until('the first heartbeat', () => controller.held.length === 1);
    // The period changes with that beat unanswered: a new beat is scheduled at once, within the new period.
    fleet.setHeartbeatMs(20);
    await until('the heartbeat on the new period', () => controller.held.length === 2);
    controller.answerAll();
    // One timer: the next beat is sent only once this one is answered, so one, never two, is held from here on
    // (however long the test waits: 15 periods, ample for a second timer chain to show).
    await until('the next heartbeat', () => controller.held.length >= 1);
    await sleep(300);
    expect(controller.held).toHaveLength(1);
    expect(fleet.errors).toBe(0);
  });
});
