import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import { executeControllerRun } from '../../src/sim/controller-runtime/execute.js';
import { executeRun, type RunRequest } from '../../src/sim/run-request.js';
import type { RunResult } from '../../src/world/run-result.js';

/**
 * A class's `maxShare` under plan-cost admission (a controller config's default) with placement between rounds, in
 * both runtimes. Ten one-task jobs under a $0.40/h cap: two large ones (1,500 s: jobs 1 and 10), eight small ones
 * (600 s), in two classes of weight 0.5, the large one with `maxShare: 0.5`. When job 1 ends, its instance is empty and
 * still paid for while job 10 waits, its class now holding nothing. Counting that idle instance, plan-cost sized job 10
 * over its class's ceiling, so the room went to the next small job, the small class already over its share; a round
 * later the large class, short of its guarantee, preempted it. Judged on what the class's jobs hold, job 10 is within
 * the ceiling and takes the room: the run is the run without a ceiling.
 */
const dir = mkdtempSync(join(tmpdir(), 'fleetwise-class-ceiling-paid-room-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function writeTrace(): string {
  const task = {
    name: 't',
    demand: { any: [0, 4, 4] },
    shm_size: 0,
    image_id: 1,
    fetch_delay: 1,
    build_image_delay: 1,
    kill_delay: 1,
    upload_delay: 1,
  };
  const jobs = Object.fromEntries(
    Array.from({ length: 10 }, (_, i) => {
      const large = i === 0 || i === 9;
      const seconds = large ? 1500 : 600;
      const job = {
        name: `resnet18[${i}]`,
        arrival_time: i === 9 ? 2.09 : i === 0 ? 0 : 1 + i / 100,
        duration: seconds,
        total_iters: seconds,
        full_throughput: 1,
        init_delay: 5,
        tasks: { '0': task },
      };
      return [String(i), job];
    }),
  );
  const path = join(dir, 'trace.json');
  writeFileSync(path, JSON.stringify(jobs));
  return path;
}

function writeConfig(name: string, largeClass: string): string {
  const path = join(dir, `${name}.yaml`);
  writeFileSync(
    path,
    [
      'roundSeconds: 60',
      'caps:',
      '  maxCostPerHour: 0.4',
      'queue:',
      '  classifyBy: size',
      '  classes:',
      '    - { id: small, weight: 0.5, maxSizeSeconds: 1000, ordering: fifo }',
      `    - ${largeClass}`,
      '',
    ].join('\n'),
  );
  return path;
}

const trace = writeTrace();
const ceiling = writeConfig('ceiling', '{ id: large, weight: 0.5, ordering: fifo, maxShare: 0.5 }');
const noCeiling = writeConfig('no-ceiling', '{ id: large, weight: 0.5, ordering: fifo }');

const request = (config: string, runtime: 'engine' | 'controller'): RunRequest =>
  simulationPlan(
    parseSimulateArgs(
      [
        ...['--trace', trace, '--format', 'eva', '--config', config, '--scheduler', 'eva'],
        ...['--runtime', runtime, '--job-ids', 'controller', '--no-predict'],
      ],
      'test',
    ),
  ).requests[0] as RunRequest;

const run = async (config: string, runtime: 'engine' | 'controller'): Promise<RunResult> =>
  runtime === 'engine'
    ? executeRun(request(config, runtime))
    : executeControllerRun(request(config, runtime));

const timeline = (r: RunResult) => r.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds, j.migrations]);

describe("a class's ceiling on the room a job's end leaves paid for", () => {
  for (const runtime of ['engine', 'controller'] as const) {
    it(`gives it to the large job under its share, nobody preempted (${runtime} runtime)`, async () => {
      const capped = await run(ceiling, runtime);
      const start = (id: string) => capped.jobs.find((j) => j.id === id)?.startSeconds ?? Infinity;
      const end = (id: string) => capped.jobs.find((j) => j.id === id)?.endSeconds ?? Infinity;
      expect(capped.starts?.placedBetweenRounds).toBeGreaterThan(0);
      expect(capped.queue?.preemptions).toBe(0);
      expect(capped.jobs.every((j) => j.migrations === 0 && j.endSeconds !== null)).toBe(true);
      // Job 10 starts on the room job 1 left, ahead of the small job that waited since before it arrived.
      expect(start('job-10')).toBeGreaterThanOrEqual(end('job-1'));
      expect(start('job-10')).toBeLessThan(start('job-5'));
      // The ceiling, never reached here, changes nothing: the run is the run without it.
      const free = await run(noCeiling, runtime);
      expect(free.queue?.preemptions).toBe(0);
      expect(timeline(capped)).toEqual(timeline(free));
      expect(capped.summary.totalCost).toBeCloseTo(free.summary.totalCost, 9);
    });
  }
});
