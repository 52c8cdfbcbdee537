/**
 * A simulated network whose zones share no spot pool with the catalog would have every run buy on demand with spot on
 * (launches land in the network's zones only): a run refuses it, naming the zones, for Eva and the baselines alike.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/core/validation.js';
import { executeRun, type RunRequest } from '../../src/sim/run-request.js';

const dir = mkdtempSync(join(tmpdir(), 'fleetwise-network-spot-zones-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const tracePath = join(dir, 'one.json');
writeFileSync(
  tracePath,
  JSON.stringify({
    format: 'fleetwise-trace/v1',
    name: 'one',
    jobs: [
      {
        id: 'job-1',
        name: 'r',
        workload: 'resnet18',
        arrivalSeconds: 0,
        durationSeconds: 600,
        tasks: [{ name: 'a', workload: 'resnet18', demand: { any: [0, 2, 4] } }],
      },
    ],
  }),
);

const run = (scheduler: RunRequest['scheduler'], zones: readonly string[]) =>
  executeRun({
    scheduler,
    trace: { path: tracePath, format: 'fleetwise', seed: 1 },
    network: { zones: [...zones] },
    spot: {},
  });

describe('spot on a simulated network', () => {
  it('is refused when none of its zones has a spot pool of the catalog, whichever the scheduler', () => {
    for (const scheduler of ['eva', 'skypilot-spot'] as const) {
      const error = (() => {
        try {
          run(scheduler, ['us-east-1d', 'us-east-1e']);
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(error, scheduler).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).message).toBe(
        "--latency-config: zones: us-east-1d, us-east-1e have no spot pool (the catalog's spot pools are in " +
          'us-east-1a, us-east-1b, us-east-1c): with --spot on, no run could buy spot; name a zone with one',
      );
    }
  });

  it('runs when one of its zones has a pool', () => {
    const result = run('skypilot-spot', ['us-east-1a', 'us-east-1d']);
    expect(result.summary.jobs).toBe(1);
    expect(result.jobs[0]?.endSeconds).not.toBeNull();
  });
});
