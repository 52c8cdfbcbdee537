import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { CHECKPOINT_SIGNALS as JOB_SPEC_SIGNALS } from '../../src/controller/job-spec/spec.js';
import {
  CHECKPOINT_SIGNALS,
  desiredTaskSchema,
  heartbeatRequestSchema,
  heartbeatResponseSchema,
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

  describe('round trips in the heartbeat', () => {
    const rtt = {
      peerInstanceId: 'inst-2',
      maxMicroseconds: 5200,
      p99Microseconds: 5100,
      samples: 6,
      failures: 0,
      windowSeconds: 60,
    };
    const beat = (network: unknown): unknown => ({ tasks: [], network });
    /** The issues' paths (dotted) of a refused heartbeat. */
    const refused = (network: unknown): string[] => {
      const parsed = heartbeatRequestSchema.safeParse(beat(network));
      return parsed.success ? [] : parsed.error.issues.map((i) => i.path.join('.'));
    };

    it('accepts a probe endpoint with measured peers, an unreached peer, and a heartbeat without any', () => {
      expect(heartbeatRequestSchema.safeParse(beat({ probe: { port: 7071 }, rtts: [rtt] })).success).toBe(
        true,
      );
      expect(
        heartbeatRequestSchema.safeParse(
          beat({
            probe: { host: '10.0.3.7', port: 7071 },
            rtts: [{ peerInstanceId: 'inst-3', samples: 0, failures: 6, windowSeconds: 60 }],
          }),
        ).success,
      ).toBe(true);
      expect(heartbeatRequestSchema.safeParse({ tasks: [] }).success).toBe(true);
      expect(heartbeatRequestSchema.parse(beat({ probe: { host: 'fe80::1', port: 1 } }))).toMatchObject({
        network: { rtts: [] },
      });
    });

    it.each<[string, unknown, string]>([
      [
        'a p99 above the max',
        { rtts: [{ ...rtt, p99Microseconds: 6000 }] },
        'network.rtts.0.p99Microseconds',
      ],
      [
        'a negative round trip',
        { rtts: [{ ...rtt, maxMicroseconds: -1, p99Microseconds: -2 }] },
        'network.rtts.0.maxMicroseconds',
      ],
      [
        'a round trip over a minute',
        { rtts: [{ ...rtt, maxMicroseconds: 61e6 }] },
        'network.rtts.0.maxMicroseconds',
      ],
      [
        'samples without figures',
        { rtts: [{ ...rtt, maxMicroseconds: undefined }] },
        'network.rtts.0.maxMicroseconds',
      ],
      ['figures without samples', { rtts: [{ ...rtt, samples: 0 }] }, 'network.rtts.0.samples'],
      ['fractional samples', { rtts: [{ ...rtt, samples: 1.5 }] }, 'network.rtts.0.samples'],
      ['a window over an hour', { rtts: [{ ...rtt, windowSeconds: 7200 }] }, 'network.rtts.0.windowSeconds'],
      [
        'a peer that is not an instance id',
        { rtts: [{ ...rtt, peerInstanceId: '../inst' }] },
        'network.rtts.0.peerInstanceId',
      ],
      ['an unknown field', { rtts: [{ ...rtt, mean: 3 }] }, 'network.rtts.0'],
      ['port 0', { probe: { port: 0 } }, 'network.probe.port'],
      ['port 70000', { probe: { port: 70000 } }, 'network.probe.port'],
      ['a host with a space', { probe: { host: 'a b', port: 7071 } }, 'network.probe.host'],
      ['257 peers', { rtts: Array(257).fill(rtt) }, 'network.rtts'],
    ])('refuses %s, naming the field', (_label, network, path) => {
      expect(refused(network)).toContain(path);
    });

    it('names the peers to probe in the answer, optionally (an older controller sends none)', () => {
      expect(heartbeatResponseSchema.safeParse({ tasks: [] }).success).toBe(true);
      const peers = [{ instanceId: 'inst-2', host: '10.0.3.8', port: 7071 }];
      expect(heartbeatResponseSchema.parse({ tasks: [], peers }).peers).toEqual(peers);
      expect(
        heartbeatResponseSchema.safeParse({ tasks: [], peers: [{ ...peers[0], port: 0 }] }).success,
      ).toBe(false);
    });
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
  it('imports nothing but zod, node:crypto and its own files, so the worker, the controller and the CLI can all depend on it', () => {
    const root = join(PROJECT_ROOT, 'src', 'protocol');
    const files = readdirSync(root).filter((f) => f.endsWith('.ts'));
    const siblings = files.map((f) => `./${f.replace(/\.ts$/, '.js')}`);
    for (const file of files)
      for (const [, spec] of readFileSync(join(root, file), 'utf8').matchAll(/from '([^']+)'/g))
        expect(['zod', 'node:crypto', ...siblings], `${file} imports ${spec as string}`).toContain(spec);
  });
});
