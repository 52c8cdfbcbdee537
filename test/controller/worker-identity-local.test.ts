import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, runCli } from '../helpers/built-cli.js';
import { writeShortCounterSpec } from '../helpers/counter-spec.js';
import {
  bareEnv,
  killLocalLeftovers,
  LOCAL_ADMIN_TOKEN,
  pidAlive,
  startLocalController,
  until,
  type StartedController,
} from '../helpers/local-controller.js';

/**
 * Worker identity in local mode, through the real CLI (process executor): the cluster's shared worker token
 * (state/worker-token) no longer registers a worker, so it cannot take over a live instance, receive the tasks placed
 * there (their env) or report for them; a worker proves its launch with the one-time secret its controller handed it
 * at spawn; a restarted worker re-registers with the per-instance token it saved, and its task runs on.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-worker-identity-'));
const stateDirs: string[] = [];
const children: ChildProcess[] = [];

afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const dir of stateDirs) killLocalLeftovers(dir);
  rmSync(scratch, { recursive: true, force: true });
});

const TEAM_SECRET = 'team-secret-value-5f0c2e9d';

/** The shortened counter, with an env secret only its own worker may ever see. */
function spec(name: string, countTo: number): string {
  const path = writeShortCounterSpec(join(scratch, `${name}.yaml`), {
    countTo,
    stepSeconds: 0.05,
    checkpointSeconds: 1,
  });
  const text = readFileSync(path, 'utf8').replace(
    /(\n\s+)CHECKPOINT_SECONDS: (\d+)/,
    `$1CHECKPOINT_SECONDS: $2$1TEAM_SECRET: ${TEAM_SECRET}`,
  );
  if (!text.includes(TEAM_SECRET)) throw new Error('could not add the env secret to the counter spec');
  writeFileSync(path, text);
  return path;
}

interface JobDoc {
  state: string;
  reason?: string;
  progress: { completed: number };
  instances: { id: string; cloudId?: string }[];
}

async function start(name: string): Promise<StartedController> {
  const stateDir = join(scratch, name);
  stateDirs.push(stateDir);
  return startLocalController(stateDir);
}

async function runningJob(
  ctl: StartedController,
  countTo: number,
): Promise<{ id: string; cloudId: string; pid: number; dir: string }> {
  const submitted = await runCli(['submit', spec(`job-${countTo}`, countTo), '--json'], ctl.env);
  expect(submitted.code, submitted.stderr).toBe(0);
  const id = (JSON.parse(submitted.stdout) as { id: string }).id;
  const doc = await until(
    `${id} to run`,
    async () => {
      const job = (await ctl.api('GET', `/v1/jobs/${id}`)).json as JobDoc;
      return job.state === 'running' && job.progress.completed >= 5 ? job : undefined;
    },
    40_000,
    ctl.diagnostics,
  );
  const cloudId = doc.instances[0]?.cloudId as string;
  const record = ctl.instances().find((i) => i.instanceId === cloudId);
  if (record?.pid === undefined) throw new Error(`no worker pid for ${id}\n${ctl.diagnostics()}`);
  return { id, cloudId, pid: record.pid, dir: record.dir };
}

async function post(url: string, bearer: string, body: unknown): Promise<{ status: number; text: string }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, text: await response.text() };
}

describe('worker identity in local mode (real CLI, process executor)', () => {
  it('the shared worker token cannot register as a live instance: no takeover, no task specs, no forged reports', async () => {
    const ctl = await start('takeover');
    try {
      const job = await runningJob(ctl, 120);
      const shared = readFileSync(join(ctl.stateDir, 'worker-token'), 'utf8').trim();
      // The worker got its launch's one-time secret, and neither the cluster's key nor the controller's admin token.
      const environ = readFileSync(`/proc/${job.pid}/environ`, 'utf8').split('\0');
      expect(environ.some((v) => /^FLEETWISE_LAUNCH_SECRET=.{20,}$/.test(v))).toBe(true);
      expect(environ.join('\n')).not.toContain(shared);
      expect(environ.join('\n')).not.toContain(LOCAL_ADMIN_TOKEN);
      const register = `${ctl.url}/v1/workers/register`;
      // The attack as it was made: the shared token and the live instance's cloud id.
      const attempts = [
        { instanceId: job.cloudId, executor: 'process', hostname: 'attacker' },
        { instanceId: job.cloudId, executor: 'process', identity: { kind: 'launch-secret' } },
        { instanceId: job.cloudId, executor: 'process', identity: { kind: 'instance-token' } },
      ];
      for (const body of attempts) {
        const answer = await post(register, shared, body);
        expect([401, 403, 409], `${JSON.stringify(body)} → ${answer.status} ${answer.text}`).toContain(
          answer.status,
        );
        expect(answer.text).not.toContain('workerToken');
      }
      // Nothing to heartbeat with: a forged report is refused and the job's spec (its env) is not handed out.
      const forged = await post(`${ctl.url}/v1/workers/heartbeat`, shared, {
        tasks: [{ taskId: `${job.id}.0`, state: 'failed', exitCode: 1, reason: 'by attacker' }],
      });
      expect(forged.status).toBe(401);
      expect(forged.text).not.toContain(TEAM_SECRET);
      // The real worker kept its instance: the job finishes there, not failed "by attacker".
      const done = await until(
        `${job.id} to succeed`,
        async () => {
          const doc = (await ctl.api('GET', `/v1/jobs/${job.id}`)).json as JobDoc;
          return doc.state === 'succeeded' || doc.state === 'failed' ? doc : undefined;
        },
        40_000,
        ctl.diagnostics,
      );
      expect(done.state, done.reason).toBe('succeeded');
      const events = (await ctl.api('GET', `/v1/jobs/${job.id}`)).text;
      expect(events).not.toContain('by attacker');
    } finally {
      ctl.process.kill('SIGTERM');
      await ctl.exited;
    }
  });

  it('a restarted worker re-registers with its saved per-instance token and its task runs on', async () => {
    const ctl = await start('restart');
    // Stopped however the test ends: a failed wait would leave it serving for ever.
    try {
      const job = await runningJob(ctl, 160);
      // The worker dies (and its task with it); its launch secret is spent.
      process.kill(-job.pid, 'SIGKILL');
      await until('the worker to exit', () => (pidAlive(job.pid) ? undefined : true), 10_000);
      expect(existsSync(join(job.dir, 'worker-credential.json'))).toBe(true);
      // The operator starts it again, without any secret: it has its saved credential.
      const worker = spawn(
        process.execPath,
        [
          CLI,
          'worker',
          '--controller',
          ctl.url,
          '--instance-id',
          job.cloudId,
          '--executor',
          'process',
          '--work-dir',
          job.dir,
        ],
        { env: bareEnv(), stdio: ['ignore', 'pipe', 'pipe'] },
      );
      children.push(worker);
      let log = '';
      worker.stdout?.on('data', (d: Buffer) => (log += d.toString()));
      worker.stderr?.on('data', (d: Buffer) => (log += d.toString()));
      await until('the restarted worker to register', () =>
        log.includes('registered as') ? true : undefined,
      );
      const done = await until(
        `${job.id} to succeed`,
        async () => {
          const doc = (await ctl.api('GET', `/v1/jobs/${job.id}`)).json as JobDoc;
          return doc.state === 'succeeded' || doc.state === 'failed' ? doc : undefined;
        },
        40_000,
        () => `${ctl.diagnostics()}\n--- restarted worker:\n${log}`,
      );
      expect(done.state, done.reason).toBe('succeeded');
      expect(log).toMatch(/re-registered/);
      // A local instance's tasks end with its worker: the restarted worker finds its task ended without an exit code,
      // takes it for stopped (not failed) and, as the controller still wants it there, runs it again.
      expect(log).toContain(`adopted task ${job.id}.0 (exited)`);
      expect(log).toMatch(new RegExp(`started ${job.id.replace('.', '\\.')}\\.0`));
      worker.kill('SIGTERM');
    } finally {
      ctl.process.kill('SIGTERM');
      await ctl.exited;
    }
  });
});
