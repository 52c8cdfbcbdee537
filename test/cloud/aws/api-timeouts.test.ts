import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DescribeInstancesCommand } from '@aws-sdk/client-ec2';
import { createEc2Client } from '../../../src/cloud/aws/ec2-api.js';

/**
 * A control-plane endpoint that accepts connections and never answers (a hung load balancer, a black-holed route):
 * the EC2 client must fail the call, not wait forever and hold the controller's round with it.
 */
describe('EC2 client timeouts', () => {
  let server: Server;
  let port = 0;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    server = createServer((socket) => {
      sockets.push(socket); // held open, never written to
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    port = address.port;
  });

  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('fails a call to an endpoint that never answers after its request timeout, once per attempt', async () => {
    const client = createEc2Client({
      endpoint: `http://127.0.0.1:${port}`,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      maxAttempts: 2,
      timeouts: { requestTimeoutMs: 400, idleTimeoutMs: 400 },
    });
    const started = Date.now();
    const before = sockets.length;
    await expect(client.send(new DescribeInstancesCommand({}))).rejects.toThrow(/timeout|timed out/i);
    // Each attempt is a new connection that timed out (not one that hung and was given up on by the test).
    expect(sockets.length - before).toBe(2);
    expect(Date.now() - started).toBeLessThan(20_000);
    client.destroy();
  });
});
