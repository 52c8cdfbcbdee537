import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import {
  killLocalLeftovers,
  LOCAL_ADMIN_TOKEN,
  startLocalController,
  type StartedController,
} from '../helpers/local-controller.js';

/**
 * Team tokens live in the state alone, so a restore from a backup brings back what the backup holds. Through the real
 * CLI against a local controller that backs up to a directory object store (once an hour: only a token change
 * triggers one here): each create and revoke is in a backup before it is answered; when that backup fails the change
 * is still answered, with a warning that a restore would undo it (on stderr; under --json the answer's `warning`),
 * which a restore then does. And with FLEETWISE_ADMIN_TOKEN set, an older admin-token file is removed, not backed up
 * and restored as the admin token.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-token-backups-'));
const stateDir = join(scratch, 'state');
const restoredDir = join(scratch, 'restored');
const objectsDir = join(scratch, 'objects');
const backupsDir = join(objectsDir, 'backups', 'tk');
const OPTIONS = { config: ['backupSeconds: 3600'], args: ['--cluster', 'tk', '--object-store', objectsDir] };
const STALE_ADMIN_TOKEN = 'an-older-admin-token-0123456789';
const started: StartedController[] = [];

function env(controller: StartedController, token: string): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env };
  for (const key of Object.keys(e)) if (key.startsWith('FLEETWISE_')) delete e[key];
  return { ...e, FLEETWISE_SERVER: controller.url, FLEETWISE_TOKEN: token };
}

interface Created {
  readonly id: string;
  readonly token: string;
  readonly warning?: string;
}

async function create(controller: StartedController, team: string): Promise<Created> {
  const made = await runCli(
    ['token', 'create', '--team', team, '--json'],
    env(controller, LOCAL_ADMIN_TOKEN),
  );
  expect(made.code, made.stderr).toBe(0);
  return JSON.parse(made.stdout) as Created;
}

/** Whether `token` authenticates: `jobs` answers (0) or is refused (401). */
async function authenticates(controller: StartedController, token: string): Promise<boolean> {
  const jobs = await runCli(['jobs', '--json'], env(controller, token));
  if (jobs.code === 0) return true;
  expect(JSON.parse(jobs.stderr)).toMatchObject({ status: 401 });
  return false;
}

const WARNING =
  /^warning: the change is in effect on this controller but not yet in a backup \(the state backup failed: .+\): a restore from the last backup would undo it; the next scheduled backup tries again\n$/;

let first: StartedController;

beforeAll(async () => {
  ensureBuiltCli();
  // An admin token file from a run without FLEETWISE_ADMIN_TOKEN (the helper sets it).
  mkdirSync(stateDir, { mode: 0o700 });
  writeFileSync(join(stateDir, 'admin-token'), `${STALE_ADMIN_TOKEN}\n`, { mode: 0o600 });
  first = await startLocalController(stateDir, OPTIONS);
  started.push(first);
}, 240_000);

afterAll(async () => {
  for (const c of started)
    if (c.process.exitCode === null && c.process.signalCode === null) {
      c.process.kill('SIGKILL');
      await c.exited;
    }
  killLocalLeftovers(stateDir);
  killLocalLeftovers(restoredDir);
  rmSync(scratch, { recursive: true, force: true });
});

describe('team token changes and backups (CLI subprocess, local controller)', () => {
  it('removes an admin-token file that differs from FLEETWISE_ADMIN_TOKEN, naming it on stderr', () => {
    const file = join(stateDir, 'admin-token');
    expect(existsSync(file)).toBe(false);
    expect(first.stderr()).toContain(
      `warning: removed ${file}: it held another token than FLEETWISE_ADMIN_TOKEN`,
    );
  });

  it('backs up each token change before answering; a failed backup is a warning, and a restore undoes that change only', async () => {
    const alpha = await create(first, 'alpha');
    expect(alpha.warning).toBeUndefined();
    const beta = await create(first, 'beta');
    const revoked = await runCli(['token', 'revoke', alpha.id], env(first, LOCAL_ADMIN_TOKEN));
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stderr).toBe('');
    expect(await authenticates(first, alpha.token)).toBe(false);

    // The object store refuses the backups (a file where their directory was): the changes still take effect.
    renameSync(backupsDir, `${backupsDir}.away`);
    writeFileSync(backupsDir, '');
    const lost = await runCli(['token', 'revoke', beta.id], env(first, LOCAL_ADMIN_TOKEN));
    expect(lost.code, lost.stderr).toBe(0);
    expect(lost.stdout).toBe(`token ${beta.id} of team beta: revoked\n`);
    expect(lost.stderr).toMatch(WARNING);
    expect(await authenticates(first, beta.token)).toBe(false);
    const unbacked = await runCli(
      ['token', 'create', '--team', 'gamma', '--json'],
      env(first, LOCAL_ADMIN_TOKEN),
    );
    expect(unbacked.code, unbacked.stderr).toBe(0);
    // Under --json the warning is the answer's, and stderr holds only an error.
    expect(unbacked.stderr).toBe('');
    const gamma = JSON.parse(unbacked.stdout) as Created;
    expect(gamma.warning).toMatch(/^the change is in effect on this controller but not yet in a backup/);
    expect(await authenticates(first, gamma.token)).toBe(true);
    rmSync(backupsDir);
    renameSync(`${backupsDir}.away`, backupsDir);

    // The machine is lost; a new one restores the last backup.
    first.process.kill('SIGKILL');
    await first.exited;
    killLocalLeftovers(stateDir);
    const restored = await startLocalController(restoredDir, {
      ...OPTIONS,
      args: [...OPTIONS.args, '--restore-from', objectsDir],
    });
    started.push(restored);
    expect(restored.stdout()).toMatch(
      /restored the state from .*\(backup \d+, taken (\S+)\);.*; team tokens as of \1 \(a token created or revoked after it is not in the backup: do it again\)/,
    );
    // The revoke that was backed up holds; the changes the warnings named are undone, as they said.
    expect(await authenticates(restored, alpha.token)).toBe(false);
    expect(await authenticates(restored, beta.token)).toBe(true);
    expect(await authenticates(restored, gamma.token)).toBe(false);
    // The older admin-token file was never backed up: the restore installs none.
    expect(existsSync(join(restoredDir, 'admin-token'))).toBe(false);
    expect(restored.stdout()).not.toContain('admin-token');
  }, 120_000);
});
