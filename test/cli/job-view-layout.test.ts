import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { keyValue, registerJob } from '../../src/cli/commands/job.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import {
  ADMIN_TOKEN,
  fakeWithTeams,
  VISION_TOKEN,
  type FakeControllerService,
} from '../controller/api-fake-service.js';

/** `fleetwise job` in-process against a real API server on a socket, as client.test.ts runs the client commands. */

let server: ApiServer;
let service: FakeControllerService;

const SPEC: JobSpec = {
  name: 'resnet',
  team: 'vision',
  tasks: [
    {
      name: 'trainer',
      image: 'r:1',
      env: {},
      demand: { any: [1, 4, 24] },
      replicas: 1,
      shmSizeGiB: 1,
      workload: 'resnet',
    },
  ],
  checkpoint: { signal: 'SIGTERM', timeoutSeconds: 60 },
  totalIterations: 1000,
  queue: {},
};

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

  it('pads a key to the value column and leaves a one-line value as it is', () => {
    expect(keyValue('warning', 'runs on spot')).toBe('warning    runs on spot');
    expect(keyValue('basis', 'a\nb')).toBe('basis      a\n           b');
  });
});
