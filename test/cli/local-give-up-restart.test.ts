import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readWorkerExit } from '../../src/cloud/local/worker-exit-record.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { writeShortCounterSpec } from '../helpers/counter-spec.js';
import { killLocalLeftovers, pidAlive, startLocalController, until } from '../helpers/local-controller.js';

/**
 * A local worker whose controller died gives up, checkpointing its task, and exits; the controller started again on
 * the state ends its instance when that worker exited, as after `fleetwise down`: billed for the worker's life, not
 * until the new controller's heartbeat timeout, and its job resumes from the checkpoint rather than being counted as
 * lost capacity. Real processes throughout (`node dist/cli/main.js`, the process executor).
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-give-up-restart-'));
const stateDir = join(scratch, 'state');

beforeAll(() => ensureBuiltCli());
afterAll(() => {
  killLocalLeftovers(stateDir);
  rmSync(scratch, { recursive: true, force: true });
});

interface JobDoc {
  state: string;
  progress: { completed: number };
  instances: { id: string; cloudId?: string }[];
}

describe('a local worker that gave up while no controller ran', () => {
  it('ends its instance when the worker exited, at the next start, as stopped with the controller', async () => {
    const ctl = await startLocalController(stateDir, { args: ['--worker-give-up-seconds', '2'] });
    const spec = writeShortCounterSpec(join(scratch, 'counter.yaml'), {
      countTo: 2000,
      stepSeconds: 0.04,
      checkpointSeconds: 1,
    });
    const submitted = await runCli(['submit', spec, '--json'], ctl.env);
    expect(submitted.code, submitted.stderr).toBe(0);
    const id = (JSON.parse(submitted.stdout) as { id: string }).id;
    const checkpoints = join(stateDir, 'objects', 'checkpoints', id, `${id}.0`);
    const running = await until(
      `${id} to run and checkpoint`,
      async () => {
        const job = (await ctl.api('GET', `/v1/jobs/${id}`)).json as JobDoc;
        return job.state === 'running' && job.progress.completed >= 10 && existsSync(checkpoints)
          ? job
          : undefined;
      },
      40_000,
      ctl.diagnostics,
    );
    const instance = running.instances[0] as JobDoc['instances'][number];
    const record = ctl.instances().find((i) => i.instanceId === instance.cloudId);
    if (record?.pid === undefined) throw new Error(`no worker pid for ${id}\n${ctl.diagnostics()}`);

    // The controller dies; its worker gives up on it and exits.
    ctl.process.kill('SIGKILL');
    await ctl.exited;
    await until('the worker to give up', () => (pidAlive(record.pid as number) ? undefined : true), 30_000);
    const exit = readWorkerExit(record.dir);
    if (exit === undefined) throw new Error(`the worker recorded no exit\n${ctl.diagnostics()}`);
    expect(exit.reason).toBe('gave-up');
    // Some time with nothing running: nobody's cost.
    await new Promise((r) => setTimeout(r, 1500));
    const restartMs = Date.now();

    const again = await startLocalController(stateDir);
    try {
      const closed = await until(
        `${instance.id} to be closed`,
        () => {
          const lines = again.stderr().split('\n');
          return lines.some((l) =>
            l.includes(`instance ${instance.id} terminated when the controller stopped`),
          )
            ? lines
            : undefined;
        },
        20_000,
        again.diagnostics,
      );
      expect(closed.filter((l) => l.includes(`instance ${instance.id} lost`))).toEqual([]);
    } finally {
      again.process.kill('SIGTERM');
      await again.exited;
    }
    // The state's record of the instance, as the cost reports bill it.
    const store = new SqliteStateStore(join(stateDir, 'state.db'));
    const ended = store.getInstance(instance.id);
    store.close();
    expect(ended?.state).toBe('terminated');
    expect(ended?.reason).toBe('terminated when the controller stopped');
    // Billed until its worker exited: before the restart, and no longer than the worker's life.
    const endMs = (ended?.terminatedAtSeconds ?? Number.NaN) * 1000;
    expect(Math.abs(endMs - exit.exitedAtMs)).toBeLessThan(2);
    expect(endMs).toBeLessThan(restartMs);
    const billedSeconds =
      (ended?.terminatedAtSeconds ?? Number.NaN) - (ended?.launchedAtSeconds ?? Number.NaN);
    expect(billedSeconds).toBeGreaterThan(0);
    expect(billedSeconds).toBeLessThanOrEqual((exit.exitedAtMs - record.launchTimeMs) / 1000 + 0.01);
  }, 120_000);
});
