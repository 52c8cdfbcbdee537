/**
 * Two network namespaces joined by a link with a delay, for tests that measure real round trips (run as root, as CI
 * does; without iproute2 or root the test fails with the reason). Each namespace also has a plain link to the root
 * namespace, where the test's controller listens.
 *
 *   root ── control link ── A ══ delayed link (A → B delayed) ══ B ── control link ── root
 *
 * The delay is the kernel's `tc qdisc … netem delay` on A's end of a veth pair. Some kernels are built without netem
 * (CONFIG_NET_SCH_NETEM unset: `tc` answers "Specified qdisc kind is unknown"); there the link is a pair of TAP
 * devices with a small userspace delay line between them (delay-wire.py), which delays A → B frames the same way.
 * Either way the round trip between A and B is at least the delay, and the packets cross real network stacks.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';

export interface ControlLink {
  /** The root namespace's address on the link (where the controller listens for this namespace's workers). */
  readonly rootAddress: string;
  readonly namespaceAddress: string;
}

export interface DelayedLink {
  readonly namespaces: readonly [string, string];
  /** A's and B's addresses on the delayed link (what their workers' probes listen on). */
  readonly linkAddresses: readonly [string, string];
  readonly control: readonly [ControlLink, ControlLink];
  readonly delayMs: number;
  readonly mechanism: 'netem' | 'userspace delay line';
  destroy(): Promise<void>;
}

function run(command: string, args: readonly string[]): string {
  const out = spawnSync(command, args, { encoding: 'utf8' });
  if (out.error !== undefined)
    throw new Error(
      `${command} ${args.join(' ')}: ${out.error.message} (this test needs iproute2 and root: apt-get install iproute2)`,
    );
  if (out.status !== 0)
    throw new Error(`${command} ${args.join(' ')} failed (${out.status}): ${out.stderr.trim()}`);
  return out.stdout;
}

const ip = (...args: string[]): string => run('ip', args);
const inNs = (ns: string, command: string, ...args: string[]): string =>
  run('ip', ['netns', 'exec', ns, command, ...args]);

/** Whether this kernel has netem: tried on a scratch namespace's loopback. */
function kernelHasNetem(scratch: string): boolean {
  ip('netns', 'add', scratch);
  try {
    return (
      spawnSync('ip', [
        'netns',
        'exec',
        scratch,
        'tc',
        'qdisc',
        'add',
        'dev',
        'lo',
        'root',
        'netem',
        'delay',
        '1ms',
      ]).status === 0
    );
  } finally {
    spawnSync('ip', ['netns', 'del', scratch]);
  }
}

async function startWire(tapA: string, tapB: string, delayMs: number): Promise<ChildProcess> {
  const child = spawn(
    'python3',
    [join(PROJECT_ROOT, 'test', 'helpers', 'delay-wire.py'), tapA, tapB, String(delayMs), '0'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the delay line did not start: ${output}`)), 10_000);
    const onData = (data: Buffer): void => {
      output += data.toString();
      if (output.includes('ready')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`python3 (the delay line): ${e.message}`));
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the delay line exited (${String(code)}): ${output}`));
    });
  });
  return child;
}

export async function createDelayedLink(delayMs: number): Promise<DelayedLink> {
  const id = process.pid % 100_000;
  const octet = process.pid % 250;
  const names = { a: `fwt-${id}-a`, b: `fwt-${id}-b` };
  // Interface names are at most 15 characters and unique in the root namespace while they are created there.
  const dev = (suffix: string): string => `fw${id}${suffix}`;
  for (const ns of Object.values(names)) spawnSync('ip', ['netns', 'del', ns]); // a crashed earlier run's
  const netem = kernelHasNetem(`fwt-${id}-probe`);
  let wire: ChildProcess | undefined;
  const destroy = async (): Promise<void> => {
    for (const ns of Object.values(names)) spawnSync('ip', ['netns', 'del', ns]);
    for (const d of [dev('ra'), dev('rb'), dev('pa'), dev('ta'), dev('tb')])
      spawnSync('ip', ['link', 'del', d]);
    if (wire !== undefined && wire.exitCode === null) {
      const exited = new Promise((resolve) => wire?.once('exit', resolve));
      wire.kill('SIGKILL');
      await exited;
    }
  };
  try {
    ip('netns', 'add', names.a);
    ip('netns', 'add', names.b);
    const control: ControlLink[] = [];
    for (const [i, [side, ns]] of [
      ['a', names.a],
      ['b', names.b],
    ].entries()) {
      const root = `198.18.${octet}.${i * 4 + 1}`;
      const inside = `198.18.${octet}.${i * 4 + 2}`;
      ip('link', 'add', dev(`r${side}`), 'type', 'veth', 'peer', 'name', dev(`n${side}`));
      ip('link', 'set', dev(`n${side}`), 'netns', ns as string);
      ip('addr', 'add', `${root}/30`, 'dev', dev(`r${side}`));
      ip('link', 'set', dev(`r${side}`), 'up');
      inNs(ns as string, 'ip', 'addr', 'add', `${inside}/30`, 'dev', dev(`n${side}`));
      inNs(ns as string, 'ip', 'link', 'set', dev(`n${side}`), 'up');
      inNs(ns as string, 'ip', 'link', 'set', 'lo', 'up');
      control.push({ rootAddress: root, namespaceAddress: inside });
    }
    const linkAddresses = ['198.19.0.1', '198.19.0.2'] as const;
    let devA: string;
    let devB: string;
    if (netem) {
      [devA, devB] = [dev('pa'), dev('pb')];
      ip('link', 'add', devA, 'type', 'veth', 'peer', 'name', devB);
    } else {
      [devA, devB] = [dev('ta'), dev('tb')];
      wire = await startWire(devA, devB, delayMs);
    }
    ip('link', 'set', devA, 'netns', names.a);
    ip('link', 'set', devB, 'netns', names.b);
    inNs(names.a, 'ip', 'addr', 'add', `${linkAddresses[0]}/24`, 'dev', devA);
    inNs(names.b, 'ip', 'addr', 'add', `${linkAddresses[1]}/24`, 'dev', devB);
    inNs(names.a, 'ip', 'link', 'set', devA, 'up');
    inNs(names.b, 'ip', 'link', 'set', devB, 'up');
    if (netem) inNs(names.a, 'tc', 'qdisc', 'add', 'dev', devA, 'root', 'netem', 'delay', `${delayMs}ms`);
    return {
      namespaces: [names.a, names.b],
      linkAddresses,
      control: [control[0] as ControlLink, control[1] as ControlLink],
      delayMs,
      mechanism: netem ? 'netem' : 'userspace delay line',
      destroy,
    };
  } catch (e) {
    await destroy();
    throw e;
  }
}
