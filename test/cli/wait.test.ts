import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import type { JobState } from '../../src/controller/state-store.js';
import { ADMIN_TOKEN, fakeWithTeams, type FakeControllerService } from '../controller/api-fake-service.js';
import { ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';
import { UNREACHABLE_URL } from '../helpers/unreachable-url.js';

/**
 * `fleetwise wait` as users run it (a subprocess) against an API server over a real socket, the jobs' states set in
 * the store while it waits: it prints each end as it sees it, exits 0 when every job succeeded and 1 when one did not,
 * gives up at --timeout naming what has not ended, waits for a whole array with --array, and refuses bad input.
 */
let server: ApiServer;
let service: FakeControllerService;
/** Reads of a job by the API: a poll of `wait` reads each of its jobs. */
let jobReads = 0;

beforeAll(async () => {
  ensureBuiltCli();
  service = fakeWithTeams();
  const getJob = service.store.getJob.bind(service.store);
  service.store.getJob = (id) => {
    jobReads += 1;
    return getJob(id);
  };
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
}, 240_000);
afterAll(() => server.close());

function cli(args: readonly string[]): Promise<CliResult> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    FLEETWISE_SERVER: server.url,
    FLEETWISE_TOKEN: ADMIN_TOKEN,
  };
  return runCli(args, env);
}

const spec = (name: string, array?: number): JobSpec => ({
  name,
  team: 'vision',
  tasks: [
    {
      name: 'main',
      image: 'busybox',
      env: {},
      demand: { any: [0, 1, 1] },
      replicas: 1,
      shmSizeGiB: 1,
      workload: 'busybox',
    },
  ],
  checkpoint: { signal: 'SIGTERM', timeoutSeconds: 60 },
  queue: {},
  ...(array === undefined ? {} : { arrayProperties: { size: array } }),
});

/** Walk a job to `state` through the states a job passes. */
function end(id: string, state: JobState, reason?: string): void {
  service.store.setJobState(id, 'starting');
  service.store.setJobState(id, 'running');
  service.store.setJobState(id, state, reason);
}

/** Until the subprocess has polled at least once (its first poll finds nothing ended), however slow its start. */
async function afterFirstPoll(): Promise<void> {
  const before = jobReads;
  const deadline = Date.now() + 60_000;
  while (jobReads === before) {
    if (Date.now() > deadline) throw new Error('wait never polled the controller');
    await new Promise((r) => setTimeout(r, 20));
  }
}

it('prints each end as it comes, and exits 0 when every job succeeded, 1 when one did not', async () => {
  const a = service.submit(spec('prepare'), 'vision').id;
  const b = service.submit(spec('train'), 'vision').id;
  const waiting = cli(['wait', a, b, '--interval', '0.2']);
  await afterFirstPoll();
  end(a, 'succeeded');
  await new Promise((r) => setTimeout(r, 600));
  end(b, 'failed', 'exit code 3');
  const result = await waiting;
  expect(result.code, result.stderr).toBe(1);
  expect(result.stdout).toBe(
    `${a} (prepare): succeeded\n${b} (train): failed (exit code 3)\n2 jobs ended: 1 succeeded, 1 failed\n`,
  );

  const again = await cli(['wait', a, '--json']);
  expect(again.code).toBe(0);
  expect((JSON.parse(again.stdout) as { id: string; state: string }[]).map((j) => [j.id, j.state])).toEqual([
    [a, 'succeeded'],
  ]);
});

it('waits through a controller restart (the API gone a while), then ends as the job does', async () => {
  const d = service.submit(spec('through-restart'), 'vision').id;
  const listen = new URL(server.url).host;
  const waiting = cli(['wait', d, '--interval', '0.2', '--timeout', '60s']);
  await afterFirstPoll();
  await server.close();
  await new Promise((r) => setTimeout(r, 1000));
  end(d, 'succeeded');
  server = await startApiServer(service, { listen, adminToken: ADMIN_TOKEN });
  const result = await waiting;
  expect(result.code, result.stderr).toBe(0);
  expect(result.stdout).toBe(`${d} (through-restart): succeeded\n`);
  expect(result.stderr).toContain('cannot reach the controller');
  expect(result.stderr).toContain('trying again');
});

it('fails at once when the controller cannot be reached at all', async () => {
  const result = await runCli(['wait', 'job-1'], {
    ...process.env,
    FLEETWISE_SERVER: UNREACHABLE_URL,
    FLEETWISE_TOKEN: ADMIN_TOKEN,
  });
  expect(result.code).toBe(1);
  expect(result.stderr).toContain(
    `cannot reach the controller at ${UNREACHABLE_URL} (GET /v1/jobs/job-1): ECONNREFUSED`,
  );
  expect(result.stderr).not.toContain("fetch's bad ports");
});

it("fails at once on one of fetch's bad ports, saying so rather than that nothing answered", async () => {
  const result = await runCli(['wait', 'job-1'], {
    ...process.env,
    FLEETWISE_SERVER: 'http://127.0.0.1:9',
    FLEETWISE_TOKEN: ADMIN_TOKEN,
  });
  expect(result.code).toBe(1);
  expect(result.stderr).toContain(
    "cannot reach the controller at http://127.0.0.1:9 (GET /v1/jobs/job-1): port 9 is one HTTP clients refuse (fetch's bad ports)",
  );
  expect(result.stderr).not.toContain('ECONNREFUSED');
});

it('gives up at --timeout, naming the jobs not ended', async () => {
  const c = service.submit(spec('slow'), 'vision').id;
  const result = await cli(['wait', c, '--timeout', '1s', '--interval', '0.2']);
  expect(result.code).toBe(1);
  expect(result.stdout).toBe('');
  expect(result.stderr).toContain(`timed out after 1s: 1 of 1 not ended (${c})`);
});

it('takes a --timeout of weeks, beyond what a timer holds, and still reads the jobs', async () => {
  const id = service.submit(spec('long-timeout'), 'vision').id;
  end(id, 'succeeded');
  for (const timeout of ['30d', '60d']) {
    const result = await cli(['wait', id, '--timeout', timeout]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`${id} (long-timeout): succeeded\n`);
  }
});

it('keeps --timeout when the controller stops answering: a poll ends at the deadline, not at its own timeout', async () => {
  const id = service.submit(spec('hung'), 'vision').id;
  const document = await (
    await fetch(`${server.url}/v1/jobs/${id}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  ).text();
  // A controller that answers the first poll, then takes every request and never answers it.
  let answered = 0;
  let firstPollAt = 0;
  const hung: ServerResponse[] = [];
  const hanging = createServer((request: IncomingMessage, response: ServerResponse) => {
    if (answered === 0 && request.url === `/v1/jobs/${id}`) {
      answered += 1;
      firstPollAt = Date.now();
      response.writeHead(200, { 'content-type': 'application/json' }).end(document);
    } else hung.push(response);
  });
  await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
  try {
    const result = await runCli(['wait', id, '--timeout', '3s', '--interval', '0.2'], {
      ...process.env,
      FLEETWISE_SERVER: `http://127.0.0.1:${(hanging.address() as AddressInfo).port}`,
      FLEETWISE_TOKEN: ADMIN_TOKEN,
    });
    // From the first poll (the process started and its deadline set, just before it) to the exit.
    const tookMs = Date.now() - firstPollAt;
    expect(answered).toBe(1);
    expect(hung.length).toBeGreaterThan(0);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`timed out after 3s: 1 of 1 not ended (${id})`);
    // The deadline, then the poll on it has a second of grace: far short of a request's own 30 s timeout, which a
    // poll left to its own timeout would wait out (the bound leaves room for a loaded host's slow process exit).
    expect(tookMs).toBeGreaterThan(2500);
    expect(tookMs).toBeLessThan(15_000);
  } finally {
    hanging.closeAllConnections();
    await new Promise((resolve) => hanging.close(resolve));
  }
}, 60_000);

it('--json prints each job in one shape, read by its id or as a job of an array', async () => {
  const ids = service.submitArray(spec('shape', 2), 'vision').map((j) => j.id);
  for (const id of ids) end(id, 'succeeded');
  const alone = await cli(['wait', ids[0] as string, '--json']);
  const whole = await cli(['wait', ids[0] as string, '--array', '--json']);
  expect(alone.code, alone.stderr).toBe(0);
  expect(whole.code, whole.stderr).toBe(0);
  const [byId] = JSON.parse(alone.stdout) as Record<string, unknown>[];
  const [byArray] = JSON.parse(whole.stdout) as Record<string, unknown>[];
  expect(byId?.id).toBe(ids[0]);
  expect(byArray?.id).toBe(ids[0]);
  expect(Object.keys(byId ?? {})).toEqual(Object.keys(byArray ?? {}));
  expect(byId).not.toHaveProperty('spec');
  expect(byId).toMatchObject({ state: 'succeeded', array: { index: 0, size: 2 }, taskCount: 1 });
});

it('refuses --array for a job of no array as bad input (exit 2), as cancel --array does', async () => {
  const lone = service.submit(spec('lone'), 'vision').id;
  const waited = await cli(['wait', lone, '--array', '--timeout', '5s']);
  expect(waited.code).toBe(2);
  expect(waited.stderr).toContain(`${lone} (lone) is not a job of an array: name it without --array`);
  const cancelled = await cli(['cancel', lone, '--array']);
  expect(cancelled.code).toBe(2);
  expect(service.store.getJob(lone)?.state).toBe('queued');
});

it('waits for a whole array with --array', async () => {
  const ids = service.submitArray(spec('sweep', 3), 'vision').map((j) => j.id);
  const waiting = cli(['wait', ids[1] as string, '--array', '--interval', '0.2']);
  await afterFirstPoll();
  for (const id of ids) end(id, 'succeeded');
  const result = await waiting;
  expect(result.code, result.stderr).toBe(0);
  expect(result.stdout.trim().split('\n')).toEqual([
    ...ids.map((id, i) => `${id} (sweep[${i}]): succeeded`),
    '3 jobs ended: 3 succeeded',
  ]);
});

it('waits for an array larger than a page of the listing it reads it by, named by two of its ids', async () => {
  const ids = service.submitArray(spec('samples', 600), 'vision').map((j) => j.id);
  const waiting = cli([
    'wait',
    ids[599] as string,
    ids[3] as string,
    '--array',
    '--interval',
    '0.2',
    '--json',
  ]);
  await afterFirstPoll();
  // Job views asked for (GET /v1/jobs/ID reads the job once) over a few polls: a poll by pages asks for one, not one
  // per job.
  const getJob = service.store.getJob.bind(service.store);
  let viewsRead = 0;
  service.store.getJob = (id) => {
    viewsRead += 1;
    return getJob(id);
  };
  await new Promise((r) => setTimeout(r, 1000));
  service.store.getJob = getJob;
  expect(viewsRead).toBeGreaterThan(0);
  expect(viewsRead).toBeLessThan(100);
  for (const [i, id] of ids.entries()) end(id, i === 550 ? 'failed' : 'succeeded');
  const result = await waiting;
  expect(result.code, result.stderr).toBe(1);
  const ended = JSON.parse(result.stdout) as { id: string; state: string }[];
  expect(ended.map((j) => j.id)).toEqual(ids);
  expect(ended.filter((j) => j.state === 'failed').map((j) => j.id)).toEqual([ids[550]]);
});

it('refuses what is not a job id, an unknown job, and a bad timeout', async () => {
  const notId = await cli(['wait', 'train']);
  expect(notId.code).toBe(2);
  expect(notId.stderr).toContain('"train": not a job id (job-<n>)');
  const unknown = await cli(['wait', 'job-999']);
  expect(unknown.code).toBe(1);
  expect(unknown.stderr).toMatch(/job-999/);
  const timeout = await cli(['wait', 'job-1', '--timeout', 'soon']);
  expect(timeout.code).toBe(2);
  expect(timeout.stderr).toContain('"soon": expected a duration, e.g. 90s, 30m or 2h');
});
