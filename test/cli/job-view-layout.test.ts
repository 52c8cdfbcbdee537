import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { keyValue, registerJob, restartLines, restartsOf } from '../../src/cli/commands/job.js';
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

  it('pads a key to the value column and leaves a one-line value as it is', () => {
    expect(keyValue('warning', 'runs on spot')).toBe('warning    runs on spot');
    expect(keyValue('basis', 'a\nb')).toBe('basis      a\n           b');
  });
});
