import { describe, expect, it } from 'vitest';
import { FleetwiseClient } from '../../src/cli/client.js';
import { normalizeServer, resolveConnection } from '../../src/cli/client-connection.js';
import { ConnectionError, isTransientFailure } from '../../src/cli/client-errors.js';
import { ValidationError } from '../../src/core/validation.js';

/**
 * The controller address a client is given: one with a user and password is refused without being echoed, and one on
 * a port fetch refuses (its bad ports) is said to be that, with real fetch, which refuses before it connects.
 */

function refusal(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (e) {
    if (e instanceof ValidationError) return e;
    throw e;
  }
  throw new Error('expected a ValidationError');
}

describe('a controller address with a user and password', () => {
  it('is refused naming --server, never echoing what it holds', () => {
    const e = refusal(() => normalizeServer('http://user:s3cret@127.0.0.1:2'));
    expect(e.source).toBe('--server');
    expect(e.problems).toEqual([expect.stringContaining('user name or password')]);
    expect(e.problems.join('\n')).toMatch(/--token/);
    expect(e.message).not.toMatch(/s3cret|user:/);
    // Without a scheme, or a user alone, likewise.
    expect(refusal(() => normalizeServer('user:s3cret@10.0.0.5:7070')).message).not.toContain('s3cret');
    expect(refusal(() => normalizeServer('https://deploy@fw.example.com')).message).not.toContain('deploy');
  });

  it('is refused before anything quotes it, naming where it came from', () => {
    const flag = refusal(() =>
      resolveConnection({ server: 'http://user:s3cret@127.0.0.1:2' }, { FLEETWISE_TOKEN: 'x' }),
    );
    expect(flag.source).toBe('--server');
    expect(flag.message).not.toContain('s3cret');
    // With no token given, the missing token's message would otherwise name the address.
    const fromEnv = refusal(() =>
      resolveConnection({}, { FLEETWISE_SERVER: 'http://user:s3cret@127.0.0.1:2' }, '/'),
    );
    expect(fromEnv.source).toBe('FLEETWISE_SERVER');
    expect(fromEnv.message).not.toContain('s3cret');
  });

  it('that does not parse is echoed with what precedes its @ masked', () => {
    const e = refusal(() => normalizeServer('http://user:s3cret@127.0.0.1:99999'));
    expect(e.problems).toEqual(['"http://***@127.0.0.1:99999": expected a URL like http://127.0.0.1:7070']);
  });

  it('is not refused when it holds an @ only in its path', () => {
    expect(normalizeServer('http://10.0.0.5:7070/a@b')).toBe('http://10.0.0.5:7070/a@b');
  });
});

describe("a controller address on one of fetch's bad ports", () => {
  it('is said to be one, with what to do, and is no failure to wait through', async () => {
    const client = new FleetwiseClient(
      'http://127.0.0.1:6000',
      'token',
      undefined,
      'the local controller of /somewhere/.fleetwise',
    );
    const error = await client.listJobs().then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).toBe(
      'cannot reach the controller at http://127.0.0.1:6000 (GET /v1/jobs): port 6000 is one HTTP clients refuse ' +
        "(fetch's bad ports); found as the local controller of /somewhere/.fleetwise; start the controller on " +
        'another port (--listen HOST:PORT) and reach it there',
    );
    expect(error).not.toBeInstanceOf(ConnectionError);
    expect(isTransientFailure(error)).toBe(false);
  });

  it("is said to be one when a job's log is streamed", async () => {
    const client = new FleetwiseClient('http://127.0.0.1:10080', 'token');
    await expect(client.writeLogs('job-1', () => undefined)).rejects.toThrow(
      /^cannot reach the controller at http:\/\/127\.0\.0\.1:10080 \(GET \/v1\/jobs\/job-1\/logs\): port 10080 is one HTTP clients refuse/,
    );
  });
});
