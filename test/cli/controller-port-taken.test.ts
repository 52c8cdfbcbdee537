import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI } from '../helpers/built-cli.js';
import {
  killLocalLeftovers,
  LOCAL_ADMIN_TOKEN,
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
    const again = spawn(
      process.execPath,
      [
        ...started.process.spawnargs.slice(1, started.process.spawnargs.indexOf('--listen')),
        '--listen',
        `127.0.0.1:${port}`,
        '--executor',
        'process',
      ],
      { env: started.env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    again.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => again.once('exit', resolve));
    expect(code).toBe(1);
    expect(stderr).toContain(`cannot serve the API on 127.0.0.1:${port}: the address is in use`);
    expect(started.instances()).toHaveLength(launched);
    expect(started.instances().filter(workerAlive)).toEqual([]);
  }, 120_000);

  it('on --listen HOST:0 tells its workers the port it bound, and their tasks run', async () => {
    const dir = join(scratch, 'any-port');
    const child = spawn(
      process.execPath,
      [
        CLI,
        'controller',
        '--provider',
        'local',
        '--executor',
        'process',
        '--state-dir',
        dir,
        '--listen',
        '127.0.0.1:0',
      ],
      {
        env: { ...process.env, FLEETWISE_ADMIN_TOKEN: LOCAL_ADMIN_TOKEN },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      const url = await until(
        'the API URL file',
        () => {
          try {
            return readFileSync(join(dir, 'api-url'), 'utf8').trim() || undefined;
          } catch {
            return undefined;
          }
        },
        60_000,
      );
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(url).not.toMatch(/:0$/);
      const headers = { authorization: `Bearer ${LOCAL_ADMIN_TOKEN}`, 'content-type': 'application/json' };
      const submitted = await fetch(`${url}/v1/jobs`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          name: 'sleeper',
          team: 'pt',
          tasks: [{ name: 'main', command: ['sleep', '600'], demand: { c7i: [0, 1, 1] } }],
        }),
      });
      expect(submitted.status).toBe(201);
      const { id } = (await submitted.json()) as { id: string };
      await until(
        `${id} running`,
        async () => {
          const job = (await (await fetch(`${url}/v1/jobs/${id}`, { headers })).json()) as { state: string };
          return job.state === 'running' ? true : undefined;
        },
        60_000,
      );
    } finally {
      child.kill('SIGTERM');
      await exited;
      killLocalLeftovers(dir);
    }
  }, 120_000);
});
