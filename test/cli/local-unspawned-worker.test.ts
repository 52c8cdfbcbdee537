import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalInstanceFile } from '../../src/cloud/local/instance-file.js';
import { isWorkerOf } from '../../src/cloud/local/worker-spawner.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { writeShortCounterSpec } from '../helpers/counter-spec.js';
import { killProcessGroups } from '../helpers/processes-under.js';
import { killLocalLeftovers, startLocalController, until } from '../helpers/local-controller.js';

/**
 * A local controller killed between recording an instance and spawning its worker leaves a record without a worker.
 * Started again, it adopts the instance by its launch token (the launch is not sent again) and must start the worker
 * itself: the job then runs on that instance within seconds, not after the 60 s registration timeout and a
 * replacement billed for nothing. The crash is a real SIGKILL right after the launch (FLEETWISE_CRASH_AT), its worker
 * killed and its pid taken off the record: what a kill a moment earlier leaves.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-unspawned-'));
const stateDir = join(scratch, 'state');
const longDownDir = join(scratch, 'state-long-down');

beforeAll(() => ensureBuiltCli());
afterAll(() => {
  killLocalLeftovers(stateDir);
  killLocalLeftovers(longDownDir);
  rmSync(scratch, { recursive: true, force: true });
});

interface JobDoc {
  state: string;
  instances: { id: string; cloudId?: string }[];
}

describe('a local instance whose worker a crashed controller never spawned', () => {
  it('gets its worker when the controller starts again, and runs its job', async () => {
    const ctl = await startLocalController(stateDir, { env: { FLEETWISE_CRASH_AT: 'launch:after-call' } });
    const spec = writeShortCounterSpec(join(scratch, 'counter.yaml'), {
      countTo: 2000,
      stepSeconds: 0.04,
      checkpointSeconds: 1,
    });
    const submitted = await runCli(['submit', spec, '--json'], ctl.env);
    expect(submitted.code, submitted.stderr).toBe(0);
    const id = (JSON.parse(submitted.stdout) as { id: string }).id;
    await ctl.exited;
    const file = new LocalInstanceFile(join(stateDir, 'local-instances.json'));
    const [record] = file.all();
    if (record?.pid === undefined) throw new Error(`no instance launched\n${ctl.diagnostics()}`);
    // As if killed before the spawn: no worker, no pid.
    killProcessGroups([record.pid]);
    await until('the first worker to die', () =>
      isWorkerOf(record.pid as number, record.instanceId) ? undefined : true,
    );
    const { pid: _dropped, ...withoutPid } = record;
    file.write([withoutPid]);
    const again = await startLocalController(stateDir);
    try {
      const job = await until(
        `${id} to run on ${record.instanceId}`,
        async () => {
          const doc = (await again.api('GET', `/v1/jobs/${id}`)).json as JobDoc;
          return doc.state === 'running' ? doc : undefined;
        },
        30_000,
        again.diagnostics,
      );
      // Within the wait above, well short of the registration timeout, and on the instance the crashed controller launched.
      expect(job.instances.map((i) => i.cloudId)).toEqual([record.instanceId]);
      expect(again.stderr()).toContain(`started the workers of ${record.instanceId}`);
      expect(again.stderr()).not.toMatch(/did not register/);
      const pid = file.all().find((i) => i.instanceId === record.instanceId)?.pid;
      expect(pid).toBeDefined();
      expect(isWorkerOf(pid as number, record.instanceId)).toBe(true);
    } finally {
      again.process.kill('SIGTERM');
      await again.exited;
    }
  }, 120_000);

  it('keeps it when the controller was down longer than the registration timeout', async () => {
    // An instance the store records running whose worker never registered nor ran (its pid, registration and
    // credential taken off), all dated two minutes back: longer than local mode's 60 s registration timeout, which
    // counts from the restart.
    const ctl = await startLocalController(longDownDir);
    const spec = writeShortCounterSpec(join(scratch, 'counter-long.yaml'), {
      countTo: 2000,
      stepSeconds: 0.04,
      checkpointSeconds: 1,
    });
    const submitted = await runCli(['submit', spec, '--json'], ctl.env);
    expect(submitted.code, submitted.stderr).toBe(0);
    const id = (JSON.parse(submitted.stdout) as { id: string }).id;
    await until(
      `${id} to run`,
      async () =>
        ((await ctl.api('GET', `/v1/jobs/${id}`)).json as JobDoc).state === 'running' ? true : undefined,
      30_000,
      ctl.diagnostics,
    );
    ctl.process.kill('SIGKILL');
    await ctl.exited;
    const file = new LocalInstanceFile(join(longDownDir, 'local-instances.json'));
    const [record] = file.all();
    if (record?.pid === undefined) throw new Error(`no instance launched\n${ctl.diagnostics()}`);
    killProcessGroups([record.pid]);
    await until('the first worker to die', () =>
      isWorkerOf(record.pid as number, record.instanceId) ? undefined : true,
    );
    const { pid: _dropped, ...withoutPid } = record;
    file.write([withoutPid]);
    rmSync(join(record.dir, 'worker-credential.json'));
    const db = new Database(join(longDownDir, 'state.db'));
    try {
      const dated = db
        .prepare(
          'UPDATE instances SET requested_at = requested_at - 120, launched_at = launched_at - 120, ' +
            'running_at = running_at - 120, updated_at = updated_at - 120, worker_token_hash = NULL ' +
            'WHERE cloud_id = ?',
        )
        .run(record.instanceId);
      expect(dated.changes).toBe(1);
    } finally {
      db.close();
    }

    const again = await startLocalController(longDownDir);
    try {
      await until(
        `the respawned worker of ${record.instanceId} to register`,
        () => (/worker registered for/.test(again.stderr()) ? true : undefined),
        30_000,
        again.diagnostics,
      );
      // A round or two after: the registration check ran on it meanwhile.
      await new Promise((resolve) => setTimeout(resolve, 2500));
      expect(again.stderr()).toContain(`started the workers of ${record.instanceId}`);
      expect(again.stderr()).not.toMatch(/did not register/);
      expect(file.all().find((i) => i.instanceId === record.instanceId)?.state).toBe('running');
    } finally {
      again.process.kill('SIGTERM');
      await again.exited;
    }
  }, 120_000);
});
