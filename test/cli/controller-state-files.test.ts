import { type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { ensureBuiltCli } from '../helpers/built-cli.js';
import { spawnDryRunController, type DryRunController } from '../helpers/local-controller.js';
import { makeZombie } from '../helpers/zombie.js';

/**
 * What a local controller leaves in its state directory, through the real CLI: the directory, the admin token and
 * the SQLite files (which hold job environments) are the owner's alone, even when an older run or an operator left
 * them readable by others.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-state-files-'));
const children: ChildProcess[] = [];

function startController(stateDir: string, extra: readonly string[] = []): DryRunController {
  return spawnDryRunController(stateDir, ['--listen', '127.0.0.1:0', ...extra], children);
}

const modeOf = (path: string): number => statSync(path).mode & 0o777;

beforeAll(() => ensureBuiltCli(), 240_000);

afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

describe('the state directory is private to the controller (CLI subprocess)', () => {
  it('an existing 0755 directory and 0644 admin token and SQLite files become 0700 and 0600 at start', async () => {
    const stateDir = join(scratch, 'loose');
    mkdirSync(stateDir, { mode: 0o755 });
    chmodSync(stateDir, 0o755);
    const token = join(stateDir, 'admin-token');
    writeFileSync(token, 'an-admin-token-written-by-an-older-run-0123456789\n');
    chmodSync(token, 0o644);
    // A state left open (so its -wal and -shm files exist), all world-readable.
    const dbPath = join(stateDir, 'state.db');
    const db = new SqliteStateStore(dbPath);
    for (const path of [dbPath, `${dbPath}-wal`, `${dbPath}-shm`]) chmodSync(path, 0o644);

    const controller = startController(stateDir);
    await controller.until('API http://');
    expect(modeOf(stateDir)).toBe(0o700);
    expect(modeOf(token)).toBe(0o600);
    expect(modeOf(dbPath)).toBe(0o600);
    for (const path of [`${dbPath}-wal`, `${dbPath}-shm`])
      if (existsSync(path)) expect(modeOf(path)).toBe(0o600);
    db.close();
    controller.child.kill('SIGTERM');
    expect(await controller.exited).toBe(0);
  }, 90_000);

  it('a pid file naming a zombie (a SIGKILLed controller not yet reaped) does not keep a new controller out', async () => {
    const stateDir = join(scratch, 'zombie');
    mkdirSync(stateDir, { mode: 0o700 });
    const zombie = await makeZombie();
    children.push(zombie.parent);
    try {
      writeFileSync(join(stateDir, 'controller.pid'), `${zombie.pid}\n`);
      const controller = startController(stateDir);
      await controller.until('API http://');
      controller.child.kill('SIGTERM');
      expect(await controller.exited).toBe(0);
    } finally {
      zombie.parent.kill('SIGKILL');
    }
  }, 90_000);
});
