import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PostgresStateStore } from '../../src/controller/state/postgres-state-store.js';
import { CLI, ensureBuiltCli } from '../helpers/built-cli.js';
import { bareEnv, killLocalLeftovers } from '../helpers/local-controller.js';
import { describeWithPostgres } from '../helpers/postgres.js';
import { freePort } from '../helpers/test-ports.js';

/**
 * How controller processes on one PostgreSQL start and stop around their lease (`node dist/cli/main.js controller
 * --state postgres://…`, the local provider): a standby whose configuration names another cluster refuses the state
 * when it takes over, a controller whose start fails gives the lease back at once, and an active controller whose
 * database goes away stops with exit 75 (lease lost) rather than crashing.
 */

const ADMIN_TOKEN = 'ha-start-test-admin-token-0123456789abcdef';
const LEASE = { durationSeconds: 3, renewDeadlineSeconds: 2, retrySeconds: 0.5 };

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-ha-start-'));
const spawned: ChildProcess[] = [];
const stateDirs: string[] = [];

afterAll(() => {
  for (const child of spawned)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const dir of stateDirs) killLocalLeftovers(dir);
  rmSync(scratch, { recursive: true, force: true });
});

interface Controller {
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
}

function configFile(name: string, cluster: string | undefined): string {
  const file = join(scratch, `${name}.yaml`);
  writeFileSync(
    file,
    [
      ...(cluster === undefined ? [] : [`cluster: ${cluster}`]),
      'roundSeconds: 1',
      'pollSeconds: 0.5',
      'workerHeartbeatSeconds: 0.5',
      `lease: { durationSeconds: ${LEASE.durationSeconds}, renewDeadlineSeconds: ${LEASE.renewDeadlineSeconds}, retrySeconds: ${LEASE.retrySeconds} }`,
      '',
    ].join('\n'),
  );
  return file;
}

async function startController(config: string, url: string, stateDir: string): Promise<Controller> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      CLI,
      'controller',
      '--config',
      config,
      '--provider',
      'local',
      '--executor',
      'process',
      '--state',
      url,
      '--state-dir',
      stateDir,
      '--listen',
      `127.0.0.1:${port}`,
    ],
    { env: { ...bareEnv(), FLEETWISE_ADMIN_TOKEN: ADMIN_TOKEN }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  spawned.push(child);
  let output = '';
  const take = (d: Buffer): void => {
    output = (output + d.toString()).slice(-20_000);
  };
  child.stdout?.on('data', take);
  child.stderr?.on('data', take);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited, output: () => output };
}

async function until(
  what: string,
  probe: () => boolean,
  timeoutMs: number,
  context: () => string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${context()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The exit, or 'running' if it has not exited within `ms`. */
function exitWithin(
  c: Controller,
  ms: number,
): Promise<{ code: number | null; signal: NodeJS.Signals | null } | 'running'> {
  return Promise.race([c.exited, new Promise<'running'>((r) => setTimeout(() => r('running'), ms))]);
}

function newStateDir(name: string): string {
  const dir = join(scratch, name);
  mkdirSync(dir, { recursive: true });
  stateDirs.push(dir);
  return dir;
}

function leaseOf(url: string): { holder: string | undefined; epoch: number } {
  const store = new PostgresStateStore(url);
  try {
    const lease = store.lease('controller').read();
    return { holder: lease?.holder, epoch: lease?.epoch ?? 0 };
  } finally {
    store.close();
  }
}

describeWithPostgres('controllers on one PostgreSQL: starting on the lease', (pg) => {
  beforeAll(() => ensureBuiltCli());

  it('a standby configured for another cluster refuses the state when it takes over, names both and `cluster`, and launches nothing', async () => {
    const url = pg.server.createDatabase();
    const stateDir = newStateDir('mismatch');
    const active = await startController(configFile('prod', 'prod'), url, stateDir);
    // Started (its signal handlers in place), so that the SIGTERM below is a clean stop.
    await until(
      'the active controller',
      () => active.output().includes('fleetwise controller: cluster prod'),
      60_000,
      active.output,
    );
    expect(active.output()).toContain('active with lease epoch 1');
    // Its copy of the configuration lacks the `cluster:` line: the default cluster, not prod.
    const standby = await startController(configFile('forgot', undefined), url, stateDir);
    await until('the standby', () => standby.output().includes('standby on'), 60_000, standby.output);
    active.child.kill('SIGTERM');
    expect((await active.exited).code).toBe(0);
    const exit = await exitWithin(standby, 30_000);
    expect(exit, standby.output()).toEqual({ code: 1, signal: null });
    expect(standby.output()).toContain('active with lease epoch 2');
    expect(standby.output()).toMatch(/belongs to cluster "prod", but this controller's `cluster` is "local"/);
    // Refused before the recovery lists the cloud under the wrong name, and the lease is given back.
    expect(standby.output()).not.toContain('recovered state');
    expect(leaseOf(url)).toEqual({ holder: undefined, epoch: 2 });
  });

  it('a controller whose start fails gives the lease back at once', async () => {
    const url = pg.server.createDatabase();
    const stateDir = newStateDir('failed-start');
    const config = configFile('failed-start', 'prod');
    const first = await startController(config, url, stateDir);
    await until(
      'the first controller',
      () => first.output().includes('fleetwise controller: cluster prod'),
      60_000,
      first.output,
    );
    expect(first.output()).toContain('active with lease epoch 1');
    first.child.kill('SIGTERM');
    expect((await first.exited).code).toBe(0);
    // The local "cloud" cannot be listed: the recovery at start fails, after the lease was taken.
    writeFileSync(join(stateDir, 'local-instances.json'), '{ not json');
    const second = await startController(config, url, stateDir);
    const exit = await exitWithin(second, 30_000);
    // Exit 2: the unreadable file is bad input, which the error names.
    expect(exit, second.output()).toEqual({ code: 2, signal: null });
    expect(second.output()).toContain('active with lease epoch 2');
    expect(second.output()).toContain('local-instances.json');
    rmSync(join(stateDir, 'local-instances.json'));
    // Released, not left to expire: a standby takes over at its next poll.
    expect(leaseOf(url)).toEqual({ holder: undefined, epoch: 2 });
  });
});

describeWithPostgres('an active controller whose PostgreSQL goes away', (pg) => {
  beforeAll(() => ensureBuiltCli());

  it('exits 75 (lease lost) within its renew deadline, not 1', async () => {
    const url = pg.server.createDatabase();
    const stateDir = newStateDir('outage');
    const active = await startController(configFile('outage', 'prod'), url, stateDir);
    await until(
      'the active controller',
      () => active.output().includes('fleetwise controller: cluster prod'),
      60_000,
      active.output,
    );
    const stoppedAt = Date.now();
    pg.server.stop();
    const exit = await exitWithin(active, 30_000);
    expect(exit, active.output()).toEqual({ code: 75, signal: null });
    expect(active.output()).toContain('lost the controller lease');
    // The renew deadline (2 s), a retry period and a connection attempt, with room for a loaded machine.
    expect(Date.now() - stoppedAt).toBeLessThan(LEASE.renewDeadlineSeconds * 1000 + 8000);
  });
});
