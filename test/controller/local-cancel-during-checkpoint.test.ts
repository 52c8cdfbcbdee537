import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { ensureBuiltCli } from '../helpers/built-cli.js';
import {
  killLocalLeftovers,
  pidAlive,
  startLocalController,
  taskPid,
  until,
  type StartedController,
} from '../helpers/local-controller.js';

/**
 * A job cancelled while a move checkpoints its task off a drained instance, end to end with real processes (the built
 * CLI's local controller, its workers, the counter under the process executor), the counter ignoring SIGTERM: the
 * task is killed at once, not when the job's checkpoint timeout runs out, and the job's cost stops with it.
 */
const CHECKPOINT_TIMEOUT_SECONDS = 60;
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-cancel-ckpt-'));
let ctl: StartedController | undefined;

beforeAll(() => ensureBuiltCli());

afterAll(async () => {
  if (ctl !== undefined) {
    ctl.process.kill('SIGTERM');
    await ctl.exited;
    killLocalLeftovers(ctl.stateDir);
  }
  rmSync(scratch, { recursive: true, force: true });
});

interface JobView {
  state: string;
  progress: { completed: number };
  instances: { id: string; cloudId?: string }[];
  tasks: { id: string; state: string; instanceId?: string }[];
}

/** The counter, ignoring SIGTERM: only a kill ends it before it counts to the end. */
function stubbornCounter(): Record<string, unknown> {
  return {
    name: 'stubborn',
    team: 'examples',
    tasks: [
      {
        name: 'counter',
        command: ['sh', join(PROJECT_ROOT, 'examples', 'counter', 'counter.sh')],
        env: { COUNT_TO: '100000', STEP_SECONDS: '0.05', CHECKPOINT_SECONDS: '1', IGNORE_TERM: '1' },
        demand: { any: [0, 0.25, 0.25] },
        shmSizeGiB: 0.0625,
      },
    ],
    checkpoint: { signal: 'SIGTERM', timeoutSeconds: CHECKPOINT_TIMEOUT_SECONDS },
  };
}

describe('a cancel during a move’s checkpoint (real controller, workers and processes)', () => {
  it('kills the task that ignores the signal at once, and its job’s cost stops growing', async () => {
    const catalog = join(scratch, 'catalog.json');
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
    const started = await startLocalController(join(scratch, 'state'), {
      executor: 'process',
      config: [`catalog: ${catalog}`],
    });
    ctl = started;
    const submitted = await started.api('POST', '/v1/jobs', stubbornCounter());
    expect(submitted.status, submitted.text).toBe(201);
    const id = (submitted.json as { id: string }).id;
    const taskId = `${id}.0`;
    const job = async (): Promise<JobView> => (await started.api('GET', `/v1/jobs/${id}`)).json as JobView;
    const counting = await until(
      'the counter to count',
      async () => {
        const doc = await job();
        return doc.state === 'running' && doc.progress.completed >= 20 ? doc : undefined;
      },
      60_000,
      started.diagnostics,
    );
    const source = counting.tasks[0]?.instanceId as string;
    const cloudId = counting.instances.find((i) => i.id === source)?.cloudId;
    const dir = started.instances().find((i) => i.instanceId === cloudId)?.dir;
    if (dir === undefined) throw new Error(`no local instance for ${source}\n${started.diagnostics()}`);
    const pid = taskPid(dir, taskId);
    if (pid === undefined) throw new Error(`no pid for ${taskId}\n${started.diagnostics()}`);

    expect((await started.api('POST', `/v1/instances/${source}/drain`)).status).toBe(200);
    // Its new instance is up: the move's checkpoint-stop signalled the task, which counts on regardless.
    await until(
      'the task checkpointing',
      async () => ((await job()).tasks[0]?.state === 'checkpointing' ? true : undefined),
      60_000,
      started.diagnostics,
    );
    expect(pidAlive(pid)).toBe(true);

    const cancelled = await started.api('POST', `/v1/jobs/${id}/cancel`);
    expect(cancelled.status, cancelled.text).toBe(200);
    // Half the checkpoint timeout is far more than a kill takes; before, the task ran on until the timeout.
    const withinMs = (CHECKPOINT_TIMEOUT_SECONDS * 1000) / 2;
    const cancelledAt = Date.now();
    await until(
      'the task process gone',
      () => (pidAlive(pid) ? undefined : true),
      withinMs,
      started.diagnostics,
    );
    await until(
      'the task stopped',
      async () => ((await job()).tasks[0]?.state === 'stopped' ? true : undefined),
      Math.max(1, withinMs - (Date.now() - cancelledAt)),
      started.diagnostics,
    );
    const cost = async (): Promise<number> => {
      const report = (await started.api('GET', '/v1/costs')).json as {
        byJob: { id: string; cost: number }[];
      };
      return report.byJob.find((j) => j.id === id)?.cost ?? Number.NaN;
    };
    const stoppedCost = await cost();
    expect(stoppedCost).toBeGreaterThan(0);
    // Billed no more once stopped: the cost two heartbeats and more later is the same.
    await new Promise((r) => setTimeout(r, 3000));
    expect(await cost()).toBeCloseTo(stoppedCost, 9);
    expect((await job()).state).toBe('cancelled');
  }, 240_000);
});
