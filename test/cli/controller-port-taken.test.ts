import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  killLocalLeftovers,
  spawnLocalController,
  startLocalController,
  until,
  workerAlive,
  type StartedController,
} from '../helpers/local-controller.js';
import { freePort } from '../helpers/test-ports.js';

/**
 * A local controller restarted on an address something else holds fails with one line naming --listen, and starts
 * nothing first: its API binds before the loop runs, so no round launches a worker that would then talk to whatever
 * holds the port (with its launch secret), for a controller that never serves.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-port-taken-'));
const stateDir = join(scratch, 'state');
let first: StartedController | undefined;
let holder: Server | undefined;

afterAll(async () => {
  if (first !== undefined && first.process.exitCode === null) {
    first.process.kill('SIGTERM');
    await first.exited;
  }
  holder?.close();
  killLocalLeftovers(stateDir);
  rmSync(scratch, { recursive: true, force: true });
});

describe('a local controller and the address it listens on', () => {
  it('restarted on an address something else holds, launches nothing before it fails', async () => {
    const port = await freePort();
    first = await startLocalController(stateDir, { port });
    const submitted = await first.api('POST', '/v1/jobs', {
      name: 'sleeper',
      team: 'pt',
      tasks: [{ name: 'main', command: ['sleep', '600'], demand: { c7i: [0, 1, 1] } }],
    });
    expect(submitted.status, submitted.text).toBe(201);
    const started = first;
    await until('a worker for the job', () => (started.instances().length > 0 ? true : undefined), 60_000);
    started.process.kill('SIGTERM');
    expect(await started.exited).toBe(0);
    const launched = started.instances().length;
    expect(started.instances().filter(workerAlive)).toEqual([]);

    // Something else takes the port; the restart (whose job needs an instance again) must fail without one.
    holder = createServer();
    await new Promise<void>((resolve) => holder?.listen(port, '127.0.0.1', resolve));
    const again = await spawnLocalController(stateDir, { port });
    expect(await again.exited).toBe(1);
    expect(again.stderr()).toContain(`cannot serve the API on 127.0.0.1:${port}: the address is in use`);
    expect(started.instances()).toHaveLength(launched);
    expect(started.instances().filter(workerAlive)).toEqual([]);
  }, 120_000);

  it('on --listen HOST:0 tells its workers the port it bound, and their tasks run', async () => {
    const dir = join(scratch, 'any-port');
    const ctl = await startLocalController(dir, { port: 0 });
    try {
      expect(ctl.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(ctl.url).not.toMatch(/:0$/);
      const submitted = await ctl.api('POST', '/v1/jobs', {
        name: 'sleeper',
        team: 'pt',
        tasks: [{ name: 'main', command: ['sleep', '600'], demand: { c7i: [0, 1, 1] } }],
      });
      expect(submitted.status, submitted.text).toBe(201);
      const { id } = submitted.json as { id: string };
      await until(
        `${id} running`,
        async () =>
          ((await ctl.api('GET', `/v1/jobs/${id}`)).json as { state: string }).state === 'running'
            ? true
            : undefined,
        60_000,
        () => ctl.diagnostics(),
      );
    } finally {
      ctl.process.kill('SIGTERM');
      await ctl.exited;
      killLocalLeftovers(dir);
    }
  }, 120_000);
});
