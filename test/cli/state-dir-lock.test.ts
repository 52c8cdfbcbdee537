import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import {
  claimStateDir,
  lockHolder,
  PID_FILE,
  procProbe,
  recordSharedController,
  sharedControllers,
} from '../../src/cli/state-dir-lock.js';
import { ensureBuiltCli } from '../helpers/built-cli.js';
import { makeZombie } from '../helpers/zombie.js';

/** The state directory's lock: a dead, zombie or recycled pid is taken over, a live controller's lock is not. */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-lock-'));
const children: ChildProcess[] = [];
let dirs = 0;

function stateDir(pidFile?: string): string {
  const dir = mkdtempSync(join(scratch, `d${(dirs += 1)}-`));
  if (pidFile !== undefined) writeFileSync(join(dir, PID_FILE), pidFile);
  return dir;
}

function sleeper(): ChildProcess & { pid: number } {
  const child = spawn('sleep', ['60'], { stdio: 'ignore' });
  children.push(child);
  if (child.pid === undefined) throw new Error('sleep did not start');
  return child as ChildProcess & { pid: number };
}

beforeAll(() => ensureBuiltCli(['cli/state-dir-lock.ts']));

afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

/**
 * A second controller claiming `dir`, in a process of its own (this process's own pid never counts as another
 * holder): what it says, the refusal or `claimed`.
 */
function claimFromAnotherProcess(dir: string): string {
  const lock = pathToFileURL(join(PROJECT_ROOT, 'dist', 'cli', 'state-dir-lock.js')).href;
  const script =
    `import { claimStateDir } from ${JSON.stringify(lock)};\n` +
    `try { claimStateDir(process.argv[1]); process.stdout.write('claimed'); }\n` +
    `catch (e) { process.stdout.write(e.message); }`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script, dir], { encoding: 'utf8' });
  if (run.status !== 0)
    throw new Error(`the second claim did not run (exit ${String(run.status)}): ${run.stderr}`);
  return run.stdout;
}

/**
 * The lock now names this process, pid and start time, so another controller is refused while it is held; the
 * release frees it. A takeover that left the stale pid in the file would let two controllers share one state.
 */
function expectTakenOver(dir: string, release: () => void): void {
  expect(readFileSync(join(dir, PID_FILE), 'utf8').trim()).toBe(
    `${process.pid} ${procProbe(process.pid)?.startTime ?? ''}`,
  );
  expect(claimFromAnotherProcess(dir)).toContain(`another controller (pid ${process.pid}) is using ${dir};`);
  release();
  expect(existsSync(join(dir, PID_FILE))).toBe(false);
}

describe('the state directory lock', () => {
  it('writes its pid and start time, and removes the file on release', () => {
    const dir = stateDir();
    const release = claimStateDir(dir);
    expect(readFileSync(join(dir, PID_FILE), 'utf8').trim()).toBe(
      `${process.pid} ${procProbe(process.pid)?.startTime ?? ''}`,
    );
    release();
    expect(existsSync(join(dir, PID_FILE))).toBe(false);
  });

  it('takes over from a zombie, with or without a start time', async () => {
    const zombie = await makeZombie();
    children.push(zombie.parent);
    const startTime = procProbe(zombie.pid)?.startTime ?? '';
    for (const content of [`${zombie.pid}\n`, `${zombie.pid} ${startTime}\n`]) {
      const dir = stateDir(content);
      expect(lockHolder(dir)).toBeUndefined();
      expectTakenOver(dir, claimStateDir(dir));
    }
  });

  it('takes over from a recycled pid: alive, but started at another time', () => {
    const other = sleeper();
    const real = procProbe(other.pid)?.startTime;
    expect(real).toBeDefined();
    const dir = stateDir(`${other.pid} ${Number(real) + 12345}\n`);
    expect(lockHolder(dir)).toBeUndefined();
    expectTakenOver(dir, claimStateDir(dir));
  });

  it('takes over from a pid that is gone', async () => {
    const gone = sleeper();
    gone.kill('SIGKILL');
    await new Promise((r) => gone.once('exit', r));
    const dir = stateDir(`${gone.pid} 1\n`);
    expectTakenOver(dir, claimStateDir(dir));
  });

  it("refuses a live controller's lock, and one without /proc it cannot check", () => {
    const live = sleeper();
    const dir = stateDir(`${live.pid} ${procProbe(live.pid)?.startTime ?? ''}\n`);
    expect(lockHolder(dir)).toBe(live.pid);
    expect(() => claimStateDir(dir)).toThrow(`another controller (pid ${live.pid}) is using ${dir}`);
    // Where /proc says nothing, a pid a signal reaches is taken as the holder.
    const legacy = stateDir(`${live.pid} 1\n`);
    expect(() => claimStateDir(legacy, () => undefined)).toThrow(`pid ${live.pid}`);
    expect(readFileSync(join(dir, PID_FILE), 'utf8')).toContain(`${live.pid}`);
  });
});

describe('the records of controllers sharing a state', () => {
  it('lists every live one, not a dead, recycled or exclusive one; recording prunes the stale ones', async () => {
    const live = sleeper();
    const gone = sleeper();
    gone.kill('SIGKILL');
    await new Promise((r) => gone.once('exit', r));
    const recycled = sleeper();
    const dir = stateDir(`${live.pid} ${procProbe(live.pid)?.startTime ?? ''}\n`);
    writeFileSync(
      join(dir, `controller-${live.pid}.pid`),
      `${live.pid} ${procProbe(live.pid)?.startTime ?? ''}\n`,
    );
    writeFileSync(join(dir, `controller-${gone.pid}.pid`), `${gone.pid} 1\n`);
    writeFileSync(
      join(dir, `controller-${recycled.pid}.pid`),
      `${recycled.pid} ${Number(procProbe(recycled.pid)?.startTime) + 1}\n`,
    );
    expect(sharedControllers(dir)).toEqual([live.pid]);

    const release = recordSharedController(dir);
    const own = join(dir, `controller-${process.pid}.pid`);
    expect(readFileSync(own, 'utf8').trim()).toBe(
      `${process.pid} ${procProbe(process.pid)?.startTime ?? ''}`,
    );
    expect(existsSync(join(dir, `controller-${gone.pid}.pid`))).toBe(false);
    expect(existsSync(join(dir, `controller-${recycled.pid}.pid`))).toBe(false);
    // This process's own record is not another controller's.
    expect(sharedControllers(dir)).toEqual([live.pid]);
    release();
    expect(existsSync(own)).toBe(false);
    expect(sharedControllers(join(dir, 'missing'))).toEqual([]);
  });
});
