#!/usr/bin/env node
// What the test suite needs besides node_modules, installed before it runs (`npm test` calls this first), so that
// a fresh machine runs the whole suite with nothing skipped: a Docker engine and a static busybox (the worker's
// Docker tests build their base image from it; there is no registry access), moto_server (the EC2/S3 stand-in),
// Chromium (the report pages are checked in it), openssl (it signs the worker identity tests' documents), a
// PostgreSQL server (the PostgreSQL state store and the active/standby controllers; the tests make their own
// throwaway cluster with its initdb and pg_ctl), and iproute2 with Python 3 (the round-trip test puts workers in
// network namespaces with a delayed link: tc netem, or a small Python delay line where the kernel has no netem). As
// root with apt-get, missing Debian packages are installed, and moto_server with pip; elsewhere one line says what is
// missing and how to install it, and the tests that need it
// fail with their own message. This script never fails the run itself: the tests are the verdict.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { delimiter, join } from 'node:path';

function onPath(name) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
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

/** A statically linked busybox: a dynamically linked one would not run in an image without a libc. */
function staticBusybox() {
  const path = process.env.BUSYBOX_BIN ?? onPath('busybox');
  if (path === undefined) return false;
  const file = spawnSync('file', ['-L', path], { encoding: 'utf8' });
  if (file.status === 0) return /statically linked|static-pie/.test(file.stdout);
  // Without `file`: an ELF with no interpreter section is static (good enough as a hint).
  return !readFileSync(path).includes('/lib64/ld-linux');
}

/** Debian's PostgreSQL server binaries (/usr/lib/postgresql/<version>/bin), as test/helpers/postgres.ts finds them. */
function postgresServer() {
  if ((process.env.PG_BIN ?? '') !== '') return true;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return false;
  return readdirSync(root).some(
    (v) => existsSync(join(root, v, 'bin', 'initdb')) && existsSync(join(root, v, 'bin', 'pg_ctl')),
  );
}

const needs = [
  {
    what: 'a Docker engine (dockerd) for the worker tests',
    present: () => (process.env.DOCKER_HOST ?? '') !== '' || onPath('dockerd') !== undefined,
    apt: 'docker.io',
  },
  {
    what: 'a static busybox for the Docker tests’ base image',
    present: staticBusybox,
    apt: 'busybox-static',
  },
  {
    what: 'Chromium for the report pages',
    present: () => onPath('chromium') !== undefined || existsSync('/usr/bin/chromium'),
    apt: 'chromium',
  },
  {
    what: 'iproute2 (ip, tc) for the network-namespace round-trip test',
    present: () => onPath('ip') !== undefined && onPath('tc') !== undefined,
    apt: 'iproute2',
  },
  {
    what: 'Python 3 for the delay line of the round-trip test (kernels without netem)',
    present: () => onPath('python3') !== undefined,
    apt: 'python3',
  },
  {
    what: 'openssl, which signs the instance identity documents of the worker identity tests',
    present: () => (process.env.OPENSSL_BIN ?? '') !== '' || onPath('openssl') !== undefined,
    apt: 'openssl',
  },
  {
    what: 'a PostgreSQL server for the PostgreSQL state store and high-availability tests',
    present: postgresServer,
    apt: 'postgresql',
  },
  {
    // An optional dependency: npm ci leaves it out when its libpq binding does not build (no libpq-dev or no C++
    // toolchain), and the PostgreSQL tests fail. Installed after the fact, it needs an npm ci again.
    what: 'pg-native (libpq binding, an optional npm dependency) for the PostgreSQL state store: after installing it, run npm ci again',
    present: () => {
      try {
        createRequire(import.meta.url)('pg-native');
        return true;
      } catch {
        return false;
      }
    },
    apt: 'libpq-dev build-essential',
  },
  {
    what: 'moto_server (EC2 and S3 stand-in) for the AWS tests',
    present: () => (process.env.MOTO_SERVER_BIN ?? '') !== '' || onPath('moto_server') !== undefined,
    pip: 'moto[server]',
  },
];

const missing = needs.filter((n) => !n.present());
if (missing.length === 0) process.exit(0);

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const apt = missing.filter((n) => n.apt !== undefined);
if (apt.length > 0) {
  const packages = apt.map((n) => n.apt);
  if (isRoot && onPath('apt-get') !== undefined) {
    console.log(
      `test prerequisites: installing ${packages.join(' ')} (apt-get) for ${apt.map((n) => n.what).join('; ')}`,
    );
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    const update = spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
    const install =
      update.status === 0
        ? spawnSync('apt-get', ['install', '-y', '-qq', ...packages.flatMap((p) => p.split(' '))], {
            stdio: ['ignore', 'ignore', 'inherit'],
            env,
          })
        : update;
    if (install.status !== 0)
      console.log(
        `test prerequisites: apt-get could not install ${packages.join(' ')}; the tests that need them will fail`,
      );
  } else
    console.log(
      `test prerequisites: missing ${apt.map((n) => n.what).join('; ')}: install with ` +
        `\`sudo apt-get install ${packages.join(' ')}\` (Debian/Ubuntu); the tests that need them will fail`,
    );
}
for (const n of missing.filter((m) => m.pip !== undefined)) {
  const pip = onPath('pip3') ?? onPath('pip');
  if (pip !== undefined) {
    console.log(`test prerequisites: installing ${n.pip} (pip) for ${n.what}`);
    const install = spawnSync(pip, ['install', '--quiet', n.pip], { stdio: 'ignore' });
    if (install.status === 0 && n.present()) continue;
  }
  console.log(
    `test prerequisites: missing ${n.what}: install with \`pip install '${n.pip}'\` (Python 3); the tests that need it will fail`,
  );
}
