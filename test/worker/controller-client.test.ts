import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { ControllerClient, ControllerRequestError } from '../../src/worker/controller-client.js';
import { freePort } from '../helpers/test-ports.js';

/**
 * The worker's HTTP client over real sockets. fetch's own message ("fetch failed") says nothing about why: the
 * client's error carries the cause, which is what a person reading a silent worker's log needs.
 */
describe('ControllerClient errors', () => {
  it('names why the controller could not be reached: a refused connection', async () => {
    const port = await freePort();
    const client = new ControllerClient(`http://127.0.0.1:${port}`);
    const error = await client
      .register('secret', { instanceId: 'i-1', executor: 'process', hostname: 'h' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ControllerRequestError);
    expect((error as ControllerRequestError).statusCode).toBeUndefined();
    expect((error as Error).message).toMatch(
      new RegExp(`cannot reach the controller at http://127.0.0.1:${port}: fetch failed \\(.*ECONNREFUSED`),
    );
  });

  it('names a connection the controller closed without answering (killed mid-request)', async () => {
    const server = createServer((request) => {
      request.resume();
      request.on('end', () => request.socket.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    try {
      const client = new ControllerClient(`http://127.0.0.1:${port}`);
      const error = await client
        .register('secret', { instanceId: 'i-1', executor: 'process', hostname: 'h' })
        .catch((e: unknown) => e);
      expect((error as Error).message).toMatch(/fetch failed \(UND_ERR_SOCKET: other side closed\)/);
    } finally {
      server.close();
    }
  });
});
