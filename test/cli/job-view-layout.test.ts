import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  attemptFailureText,
  keyValue,
  registerJob,
  restartLines,
  restartsOf,
} from '../../src/cli/commands/job.js';
import { formatTime } from '../../src/cli/table.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import {
  ADMIN_TOKEN,
  type FakeControllerService,
  fakeWithTeams,
  RESNET_SPEC,
  VISION_TOKEN,
} from '../controller/api-fake-service.js';

/** `fleetwise job` in-process against a real API server on a socket, as client.test.ts runs the client commands. */

let server: ApiServer;
let service: FakeControllerService;

const SPEC: JobSpec = RESNET_SPEC;

async function jobView(id: string): Promise<string> {
  const program = new Command('fleetwise').exitOverride();
  registerJob(program);
  let stdout = '';
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  try {
    await program.parseAsync([
      'node',
      'fleetwise',
      'job',
      id,
      '--server',
      server.url,
      '--token',
      VISION_TOKEN,
    ]);
  } finally {
    spy.mockRestore();
  }
  return stdout;
}

beforeAll(async () => {
  service = fakeWithTeams();
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
});

afterAll(async () => {
  await server.close();
});

describe('fleetwise job', () => {
  it('indents the further lines of a failure reason under the value column', async () => {
    const job = service.submit(SPEC, 'vision');
    service.store.setJobState(job.id, 'failed', 'task exited 1:\nTraceback (most recent call last):\n  boom');
    const view = await jobView(job.id);
    expect(view).toContain(
      'state      failed (task exited 1:\n' +
        '           Traceback (most recent call last):\n' +
        '             boom)\n' +
        'progress   0/1000 iterations',
    );
    // Every line of the key/value block starts with a key or with the value column's indent.
    const block = view.slice(0, view.indexOf('\n\n')).split('\n');
    for (const line of block) expect(line, line).toMatch(/^(\S.{9} \S|\s{11}|attempt \d)/);
  });

  it('shows no progress count for a job that reports no iterations and declares none, as `fleetwise jobs` does', async () => {
    const job = service.submit({ ...SPEC, totalIterations: undefined }, 'vision');
    for (const state of ['starting', 'running', 'succeeded'] as const)
      service.store.setJobState(job.id, state);
    const view = await jobView(job.id);
    expect(view).toMatch(/^progress {3}-$/m);
    // One that reports iterations shows them.
    service.store.recordJobProgress(job.id, 42);
    expect(await jobView(job.id)).toMatch(/^progress {3}42 iterations$/m);
  });

  it('names the restarts its instances or workers caused, the newest three, in a line of its own', () => {
    const causes = ['inst-1 was lost: vanished from EC2', 'inst-2 was lost: worker stopped heartbeating'];
    const restarts = causes.map((cause, i) => ({ atSeconds: 1000 + i, cause }));
    expect(restartLines(restartsOf({ id: 'job-1', restarts }))).toEqual([
      'restarts   2 (inst-1 was lost: vanished from EC2; inst-2 was lost: worker stopped heartbeating)',
    ]);
    const many = ['a', 'b', 'c', 'd', 'e'].map((cause, i) => ({ atSeconds: i, cause }));
    expect(restartLines(many)).toEqual(['restarts   5 (c; d; e; 2 earlier)']);
    // None, or a controller that does not say: no line.
    expect(restartLines(restartsOf({ id: 'job-1', restarts: [] }))).toEqual([]);
    expect(restartLines(restartsOf({ id: 'job-1' }))).toEqual([]);
  });

  it('says an earlier attempt’s exit code once, under its header, with the reason’s last output', async () => {
    const job = service.submit({ ...SPEC, retryStrategy: { attempts: 3 } }, 'vision');
    for (const state of ['starting', 'running'] as const) service.store.setJobState(job.id, state);
    service.store.retryJob(
      job.id,
      { taskId: `${job.id}.0`, exitCode: 7, reason: 'exit code 7; last output:\nKilled' },
      'attempt 1 of 3 failed',
    );
    const view = await jobView(job.id);
    expect(view.match(/exit code 7/g)).toHaveLength(1);
    expect(view).toMatch(
      new RegExp(
        `^attempt 1  failed .+: task ${job.id}\\.0\\n {11}exit code 7; last output:\\n {11}Killed$`,
        'm',
      ),
    );
  });

  it('keeps the exit code in an attempt’s header when its reason does not name it', () => {
    const at = 1_700_000_000;
    const failure = { attempt: 2, atSeconds: at, taskId: 'job-3.1', exitCode: 7 };
    expect(attemptFailureText({ ...failure, reason: 'its start failed' })).toBe(
      `attempt 2  failed ${formatTime(at)}: task job-3.1, exit code 7\n           its start failed`,
    );
    // Another code that begins with the same digits is not this one.
    expect(attemptFailureText({ ...failure, reason: 'exit code 70' })).toBe(
      `attempt 2  failed ${formatTime(at)}: task job-3.1, exit code 7\n           exit code 70`,
    );
    expect(
      attemptFailureText({ ...failure, reason: 'killed: out of memory (limit 2 GiB), exit code 7' }),
    ).toBe(
      `attempt 2  failed ${formatTime(at)}: task job-3.1\n           killed: out of memory (limit 2 GiB), exit code 7`,
    );
    expect(attemptFailureText({ attempt: 2, atSeconds: at, taskId: 'job-3.1', reason: 'vanished' })).toBe(
      `attempt 2  failed ${formatTime(at)}: task job-3.1\n           vanished`,
    );
  });

  it('pads a key to the value column and leaves a one-line value as it is', () => {
    expect(keyValue('warning', 'runs on spot')).toBe('warning    runs on spot');
    expect(keyValue('basis', 'a\nb')).toBe('basis      a\n           b');
  });
});
