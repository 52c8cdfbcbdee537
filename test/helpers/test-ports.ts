import {
  chmodSync,
  closeSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Ports for the servers tests start, most of them in child processes that bind the port later and bind it again after
 * a restart (a controller killed and started on its state, a store that stops listening through an outage).
 *
 * A port the kernel hands out for listen(0) is free again as soon as it is probed, and it comes from the ephemeral
 * range every file running beside it draws from too, through its own listen(0) and every outgoing connection: a
 * controller restarted on its port once found another file's standby controller there, and its worker registered
 * with that one. So ports come from below the ephemeral range, from a block of their own per test process, each
 * handed out once per process; the probe still skips one something else listens on.
 *
 * A block is claimed for the whole machine, not per vitest worker number: two runs at once (a CI clone running the
 * suite while a developer runs one file) number their workers alike, and would otherwise hand out the same ports.
 */
const BLOCK_SIZE = 1_000;
/** Below the ephemeral range: clear of the well-known ports and of what services usually listen on. */
const FIRST_BLOCK = 20_000;
const LAST_PORT = 65_535;
/** The kernel's own default ephemeral range, when it cannot be read. */
const DEFAULT_EPHEMERAL_RANGE: readonly [number, number] = [32_768, 60_999];
/** Times a claimant tries a block it found contended (another claimant took it at the same moment). */
const CONTENDED_TRIES = 5;

function ephemeralRange(): readonly [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    return Number.isInteger(low) && Number.isInteger(high)
      ? [low as number, high as number]
      : DEFAULT_EPHEMERAL_RANGE;
  } catch {
    return DEFAULT_EPHEMERAL_RANGE;
  }
}

/** The first port of each block: below the ephemeral range, or above it on a host whose range starts low. */
export function portBlockStarts(): number[] {
  const [low, high] = ephemeralRange();
  const below = Math.max(0, Math.floor((low - FIRST_BLOCK) / BLOCK_SIZE));
  if (below > 0) return Array.from({ length: below }, (_, i) => FIRST_BLOCK + i * BLOCK_SIZE);
  const above = Math.floor((LAST_PORT - high) / BLOCK_SIZE);
  if (above > 0) return Array.from({ length: above }, (_, i) => high + 1 + i * BLOCK_SIZE);
  throw new Error(
    `test ports: the kernel's ephemeral range ${low}–${high} leaves no block of ${BLOCK_SIZE} ports`,
  );
}

/** Where blocks are claimed: one directory for every run and user on the machine, as the ports are shared too. */
export function portLockDir(): string {
  return join(tmpdir(), 'fleetwise-test-ports');
}

/** A process as a lock records it: its start time tells it from a later process given the same pid. */
interface Holder {
  readonly pid: number;
  /** Clock ticks after boot (/proc/PID/stat); undefined where it cannot be read. */
  readonly startTime: string | undefined;
}

function processState(pid: number): { readonly running: boolean; readonly startTime?: string } {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The fields after the parenthesised command name: state (3rd field of the line), …, starttime (22nd).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const state = fields[0];
    const startTime = fields[19];
    return {
      running: state !== 'Z' && state !== 'X',
      ...(startTime === undefined ? {} : { startTime }),
    };
  } catch {
    // No /proc, or another user's process hidden by it: the kill probe still tells (EPERM: it runs).
    try {
      process.kill(pid, 0);
      return { running: true };
    } catch (error) {
      return { running: (error as NodeJS.ErrnoException).code === 'EPERM' };
    }
  }
}

function holderRuns(holder: Holder): boolean {
  const state = processState(holder.pid);
  return (
    state.running &&
    (holder.startTime === undefined || state.startTime === undefined || state.startTime === holder.startTime)
  );
}

interface LockFile extends Holder {
  readonly path: string;
}

/** The lock files of one block: `START.PID.lock`, holding `PID STARTTIME`. */
function lockFiles(lockDir: string, start: number): LockFile[] {
  const found: LockFile[] = [];
  for (const name of readdirSync(lockDir)) {
    const match = /^(\d+)\.(\d+)\.lock$/.exec(name);
    if (match === null || Number(match[1]) !== start) continue;
    const path = join(lockDir, name);
    let startTime: string | undefined;
    try {
      // Empty while its claimant is still writing it: the pid in the name is enough then.
      startTime = readFileSync(path, 'utf8').trim().split(/\s+/)[1] || undefined;
    } catch {
      continue; // released meanwhile
    }
    found.push({ path, pid: Number(match[2]), startTime });
  }
  return found;
}

function removeQuietly(path: string): void {
  try {
    rmSync(path, { force: true });
  } catch {
    // Another user's lock in the shared directory: it stays, and is still judged by its process.
  }
}

/**
 * Claim `start` for `self`: the lock file's path, or undefined while another running process holds the block.
 *
 * Every claimant writes a file of its own (its pid in the name) and then looks again: of two claimants, the later
 * writer always sees the earlier one's file, so at most one keeps the block. Two that write at the same moment both
 * step back, and each tries again after a random pause. A lock whose process is gone (killed, so its exit handler
 * never ran) counts for nothing and is removed by the next holder.
 */
async function claimBlock(lockDir: string, start: number, self: Holder): Promise<string | undefined> {
  const mine = join(lockDir, `${start}.${self.pid}.lock`);
  const othersRunning = (): LockFile[] =>
    lockFiles(lockDir, start).filter((lock) => lock.pid !== self.pid && holderRuns(lock));
  for (let tried = 0; tried < CONTENDED_TRIES; tried += 1) {
    if (othersRunning().length > 0) return undefined;
    // A file under this pid can only be an earlier process's, which had the pid before.
    rmSync(mine, { force: true });
    const fd = openSync(mine, 'wx');
    try {
      writeSync(fd, `${self.pid} ${self.startTime ?? ''}\n`);
    } finally {
      closeSync(fd);
    }
    if (othersRunning().length === 0) {
      for (const stale of lockFiles(lockDir, start))
        if (stale.pid !== self.pid && !holderRuns(stale)) removeQuietly(stale.path);
      return mine;
    }
    rmSync(mine, { force: true });
    await new Promise((resolve) => setTimeout(resolve, 10 + Math.random() * 50));
  }
  return undefined;
}

export interface PortBlock {
  /** Its first port; it has BLOCK_SIZE. */
  readonly start: number;
  readonly lockFile: string;
  release(): void;
}

export interface PortBlockOptions {
  readonly lockDir?: string;
  /** The claiming process (this one unless given): its lock holds the block while it runs. */
  readonly pid?: number;
  /** The index of the block tried first; the next free one after it otherwise. */
  readonly preferred?: number;
}

/**
 * A block of ports no other running process on the machine holds, this one's until released or until it exits. Fails
 * naming the lock directory when every block is held.
 */
export async function claimPortBlock(options: PortBlockOptions = {}): Promise<PortBlock> {
  const lockDir = options.lockDir ?? portLockDir();
  const pid = options.pid ?? process.pid;
  const starts = portBlockStarts();
  // VITEST_POOL_ID numbers the workers from 1, and spreads them over the blocks; outside vitest, the process id.
  const preferred = options.preferred ?? Math.max(Number(process.env['VITEST_POOL_ID'] ?? pid), 1) - 1;
  if (mkdirSync(lockDir, { recursive: true }) !== undefined) {
    // Whoever made it: every user's test runs claim their blocks here. Sticky, as /tmp is.
    try {
      chmodSync(lockDir, 0o1777);
    } catch {
      // made by another user meanwhile
    }
  }
  const self: Holder = { pid, startTime: processState(pid).startTime };
  for (let i = 0; i < starts.length; i += 1) {
    const start = starts[(((preferred + i) % starts.length) + starts.length) % starts.length] as number;
    const lockFile = await claimBlock(lockDir, start, self);
    if (lockFile !== undefined) return { start, lockFile, release: () => removeQuietly(lockFile) };
  }
  throw new Error(
    `test ports: all ${starts.length} blocks of ${BLOCK_SIZE} ports are held by running processes (their lock ` +
      `files are in ${lockDir}): wait for other test runs to end, or remove the locks of runs that are gone`,
  );
}

async function claimOwnBlock(): Promise<number> {
  const block = await claimPortBlock();
  process.once('exit', () => block.release());
  // vitest ends its workers with SIGTERM (Ctrl-C sends SIGINT), which runs no exit handler. Released then, the signal
  // is raised again to end the process as it would have ended, unless something else here handles it. (A process
  // killed outright leaves its lock behind; the next claimant finds that process gone.)
  for (const signal of ['SIGTERM', 'SIGINT'] as const)
    process.once(signal, () => {
      block.release();
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    });
  return block.start;
}

let ownBlock: Promise<number> | undefined;
let next = 0;

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A port on 127.0.0.1 that nothing listens on and that no other test process on the machine is given. */
export async function freePort(): Promise<number> {
  // Claimed on first use: a file that imports this and starts no server holds no block.
  ownBlock ??= claimOwnBlock();
  const blockStart = await ownBlock;
  for (let tried = 0; tried < BLOCK_SIZE; tried += 1) {
    const port = blockStart + (next % BLOCK_SIZE);
    next += 1;
    if (await canListen(port)) return port;
  }
  throw new Error(`test ports: every port of ${blockStart}–${blockStart + BLOCK_SIZE - 1} is taken`);
}
