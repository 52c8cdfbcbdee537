import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  controllerAddressFileOf,
  CONTROLLER_ADDRESS_FILE_ENV,
  parseControllerAddress,
} from '../../src/protocol/controller-address.js';
import { ControllerClient, ControllerRequestError } from '../../src/worker/controller-client.js';
import { WORKER_ROUTES } from '../../src/protocol/worker-protocol.js';

/**
 * A worker following its controller to a new address (protocol/controller-address.ts), over real sockets: the client
 * given an address file sends a failed request again to the address the file names, and keeps using it; without one
 * (an EC2 worker) it keeps the address it was given.
 */

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-controller-address-'));
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const WORKER_TOKEN = 'per-instance-token-0123456789';

/** A stand-in controller: answers the worker routes, and records each request as `route bearer`. */
async function fakeController(): Promise<{ url: string; seen: string[]; close(): Promise<void> }> {
  const seen: string[] = [];
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      seen.push(`${request.url} ${request.headers.authorization}`);
      const body =
        request.url === WORKER_ROUTES.register
          ? { instanceId: 'inst-1', workerToken: WORKER_TOKEN, heartbeatSeconds: 1, objectStore: scratch }
          : { tasks: [] };
      response.setHeader('content-type', 'application/json');
      response.end(JSON.stringify(body));
    });
  });
  return listening(server, seen);
}

/** Another program on a port the controller left: answers every request 404. */
async function otherProgram(): Promise<{ url: string; seen: string[]; close(): Promise<void> }> {
  const seen: string[] = [];
  const server = createServer((request, response) => {
    request.resume();
    seen.push(`${request.url}`);
    response.statusCode = 404;
    response.end('not found');
  });
  return listening(server, seen);
}

async function listening(
  server: Server,
  seen: string[],
): Promise<{ url: string; seen: string[]; close(): Promise<void> }> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const REGISTER = { instanceId: 'local-1', executor: 'process' as const };
const HEARTBEAT = { tasks: [], bootId: 'boot', seq: 1 };

function addressFile(name: string, url: string): string {
  const path = join(scratch, name);
  writeFileSync(path, `${url}\n`);
  return path;
}

describe('a worker given its controller’s address file', () => {
  it('sends a heartbeat that found no controller to the address the file names now, and stays there', async () => {
    const first = await fakeController();
    const file = addressFile('restart', first.url);
    const client = new ControllerClient(first.url, 10_000, file);
    await client.register('launch-secret', REGISTER);
    expect(first.seen).toEqual([`${WORKER_ROUTES.register} Bearer launch-secret`]);

    // The controller is killed and started again on another port, which it records in the file.
    await first.close();
    const second = await fakeController();
    writeFileSync(file, `${second.url}\n`);
    expect(await client.heartbeat({ ...HEARTBEAT })).toEqual({ tasks: [] });
    await client.heartbeat({ ...HEARTBEAT, seq: 2 });
    // Both reached the restarted controller with the worker's own token; the second went there directly.
    expect(second.seen).toEqual([
      `${WORKER_ROUTES.heartbeat} Bearer ${WORKER_TOKEN}`,
      `${WORKER_ROUTES.heartbeat} Bearer ${WORKER_TOKEN}`,
    ]);
  });

  it('leaves the old port when another program answers there', async () => {
    const stranger = await otherProgram();
    const controller = await fakeController();
    const file = addressFile('taken', controller.url);
    const client = new ControllerClient(stranger.url, 10_000, file);
    const answer = await client.register('launch-secret', REGISTER);
    expect(answer.instanceId).toBe('inst-1');
    expect(stranger.seen).toEqual([WORKER_ROUTES.register]);
    expect(controller.seen).toEqual([`${WORKER_ROUTES.register} Bearer launch-secret`]);
  });

  it('keeps the failure when the file names the address already tried, or nothing usable', async () => {
    const gone = await fakeController();
    await gone.close();
    for (const [name, text] of [
      ['same', `${gone.url}/\n`],
      ['empty', ''],
      ['not-a-url', 'localhost port 7070'],
    ] as const) {
      const path = join(scratch, name);
      writeFileSync(path, text);
      const error = await new ControllerClient(gone.url, 10_000, path)
        .register('launch-secret', REGISTER)
        .catch((e: unknown) => e);
      expect(error, name).toBeInstanceOf(ControllerRequestError);
      expect((error as Error).message, name).toContain(`cannot reach the controller at ${gone.url}`);
    }
    const missing = await new ControllerClient(gone.url, 10_000, join(scratch, 'never-written'))
      .register('launch-secret', REGISTER)
      .catch((e: unknown) => e);
    expect((missing as Error).message).toContain(`cannot reach the controller at ${gone.url}`);
  });

  it('is the one the environment names (a local controller’s spawned worker); with none, the address given is kept', () => {
    expect(
      controllerAddressFileOf({ [CONTROLLER_ADDRESS_FILE_ENV]: '/state/.fleetwise/worker-controller-url' }),
    ).toBe('/state/.fleetwise/worker-controller-url');
    // An EC2 worker, or one started by hand: no file.
    expect(controllerAddressFileOf({})).toBeUndefined();
    expect(controllerAddressFileOf({ [CONTROLLER_ADDRESS_FILE_ENV]: ' ' })).toBeUndefined();
  });
});

describe('a controller address file’s text', () => {
  it('is one http(s) URL, its trailing slashes dropped', () => {
    expect(parseControllerAddress('http://127.0.0.1:40213\n')).toBe('http://127.0.0.1:40213');
    expect(parseControllerAddress('https://[::1]:7070/')).toBe('https://[::1]:7070');
    expect(parseControllerAddress('')).toBeUndefined();
    expect(parseControllerAddress('http://a:1 http://b:2')).toBeUndefined();
    expect(parseControllerAddress('ftp://127.0.0.1:21')).toBeUndefined();
    expect(parseControllerAddress('127.0.0.1:7070')).toBeUndefined();
  });
});
