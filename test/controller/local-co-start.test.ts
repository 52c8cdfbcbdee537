import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { runCli } from '../helpers/built-cli.js';
import { killLocalLeftovers, until } from '../helpers/local-controller.js';
import { freePort } from '../helpers/test-ports.js';

/** A CLI command's standard output; its failure names the command and what it printed on stderr. */
async function cliOutput(args: readonly string[], env: NodeJS.ProcessEnv): Promise<string> {
  const r = await runCli(args, env);
  if (r.code !== 0) throw new Error(`${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/**
 * Co-start end to end with real processes (`node dist/cli/main.js`; `npm test` builds dist): a controller in local
 * mode with the process executor runs a two-task job whose tasks need instances of two types, one of which boots
 * five seconds late (`localBootSeconds`). With co-start on, the task whose instance is up early is held until its
 * sibling is ready and both start within one heartbeat of each other; with it off (the contrast, so the check can
 * fail), the early task starts about the boot time before the other. Each task writes the time its process started.
 *
 * The tasks run longer than the late boot, so that even without co-start both run at once for a while.
 */
const MAIN = join(PROJECT_ROOT, 'dist', 'cli', 'main.js');
const ADMIN = 'local-co-start-admin-token-0123456789';
const HEARTBEAT_SECONDS = 1;
const BOOT_SECONDS = 5;
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-co-start-'));
const children: ChildProcess[] = [];
const stateDirs: string[] = [];

afterAll(async () => {
  await Promise.all(
    children
      .filter((c) => c.exitCode === null && c.signalCode === null)
      .map((c) => new Promise((resolve) => c.once('exit', resolve).kill('SIGTERM'))),
  );
  // Workers are detached: stop any a scenario's controller left (it stops them itself when it exits cleanly).
  for (const dir of stateDirs) killLocalLeftovers(dir);
  rmSync(scratch, { recursive: true, force: true });
});

/** Two types alike but for their family, so each task of the job needs an instance of its own type. */
function writeCatalog(path: string): void {
  const type = (name: string, family: string) => ({
    name,
    family,
    gpus: 0,
    vcpus: 2,
    memoryGiB: 4,
    costPerHour: 0.1,
    delays: { instantiateSeconds: 0, workerStartSeconds: 2, workerRegisterSeconds: 1, terminateSeconds: 1 },
  });
  writeFileSync(
    path,
    JSON.stringify({
      schemaVersion: 1,
      provider: 'aws',
      region: 'us-east-1',
      types: [type('fast.large', 'fast'), type('slow.large', 'slow')],
    }),
  );
}

/** Each task writes when its process started (epoch seconds) into `out`, then works a while and succeeds. */
function writeJob(path: string, out: string): void {
  const task = (name: string) => ({
    name,
    image: 'busybox:latest',
    command: ['sh', '-c', `date +%s.%N > "${join(out, name)}"; sleep ${BOOT_SECONDS + 3}`],
    demand: { [name]: [0, 1, 1] },
  });
  writeFileSync(
    path,
    JSON.stringify({ name: 'gang', team: 'examples', tasks: [task('fast'), task('slow')] }),
  );
}

interface JobDoc {
  state: string;
  coStart: { releasedAtSeconds?: number; startSkewSeconds?: number; barrierIdleCost?: number } | null;
}

/** Run the job under a controller with co-start on or off; the two tasks' process start times. */
async function runGang(name: string, coStart: boolean): Promise<{ fast: number; slow: number; doc: JobDoc }> {
  const port = await freePort();
  const stateDir = join(scratch, name);
  const out = join(scratch, `${name}-starts`);
  mkdirSync(out, { recursive: true });
  stateDirs.push(stateDir);
  const catalogFile = join(scratch, 'catalog.json');
  writeCatalog(catalogFile);
  const config = join(scratch, `${name}.yaml`);
  writeFileSync(
    config,
    [
      `workerHeartbeatSeconds: ${HEARTBEAT_SECONDS}`,
      'pollSeconds: 0.5',
      'roundSeconds: 1',
      `catalog: ${catalogFile}`,
      `localBootSeconds: { slow.large: ${BOOT_SECONDS} }`,
      `coStart: ${coStart}`,
      '',
    ].join('\n'),
  );
  const env = {
    ...process.env,
    FLEETWISE_ADMIN_TOKEN: ADMIN,
    FLEETWISE_SERVER: `http://127.0.0.1:${port}`,
    FLEETWISE_TOKEN: ADMIN,
  };
  const controller = spawn(
    process.execPath,
    [
      MAIN,
      'controller',
      '--config',
      config,
      '--provider',
      'local',
      '--state-dir',
      stateDir,
      '--listen',
      `127.0.0.1:${port}`,
      '--executor',
      'process',
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(controller);
  let log = '';
  controller.stdout?.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-6000)));
  controller.stderr?.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-6000)));
  const diagnostics = (): string => `--- controller ${name}:\n${log}`;
  await until(
    `the API of ${name}`,
    async () => (log.includes('API http://') ? true : undefined),
    40_000,
    diagnostics,
  );
  const spec = join(scratch, `${name}-job.json`);
  writeJob(spec, out);
  const id = (
    JSON.parse(await cliOutput(['submit', spec, '--catalog', catalogFile, '--json'], env)) as { id: string }
  ).id;
  const job = async (): Promise<JobDoc> => {
    const response = await fetch(`http://127.0.0.1:${port}/v1/jobs/${id}`, {
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    if (!response.ok) throw new Error(`GET /v1/jobs/${id}: HTTP ${response.status}`);
    return (await response.json()) as JobDoc;
  };
  const started = (task: string): number | undefined => {
    const file = join(out, task);
    const text = existsSync(file) ? readFileSync(file, 'utf8').trim() : '';
    return text === '' ? undefined : Number(text);
  };
  const [fast, slow] = await until(
    `${name}: both tasks to start`,
    async () => {
      const f = started('fast');
      const s = started('slow');
      return f !== undefined && s !== undefined ? [f, s] : undefined;
    },
    60_000,
    diagnostics,
  );
  // The controller's own account of the start, once it has heard both tasks running.
  const doc = await until(
    `${name}: the job's start to be measured`,
    async () => {
      const d = await job();
      return d.coStart?.startSkewSeconds !== undefined ? d : undefined;
    },
    30_000,
    diagnostics,
  );
  return { fast, slow, doc };
}

describe('co-start in local mode (real controller, workers and processes)', () => {
  it('starts both tasks of a job within one heartbeat of each other although one instance is up much later', async () => {
    const [held, free] = await Promise.all([runGang('co-start-on', true), runGang('co-start-off', false)]);
    // Without co-start, the early task starts about the late instance's boot time before its sibling…
    expect(free.slow - free.fast).toBeGreaterThan(BOOT_SECONDS / 2);
    expect(free.doc.coStart?.releasedAtSeconds).toBeUndefined();
    expect(free.doc.coStart?.startSkewSeconds).toBeGreaterThan(BOOT_SECONDS / 2);
    expect(free.doc.coStart?.barrierIdleCost).toBeGreaterThan(0);
    // …with it, the two start within one heartbeat (plus a process spawn's slack on a loaded host).
    expect(Math.abs(held.slow - held.fast)).toBeLessThanOrEqual(HEARTBEAT_SECONDS + 0.25);
    expect(held.doc.coStart?.releasedAtSeconds).toBeGreaterThan(0);
    expect(held.doc.state).toBe('running');
    // As the controller hears it (one report per heartbeat from each worker): within about a heartbeat too.
    expect(held.doc.coStart?.startSkewSeconds).toBeLessThanOrEqual(2 * HEARTBEAT_SECONDS);
  }, 120_000);
});
