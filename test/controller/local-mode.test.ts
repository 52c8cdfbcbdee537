import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';

/**
 * The acceptance check, end to end with real processes (`node dist/cli/main.js`; `npm test` builds dist): a
 * controller in local mode with the process executor; the counter job is drained off its instance mid-run and resumes
 * from its checkpoint on a new one; a second job's worker is SIGKILLed and the job resumes from its last checkpoint on
 * a replacement instance.
 */
const MAIN = join(PROJECT_ROOT, 'dist', 'cli', 'main.js');
const ADMIN = 'local-mode-admin-token-0123456789';
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-local-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  // Workers are detached (they outlive a controller restart): stop the ones this test's controller spawned.
  try {
    const file = JSON.parse(readFileSync(join(scratch, 'state', 'local-instances.json'), 'utf8')) as {
      instances: { state: string; pid?: number }[];
    };
    for (const i of file.instances)
      if (i.state !== 'terminated' && i.pid !== undefined)
        try {
          process.kill(-i.pid, 'SIGKILL');
        } catch {
          // already gone
        }
  } catch {
    // no instances were launched
  }
  rmSync(scratch, { recursive: true, force: true });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function cli(args: readonly string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.once('exit', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${args.join(' ')}: ${err}`)),
    );
  });
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

interface JobDoc {
  state: string;
  migrations: number;
  progress: { completed: number; total: number | null };
  instances: { id: string; cloudId?: string }[];
}

it('local mode: a drained job and a job whose worker is SIGKILLed both resume from checkpoints and succeed', async () => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run "npm run build" first (npm test does)`);
  const port = await freePort();
  const stateDir = join(scratch, 'state');
  const spec = join(scratch, 'counter.yaml');
  writeFileSync(
    spec,
    readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'counter.yaml'), 'utf8')
      .replace('context: ../counter', `context: ${join(PROJECT_ROOT, 'examples', 'counter')}`)
      .replace('COUNT_TO: 300', 'COUNT_TO: 60')
      .replace("STEP_SECONDS: '0.2'", "STEP_SECONDS: '0.1'")
      .replace('CHECKPOINT_SECONDS: 2', 'CHECKPOINT_SECONDS: 1')
      .replace('totalIterations: 300', 'totalIterations: 60'),
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
      '--provider',
      'local',
      '--state-dir',
      stateDir,
      '--listen',
      `127.0.0.1:${port}`,
      '--executor',
      'process',
      '--round-seconds',
      '2',
      '--heartbeat-timeout-seconds',
      '3',
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(controller);
  let startup = '';
  controller.stdout?.on('data', (d: Buffer) => (startup += d.toString()));
  controller.stderr?.resume();
  await until('the API', async () => (startup.includes('API http://') ? true : undefined));
  expect(startup).toMatch(/tasks run with the process executor/);
  expect(startup).toMatch(/this host has \d+ vCPUs/);

  const job = async (id: string): Promise<JobDoc> =>
    JSON.parse(await cli(['job', id, '--json'], env)) as JobDoc;
  const checkpointsOf = (jobId: string): string[] => {
    const dir = join(stateDir, 'objects', 'checkpoints', jobId, `${jobId}.0`);
    return existsSync(dir) ? readdirSync(dir) : [];
  };

  // 1. Drain: checkpoint on the source, start with restore on a new instance.
  const first = (JSON.parse(await cli(['submit', spec, '--json'], env)) as { id: string }).id;
  const before = await until('progress and a checkpoint', async () => {
    const doc = await job(first);
    return doc.state === 'running' && doc.progress.completed >= 15 && checkpointsOf(first).length > 0
      ? doc
      : undefined;
  });
  const source = before.instances[0]?.id as string;
  await cli(['drain', source], env);
  const done = await until('the drained job to succeed', async () => {
    const doc = await job(first);
    return doc.state === 'succeeded' ? doc : undefined;
  });
  expect(done.migrations).toBeGreaterThanOrEqual(1);
  expect(done.progress.completed).toBe(60);
  const logs = await cli(['logs', first], env);
  expect(logs).toMatch(/finished 60/);
  const resumedAt = Number(/resumed at (\d+)/.exec(logs)?.[1]);
  expect(resumedAt).toBeGreaterThan(0);
  expect(checkpointsOf(first).length).toBeGreaterThan(0);

  // 2. SIGKILL of the worker: silent past the heartbeat timeout → instance replaced, job resumed elsewhere.
  const second = (JSON.parse(await cli(['submit', spec, '--json'], env)) as { id: string }).id;
  const running = await until('the second job to checkpoint', async () => {
    const doc = await job(second);
    return doc.state === 'running' && doc.progress.completed >= 15 && checkpointsOf(second).length > 0
      ? doc
      : undefined;
  });
  const victim = running.instances[0]?.cloudId as string;
  const records = JSON.parse(readFileSync(join(stateDir, 'local-instances.json'), 'utf8')) as {
    instances: { instanceId: string; pid?: number }[];
  };
  const pid = records.instances.find((i) => i.instanceId === victim)?.pid as number;
  process.kill(pid, 'SIGKILL');
  const recovered = await until(
    'the second job to succeed',
    async () => {
      const doc = await job(second);
      return doc.state === 'succeeded' ? doc : undefined;
    },
    40_000,
  );
  expect(recovered.progress.completed).toBe(60);
  const secondLogs = await cli(['logs', second], env);
  expect(Number(/resumed at (\d+)/.exec(secondLogs)?.[1])).toBeGreaterThan(0);
  expect(secondLogs).toMatch(/finished 60/);
  const runs = secondLogs.match(/^==> .*-job-\d+\.0-(inst-\d+)\.log <==$/gm) ?? [];
  expect(new Set(runs.map((r) => /inst-\d+/.exec(r)?.[0])).size).toBeGreaterThanOrEqual(2);
}, 90_000);
