import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { claimStateDir, PID_FILE, procProbe } from '../../src/cli/state-dir-lock.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';

/**
 * Controllers claiming one state directory at the same instant, in processes of their own, over the pid file a
 * SIGKILLed controller left behind (a supervisor's restart beside an operator's start): one claims, the others are
 * refused naming it. Two that both took the stale file over would run two controllers on one state.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-lock-race-'));
const children: ChildProcess[] = [];

beforeAll(() => ensureBuiltCli());

afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

const CLAIMERS = 8;
const ROUNDS = 25;
/** Between rounds: enough for every claimer to be done with one before the next starts. */
const ROUND_MS = 60;
/** A pid that no process has (above the kernel's pid_max): the controller that wrote the file is gone. */
const STALE = '99999999 1\n';

const LOCK_MODULE = pathToFileURL(join(PROJECT_ROOT, 'dist', 'cli', 'state-dir-lock.js')).href;

/**
 * A claimer: says `ready` once loaded, reads the start time on its standard input, then claims each directory in
 * turn at its round's instant (sleeping until just before, spinning the last milliseconds). Prints what each claim
 * said, `claimed` or the refusal, and keeps what it claimed until it exits: at once, or, with `hold`, once killed.
 */
const CLAIMER = `
import { claimStateDir } from ${JSON.stringify(LOCK_MODULE)};
const dirs = JSON.parse(process.argv[1]);
const roundMs = Number(process.argv[2]);
const sleeper = new Int32Array(new SharedArrayBuffer(4));
process.stdout.write('ready\\n');
let input = '';
for await (const chunk of process.stdin) input += chunk;
const start = Number(input);
const said = [];
const held = [];
for (const [i, dir] of dirs.entries()) {
  const at = start + i * roundMs;
  const ms = at - Date.now() - 3;
  if (ms > 0) Atomics.wait(sleeper, 0, 0, ms);
  while (Date.now() < at);
  try {
    held.push(claimStateDir(dir));
    said.push('claimed');
  } catch (e) {
    said.push(e.message);
  }
}
process.stdout.write(JSON.stringify(said) + '\\n');
if (process.argv[3] === 'hold') setInterval(() => held.length, 60_000);
`;

interface Claimer {
  readonly child: ChildProcess & { pid: number };
  readonly ready: Promise<void>;
  /** What each of its claims said, once it has tried them all. */
  readonly said: Promise<string[]>;
  readonly exited: Promise<NodeJS.Signals | null>;
}

function startClaimer(dirs: readonly string[], hold = false): Claimer {
  const args = ['--input-type=module', '-e', CLAIMER, JSON.stringify(dirs), String(ROUND_MS)];
  const child = spawn(process.execPath, hold ? [...args, 'hold'] : args, { stdio: ['pipe', 'pipe', 'pipe'] });
  children.push(child);
  if (child.pid === undefined) throw new Error('a claimer did not start');
  let out = '';
  let err = '';
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.once('close', (_, signal) => resolve(signal)),
  );
  const failed = exited.then(() => {
    throw new Error(`a claimer exited early:\n${out}${err}`);
  });
  const line = (n: number): Promise<string> =>
    Promise.race([
      new Promise<string>((resolve) => {
        const look = (): void => {
          const lines = out.split('\n');
          if (lines.length > n + 1) {
            child.stdout?.off('data', look);
            resolve(lines[n] ?? '');
          }
        };
        child.stdout?.on('data', look);
      }),
      failed,
    ]);
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  return {
    child: child as ChildProcess & { pid: number },
    ready: line(0).then(() => undefined),
    said: line(1).then((l) => JSON.parse(l) as string[]),
    exited,
  };
}

describe('claiming a state directory together', () => {
  it('over a stale pid file: exactly one claimer wins each time, the others are refused naming it', async () => {
    const stateDirs = Array.from({ length: ROUNDS }, (_, round) => {
      const dir = mkdtempSync(join(scratch, `round-${round}-`));
      writeFileSync(join(dir, PID_FILE), STALE);
      return dir;
    });
    // Each holds its claims until killed, so that a winner still holds its round when the last refusal names it.
    const claimers = Array.from({ length: CLAIMERS }, () => startClaimer(stateDirs, true));
    await Promise.all(claimers.map((c) => c.ready));
    const start = String(Date.now() + 100);
    for (const c of claimers) c.child.stdin?.end(start);
    const said = await Promise.all(claimers.map((c) => c.said));
    for (const c of claimers) c.child.kill('SIGKILL');
    await Promise.all(claimers.map((c) => c.exited));

    const notOneWinner: string[] = [];
    stateDirs.forEach((dir, round) => {
      const winners = claimers.filter((_, i) => said[i]?.[round] === 'claimed');
      if (winners.length !== 1) {
        notOneWinner.push(`round ${round}: ${winners.length} claimed`);
        return;
      }
      const winner = winners[0]?.child.pid;
      for (const [i, c] of claimers.entries())
        if (c.child.pid !== winner)
          expect(said[i]?.[round]).toContain(`another controller (pid ${String(winner)}) is using ${dir};`);
      expect(readFileSync(join(dir, PID_FILE), 'utf8')).toMatch(new RegExp(`^${String(winner)} \\d+\\n$`));
    });
    expect(notOneWinner).toEqual([]);
  });

  it('a claim held by a process that is then SIGKILLed is taken over by the next claimer', async () => {
    const dir = mkdtempSync(join(scratch, 'killed-'));
    const holder = startClaimer([dir], true);
    await holder.ready;
    holder.child.stdin?.end(String(Date.now()));
    expect(await holder.said).toEqual(['claimed']);
    expect(() => claimStateDir(dir)).toThrow(`another controller (pid ${holder.child.pid}) is using ${dir};`);
    holder.child.kill('SIGKILL');
    expect(await holder.exited).toBe('SIGKILL');

    // The killed holder's pid file is left behind, naming a process that is gone; its kernel lock went with it.
    expect(readFileSync(join(dir, PID_FILE), 'utf8')).toMatch(new RegExp(`^${holder.child.pid} `));
    const release = claimStateDir(dir);
    expect(readFileSync(join(dir, PID_FILE), 'utf8').trim()).toBe(
      `${process.pid} ${procProbe(process.pid)?.startTime ?? ''}`,
    );
    release();
    // What stays is the lock file alone, which holds nothing once released: the next claim succeeds.
    expect(readdirSync(dir)).toEqual(['controller.lock']);
    claimStateDir(dir)();
  });

  it('a holder whose pid file was removed by hand still holds it: refused with how to find it, and down stops nothing', async () => {
    const dir = mkdtempSync(join(scratch, 'no-pid-file-'));
    const holder = startClaimer([dir], true);
    await holder.ready;
    holder.child.stdin?.end(String(Date.now()));
    expect(await holder.said).toEqual(['claimed']);
    rmSync(join(dir, PID_FILE));
    const lock = join(dir, 'controller.lock');
    expect(() => claimStateDir(dir)).toThrow(
      `another controller is using ${dir}; stop it first (it holds ${lock}: fuser -v ${lock} names it)`,
    );
    const down = await runCli(['down', '--state-dir', dir]);
    expect(down.code).not.toBe(0);
    expect(down.stderr).toContain(`a controller holds ${lock} but ${join(dir, PID_FILE)} is missing`);
    expect(down.stdout).not.toContain('nothing to stop');
    // Still running, still holding the directory.
    expect(holder.child.exitCode).toBeNull();
    expect(() => claimStateDir(dir)).toThrow(/another controller is using/);
    holder.child.kill('SIGKILL');
    await holder.exited;
    claimStateDir(dir)();
  });
});
