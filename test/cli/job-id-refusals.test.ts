import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';
import { bareEnv } from '../helpers/local-controller.js';

/**
 * `job`, `logs` and `why` refuse an argument that is not a job id as bad input (exit 2, naming it), before any request,
 * as `cancel`, `wait` and `resubmit` do; a job id still goes to the controller. The built CLI in a subprocess, against
 * a server that records what reaches it and knows no job.
 */
const requests: string[] = [];
let server: Server;
let url: string;

beforeAll(async () => {
  ensureBuiltCli();
  server = createServer((request, response) => {
    requests.push(`${request.method ?? ''} ${request.url ?? ''}`);
    request.resume();
    response.writeHead(404, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ error: 'no such job' }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 240_000);

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

function cli(args: readonly string[]): Promise<CliResult> {
  return runCli(args, {
    ...bareEnv(),
    FLEETWISE_SERVER: url,
    FLEETWISE_TOKEN: 'a-token-of-some-team-0123456789',
  });
}

const REFUSAL = 'fleetwise: invalid input: arguments\n  - "nonsense": not a job id (job-<n>)\n';

describe('a job view refuses what is not a job id before asking the controller', () => {
  it.each([
    [['job', 'nonsense']],
    [['job', 'nonsense', '--mark-unsuccessful']],
    [['logs', 'nonsense']],
    [['logs', 'nonsense', '--follow']],
    [['why', 'nonsense']],
    // As cancel refuses it.
    [['cancel', 'nonsense']],
  ])('%j: exit 2, naming it, and no request', async (args) => {
    requests.length = 0;
    const result = await cli(args);
    expect({ code: result.code, stderr: result.stderr, stdout: result.stdout }).toEqual({
      code: 2,
      stderr: REFUSAL,
      stdout: '',
    });
    expect(requests).toEqual([]);
  });

  it('--json: the refusal as one JSON object', async () => {
    requests.length = 0;
    for (const command of ['job', 'why']) {
      const result = await cli([command, 'job-0', '--json']);
      expect(result.code, result.stderr).toBe(2);
      expect(JSON.parse(result.stderr)).toEqual({
        error: 'invalid input: arguments',
        details: ['"job-0": not a job id (job-<n>)'],
      });
    }
    expect(requests).toEqual([]);
  });

  it('a job id is sent to the controller (this one answers 404: exit 1)', async () => {
    requests.length = 0;
    for (const command of ['job', 'logs', 'why']) {
      const result = await cli([command, 'job-7']);
      expect(result.code, result.stderr).toBe(1);
    }
    expect(requests.length).toBeGreaterThanOrEqual(3);
    expect(requests.every((r) => r.includes('/v1/jobs/job-7'))).toBe(true);
  });
});
