import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
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
 * when it takes over, a controller whose start fails (or is stopped by a signal while it starts) gives the lease back
 * at once, a listen port the lease cannot publish (0) is refused, and an active controller whose database goes away
 * stops with exit 75 (lease lost) rather than crashing.
 */

const ADMIN_TOKEN = 'ha-start-test-admin-token-0123456789abcdef';
const LEASE = { durationSeconds: 3, renewDeadlineSeconds: 2, retrySeconds: 0.5 };
const LONG_LEASE = { durationSeconds: 30, renewDeadlineSeconds: 20, retrySeconds: 0.5 };

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

function configFile(name: string, cluster: string | undefined, lease = LEASE): string {
  const file = join(scratch, `${name}.yaml`);
  writeFileSync(
    file,
    [
      ...(cluster === undefined ? [] : [`cluster: ${cluster}`]),
      'roundSeconds: 1',
      'pollSeconds: 0.5',
      'workerHeartbeatSeconds: 0.5',
      `lease: { durationSeconds: ${lease.durationSeconds}, renewDeadlineSeconds: ${lease.renewDeadlineSeconds}, retrySeconds: ${lease.retrySeconds} }`,
      '',
    ].join('\n'),
  );
  return file;
}

interface ControllerOptions {
  /** `--listen` (default: a free port on 127.0.0.1). */
  readonly listen?: string;
  readonly executor?: 'process' | 'docker';
  readonly args?: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
}

async function startController(
  config: string,
  url: string,
  stateDir: string,
  options: ControllerOptions = {},
): Promise<Controller> {
  const listen = options.listen ?? `127.0.0.1:${await freePort()}`;
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
      options.executor ?? 'process',
      '--state',
      url,
      '--state-dir',
      stateDir,
      '--listen',
      listen,
      ...(options.args ?? []),
    ],
    {
      env: { ...bareEnv(), FLEETWISE_ADMIN_TOKEN: ADMIN_TOKEN, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
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

  it('a standby given a --submit file that is not a job spec is refused at start, not when it would take over', async () => {
    const url = pg.server.createDatabase();
    const stateDir = newStateDir('standby-submit');
    const config = configFile('standby-submit', 'prod');
    const active = await startController(config, url, stateDir);
    await until(
      'the active controller',
      () => active.output().includes('fleetwise controller: cluster prod'),
      60_000,
      active.output,
    );
    const bad = join(stateDir, 'bad.yaml');
    writeFileSync(bad, 'name: x\n');
    const standby = await startController(config, url, stateDir, { args: ['--submit', bad] });
    const exit = await exitWithin(standby, 30_000);
    expect(exit, standby.output()).toEqual({ code: 2, signal: null });
    expect(standby.output()).toContain('invalid input: --submit');
    expect(standby.output()).not.toContain('standby on');
    // The active controller's lease is untouched.
    expect(leaseOf(url).epoch).toBe(1);
    active.child.kill('SIGTERM');
    expect((await active.exited).code).toBe(0);
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

  it('a standby that cannot bind its --listen says so as an active controller does', async () => {
    const url = pg.server.createDatabase();
    const stateDir = newStateDir('standby-port-taken');
    const config = configFile('standby-port-taken', 'prod', LONG_LEASE);
    const active = await startController(config, url, stateDir);
    await until(
      'the active controller',
      () => active.output().includes('active with lease epoch 1'),
      60_000,
      active.output,
    );
    // The lease is held: the second controller waits as a standby, serving its health on the taken port.
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as AddressInfo).port;
    try {
      const standby = await startController(config, url, stateDir, { listen: `127.0.0.1:${port}` });
      expect(await exitWithin(standby, 30_000), standby.output()).toEqual({ code: 1, signal: null });
      expect(standby.output()).toContain(
        `fleetwise: cannot serve the API on 127.0.0.1:${port}: the address is in use (another controller?); ` +
          'choose another with --listen HOST:PORT',
      );
      // The active one is untouched.
      expect(leaseOf(url).epoch).toBe(1);
    } finally {
      taken.close();
      active.child.kill('SIGTERM');
      await active.exited;
    }
  });

  it('a controller whose set-up fails after it took the lease (no Docker engine) gives it back at once', async () => {
    const url = pg.server.createDatabase();
    const stateDir = newStateDir('no-docker');
    // A lease far longer than the test waits: only a release frees it in time.
    const config = configFile('no-docker', 'prod', LONG_LEASE);
    const failing = await startController(config, url, stateDir, {
      executor: 'docker',
      env: { DOCKER_HOST: `unix://${join(scratch, 'no-docker.sock')}` },
    });
    const exit = await exitWithin(failing, 30_000);
    expect(exit, failing.output()).toEqual({ code: 2, signal: null });
    expect(failing.output()).toContain('active with lease epoch 1');
    expect(failing.output()).toContain('--executor');
    expect(leaseOf(url)).toEqual({ holder: undefined, epoch: 1 });
    // The next controller is active at once, not a standby waiting out the lease.
    const next = await startController(config, url, stateDir);
    await until(
      'the next controller',
      () => next.output().includes('fleetwise controller: cluster prod'),
      LONG_LEASE.durationSeconds * 1000 - 5000,
      next.output,
    );
    expect(next.output()).toContain('active with lease epoch 2');
    expect(next.output()).not.toContain('standby on');
    next.child.kill('SIGTERM');
    expect((await next.exited).code).toBe(0);
  });

  it('a controller stopped by a signal while it sets up, after it took the lease, gives it back at once', async () => {
    // A Docker engine that accepts the connection and never answers: the start waits on it, holding the lease.
    const sockets: Socket[] = [];
    const silent = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const url = pg.server.createDatabase();
      const stateDir = newStateDir('signal-at-start');
      const starting = await startController(
        configFile('signal-at-start', 'prod', LONG_LEASE),
        url,
        stateDir,
        {
          executor: 'docker',
          env: { DOCKER_HOST: `tcp://127.0.0.1:${(silent.address() as AddressInfo).port}` },
        },
      );
      await until(
        'the lease and the Docker check',
        () => starting.output().includes('active with lease epoch 1') && sockets.length > 0,
        30_000,
        starting.output,
      );
      starting.child.kill('SIGTERM');
      const exit = await exitWithin(starting, 10_000);
      expect(exit, starting.output()).toEqual({ code: null, signal: 'SIGTERM' });
      expect(leaseOf(url)).toEqual({ holder: undefined, epoch: 1 });
      expect(existsSync(join(stateDir, `controller-${starting.child.pid}.pid`))).toBe(false);
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });

  it('refuses --listen with port 0 on a shared state, which the lease could not publish, unless --advertise-url says where', async () => {
    const url = pg.server.createDatabase();
    const config = configFile('port-zero', 'prod');
    const refused = await startController(config, url, newStateDir('port-zero'), { listen: '127.0.0.1:0' });
    const exit = await exitWithin(refused, 30_000);
    expect(exit, refused.output()).toEqual({ code: 2, signal: null });
    expect(refused.output()).toContain('invalid input: --listen');
    expect(refused.output()).toContain(
      '127.0.0.1:0: port 0 (any free port) cannot be published with the lease',
    );
    expect(refused.output()).toContain('--advertise-url');
    // Refused before the lease: nothing was taken.
    expect(leaseOf(url)).toEqual({ holder: undefined, epoch: 0 });

    const advertised = await startController(config, url, newStateDir('port-zero-advertised'), {
      listen: '127.0.0.1:0',
      args: ['--advertise-url', 'http://lb.test:7070'],
    });
    await until(
      'the advertised controller',
      () => advertised.output().includes('fleetwise controller: cluster prod'),
      60_000,
      advertised.output,
    );
    const api = /API (http:\/\/127\.0\.0\.1:\d+)/.exec(advertised.output())?.[1];
    expect(api, advertised.output()).toBeDefined();
    const health = (await (await fetch(`${api}/healthz`)).json()) as { activeUrl?: string };
    expect(health.activeUrl).toBe('http://lb.test:7070');
    const store = new PostgresStateStore(url);
    try {
      expect(store.lease('controller').read()?.holderUrl).toBe('http://lb.test:7070');
    } finally {
      store.close();
    }
    advertised.child.kill('SIGTERM');
    expect((await advertised.exited).code).toBe(0);
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
