import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/core/validation.js';
import {
  renderTemplate,
  WORKER_USER_DATA_TEMPLATE_PATH,
  workerUserDataBase64,
} from '../../../src/cloud/aws/user-data.js';

const valid = { controllerUrl: 'https://controller.internal:8443', workerToken: 'abcdefghijklmnop-0123' };
const decode = (b64: string): string => Buffer.from(b64, 'base64').toString('utf8');

/** Template files written by the tests, removed after them. */
const scratch: string[] = [];
function scratchDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'fleetwise-user-data-'));
  scratch.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

describe('worker user data', () => {
  it('fills every placeholder of infra/worker-user-data.sh, defaulting the package to this version', () => {
    const script = decode(workerUserDataBase64(valid));
    expect(script.startsWith('#!/bin/bash\n')).toBe(true);
    expect(script).toContain("CONTROLLER_URL='https://controller.internal:8443'");
    expect(script).toContain("WORKER_TOKEN='abcdefghijklmnop-0123'");
    expect(script).toContain("FLEETWISE_PACKAGE='fleetwise@0.1.0'");
    expect(script).toContain("NODE_VERSION='20.19.0'");
    expect(script).toContain('systemctl enable --now fleetwise-worker.service');
    expect(script).toContain('X-aws-ec2-metadata-token'); // IMDSv2 for the instance id
    expect(script).not.toMatch(/\{\{[A-Z_]+\}\}/);
    expect(WORKER_USER_DATA_TEMPLATE_PATH.endsWith(join('infra', 'worker-user-data.sh'))).toBe(true);
  });

  it("passes the worker token in the worker's root-only environment file, never on its command line", () => {
    const script = decode(workerUserDataBase64(valid));
    // A command line is readable by every process on the host (/proc/<pid>/cmdline); the env file is root's.
    const execStart = script.split('\n').find((l) => l.startsWith('ExecStart='));
    expect(execStart).toBeDefined();
    expect(execStart).not.toMatch(/--token|WORKER_TOKEN/);
    expect(script).toContain('FLEETWISE_WORKER_TOKEN=${WORKER_TOKEN}');
    expect(script).toContain('chmod 0600 /etc/fleetwise/worker.env');
  });

  it.each([
    [{ controllerUrl: "http://x/'; rm -rf /" }, /controllerUrl/],
    [{ controllerUrl: 'ftp://x' }, /controllerUrl/],
    [{ workerToken: 'short' }, /workerToken: at least 16/],
    [{ workerToken: "abcdefghijklmnop'" }, /workerToken/],
    [{ packageSpec: 'fleetwise@1 && curl evil' }, /packageSpec/],
    [{ nodeVersion: '20' }, /nodeVersion/],
  ])('rejects unsafe or malformed values (%j)', (override, reason) => {
    expect(() => workerUserDataBase64({ ...valid, ...override })).toThrow(reason);
  });

  it('refuses a template with an unknown placeholder, naming it', () => {
    const dir = scratchDir();
    const templatePath = join(dir, 'custom.sh');
    writeFileSync(templatePath, '#!/bin/sh\necho {{CONTROLLER_URL}} {{REGION}}\n');
    const error = (() => {
      try {
        workerUserDataBase64({ ...valid, templatePath });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).source).toBe(templatePath);
    expect((error as ValidationError).problems).toEqual(['{{REGION}}: no value for this placeholder']);
  });

  it("refuses user data over EC2's 16 KiB limit", () => {
    const dir = scratchDir();
    const templatePath = join(dir, 'huge.sh');
    writeFileSync(templatePath, `#!/bin/sh\n# ${'x'.repeat(16 * 1024)}\n`);
    expect(() => workerUserDataBase64({ ...valid, templatePath })).toThrow(/EC2 allows 16384/);
  });

  it('renders placeholders anywhere and repeatedly', () => {
    expect(renderTemplate('{{A}}-{{B}}-{{A}}', { A: '1', B: '2' }, 't')).toBe('1-2-1');
    expect(renderTemplate('no placeholders {x} {{lower}}', {}, 't')).toBe('no placeholders {x} {{lower}}');
  });
});

/**
 * Running infra/worker-user-data.sh for real, with bash, on a fake host: its absolute paths moved under a scratch
 * root, and the commands it calls (package managers, curl, tar, node, npm, systemctl, shutdown, sleep) replaced by
 * stubs that record each call. Only a few harmless coreutils are the real ones.
 */
interface FakeHost {
  /** What `node -p 'process.versions.node'` prints; 'broken' is a node that does not run; undefined: no node. */
  readonly node?: string;
  /** The version the Node.js tarball installs ('unchanged': an older node earlier on PATH stays the one found). */
  readonly installedNode?: string;
  readonly packageManager?: 'dnf' | 'apt-get' | 'none';
  /** How many times each stubbed command fails before it succeeds. */
  readonly failures?: Readonly<Record<string, number>>;
  /** What the metadata service answers for local-ipv4 (undefined: no such address, a 404). */
  readonly localIpv4?: string;
}

interface BootstrapRun {
  readonly status: number | null;
  readonly output: string;
  /** Every stubbed command called, as "name args…". */
  readonly calls: string[];
  /** The systemd unit the script wrote, if any. */
  readonly unit: string | undefined;
}

const REAL_TOOLS = ['cat', 'chmod', 'date', 'install', 'tee', 'uname'];
const BASH = ['/usr/bin/bash', '/bin/bash'].find((p) => existsSync(p)) ?? 'bash';

function realTool(name: string): string {
  const found = ['/usr/bin', '/bin'].map((d) => join(d, name)).find((p) => existsSync(p));
  if (found === undefined) throw new Error(`${name} not found in /usr/bin or /bin`);
  return found;
}

/** A stub that records its call and fails its first `failures` calls (a count kept in the state directory). */
const STUB = (name: string, extra = ''): string => `#!${BASH}
echo "${name} $*" >> "$FW_STATE/calls"
n=$(( $(cat "$FW_STATE/${name}.count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$FW_STATE/${name}.count"
if [ "$n" -le "$(cat "$FW_STATE/${name}.fail" 2>/dev/null || echo 0)" ]; then exit 1; fi
${extra}
exit 0
`;

/** A node stub: the real node evaluates the script's expression, with process.versions.node faked. */
function nodeStub(version: string): string {
  if (version === 'broken')
    return `#!${BASH}\necho 'node: error while loading shared libraries: libatomic.so.1' >&2\nexit 127\n`;
  return `#!${BASH}
if [ "$1" = --version ]; then echo v${version}; exit 0; fi
exec "$FW_REAL_NODE" -p "{ const process = { versions: { node: '${version}' } }; $2 }"
`;
}

function runBootstrap(host: FakeHost): BootstrapRun {
  const dir = scratchDir();
  const [root, stubs, nodeBin, tools, state] = ['root', 'stubs', 'node-bin', 'tools', 'state'].map((d) => {
    const path = join(dir, d);
    mkdirSync(path, { recursive: true });
    return path;
  }) as [string, string, string, string, string];
  for (const d of ['var/log', 'etc/systemd/system', 'usr/local'])
    mkdirSync(join(root, d), { recursive: true });
  const write = (path: string, text: string): void => writeFileSync(path, text, { mode: 0o755 });
  for (const tool of REAL_TOOLS) write(join(tools, tool), `#!${BASH}\nexec ${realTool(tool)} "$@"\n`);
  const pm = host.packageManager ?? 'dnf';
  for (const name of ['npm', 'fleetwise', 'systemctl', 'shutdown', 'sleep', ...(pm === 'none' ? [] : [pm])])
    write(join(stubs, name), STUB(name));
  write(
    join(stubs, 'curl'),
    STUB(
      'curl',
      `case "$*" in *api/token*) echo imds-token ;; *meta-data/instance-id*) echo i-0123456789abcdef0 ;; ` +
        `*meta-data/local-ipv4*) ${host.localIpv4 === undefined ? 'exit 22' : `echo '${host.localIpv4}'`} ;; esac`,
    ),
  );
  const installed = host.installedNode ?? '20.19.0';
  write(
    join(stubs, 'tar'),
    STUB(
      'tar',
      installed === 'unchanged'
        ? ''
        : `cat > "$FW_STATE/../node-bin/node" <<'NODE'\n${nodeStub(installed)}NODE\nchmod 0755 "$FW_STATE/../node-bin/node"`,
    ),
  );
  if (host.node !== undefined) write(join(nodeBin, 'node'), nodeStub(host.node));
  for (const [name, count] of Object.entries(host.failures ?? {}))
    writeFileSync(join(state, `${name}.fail`), String(count));

  const rendered = decode(workerUserDataBase64(valid)).replace(
    /\/(etc|var|usr\/local)(?=[/\s])/g,
    (m) => `${root}${m}`,
  );
  // Nothing outside a comment may still point at the real host (these tests may run as root).
  const leftovers = rendered
    .split('\n')
    .filter((l) => !l.trimStart().startsWith('#') && /(^|[\s=])\/(etc|var|usr)\//.test(l));
  expect(leftovers).toEqual([]);
  const script = join(dir, 'user-data.sh');
  writeFileSync(script, rendered);
  const run = spawnSync(BASH, [script], {
    env: { PATH: [stubs, nodeBin, tools].join(':'), FW_STATE: state, FW_REAL_NODE: process.execPath },
    encoding: 'utf8',
    timeout: 20_000,
  });
  const callsPath = join(state, 'calls');
  const unitPath = join(root, 'etc/systemd/system/fleetwise-worker.service');
  return {
    status: run.status,
    output: `${run.stdout}${run.stderr}`,
    calls: existsSync(callsPath) ? readFileSync(callsPath, 'utf8').trimEnd().split('\n') : [],
    unit: existsSync(unitPath) ? readFileSync(unitPath, 'utf8') : undefined,
  };
}

const started = (run: BootstrapRun): boolean =>
  run.calls.includes('systemctl enable --now fleetwise-worker.service');
const installedNode = (run: BootstrapRun): boolean => run.calls.some((c) => c.startsWith('tar '));

describe('infra/worker-user-data.sh on a fake host', () => {
  it('installs what is missing and starts the worker with the Docker executor, never `auto`', () => {
    const run = runBootstrap({});
    expect(run.status, run.output).toBe(0);
    expect(run.calls).toContain('dnf install -y docker');
    expect(run.calls.some((c) => c.startsWith('curl ') && c.includes('nodejs.org/dist/v20.19.0/'))).toBe(
      true,
    );
    expect(run.calls.some((c) => /^npm install --global .*fleetwise@0\.1\.0$/.test(c))).toBe(true);
    expect(started(run)).toBe(true);
    expect(run.calls.filter((c) => c.startsWith('shutdown'))).toEqual([]);
    // `auto` falls back to running tasks as host processes (next to the metadata service) when Docker is slow.
    const execStart = run.unit?.split('\n').find((l) => l.startsWith('ExecStart='));
    expect(execStart).toMatch(/ worker --executor docker /);
  });

  it("gives the worker its private IPv4 as the latency probe's address, read from IMDSv2", () => {
    // Left to the controller, the probe's address is where heartbeats come from: a load balancer's, for every worker.
    const run = runBootstrap({ localIpv4: '10.0.3.7' });
    expect(run.status, run.output).toBe(0);
    expect(run.calls).toContain(
      'curl -fsS --retry 5 -H X-aws-ec2-metadata-token: imds-token http://169.254.169.254/latest/meta-data/local-ipv4',
    );
    const execStart = run.unit?.split('\n').find((l) => l.startsWith('ExecStart='));
    expect(execStart).toMatch(/ --work-dir \S+\/var\/lib\/fleetwise-worker --probe-host 10\.0\.3\.7$/);
    expect(started(run)).toBe(true);
  });

  it.each([
    ['no private IPv4 (an IPv6-only subnet)', undefined],
    ['an answer that is no IPv4 address', '<html>error</html>'],
  ])('starts the worker without --probe-host when the metadata gives %s', (_label, localIpv4) => {
    const run = runBootstrap(localIpv4 === undefined ? {} : { localIpv4 });
    expect(run.status, run.output).toBe(0);
    const execStart = run.unit?.split('\n').find((l) => l.startsWith('ExecStart='));
    expect(execStart).toMatch(/ --work-dir \S+\/var\/lib\/fleetwise-worker$/);
    expect(run.output).toContain('no private IPv4 address from the instance metadata');
    expect(started(run)).toBe(true);
    expect(run.calls.filter((c) => c.startsWith('shutdown'))).toEqual([]);
  });

  it('retries apt-get, waiting for the dpkg lock, and carries on when it comes free', () => {
    const run = runBootstrap({ packageManager: 'apt-get', failures: { 'apt-get': 2 } });
    expect(run.status, run.output).toBe(0);
    const apt = run.calls.filter((c) => c.startsWith('apt-get '));
    expect(apt).toEqual([
      'apt-get -o DPkg::Lock::Timeout=120 update -y',
      'apt-get -o DPkg::Lock::Timeout=120 update -y',
      'apt-get -o DPkg::Lock::Timeout=120 update -y',
      'apt-get -o DPkg::Lock::Timeout=120 install -y docker.io curl xz-utils',
    ]);
    expect(run.calls.filter((c) => c.startsWith('sleep '))).toEqual(['sleep 10', 'sleep 20']);
    expect(started(run)).toBe(true);
    expect(run.calls.filter((c) => c.startsWith('shutdown'))).toEqual([]);
  });

  it.each([
    ['a package manager that keeps failing', { failures: { dnf: 99 } }, 'dnf install -y docker', 5],
    ['npm that keeps failing', { failures: { npm: 99 } }, 'npm install', 5],
    ['no package manager to install Docker with', { packageManager: 'none' as const }, undefined, 0],
  ])(
    'shuts the instance down (so it terminates) after a failed bootstrap: %s',
    (_name, host, command, tries) => {
      const run = runBootstrap(host);
      expect(run.status).not.toBe(0);
      if (command !== undefined) expect(run.calls.filter((c) => c.startsWith(command))).toHaveLength(tries);
      expect(run.calls.filter((c) => c.startsWith('shutdown'))).toEqual(['shutdown -h now']);
      expect(started(run)).toBe(false);
      expect(run.output).toMatch(/fleetwise bootstrap failed \(exit \d+\)/);
    },
  );

  it.each([
    ['(none)', true],
    ['18.20.4', true],
    ['20.5.0', true],
    ['20.18.1', true],
    ['21.7.3', true],
    ['22.11.0', true],
    ['broken', true],
    ['20.19.0', false],
    ['20.20.2', false],
    ['22.12.0', false],
    ['24.1.0', false],
  ])("with node %s installs Node.js: %s (package.json's engines: ^20.19.0 || >=22.12.0)", (node, install) => {
    const run = runBootstrap(node === '(none)' ? {} : { node });
    expect(run.status, run.output).toBe(0);
    expect(installedNode(run)).toBe(install);
    expect(started(run)).toBe(true);
  });

  it('fails (and shuts down) when an older node still comes first on PATH after the install', () => {
    const run = runBootstrap({ node: '18.20.4', installedNode: 'unchanged' });
    expect(run.status).not.toBe(0);
    expect(installedNode(run)).toBe(true);
    expect(run.output).toContain('fleetwise needs ^20.19.0 || >=22.12.0');
    expect(run.calls.filter((c) => c.startsWith('shutdown'))).toEqual(['shutdown -h now']);
    expect(started(run)).toBe(false);
  });
});
