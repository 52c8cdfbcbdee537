/**
 * A real Docker engine for the worker tests, started exactly as /work/shared/research/local-aws-and-docker.md says:
 * a private dockerd (data and exec roots in a temp dir, a unix socket, `--bridge=none --iptables=false` so it never
 * touches the host's network) with `base:local` imported from a busybox-static root filesystem (no registry here).
 * An engine that already answers at DOCKER_HOST is reused (and left running). Without dockerd or busybox the suite
 * fails (never skips); `npm test` installs both first where it can (scripts/test-prerequisites.mjs). Starting dockerd needs root.
 */
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { dockerFromEnv } from '../../src/worker/executors/docker-engine.js';

export const BASE_IMAGE = 'base:local';
const STARTUP_TIMEOUT_MS = 30_000;

function onPath(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const dirs = [...(env.PATH ?? '').split(delimiter), '/usr/sbin', '/sbin', '/usr/bin', '/bin'];
  for (const dir of dirs) {
    if (dir === '') continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** A statically linked busybox (the busybox-static package installs /bin/busybox). */
function findStaticBusybox(): string | undefined {
  const path = process.env.BUSYBOX_BIN ?? onPath('busybox');
  if (path === undefined) return undefined;
  // A dynamically linked busybox would not run inside an image that has no libc.
  const ldd = spawnSync('ldd', [path], { encoding: 'utf8' });
  const text = `${ldd.stdout ?? ''}${ldd.stderr ?? ''}`;
  return /not a dynamic executable|statically linked/.test(text) || ldd.error !== undefined
    ? path
    : undefined;
}

async function answers(docker: Docker): Promise<boolean> {
  try {
    await docker.ping();
    return true;
  } catch {
    return false;
  }
}

export interface DockerEngine {
  readonly docker: Docker;
  /** `unix:///…/docker.sock`, for DOCKER_HOST of a subprocess. */
  readonly host: string;
  stop(): Promise<void>;
}

/** Start a private dockerd (or reuse the one DOCKER_HOST names) and make sure base:local exists. */
export async function startDockerEngine(busybox: string): Promise<DockerEngine> {
  const existingHost = process.env.DOCKER_HOST;
  if (existingHost !== undefined && existingHost !== '') {
    const docker = dockerFromEnv(process.env);
    if (await answers(docker)) {
      await ensureBaseImage(docker, busybox);
      return { docker, host: existingHost, stop: async () => {} };
    }
  }
  const dockerd = onPath('dockerd');
  if (dockerd === undefined) throw new Error('dockerd not found');
  const dir = mkdtempSync(join(tmpdir(), 'fw-dockerd-'));
  mkdirSync(join(dir, 'data'));
  mkdirSync(join(dir, 'exec'));
  const socket = join(dir, 'docker.sock');
  const host = `unix://${socket}`;
  const logPath = join(dir, 'dockerd.log');
  // setsid (detached): its own session, so a Ctrl-C of vitest does not hit it before we stop it cleanly.
  const child = spawn(
    'sh',
    [
      '-c',
      `exec "$0" "$@" >"${logPath}" 2>&1`,
      dockerd,
      '--host',
      host,
      '--data-root',
      join(dir, 'data'),
      '--exec-root',
      join(dir, 'exec'),
      '--pidfile',
      join(dir, 'dockerd.pid'),
      '--bridge=none',
      '--iptables=false',
    ],
    { detached: true, stdio: 'ignore' },
  );
  child.unref();
  const killOnExit = (): void => {
    if (child.pid !== undefined) process.kill(child.pid, 'SIGKILL');
  };
  process.once('exit', killOnExit);
  const docker = new Docker({ socketPath: socket });
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  while (!(await answers(docker))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      const log = (() => {
        try {
          return readFileSync(logPath, 'utf8').split('\n').slice(-20).join('\n');
        } catch {
          return '';
        }
      })();
      killOnExit();
      throw new Error(`dockerd did not answer on ${socket} within ${STARTUP_TIMEOUT_MS} ms:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await ensureBaseImage(docker, busybox);
  const stop = async (): Promise<void> => {
    process.removeListener('exit', killOnExit);
    if (child.exitCode === null && child.pid !== undefined) {
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      process.kill(child.pid, 'SIGTERM');
      const timer = setTimeout(() => child.pid !== undefined && process.kill(child.pid, 'SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    }
    // dockerd unmounts its layers on a clean shutdown but leaves the netns bind mount of --bridge=none behind.
    unmountUnder(dir);
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 2 });
    } catch (e) {
      process.stderr.write(`could not remove ${dir}: ${(e as Error).message}\n`);
    }
  };
  return { docker, host, stop };
}

/** Unmount (lazily, deepest first) whatever is still mounted below `dir`. */
function unmountUnder(dir: string): void {
  let mountinfo = '';
  try {
    mountinfo = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return;
  }
  const points = mountinfo
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((p) => p.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
  for (const p of points) spawnSync('umount', ['-l', p]);
}

/** What examples/counter/Dockerfile builds FROM: the imported busybox is tagged so, and found without a registry. */
export const EXAMPLE_BASE_IMAGE = { repo: 'busybox', tag: '1.36' } as const;

/**
 * `docker import` of a busybox root filesystem as base:local (ENV PATH=/bin, CMD /bin/sh), unless present, also
 * tagged as the example's base image.
 */
export async function ensureBaseImage(docker: Docker, busybox: string): Promise<void> {
  try {
    await docker.getImage(BASE_IMAGE).inspect();
  } catch {
    await importBaseImage(docker, busybox);
  }
  await docker.getImage(BASE_IMAGE).tag(EXAMPLE_BASE_IMAGE);
}

async function importBaseImage(docker: Docker, busybox: string): Promise<void> {
  const rootfs = mkdtempSync(join(tmpdir(), 'fw-rootfs-'));
  try {
    for (const d of ['bin', 'tmp', 'etc', 'proc', 'sys', 'dev']) mkdirSync(join(rootfs, d));
    copyFileSync(busybox, join(rootfs, 'bin', 'busybox'));
    const install = spawnSync(join(rootfs, 'bin', 'busybox'), ['--install', join(rootfs, 'bin')], {
      encoding: 'utf8',
    });
    if (install.status !== 0) throw new Error(`busybox --install failed: ${install.stderr}`);
    const tar = spawn('tar', ['-C', rootfs, '-c', '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const stream = await docker.importImage(tar.stdout, {
      repo: 'base',
      tag: 'local',
      changes: ['ENV PATH=/bin', 'CMD ["/bin/sh"]'],
    });
    await new Promise<void>((resolve, reject) =>
      docker.modem.followProgress(stream, (err) => (err === null ? resolve() : reject(err))),
    );
    await docker.getImage(BASE_IMAGE).inspect();
  } finally {
    rmSync(rootfs, { recursive: true, force: true });
  }
}

export interface DockerContext {
  readonly docker: Docker;
  readonly host: string;
}

/** `describe` with a Docker engine around it (started in beforeAll, stopped in afterAll). */
export function describeWithDocker(name: string, body: (engine: DockerContext) => void): void {
  const busybox = findStaticBusybox();
  const reusable = process.env.DOCKER_HOST !== undefined && process.env.DOCKER_HOST !== '';
  const missing =
    !reusable && onPath('dockerd') === undefined
      ? 'a Docker engine (dockerd: apt-get install docker.io)'
      : busybox === undefined
        ? "the Docker tests' base image, a static busybox (apt-get install busybox-static)"
        : undefined;
  if (missing !== undefined || busybox === undefined) {
    // A test that cannot find its dependency fails, never skips: `npm test` installs these first where it can
    // (scripts/test-prerequisites.mjs), so reaching here means the install could not be done on this machine.
    const message = `${missing ?? 'busybox'} not found; the Docker tests of "${name}" need it`;
    describe(name, () => {
      it('requires a Docker engine', () => {
        throw new Error(message);
      });
    });
    return;
  }
  describe(name, () => {
    let engine: DockerEngine | undefined;
    const current = (): DockerEngine => {
      if (engine === undefined) throw new Error('dockerd is not running (used outside a hook or test?)');
      return engine;
    };
    beforeAll(async () => {
      engine = await startDockerEngine(busybox);
    });
    afterAll(async () => {
      await engine?.stop();
    });
    body({
      get docker() {
        return current().docker;
      },
      get host() {
        return current().host;
      },
    });
  });
}
