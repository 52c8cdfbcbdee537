import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FleetwiseClient } from '../../src/cli/client.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { ADMIN_TOKEN, fakeWithTeams, type FakeControllerService } from '../controller/api-fake-service.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';

/**
 * A submission whose answer is lost on the way back (the controller made the job; the connection dropped before the
 * client read the answer), through an HTTP proxy in front of a real API server: the client sends it again with its
 * idempotency key and is answered with the job the first send made, so the job exists once. Without a key the loss
 * is reported and nothing is sent again (the job may exist: the case a key is for). The CLI does this on its own.
 */

let server: ApiServer;
let service: FakeControllerService;
let proxy: Server;
let proxyUrl: string;
/** Answers to submissions the proxy will drop (the controller's answer read, the client's connection cut). */
let dropAnswers = 0;
let submissionsSeen = 0;
/** Answer /healthz as a controller from before idempotency keys (without saying it takes them). */
let olderController = false;
/** Answer submissions 500 after the controller made them. */
let answer500 = false;
/** Submissions answered 503 with Retry-After 0 (a controller whose database is briefly busy), not passed on. */
let submissions503 = 0;
/** Dry runs answered 503 (as a controller whose database is briefly unavailable) before one is passed on. */
let dryRuns503 = 0;
/** The Retry-After those 503s carry. */
let dryRunRetryAfter = '0';
let dryRunsSeen = 0;
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-resend-'));

async function forward(request: IncomingMessage, response: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const sent = new Headers();
  for (const [name, value] of Object.entries(request.headers))
    if (typeof value === 'string' && !['host', 'connection', 'content-length'].includes(name))
      sent.set(name, value);
  const body = Buffer.concat(chunks);
  const upstream = await fetch(`${server.url}${request.url ?? '/'}`, {
    method: request.method ?? 'GET',
    headers: sent,
    ...(body.length === 0 ? {} : { body }),
  });
  let text = await upstream.text();
  if (olderController && request.url === '/healthz') {
    const { idempotencyKeys: _dropped, ...rest } = JSON.parse(text) as Record<string, unknown>;
    text = JSON.stringify(rest);
  }
  if (request.method === 'POST' && request.url?.includes('dryRun=true') === true) {
    dryRunsSeen += 1;
    if (dryRuns503 > 0) {
      dryRuns503 -= 1;
      response.writeHead(503, { 'content-type': 'application/json', 'retry-after': dryRunRetryAfter });
      response.end(JSON.stringify({ error: 'state store unavailable (injected by the proxy)' }));
      return;
    }
  }
  // Submissions only: `fleetwise submit` dry-runs each file first, which creates nothing.
  if (
    request.method === 'POST' &&
    request.url?.startsWith('/v1/jobs') === true &&
    request.url.includes('dryRun=true') === false
  ) {
    submissionsSeen += 1;
    if (submissions503 > 0) {
      submissions503 -= 1;
      response.writeHead(503, { 'content-type': 'application/json', 'retry-after': '0' });
      response.end(JSON.stringify({ error: 'state database busy (injected by the proxy)' }));
      return;
    }
    if (answer500) {
      response.writeHead(500, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: 'internal error (injected by the proxy)' }));
      return;
    }
    if (dropAnswers > 0) {
      dropAnswers -= 1;
      request.socket.destroy(); // the controller answered; the client never hears it
      return;
    }
  }
  const headers = Object.fromEntries(upstream.headers);
  delete headers['content-length'];
  response.writeHead(upstream.status, headers);
  response.end(text);
}

beforeAll(async () => {
  ensureBuiltCli();
  service = fakeWithTeams();
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
  proxy = createServer((request, response) => {
    forward(request, response).catch(() => request.socket.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => proxy.close(resolve));
  await server.close();
  rmSync(scratch, { recursive: true, force: true });
});

beforeEach(() => {
  dropAnswers = 0;
  submissions503 = 0;
  submissionsSeen = 0;
  dryRuns503 = 0;
  dryRunRetryAfter = '0';
  dryRunsSeen = 0;
});

const spec = (name: string): Record<string, unknown> => ({
  name,
  team: 'vision',
  tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 1, 2] } }],
});
/** A client through the proxy whose resends wait `ms` (doubling), not seconds. */
function clientResendingAfter(ms: number): FleetwiseClient {
  const client = new FleetwiseClient(proxyUrl, ADMIN_TOKEN);
  client.resendDelayMs = ms;
  return client;
}

const jobsNamed = (name: string): string[] =>
  service.store
    .listJobs()
    .filter((j) => j.name === name)
    .map((j) => j.id);

describe('a submission whose answer is lost', () => {
  it('is sent again with its key and answered with the one job the first send made', async () => {
    const client = clientResendingAfter(20);
    dropAnswers = 2;
    const told: number[] = [];
    const answer = await client.submitJob(spec('resent'), {
      idempotencyKey: 'resent-1',
      onResend: (_reason, delayMs) => told.push(delayMs),
    });
    expect(submissionsSeen).toBe(3);
    expect(told).toEqual([20, 40]);
    expect(jobsNamed('resent')).toEqual([answer.id]);
    // Replayed to the resend, which says it was one: the job is this call's own, not "submitted before".
    expect([answer.replayed, answer.resent]).toEqual([true, true]);
  });

  it("waits what a 503's Retry-After asks before sending it again, not its own doubling delay", async () => {
    // Its own delay is a minute: only the controller's Retry-After (0 s) keeps this fast.
    const client = clientResendingAfter(60_000);
    submissions503 = 2;
    const told: number[] = [];
    const answer = await client.submitJob(spec('asked'), {
      idempotencyKey: 'asked-1',
      onResend: (_reason, delayMs) => told.push(delayMs),
    });
    expect([submissionsSeen, told]).toEqual([3, [0, 0]]);
    expect(jobsNamed('asked')).toEqual([answer.id]);
  });

  it('gives up after its sends, naming the loss', async () => {
    const client = clientResendingAfter(5);
    dropAnswers = 10;
    await expect(client.submitJob(spec('lost'), { idempotencyKey: 'lost-1' })).rejects.toThrow(
      /cannot reach the controller .*POST \/v1\/jobs/,
    );
    expect(submissionsSeen).toBe(5);
    expect(jobsNamed('lost')).toHaveLength(1);
  });

  it('is not sent again to a controller that does not say it takes keys', async () => {
    const client = clientResendingAfter(5);
    dropAnswers = 1;
    olderController = true;
    try {
      await expect(client.submitJob(spec('older'), { idempotencyKey: 'older-1' })).rejects.toThrow(
        /not sent again: this controller does not take idempotency keys/,
      );
    } finally {
      olderController = false;
    }
    expect(submissionsSeen).toBe(1);
    expect(jobsNamed('older')).toHaveLength(1);
  });

  it('is not sent again without a key (a second send could make a second job)', async () => {
    const client = clientResendingAfter(5);
    dropAnswers = 1;
    await expect(client.submitJob(spec('unkeyed'))).rejects.toThrow(/cannot reach the controller/);
    expect(submissionsSeen).toBe(1);
    expect(jobsNamed('unkeyed')).toHaveLength(1);
  });

  it('is resent by `fleetwise submit` on its own, and a rerun with --idempotency-key submits nothing new', async () => {
    const file = join(scratch, 'train.json');
    writeFileSync(file, JSON.stringify(spec('cli-resent')));
    const env = { ...process.env, FLEETWISE_SERVER: proxyUrl, FLEETWISE_TOKEN: ADMIN_TOKEN };
    dropAnswers = 1;
    const first = await runCli(['submit', file, '--idempotency-key', 'train/2026-12-02'], env);
    expect(first.code, first.stderr).toBe(0);
    const [id] = jobsNamed('cli-resent');
    expect(first.stdout).toBe(`submitted ${id} (cli-resent, team vision): queued\n`);
    expect(submissionsSeen).toBe(2);
    expect(first.stderr).toMatch(
      /train\.json: no answer \(cannot reach the controller .*\); sending it again in 1 s \(with its idempotency key: never a second copy\)/,
    );
    const text = await runCli(['submit', file, '--idempotency-key', 'train/2026-12-02'], env);
    expect(text.stdout).toBe(
      `submitted before with this idempotency key: ${id} (cli-resent, team vision): queued\n`,
    );
    const rerun = await runCli(['submit', file, '--idempotency-key', 'train/2026-12-02', '--json'], env);
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(JSON.parse(rerun.stdout)).toMatchObject({ id, replayed: true });
    // Without the flag each run is a new submission (its own key covers only its own resends).
    const plain = await runCli(['submit', file], env);
    expect(plain.code, plain.stderr).toBe(0);
    expect(jobsNamed('cli-resent')).toHaveLength(2);
    const bad = await runCli(['submit', file, '--idempotency-key', 'no spaces allowed'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--idempotency-key');
    const theirs = await runCli(['submit', file, '--idempotency-key', 'resubmit/job-1'], env);
    expect(theirs.code).toBe(2);
    expect(theirs.stderr).toContain("keys starting resubmit/ are fleetwise resubmit's own");
    expect(jobsNamed('cli-resent')).toHaveLength(2);
    // A failure that leaves its fate unknown (here a 500, not resent) says how to send it again without a copy.
    answer500 = true;
    const lost = await runCli(['submit', file, '--idempotency-key', 'train/lost'], env).finally(
      () => (answer500 = false),
    );
    expect(lost.code).toBe(1);
    // Without a key given, the hint names the random one the command used.
    answer500 = true;
    const unkeyed = await runCli(['submit', file], env).finally(() => (answer500 = false));
    const used = /run the same command with --idempotency-key ([0-9a-f-]{36})/.exec(unkeyed.stderr)?.[1];
    expect(used, unkeyed.stderr).toBeDefined();
    const again = await runCli(['submit', file, '--idempotency-key', used ?? '', '--json'], env);
    expect(JSON.parse(again.stdout)).toMatchObject({ replayed: true });
    expect(lost.stderr).toContain(
      'to send it again without risking a second copy, run the same command with --idempotency-key train/lost',
    );
    // Under --json the resend is not told: stderr holds only an error, one JSON object, and there is none.
    const quietFile = join(scratch, 'quiet.json');
    writeFileSync(quietFile, JSON.stringify(spec('cli-quiet')));
    dropAnswers = 1;
    const quiet = await runCli(['submit', quietFile, '--json'], env);
    expect(quiet.code, quiet.stderr).toBe(0);
    expect(quiet.stderr).toBe('');
    expect(JSON.parse(quiet.stdout)).toMatchObject({ id: jobsNamed('cli-quiet')[0] });
    expect(jobsNamed('cli-quiet')).toHaveLength(1);
  });
});

describe('a dry run the controller answers 503', () => {
  it("is asked again after the controller's Retry-After, a few times, then given up", async () => {
    // Its own delay is a minute: only the controller's Retry-After (0 s) keeps this fast.
    const client = clientResendingAfter(60_000);
    dryRuns503 = 2;
    const told: number[] = [];
    const view = await client.dryRunJob(spec('checked'), { onResend: (_reason, ms) => told.push(ms) });
    expect(view.name).toBe('checked');
    expect([dryRunsSeen, told]).toEqual([3, [0, 0]]);
    // Without a Retry-After its own delay, doubling; five sends, then the controller's answer.
    const doubling = clientResendingAfter(5);
    dryRuns503 = 10;
    dryRunRetryAfter = 'soon';
    told.length = 0;
    await expect(
      doubling.dryRunJob(spec('checked'), { onResend: (_reason, ms) => told.push(ms) }),
    ).rejects.toThrow(/the controller answered 503: state store unavailable/);
    expect([dryRunsSeen, told]).toEqual([8, [5, 10, 20, 40]]);
    expect(jobsNamed('checked')).toEqual([]);
  });

  it('does not stop `fleetwise submit`, which says so on stderr', async () => {
    const file = join(scratch, 'checked.json');
    writeFileSync(file, JSON.stringify(spec('cli-checked')));
    const env = { ...process.env, FLEETWISE_SERVER: proxyUrl, FLEETWISE_TOKEN: ADMIN_TOKEN };
    dryRuns503 = 1;
    const out = await runCli(['submit', file], env);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stderr).toMatch(
      /checked\.json: checking it on the controller: POST \/v1\/jobs: the controller answered 503: state store unavailable \(injected by the proxy\); asking again in 0 s/,
    );
    expect(jobsNamed('cli-checked')).toHaveLength(1);
  });
});
