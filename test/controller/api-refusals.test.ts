import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import type { Readable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import type { ContextInfo } from '../../src/controller/artifacts.js';
import { craftTar } from '../helpers/tar.js';
import { ADMIN_TOKEN, FakeControllerService, VISION_TOKEN } from './api-fake-service.js';

/**
 * What the API answers a request it refuses before its route acts: the content types a route takes, named when a
 * body has another type or none; a dry run's Idempotency-Key checked as its submission checks it; and a client that
 * drops its upload mid-body, which is no failure of the server's and is not logged as one.
 */

/** A controller that tells when an upload it was streaming ended, however it ended. */
class UploadService extends FakeControllerService {
  private settled: (() => void) | undefined;
  readonly uploadEnded = new Promise<void>((resolve) => (this.settled = resolve));
  uploadStarted = false;

  override async storeContext(upload: Readable, info: ContextInfo): Promise<string> {
    this.uploadStarted = true;
    try {
      return await super.storeContext(upload, info);
    } finally {
      this.settled?.();
    }
  }
}

const service = new UploadService();
service.store.addTeamToken('vision', VISION_TOKEN, 'test');
const lines: Record<string, unknown>[] = [];
let server: ApiServer;

beforeAll(async () => {
  // The controller's log as it runs: the API logs there at warn and above.
  const log = pino(
    { level: 'debug' },
    { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN, logger: log });
});
afterAll(async () => {
  await server.close();
});

interface Answer {
  readonly status: number;
  readonly body: { readonly error?: string; readonly details?: readonly string[] };
}

async function post(path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  const response = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${VISION_TOKEN}`, ...headers },
    ...(body === undefined ? {} : { body }),
  });
  return { status: response.status, body: (await response.json()) as Answer['body'] };
}

const SPEC = JSON.stringify({
  name: 'keyed',
  team: 'vision',
  tasks: [{ name: 'main', image: 'python:3.12-slim', demand: { any: [0, 0.5, 0.25] } }],
});
const SHA = '0'.repeat(64);

describe('a body of a content type the route does not take, or of none', () => {
  // fetch sends a string body as text/plain unless told otherwise; a Blob without a type sends no Content-Type.
  const untyped = (text: string): Blob => new Blob([text]);

  it('is a 415 naming the types the route takes', async () => {
    const cases: readonly (readonly [string, string | undefined, string])[] = [
      [
        `/v1/contexts?sha256=${SHA}`,
        undefined,
        'missing Content-Type header: send application/x-tar or application/gzip',
      ],
      [
        `/v1/contexts?sha256=${SHA}`,
        'text/html',
        'unsupported content type "text/html": send application/x-tar or application/gzip',
      ],
      ['/v1/jobs', undefined, 'missing Content-Type header: send application/json or application/yaml'],
      [
        '/v1/jobs',
        'text/html',
        'unsupported content type "text/html": send application/json or application/yaml',
      ],
      [
        '/v1/jobs/job-1/unsuccessful',
        'text/html',
        'unsupported content type "text/html": send application/json',
      ],
      [
        '/v1/jobs/job-1/cancel',
        undefined,
        'missing Content-Type header: this request takes no body (or {} as application/json)',
      ],
    ];
    for (const [path, type, error] of cases) {
      const response = await fetch(`${server.url}${path}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${VISION_TOKEN}`,
          ...(type === undefined ? {} : { 'content-type': type }),
        },
        body: type === undefined ? untyped('x') : 'x',
      });
      expect(response.status, `${path} ${type ?? '(none)'}`).toBe(415);
      expect(await response.json(), `${path} ${type ?? '(none)'}`).toEqual({ error });
    }
  });
});

describe("a dry run's Idempotency-Key", () => {
  it('is refused when malformed, as its submission refuses it', async () => {
    for (const dryRun of [true, false]) {
      const path = `/v1/jobs${dryRun ? '?dryRun=true' : ''}`;
      const json = { 'content-type': 'application/json' };
      const malformed = await post(path, { ...json, 'idempotency-key': 'two words' }, SPEC);
      expect(malformed.status, `dryRun ${dryRun}: ${JSON.stringify(malformed.body)}`).toBe(400);
      expect(malformed.body.details).toEqual([expect.stringMatching(/^idempotency-key: /)]);
    }
    // A well-formed key is taken by a dry run, which records nothing under it: the submission after it is the first.
    const dry = await post(
      '/v1/jobs?dryRun=true',
      { 'content-type': 'application/json', 'idempotency-key': 'k-1' },
      SPEC,
    );
    expect(dry.status).toBe(200);
    const made = await fetch(`${server.url}/v1/jobs`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${VISION_TOKEN}`,
        'content-type': 'application/json',
        'idempotency-key': 'k-1',
      },
      body: SPEC,
    });
    expect(made.status).toBe(201);
    expect(made.headers.get('idempotent-replayed')).toBeNull();
  });
});

describe('an upload the client drops mid-body', () => {
  it('is no failure of the server: nothing is logged at warn or above, and the API goes on answering', async () => {
    const tar = await craftTar([{ name: 'big.bin', content: 'x'.repeat(1024 * 1024) }]);
    const sha256 = createHash('sha256').update(tar).digest('hex');
    const url = new URL(server.url);
    const socket = connect(Number(url.port), url.hostname);
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.write(
      `POST /v1/contexts?sha256=${sha256} HTTP/1.1\r\nHost: ${url.host}\r\n` +
        `Authorization: Bearer ${ADMIN_TOKEN}\r\nContent-Type: application/x-tar\r\n` +
        `Content-Length: ${tar.length}\r\n\r\n`,
    );
    socket.write(tar.subarray(0, 200 * 1024));
    // Dropped once the controller streams it into the store.
    for (let i = 0; i < 200 && !service.uploadStarted; i++) await new Promise((r) => setTimeout(r, 25));
    expect(service.uploadStarted).toBe(true);
    socket.destroy();
    await service.uploadEnded;
    // A request after it: by its answer the API has handled the dropped one.
    const health = await fetch(`${server.url}/healthz`);
    expect(health.status).toBe(200);
    expect(lines.filter((l) => Number(l['level']) >= 40)).toEqual([]);
    expect(service.contexts.size).toBe(0);
  });
});
