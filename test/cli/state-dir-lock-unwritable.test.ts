import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { claimStateDir, lockFileOf, PID_FILE } from '../../src/cli/state-dir-lock.js';
import { NOBODY } from '../helpers/as-nobody.js';
import { ensureBuiltCli, type CliResult } from '../helpers/built-cli.js';

/**
 * A state directory whose lock file its user may not write (read-only mode here; another user's file or a read-only
 * mount alike). SQLite opens such a file read-only without a word, and there its lock is no lock: two controllers
 * would both "hold" the directory, and `fleetwise down` would find it free under a running one. Tests run as root,
 * who writes through any mode, so the users here are processes that become nobody. Each starts as root and loads the
 * code it runs first, then gives up root for good: the checkout it loads from may be one nobody cannot read (a
 * fresh clone under a 0700 temporary directory).
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-lock-unwritable-'));
const children: ChildProcess[] = [];
let dirs = 0;

const LOCK_MODULE = pathToFileURL(join(PROJECT_ROOT, 'dist', 'cli', 'state-dir-lock.js')).href;
const PROGRAM_MODULE = pathToFileURL(join(PROJECT_ROOT, 'dist', 'cli', 'program.js')).href;

const SQLITE_MODULE = pathToFileURL(
  createRequire(join(PROJECT_ROOT, 'package.json')).resolve('better-sqlite3'),
).href;

/**
 * A script's step from root to nobody, real and effective ids alike, after its imports ran as root. better-sqlite3
 * loads its native part at its first database, so one is opened (in memory) before.
 */
const BECOME_NOBODY = `
const { default: Database } = await import(${JSON.stringify(SQLITE_MODULE)});
new Database(':memory:').close();
process.setgroups([]);
process.setgid(${NOBODY});
process.setuid(${NOBODY});
`;

beforeAll(() => {
  ensureBuiltCli();
  // nobody reaches the directories below.
  chmodSync(scratch, 0o755);
});

afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

/** A state directory nobody owns, its lock file nobody's too but read-only (mode 0444). */
function nobodysStateDir(): { dir: string; lock: string } {
  const dir = mkdtempSync(join(scratch, `d${(dirs += 1)}-`));
  const lock = lockFileOf(dir);
  writeFileSync(lock, '');
  chmodSync(lock, 0o444);
  chownSync(dir, NOBODY, NOBODY);
  chownSync(lock, NOBODY, NOBODY);
  return { dir, lock };
}

/** A state directory root owns and others may read: a controller run as root made it and its lock (mode 0644). */
function rootsStateDir(): { dir: string; lock: string } {
  const dir = mkdtempSync(join(scratch, `d${(dirs += 1)}-`));
  chmodSync(dir, 0o755);
  const lock = lockFileOf(dir);
  writeFileSync(lock, '', { mode: 0o644 });
  return { dir, lock };
}

/** Why nobody may not write its own read-only lock file, and what to do: the end of a refusal through it. */
function ownReadOnly(lock: string): { readonly reason: string; readonly remedy: string } {
  return {
    reason: `not writable by uid ${NOBODY} (EACCES; the file is uid ${NOBODY}'s, mode 0444)`,
    remedy: `make it writable (chmod u+w ${lock})`,
  };
}

/**
 * Run `script` (an ES module importing the built lock module, then becoming nobody); resolves with its first line of
 * output, and the process keeps running until it exits by itself or the test ends.
 */
function runAsNobody(script: string, ...args: string[]): Promise<string> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', script, ...args], {
    cwd: scratch,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  let err = '';
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('\n')) resolve(out.slice(0, out.indexOf('\n')));
    });
    child.once('exit', (code) => reject(new Error(`exited (${String(code)}) saying nothing: ${err}`)));
  });
}

/** A controller's claim of the directory, made as nobody: `claimed` (then held until killed) or the refusal. */
const CLAIM = `
import { claimStateDir } from ${JSON.stringify(LOCK_MODULE)};
${BECOME_NOBODY}
try {
  const release = claimStateDir(process.argv[1]);
  process.stdout.write('claimed\\n');
  setInterval(() => release, 60_000);
} catch (e) {
  process.stdout.write(e.message + '\\n');
}
`;

/** dirLockHeld as nobody: `held`, `free`, or the error it threw. */
const HELD = `
import { dirLockHeld } from ${JSON.stringify(LOCK_MODULE)};
${BECOME_NOBODY}
try {
  process.stdout.write((dirLockHeld(process.argv[1]) ? 'held' : 'free') + '\\n');
} catch (e) {
  process.stdout.write(e.message + '\\n');
}
`;

/**
 * `fleetwise down` run as nobody: the built program with its `down` command loaded as root, then run as nobody, its
 * error written as the CLI's main writes one (`fleetwise: …`, exit 1).
 */
const DOWN = `
const { buildProgram } = await import(${JSON.stringify(PROGRAM_MODULE)});
const program = await buildProgram(false, 'down');
${BECOME_NOBODY}
try {
  await program.parseAsync(['node', 'fleetwise', 'down', ...process.argv.slice(1)]);
} catch (e) {
  process.stderr.write('fleetwise: ' + e.message + '\\n');
  process.exit(1);
}
`;

function downAsNobody(dir: string): Promise<CliResult> {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: scratch };
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--input-type=module', '-e', DOWN, '--', '--state-dir', dir, '--grace-seconds', '1'],
      { cwd: scratch, env },
      (error, stdout, stderr) => {
        resolve({
          code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1,
          stdout,
          stderr,
        });
      },
    );
  });
}

describe('a state directory lock its user may not write', () => {
  it('is held by no claimer: each is refused, naming the file, why and what to do', async () => {
    const { dir, lock } = nobodysStateDir();
    const { reason, remedy } = ownReadOnly(lock);
    // The first keeps what it claimed, if anything, while the second tries.
    const first = await runAsNobody(CLAIM, dir);
    const second = await runAsNobody(CLAIM, dir);
    expect([first, second]).not.toContain('claimed');
    expect(first).toBe(`cannot lock ${lock}: ${reason}: ${remedy}`);
    expect(second).toBe(first);
    expect(existsSync(join(dir, PID_FILE))).toBe(false);
    // Root writes through the mode: its claim holds, and a claim as nobody is still refused.
    const release = claimStateDir(dir);
    try {
      expect(await runAsNobody(CLAIM, dir)).toBe(first);
    } finally {
      release();
    }
  });

  it('is not reported free by dirLockHeld, held or not: it cannot tell, and says so', async () => {
    const { dir, lock } = nobodysStateDir();
    const { reason, remedy } = ownReadOnly(lock);
    const cannotTell =
      `cannot tell whether a controller is using ${dir}: its lock ${lock} is ${reason}, ` +
      `so this process can neither test nor take it: ${remedy}`;
    expect(await runAsNobody(HELD, dir)).toBe(cannotTell);
    const release = claimStateDir(dir);
    try {
      expect(await runAsNobody(HELD, dir)).toBe(cannotTell);
    } finally {
      release();
    }
  });

  it("makes fleetwise down refuse rather than find nothing to stop under another user's controller", async () => {
    const { dir, lock } = rootsStateDir();
    // A controller (this process, root) holds the directory, its pid file removed by hand: only the lock tells.
    const release = claimStateDir(dir);
    try {
      rmSync(join(dir, PID_FILE));
      const down = await downAsNobody(dir);
      expect(down.stdout).not.toContain('nothing to stop');
      expect(down.code, down.stdout).toBe(1);
      expect(down.stderr).toBe(
        `fleetwise: cannot tell whether a controller is using ${dir}: its lock ${lock} is not writable by uid ` +
          `${NOBODY} (EACCES; the file is uid 0's, mode 0644), so this process can neither test nor take it: ` +
          `run as its owner (uid 0), or make it writable for uid ${NOBODY}\n`,
      );
    } finally {
      release();
    }
  }, 60_000);
});
