import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backupSecretsKey } from '../../src/protocol/object-keys.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import {
  LOCAL_ADMIN_TOKEN,
  startLocalController,
  until,
  type StartedController,
} from '../helpers/local-controller.js';

/**
 * `fleetwise controller --metrics-auth token` (a real controller process, its API over a socket): `/metrics` then
 * asks for the metrics token, made owner-only in the state directory (or taken from FLEETWISE_METRICS_TOKEN) and
 * backed up with the other tokens; the admin token is taken too.
 */

const CLUSTER = 'metrics-auth';
let scratch = '';

beforeAll(() => {
  ensureBuiltCli();
  scratch = mkdtempSync(join(tmpdir(), 'fleetwise-metrics-auth-'));
});
afterAll(() => {
  if (scratch !== '') rmSync(scratch, { recursive: true, force: true });
});

async function stop(controller: StartedController): Promise<void> {
  controller.process.kill('SIGTERM');
  expect(await controller.exited).toBe(0);
}

async function scrape(controller: StartedController, token?: string): Promise<number> {
  const response = await fetch(`${controller.url}/metrics`, {
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  });
  await response.text();
  return response.status;
}

describe('fleetwise controller --metrics-auth', () => {
  it('token: /metrics takes the generated metrics token or the admin token, and the backup keeps the token', async () => {
    const stateDir = join(scratch, 'generated');
    const controller = await startLocalController(stateDir, {
      args: ['--metrics-auth', 'token', '--cluster', CLUSTER],
    });
    try {
      await until('the API', async () => ((await scrape(controller)) === 401 ? true : undefined));
      const file = join(stateDir, 'metrics-token');
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const token = readFileSync(file, 'utf8').trim();
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      await until('the start line', () =>
        controller.stdout().includes(`; metrics token in ${file}`) ? true : undefined,
      );
      expect(await scrape(controller, token)).toBe(200);
      expect(await scrape(controller, LOCAL_ADMIN_TOKEN)).toBe(200);
      expect(await scrape(controller, 'not-the-token')).toBe(401);
      // The first backup is written at start: a new box restored from it keeps the scraper's token.
      const secretsFile = join(stateDir, 'objects', backupSecretsKey(CLUSTER));
      await until('the first backup', () => (existsSync(secretsFile) ? true : undefined));
      expect(JSON.parse(readFileSync(secretsFile, 'utf8'))).toMatchObject({ metricsToken: token });
    } finally {
      await stop(controller);
    }
  }, 90_000);

  it('token: FLEETWISE_METRICS_TOKEN is the token when set, and no file is made', async () => {
    const stateDir = join(scratch, 'from-env');
    const fromEnv = 'metrics-token-from-the-environment-0123';
    const controller = await startLocalController(stateDir, {
      args: ['--metrics-auth', 'token'],
      env: { FLEETWISE_METRICS_TOKEN: fromEnv },
    });
    try {
      await until('the API', async () => ((await scrape(controller, fromEnv)) === 200 ? true : undefined));
      expect(await scrape(controller)).toBe(401);
      expect(existsSync(join(stateDir, 'metrics-token'))).toBe(false);
      expect(controller.stdout()).not.toContain('metrics token in');
    } finally {
      await stop(controller);
    }
  }, 90_000);

  it('none (the default): /metrics answers without a token', async () => {
    const controller = await startLocalController(join(scratch, 'open'));
    try {
      await until('the API', async () => ((await scrape(controller)) === 200 ? true : undefined));
      expect(existsSync(join(scratch, 'open', 'metrics-token'))).toBe(false);
    } finally {
      await stop(controller);
    }
  }, 90_000);

  it('refuses FLEETWISE_METRICS_TOKEN while /metrics is open, before it starts', async () => {
    const stateDir = join(scratch, 'token-unused');
    const result = await runCli(['controller', '--provider', 'local', '--state-dir', stateDir], {
      ...process.env,
      FLEETWISE_METRICS_TOKEN: 'metrics-token-from-the-environment-0123',
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('FLEETWISE_METRICS_TOKEN');
    expect(result.stderr).toContain('give --metrics-auth token');
    expect(existsSync(join(stateDir, 'state.db'))).toBe(false);
  });

  it('refuses another mode by name, before it starts', async () => {
    const result = await runCli([
      'controller',
      '--provider',
      'local',
      '--state-dir',
      join(scratch, 'bad'),
      '--metrics-auth',
      'open',
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--metrics-auth: Invalid option: expected one of "none"|"token"');
  });
});
