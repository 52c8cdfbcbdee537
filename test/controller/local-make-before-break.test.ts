import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { counterJobBody } from '../helpers/counter-spec.js';
import {
  killLocalLeftovers,
  startLocalController,
  until,
  type StartedController,
} from '../helpers/local-controller.js';

/**
 * Make before break end to end with real processes (the built CLI's local controller, its workers, the counter under
 * the process executor): the counter's instance is drained, and its one instance type boots BOOT_SECONDS late
 * (`localBootSeconds`). With `makeBeforeBreak: true` (the controller's default) the task keeps counting on the
 * drained instance while its new one boots, and checkpoints only then; with it off (the contrast, so the check can
 * fail) it checkpoints at once and the count stands still through the boot.
 */
const BOOT_SECONDS = 6;
const COUNT_TO = 100_000; // never reached: the test ends once the job has resumed on its new instance
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-mbb-'));
const controllers: StartedController[] = [];

afterAll(async () => {
  for (const ctl of controllers) {
    ctl.process.kill('SIGTERM');
    await ctl.exited;
    killLocalLeftovers(ctl.stateDir);
  }
  rmSync(scratch, { recursive: true, force: true });
});

interface JobView {
  state: string;
  progress: { completed: number };
  instances: { id: string }[];
  tasks: { state: string; instanceId?: string }[];
}

/** What the job looked like at one poll, seconds after the drain. */
interface Sample {
  readonly atSeconds: number;
  readonly job: string;
  readonly task: string;
  readonly completed: number;
}

/** Drain the counter's instance once it counts; sample the job until it runs on its new instance. */
async function drainWhileBooting(name: string, makeBeforeBreak: boolean) {
  const catalog = join(scratch, `${name}-catalog.json`);
  writeFileSync(
    catalog,
    JSON.stringify({
      schemaVersion: 1,
      provider: 'aws',
      region: 'us-east-1',
      types: [
        {
          name: 'solo.large',
          family: 'solo',
          gpus: 0,
          vcpus: 2,
          memoryGiB: 4,
          costPerHour: 0.1,
          delays: {
            instantiateSeconds: 0,
            workerStartSeconds: 2,
            workerRegisterSeconds: 1,
            terminateSeconds: 1,
          },
        },
      ],
    }),
  );
  const ctl = await startLocalController(join(scratch, name), {
    config: [
      `catalog: ${catalog}`,
      `localBootSeconds: { solo.large: ${BOOT_SECONDS} }`,
      `makeBeforeBreak: ${makeBeforeBreak}`,
    ],
  });
  controllers.push(ctl);
  const submitted = await ctl.api(
    'POST',
    '/v1/jobs',
    counterJobBody({ countTo: COUNT_TO, checkpointSeconds: 1, checkpointTimeoutSeconds: 5 }),
  );
  expect(submitted.status, submitted.text).toBe(201);
  const id = (submitted.json as { id: string }).id;
  const job = async (): Promise<JobView> => (await ctl.api('GET', `/v1/jobs/${id}`)).json as JobView;
  const before = await until(
    `${name}: the counter to count`,
    async () => {
      const doc = await job();
      return doc.state === 'running' && doc.progress.completed >= 20 ? doc : undefined;
    },
    60_000,
    ctl.diagnostics,
  );
  const source = before.tasks[0]?.instanceId as string;
  const drainedAt = Date.now();
  expect((await ctl.api('POST', `/v1/instances/${source}/drain`)).status).toBe(200);
  const samples: Sample[] = [];
  await until(
    `${name}: the job to run on its new instance`,
    async () => {
      const doc = await job();
      const task = doc.tasks[0];
      samples.push({
        atSeconds: (Date.now() - drainedAt) / 1000,
        job: doc.state,
        task: task?.state ?? 'none',
        completed: doc.progress.completed,
      });
      return doc.state === 'running' && task?.instanceId !== source ? doc : undefined;
    },
    60_000,
    ctl.diagnostics,
  );
  return { before, samples };
}

describe.concurrent('make before break in local mode (real controller, workers and processes)', () => {
  it('with it on, a drained task counts on while its new instance boots, and checkpoints only then', async () => {
    const { before, samples } = await drainWhileBooting('on', true);
    // Moving (the job `migrating`) with its task still running, well into the boot, and counting.
    const late = samples.filter((s) => s.job === 'migrating' && s.task === 'running' && s.atSeconds >= 3);
    expect(late.length, JSON.stringify(samples)).toBeGreaterThan(0);
    expect(Math.max(...late.map((s) => s.completed))).toBeGreaterThan(before.progress.completed + 10);
  }, 120_000);

  it('with it off, the drained task checkpoints at once and the count stands still through the boot', async () => {
    const { samples } = await drainWhileBooting('off', false);
    const late = samples.filter((s) => s.job === 'migrating' && s.task === 'running' && s.atSeconds >= 3);
    expect(late, JSON.stringify(samples)).toEqual([]);
    // The move did last that long (its new instance boots BOOT_SECONDS): the samples cover the boot.
    expect(samples.some((s) => s.atSeconds >= 3 && s.job !== 'running')).toBe(true);
  }, 120_000);
});
