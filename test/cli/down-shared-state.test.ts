import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sharedControllers } from '../../src/cli/state-dir-lock.js';
import { readLocalInstances } from '../../src/cloud/local/instance-file.js';
import { JOB_CAPACITY_LOST_EVENT } from '../../src/controller/snapshot.js';
import { PostgresStateStore } from '../../src/controller/state/postgres-state-store.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { writeShortCounterSpec } from '../helpers/counter-spec.js';
import {
  killLocalLeftovers,
  pidAlive,
  spawnLocalController,
  startLocalController,
  until,
  type StartedController,
} from '../helpers/local-controller.js';
import { describeWithPostgres } from '../helpers/postgres.js';

/**
 * Local-mode controllers sharing a PostgreSQL state (`--state postgres://…`) on one state directory, through the real
 * CLI: each records itself there, so `fleetwise down` stops the active one and the standby before the workers (which
 * they would otherwise launch again), and the next start takes those workers for stopped with the controller, not
 * lost; and each warns that a local-directory object store is not shared.
 */

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-down-shared-'));
const started: StartedController[] = [];
const stateDirs: string[] = [];

beforeAll(() => ensureBuiltCli(), 300_000);

afterAll(async () => {
  for (const c of started)
    if (c.process.exitCode === null && c.process.signalCode === null) {
      c.process.kill('SIGKILL');
      await c.exited;
    }
  for (const dir of stateDirs) killLocalLeftovers(dir);
  rmSync(scratch, { recursive: true, force: true });
});

function newStateDir(name: string): string {
  const dir = join(scratch, name);
  stateDirs.push(dir);
  return dir;
}

describeWithPostgres('controllers sharing a PostgreSQL state', (pg) => {
  it('fleetwise down stops every controller on the state directory, then the workers', async () => {
    const stateDir = newStateDir('down');
    const url = pg.server.createDatabase();
    const args = ['--state', url];
    const active = await startLocalController(stateDir, { args });
    started.push(active);
    const standby = await spawnLocalController(stateDir, { args });
    started.push(standby);
    await until(
      'the standby',
      () => (standby.stdout().includes('standby on') ? true : undefined),
      60_000,
      () => standby.diagnostics(),
    );
    const activePid = active.process.pid as number;
    const standbyPid = standby.process.pid as number;
    expect(sharedControllers(stateDir).sort()).toEqual([activePid, standbyPid].sort());

    const spec = writeShortCounterSpec(join(scratch, 'counter.yaml'), {
      countTo: 3000,
      stepSeconds: 0.04,
      checkpointSeconds: 1,
    });
    const submitted = await runCli(['submit', spec, '--json'], active.env);
    expect(submitted.code, submitted.stderr).toBe(0);
    const worker = await until(
      'a worker to run',
      () => active.instances().find((i) => i.state === 'running' && i.pid !== undefined),
      60_000,
      () => active.diagnostics(),
    );

    const down = await runCli(['down', '--state-dir', stateDir, '--grace-seconds', '20']);
    expect(down.code, down.stderr).toBe(0);
    for (const pid of [activePid, standbyPid])
      expect(down.stdout).toMatch(new RegExp(`stopping the controller \\(pid ${pid}\\) sharing the state`));
    expect(down.stdout).toMatch(/worker local-[0-9a-f]+ \(pid \d+\): /);
    // Both controllers are gone before the workers go: none is left to launch them again.
    expect(pidAlive(activePid)).toBe(false);
    expect(pidAlive(standbyPid)).toBe(false);
    expect(pidAlive(worker.pid as number)).toBe(false);
    expect(active.instances().every((i) => i.state === 'terminated')).toBe(true);
    // The active controller removed its record as it stopped; the standby's is stale, and ignored.
    expect(existsSync(join(stateDir, `controller-${activePid}.pid`))).toBe(false);
    expect(sharedControllers(stateDir)).toEqual([]);

    const twice = await runCli(['down', '--state-dir', stateDir]);
    expect(twice.code, twice.stderr).toBe(0);
    expect(twice.stdout).toMatch(/nothing to stop in /);

    // `down` stopped the workers as a controller's own stop does (checkpoints first), where no controller could tell
    // the state: the next start closes their instances as stopped with the controller, not as lost capacity.
    const stopped = readLocalInstances(join(stateDir, 'local-instances.json')).find(
      (i) => i.instanceId === worker.instanceId,
    );
    expect(stopped?.stoppedBy).toBe('down');
    const next = await startLocalController(stateDir, { args });
    started.push(next);
    const store = new PostgresStateStore(url);
    try {
      const closed = store.findInstanceByCloudId(worker.instanceId);
      expect(closed?.state).toBe('terminated');
      expect(closed?.reason).toBe('terminated when the controller stopped');
      // Billed until its worker exited, when `down` ended it, not until this start.
      expect(closed?.terminatedAtSeconds).toBe((stopped?.terminatedAtMs ?? 0) / 1000);
      expect(store.listEvents({ kind: JOB_CAPACITY_LOST_EVENT })).toEqual([]);
    } finally {
      store.close();
    }
    expect(next.stderr()).not.toContain('lost: vanished');
    const last = await runCli(['down', '--state-dir', stateDir, '--grace-seconds', '20']);
    expect(last.code, last.stderr).toBe(0);
  }, 240_000);

  it('warns that a local-directory object store is not shared with the other controllers', async () => {
    const stateDir = newStateDir('warn');
    const ctl = await startLocalController(stateDir, { args: ['--state', pg.server.createDatabase()] });
    started.push(ctl);
    const line = ctl
      .stderr()
      .split('\n')
      .find((l) => l.includes('object store is the local directory'));
    expect(line, ctl.stderr()).toBeDefined();
    expect(line).toContain(join(stateDir, 'objects'));
    expect(line).toContain('every controller on one database must use the same s3:// object store');
    expect(line).toContain(`127.0.0.1:${pg.server.port}/`);
    ctl.process.kill('SIGTERM');
    expect(await ctl.exited).toBe(0);
  }, 120_000);
});
