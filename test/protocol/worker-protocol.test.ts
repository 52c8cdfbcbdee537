import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { CHECKPOINT_SIGNALS as JOB_SPEC_SIGNALS } from '../../src/controller/job-spec/spec.js';
import {
  CHECKPOINT_SIGNALS,
  desiredTaskSchema,
  heartbeatRequestSchema,
  WORKER_ROUTES,
} from '../../src/protocol/worker-protocol.js';

describe('worker protocol', () => {
  it('accepts every checkpoint signal a job spec may name, and no other', () => {
    expect([...CHECKPOINT_SIGNALS]).toEqual([...JOB_SPEC_SIGNALS]);
  });

  it('routes both calls under /v1/workers/', () => {
    expect(Object.values(WORKER_ROUTES)).toEqual(['/v1/workers/register', '/v1/workers/heartbeat']);
  });

  it('refuses a heartbeat naming a task id that is not a task id', () => {
    expect(heartbeatRequestSchema.safeParse({ tasks: [{ taskId: '../x', state: 'running' }] }).success).toBe(
      false,
    );
    expect(
      heartbeatRequestSchema.safeParse({ tasks: [{ taskId: 'job-7.0', state: 'running' }] }).success,
    ).toBe(true);
  });

  it('refuses a desired task with a checkpoint signal outside the list', () => {
    const desired = {
      taskId: 'job-7.0',
      jobId: 'job-7',
      action: 'run',
      restore: false,
      launch: {
        command: ['true'],
        env: {},
        vcpus: 1,
        memoryGiB: 1,
        gpus: 0,
        shmSizeGiB: 0,
      },
      checkpoint: { signal: 'SIGTERM', timeoutSeconds: 30 },
    };
    expect(desiredTaskSchema.safeParse(desired).success).toBe(true);
    expect(
      desiredTaskSchema.safeParse({ ...desired, checkpoint: { signal: 'SIGKILL', timeoutSeconds: 30 } })
        .success,
    ).toBe(false);
  });
});

describe('protocol/', () => {
  it('imports nothing but zod (and its own files), so the worker, the controller and the CLI can all depend on it', () => {
    const root = join(PROJECT_ROOT, 'src', 'protocol');
    const files = readdirSync(root).filter((f) => f.endsWith('.ts'));
    const siblings = files.map((f) => `./${f.replace(/\.ts$/, '.js')}`);
    for (const file of files)
      for (const [, spec] of readFileSync(join(root, file), 'utf8').matchAll(/from '([^']+)'/g))
        expect(['zod', ...siblings], `${file} imports ${spec as string}`).toContain(spec);
  });
});
