/**
 * The simulated network's noise follows `--seed` whenever the network matters, whether or not `--latency-config` or
 * `--latency-sensitive` is given: a trace whose jobs declare a `network:` is seeded as the flags would seed it.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { executeRun, type RunRequest } from '../../src/sim/run-request.js';
import type { RunResult } from '../../src/world/run-result.js';

const dir = mkdtempSync(join(tmpdir(), 'fleetwise-network-seed-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** One memcached job of two tasks: its time-average P_job is the noise it was dealt. */
const tracePath = join(dir, 'memcached.json');
const task = (name: string) => ({ name, workload: 'resnet18', demand: { any: [0, 2, 4] } });
writeFileSync(
  tracePath,
  JSON.stringify({
    format: 'fleetwise-trace/v1',
    name: 'memcached',
    jobs: [
      {
        id: 'job-1',
        name: 'r',
        workload: 'resnet18',
        arrivalSeconds: 0,
        durationSeconds: 600,
        tasks: [task('a'), task('b')],
        network: { sensitivity: 'memcached', root: 'a', gibPerHour: 10 },
      },
    ],
  }),
);

const run = (seed: number, network?: RunRequest['network']): RunResult =>
  executeRun({
    scheduler: 'eva',
    trace: { path: tracePath, format: 'fleetwise', seed },
    ...(network === undefined ? {} : { network }),
  });

/** What a run measured, without its wall-clock time. */
const measured = (r: RunResult) => ({
  summary: { ...r.summary, wallSeconds: 0 },
  network: r.network,
  jobs: r.jobs,
  costBreakdown: r.costBreakdown,
});

describe('the network of a trace whose jobs declare one', () => {
  it('draws its noise from --seed without --latency-config, and a config of the defaults changes nothing', () => {
    const seeds = [0, 5, 9];
    const bare = seeds.map((seed) => run(seed));
    const performances = bare.map((r) => r.network?.appPerformanceMean);
    for (const p of performances) expect(p).toBeGreaterThan(0);
    expect(new Set(performances).size).toBe(seeds.length);
    seeds.forEach((seed, i) => {
      expect(measured(run(seed, { zones: 3 })), `seed ${seed}`).toEqual(measured(bare[i] as RunResult));
    });
  });
});
