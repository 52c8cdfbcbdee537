import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { readLocalInstances } from '../../src/cloud/local/instance-file.js';
import { INSTANCE_LABEL, TASK_LABEL } from '../../src/worker/executors/docker.js';
import { writeShortCounterSpec } from '../helpers/counter-spec.js';
import { describeWithDocker } from '../helpers/dockerd.js';
import { CONTROLLER_START_TIMEOUT_MS, until } from '../helpers/local-controller.js';
import { freePort } from '../helpers/test-ports.js';

/**
 * Local mode's acceptance check, end to end with real processes (`node dist/cli/main.js`; `npm test` builds dist): a
 * controller in local mode; the counter job is drained off its instance mid-run and resumes from its checkpoint on a
 * new one (with the process executor, and with the Docker executor against the private dockerd of
 * test/helpers/dockerd.ts); a job whose worker is SIGKILLed resumes from its last checkpoint on a replacement
 * instance. Each scenario has its own controller (state directory, port), so they run concurrently; rounds, polls and
 * heartbeats are shortened (a config file) so the whole file takes a fraction of the default local timings.
 */
const MAIN = join(PROJECT_ROOT, 'dist', 'cli', 'main.js');
const ADMIN = 'local-mode-admin-token-0123456789';
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-local-'));
const children: ChildProcess[] = [];
const stateDirs: string[] = [];

/** Workers are detached (they outlive a controller restart): stop the ones a scenario's controller spawned. */
function stopWorkers(stateDir: string): void {
  try {
    for (const i of readLocalInstances(join(stateDir, 'local-instances.json')))
      if (i.state !== 'terminated' && i.pid !== undefined)
        try {
          process.kill(-i.pid, 'SIGKILL');
        } catch {
          // already gone
        }
  } catch {
    // no instances were launched
  }
}

afterAll(async () => {
  // A stopped controller stops its workers (checkpointing their tasks) before it exits: wait for that.
  await Promise.all(
    children
      .filter((c) => c.exitCode === null && c.signalCode === null)
      .map((c) => new Promise((resolve) => c.once('exit', resolve).kill('SIGTERM'))),
  );
  for (const dir of stateDirs) stopWorkers(dir);
  rmSync(scratch, { recursive: true, force: true });
});

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

interface JobDoc {
  state: string;
  migrations: number;
  progress: { completed: number; total: number | null };
  instances: { id: string; cloudId?: string }[];
}

// Short timings for tests: 0.5 s heartbeats and reconciliation passes, 1 s rounds (the local defaults are 1 s, 2 s,
// 10 s: a demo pace). The counter counts to 120 at 0.1 s a step (~14 s with the shell's overhead) and checkpoints every
// second: long enough that a drain asked once it has a checkpoint lands well before it ends on a starved host (at 0.04 s
// a step, 5 s of work, a drained job once succeeded with no resumed run in its logs).
const COUNT_TO = 120;
const TEST_CONFIG = ['workerHeartbeatSeconds: 0.5', 'pollSeconds: 0.5', 'roundSeconds: 1', ''].join('\n');

function counterSpec(): string {
  const spec = join(scratch, 'counter.yaml');
  if (!existsSync(spec))
    writeShortCounterSpec(spec, { countTo: COUNT_TO, stepSeconds: 0.1, checkpointSeconds: 1 });
  return spec;
}

interface LocalController {
  readonly name: string;
  readonly stateDir: string;
  readonly env: NodeJS.ProcessEnv;
  readonly startup: string;
  job(id: string): Promise<JobDoc>;
  /** GET /v1/jobs/{id}/logs: what `fleetwise logs` prints. */
  logs(id: string): Promise<string>;
  /** POST /v1/instances/{id}/drain: what `fleetwise drain` sends. */
  drain(instanceId: string): Promise<void>;
  submit(): Promise<string>;
  checkpointsOf(jobId: string): string[];
  /** Seconds since the controller started, for the timeline printed on stderr. */
  mark(what: string): void;
  /** The controller's and every worker's last log lines, for a failure message. */
  diagnostics(): string;
}

async function startController(
  name: string,
  executor: 'process' | 'docker',
  options: { heartbeatTimeoutSeconds?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<LocalController> {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run "npm run build" first (npm test does)`);
  const started = Date.now();
  const port = await freePort();
  const stateDir = join(scratch, name);
  stateDirs.push(stateDir);
  const config = join(scratch, `${name}.yaml`);
  writeFileSync(config, TEST_CONFIG);
  const env = {
    ...process.env,
    ...options.env,
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
      executor,
      ...(options.heartbeatTimeoutSeconds === undefined
        ? []
        : ['--heartbeat-timeout-seconds', String(options.heartbeatTimeoutSeconds)]),
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(controller);
  let startup = '';
  controller.stdout?.on('data', (d: Buffer) => (startup += d.toString()));
  let stderr = '';
  controller.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  await until(
    `the API of ${name}`,
    async () => (startup.includes('API http://') ? true : undefined),
    CONTROLLER_START_TIMEOUT_MS,
  );
  return {
    name,
    stateDir,
    env,
    startup,
    // Polled over HTTP (a CLI process per probe is slow on a busy host); the CLI is checked once per scenario.
    job: async (id) => {
      const response = await fetch(`http://127.0.0.1:${port}/v1/jobs/${id}`, {
        headers: { authorization: `Bearer ${ADMIN}` },
      });
      if (!response.ok) throw new Error(`GET /v1/jobs/${id}: HTTP ${response.status}`);
      return (await response.json()) as JobDoc;
    },
    logs: async (id) => {
      const response = await fetch(`http://127.0.0.1:${port}/v1/jobs/${id}/logs`, {
        headers: { authorization: `Bearer ${ADMIN}` },
      });
      if (!response.ok) throw new Error(`GET /v1/jobs/${id}/logs: HTTP ${response.status}`);
      return response.text();
    },
    drain: async (instanceId) => {
      const response = await fetch(`http://127.0.0.1:${port}/v1/instances/${instanceId}/drain`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN}` },
      });
      if (!response.ok) throw new Error(`POST drain ${instanceId}: HTTP ${response.status}`);
    },
    submit: async () =>
      (JSON.parse(await cli(['submit', counterSpec(), '--json'], env)) as { id: string }).id,
    checkpointsOf: (jobId) => {
      const dir = join(stateDir, 'objects', 'checkpoints', jobId, `${jobId}.0`);
      return existsSync(dir) ? readdirSync(dir) : [];
    },
    diagnostics: () => {
      const instances = join(stateDir, 'instances');
      const workers = existsSync(instances)
        ? readdirSync(instances).map((i) => {
            const log = join(instances, i, 'worker.log');
            const text = existsSync(log) ? readFileSync(log, 'utf8') : '(no worker.log)';
            return `--- worker ${i}:\n${text.split('\n').slice(-8).join('\n')}`;
          })
        : [];
      return [
        `--- controller ${name} (stdout+stderr tail):\n${(startup + stderr).slice(-3000)}`,
        ...workers,
      ].join('\n');
    },
    mark: (what) =>
      process.stderr.write(`[local-mode ${name}] ${((Date.now() - started) / 1000).toFixed(1)} s ${what}\n`),
  };
}

/** Wait until the job runs with some progress and an uploaded checkpoint. */
function runningWithCheckpoint(ctl: LocalController, id: string): Promise<JobDoc> {
  return until(
    `${ctl.name}: ${id} to make progress and checkpoint`,
    async () => {
      const doc = await ctl.job(id);
      return doc.state === 'running' && doc.progress.completed >= 10 && ctl.checkpointsOf(id).length > 0
        ? doc
        : undefined;
    },
    40_000,
    ctl.diagnostics,
  );
}

/**
 * Drain: checkpoint on the source, start with restore on a new instance; the job finishes from its checkpoint. With
 * `viaCli` the job document and logs are also read through the `fleetwise` commands of the acceptance check (each
 * CLI process costs seconds of CPU on a busy host, so the other scenarios use the same API calls directly).
 */
async function drainScenario(ctl: LocalController, viaCli: boolean): Promise<void> {
  ctl.mark('API up');
  const id = await ctl.submit();
  ctl.mark(`${id} submitted`);
  const before = await runningWithCheckpoint(ctl, id);
  ctl.mark(`${id} running at ${before.progress.completed}; draining`);
  const source = before.instances[0]?.id as string;
  // Over HTTP even in the CLI variant: a `fleetwise drain` process takes seconds to start on a busy 2-core host, long
  // enough for the job to finish before the drain lands (test/cli/client.test.ts covers the command itself).
  await ctl.drain(source);
  const done = await until(
    `${ctl.name}: the drained job to succeed`,
    async () => {
      const doc = await ctl.job(id);
      return doc.state === 'succeeded' ? doc : undefined;
    },
    40_000,
    ctl.diagnostics,
  );
  ctl.mark(`${id} succeeded`);
  // The acceptance check's own command agrees with the API.
  if (viaCli)
    expect(JSON.parse(await cli(['job', id, '--json'], ctl.env))).toMatchObject({ state: 'succeeded' });
  expect(done.migrations).toBeGreaterThanOrEqual(1);
  expect(done.progress.completed).toBe(COUNT_TO);
  const logs = viaCli ? await cli(['logs', id], ctl.env) : await ctl.logs(id);
  expect(logs).toMatch(new RegExp(`finished ${COUNT_TO}`));
  const resumedAt = Number(/resumed at (\d+)/.exec(logs)?.[1]);
  expect(resumedAt).toBeGreaterThan(0);
  expect(resumedAt).toBeLessThan(COUNT_TO);
  expect(ctl.checkpointsOf(id).length).toBeGreaterThan(0);
  // Two runs (source, then target) on two different instances.
  const runs = logs.match(/^==> .*-job-\d+\.0-(inst-\d+)\.log <==$/gm) ?? [];
  expect(new Set(runs.map((r) => /inst-\d+/.exec(r)?.[0])).size).toBeGreaterThanOrEqual(2);
}

describe.concurrent('local mode end to end (one controller per scenario, run concurrently)', () => {
  it('process executor: a drained job resumes from its checkpoint on a new instance and succeeds', async () => {
    const ctl = await startController('drain-process', 'process');
    expect(ctl.startup).toMatch(/tasks run with the process executor/);
    expect(ctl.startup).toMatch(/this host has \d+ vCPUs/);
    await drainScenario(ctl, true);
  }, 100_000);

  it('process executor: a job whose worker is SIGKILLed resumes from its last checkpoint on a replacement', async () => {
    // Silent past 2 s (four missed 0.5 s heartbeats) → the instance is replaced and the job resumed elsewhere.
    const ctl = await startController('sigkill-process', 'process', { heartbeatTimeoutSeconds: 2 });
    const id = await ctl.submit();
    await runningWithCheckpoint(ctl, id);
    // The controller restores only checkpoints a heartbeat has reported (worker-task-control.ts: restore ⇔ a known
    // checkpoint key), so wait for a complete upload (its manifest) and then for one more heartbeat (new progress).
    const manifestDir = join(ctl.stateDir, 'objects', 'checkpoints', id, `${id}.0`);
    await until(`${ctl.name}: a complete checkpoint`, async () =>
      ctl.checkpointsOf(id).some((seq) => existsSync(join(manifestDir, seq, 'manifest.json')))
        ? true
        : undefined,
    );
    const seen = (await ctl.job(id)).progress.completed;
    const running = await until(`${ctl.name}: a heartbeat after the upload`, async () => {
      const doc = await ctl.job(id);
      return doc.state === 'running' && doc.progress.completed > seen ? doc : undefined;
    });
    const victim = running.instances[0]?.cloudId as string;
    const records = readLocalInstances(join(ctl.stateDir, 'local-instances.json'));
    const pid = records.find((i) => i.instanceId === victim)?.pid as number;
    ctl.mark(`${id} running at ${running.progress.completed}; SIGKILL worker ${pid}`);
    process.kill(pid, 'SIGKILL');
    const recovered = await until(
      `${ctl.name}: the job to succeed`,
      async () => {
        const doc = await ctl.job(id);
        return doc.state === 'succeeded' ? doc : undefined;
      },
      40_000,
      ctl.diagnostics,
    );
    ctl.mark(`${id} succeeded`);
    expect(recovered.progress.completed).toBe(COUNT_TO);
    const logs = await ctl.logs(id);
    expect(Number(/resumed at (\d+)/.exec(logs)?.[1])).toBeGreaterThan(0);
    expect(logs).toMatch(new RegExp(`finished ${COUNT_TO}`));
    const runs = logs.match(/^==> .*-job-\d+\.0-(inst-\d+)\.log <==$/gm) ?? [];
    expect(new Set(runs.map((r) => /inst-\d+/.exec(r)?.[0])).size).toBeGreaterThanOrEqual(2);
  }, 100_000);

  it('process executor: a task failing its first attempt is retried (retryStrategy) from its checkpoint and succeeds', async () => {
    const ctl = await startController('retry-process', 'process');
    // Exits 3 unless its checkpoint holds the marker the first attempt left there (uploaded when the task exited).
    const script = [
      'echo "attempt $FLEETWISE_ATTEMPT, restore $FLEETWISE_RESTORE"',
      'if [ -f "$FLEETWISE_CHECKPOINT_DIR/marker" ]; then echo "resumed from the marker"; exit 0; fi',
      'echo first > "$FLEETWISE_CHECKPOINT_DIR/marker"',
      'echo "no marker: failing"',
      'exit 3',
    ].join('; ');
    const spec = join(scratch, 'retry.yaml');
    writeFileSync(
      spec,
      JSON.stringify({
        name: 'retry-once',
        team: 'demo',
        retryStrategy: { attempts: 2, evaluateOnExit: [{ onExitCode: '3', action: 'retry' }] },
        tasks: [{ command: ['sh', '-c', script], demand: [0, 1, 1] }],
      }),
    );
    const { id } = JSON.parse(await cli(['submit', spec, '--json'], ctl.env)) as { id: string };
    ctl.mark(`${id} submitted`);
    await until(
      `${ctl.name}: the retried job to succeed`,
      async () => ((await ctl.job(id)).state === 'succeeded' ? true : undefined),
      40_000,
      ctl.diagnostics,
    );
    ctl.mark(`${id} succeeded`);
    const doc = JSON.parse(await cli(['job', id, '--json'], ctl.env)) as {
      attempts: number;
      maxAttempts: number;
      attemptFailures: { attempt: number; exitCode?: number; reason: string }[];
    };
    expect(doc).toMatchObject({ attempts: 2, maxAttempts: 2 });
    expect(doc.attemptFailures).toEqual([
      expect.objectContaining({
        attempt: 1,
        exitCode: 3,
        reason: expect.stringContaining('no marker: failing'),
      }),
    ]);
    const text = await cli(['job', id], ctl.env);
    expect(text).toMatch(/^attempts {3}attempt 2 of 2$/m);
    // The worker's reason names the exit code, so the attempt's line leaves it to the reason below it.
    expect(text).toMatch(/^attempt 1 {2}failed .*: task job-1\.0\n +exit code 3; last output:$/m);
    const logs = await ctl.logs(id);
    expect(logs).toMatch(/attempt 1, restore 0\nno marker: failing/);
    expect(logs).toMatch(/attempt 2, restore 1\nresumed from the marker/);
  }, 100_000);

  describeWithDocker('docker executor (private dockerd)', (engine) => {
    afterAll(async () => {
      // Containers outlive their (killed) workers: remove this scenario's before the engine stops.
      const docker: Docker = engine.docker;
      for (const c of await docker.listContainers({ all: true, filters: { label: [TASK_LABEL] } }))
        await docker
          .getContainer(c.Id)
          .remove({ force: true })
          .catch(() => undefined);
    });

    it('a drained job moves between two instances sharing one engine, each seeing only its own container', async () => {
      const ctl = await startController('drain-docker', 'docker', { env: { DOCKER_HOST: engine.host } });
      expect(ctl.startup).toMatch(/tasks run with the docker executor/);
      await drainScenario(ctl, false);
      // Both runs were containers of the same task id, scoped (labelled and named) by their instance.
      const containers = await engine.docker.listContainers({ all: true, filters: { label: [TASK_LABEL] } });
      const scoped = containers.map((c) => [c.Labels[INSTANCE_LABEL], c.Names[0]]);
      for (const [instance, name] of scoped)
        expect(name).toBe(`/fleetwise-${instance}-${containers[0]?.Labels[TASK_LABEL]}`);
    }, 100_000);

    it('a GPU job runs on a GPU type without devices, as start-up says (this host has none to give)', async () => {
      const ctl = await startController('gpu-docker', 'docker', { env: { DOCKER_HOST: engine.host } });
      expect(ctl.startup).toMatch(/GPU types have no GPU here: their tasks run without devices/);
      const spec = join(scratch, 'gpu-counter.yaml');
      const counter = readFileSync(counterSpec(), 'utf8');
      writeFileSync(spec, counter.replace('any: [0, 0.5, 0.25]', 'p3: [1, 0.5, 0.25]'));
      expect(readFileSync(spec, 'utf8')).toContain('p3: [1, 0.5, 0.25]');
      const id = (JSON.parse(await cli(['submit', spec, '--json'], ctl.env)) as { id: string }).id;
      const done = await until(
        `${ctl.name}: the GPU job to end`,
        async () => {
          const doc = await ctl.job(id);
          return ['succeeded', 'failed'].includes(doc.state) ? doc : undefined;
        },
        60_000,
        ctl.diagnostics,
      );
      // Asking the engine for NVIDIA devices on a host without them fails the container's start, and the job.
      expect(done.state).toBe('succeeded');
      expect(done.progress.completed).toBe(COUNT_TO);
    }, 100_000);
  });
});
