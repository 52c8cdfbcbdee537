import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/built-cli.js';
import { writeShortCounterSpec } from '../helpers/counter-spec.js';
import {
  killLocalLeftovers,
  pidAlive,
  startLocalController,
  taskPid,
  until,
  type StartedController,
} from '../helpers/local-controller.js';

/**
 * Stopping local mode, through the real CLI (process executor, no Docker needed): Ctrl-C on the controller stops its
 * workers after they checkpointed their tasks (and the next start resumes the job); `--keep-workers` leaves them and
 * says which and how to stop them; `fleetwise down` stops the controller and every worker, twice without harm; a kept
 * worker whose controller stays gone checkpoints its task and exits on its own.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-local-stop-'));
const stateDirs: string[] = [];

afterAll(() => {
  for (const dir of stateDirs) killLocalLeftovers(dir);
  rmSync(scratch, { recursive: true, force: true });
});

// 300 steps of 0.04 s: ~12 s, long enough to stop mid-run, short enough to finish after a restart.
const COUNT_TO = 300;
/** How long the first test leaves its controller stopped before starting it again. */
const STOPPED_SECONDS = 6;
const spec = (): string =>
  writeShortCounterSpec(join(scratch, 'counter.yaml'), {
    countTo: COUNT_TO,
    stepSeconds: 0.04,
    checkpointSeconds: 1,
  });

async function start(
  name: string,
  options: Parameters<typeof startLocalController>[1] = {},
): Promise<StartedController> {
  const stateDir = join(scratch, name);
  stateDirs.push(stateDir);
  return startLocalController(stateDir, options);
}

interface JobDoc {
  state: string;
  progress: { completed: number };
  instances: { id: string; cloudId?: string }[];
}

async function submitAndRun(
  ctl: StartedController,
): Promise<{ id: string; pid: number; dir: string; instanceId: string }> {
  const submitted = await runCli(['submit', spec(), '--json'], ctl.env);
  expect(submitted.code, submitted.stderr).toBe(0);
  const id = (JSON.parse(submitted.stdout) as { id: string }).id;
  const checkpoints = join(ctl.stateDir, 'objects', 'checkpoints', id, `${id}.0`);
  const doc = await until(
    `${id} to run and checkpoint`,
    async () => {
      const { json } = await ctl.api('GET', `/v1/jobs/${id}`);
      const job = json as JobDoc;
      return job.state === 'running' && job.progress.completed >= 10 && existsSync(checkpoints)
        ? job
        : undefined;
    },
    40_000,
    ctl.diagnostics,
  );
  const record = ctl.instances().find((i) => i.instanceId === doc.instances[0]?.cloudId);
  if (record?.pid === undefined) throw new Error(`no worker pid for ${id}\n${ctl.diagnostics()}`);
  return { id, pid: record.pid, dir: record.dir, instanceId: doc.instances[0]?.id ?? '' };
}

function workerLog(dir: string): string {
  const file = join(dir, 'worker.log');
  return existsSync(file) ? readFileSync(file, 'utf8') : '';
}

describe.concurrent('stopping local mode', () => {
  it('Ctrl-C checkpoints and stops the workers and their tasks; the next start resumes the job', async () => {
    const ctl = await start('ctrl-c');
    const { id, pid, dir, instanceId } = await submitAndRun(ctl);
    const task = taskPid(dir, `${id}.0`) as number;
    expect(pidAlive(task)).toBe(true);
    // Twice at once, as under `npm start` (the terminal's SIGINT and npm's forwarded one): still one clean stop.
    ctl.process.kill('SIGINT');
    ctl.process.kill('SIGINT');
    expect(await ctl.exited).toBe(0);
    expect(ctl.stdout()).toMatch(/stopping 1 local worker\(s\): checkpointing their tasks/);
    expect(ctl.stdout()).toMatch(new RegExp(`stopped local-[0-9a-f]+ \\(pid ${pid}\\)`));
    expect(pidAlive(pid)).toBe(false);
    expect(pidAlive(task)).toBe(false);
    expect(workerLog(dir)).toMatch(new RegExp(`checkpointed and stopped 1 task\\(s\\) \\(${id}\\.0\\)`));
    expect(ctl.instances().every((i) => i.state === 'terminated')).toBe(true);
    const stopped = ctl.instances()[0];
    const aliveSeconds = ((stopped?.terminatedAtMs ?? Number.NaN) - (stopped?.launchTimeMs ?? 0)) / 1000;

    // Stopped a while: that time is nobody's cost.
    await new Promise((r) => setTimeout(r, STOPPED_SECONDS * 1000));
    // The same state directory again: the job resumes from the checkpoint its worker took on the way out.
    const again = await startLocalController(ctl.stateDir);
    try {
      // Closed as stopped with the controller (an info line), not as lost.
      const closed = await until(
        `${instanceId} to be closed`,
        () => {
          const lines = again.stderr().split('\n');
          const line = lines.find((l) =>
            l.includes(`instance ${instanceId} terminated when the controller stopped`),
          );
          return line === undefined ? undefined : { line, lines };
        },
        30_000,
        again.diagnostics,
      );
      expect(closed.line).toMatch(/"level":30/);
      expect(closed.lines.filter((l) => l.includes(`instance ${instanceId} lost`))).toEqual([]);
      const done = await until(
        `${id} to succeed after the restart`,
        async () => {
          const { json } = await again.api('GET', `/v1/jobs/${id}`);
          return (json as JobDoc).state === 'succeeded' ? (json as JobDoc) : undefined;
        },
        60_000,
        again.diagnostics,
      );
      expect(done.progress.completed).toBe(COUNT_TO);
      const logs = (await again.api('GET', `/v1/jobs/${id}/logs`)).text;
      expect(Number(/resumed at (\d+)/.exec(logs)?.[1])).toBeGreaterThan(0);
      expect(logs).toMatch(new RegExp(`finished ${COUNT_TO}`));
      // The job's share of that instance is its time there, not the stop's too (the instance's own line is the
      // one-minute minimum either way, the rest of it idle).
      const costs = (await again.api('GET', '/v1/costs')).json as {
        byInstance: { id: string; cost: number; idleCost: number; billedSeconds: number }[];
      };
      const line = costs.byInstance.find((l) => l.id === instanceId);
      if (line === undefined) throw new Error(`no cost line for ${instanceId}`);
      const jobSeconds = ((line.cost - line.idleCost) / line.cost) * line.billedSeconds;
      expect(jobSeconds).toBeGreaterThan(0);
      expect(jobSeconds).toBeLessThan(aliveSeconds + 1);
    } finally {
      again.process.kill('SIGTERM');
      await again.exited;
    }
  }, 120_000);

  it('--keep-workers leaves them running and names them; fleetwise down stops them, and again finds nothing', async () => {
    const ctl = await start('keep', { args: ['--keep-workers'] });
    const { id, pid, dir } = await submitAndRun(ctl);
    const task = taskPid(dir, `${id}.0`) as number;
    ctl.process.kill('SIGINT');
    expect(await ctl.exited).toBe(0);
    expect(ctl.stdout()).toMatch(
      new RegExp(
        `--keep-workers: left 1 worker process\\(es\\) running with their tasks: local-[0-9a-f]+ \\(pid ${pid}\\)`,
      ),
    );
    expect(ctl.stdout()).toContain(`fleetwise down --state-dir ${ctl.stateDir}`);
    expect(ctl.stdout()).toMatch(/each checkpoints its tasks and exits after 300 s/);
    expect(pidAlive(pid)).toBe(true);
    expect(pidAlive(task)).toBe(true);

    const down = await runCli(['down', '--state-dir', ctl.stateDir]);
    expect(down.code, down.stderr).toBe(0);
    expect(down.stdout).toMatch(/worker local-[0-9a-f]+ \(pid \d+\): checkpointed its tasks and stopped/);
    expect(pidAlive(pid)).toBe(false);
    expect(pidAlive(task)).toBe(false);
    expect(workerLog(dir)).toMatch(/checkpointed and stopped 1 task\(s\)/);
    expect(ctl.instances().every((i) => i.state === 'terminated')).toBe(true);

    const twice = await runCli(['down', '--state-dir', ctl.stateDir]);
    expect(twice.code, twice.stderr).toBe(0);
    expect(twice.stdout).toMatch(/nothing to stop in /);
  }, 120_000);

  it('fleetwise down stops a running controller, which stops its workers', async () => {
    const ctl = await start('down-controller');
    const { id, pid, dir } = await submitAndRun(ctl);
    const down = await runCli(['down', '--state-dir', ctl.stateDir]);
    expect(down.code, down.stderr).toBe(0);
    expect(down.stdout).toMatch(new RegExp(`stopping the controller \\(pid ${ctl.process.pid}\\)`));
    expect(down.stdout).toMatch(/controller stopped/);
    expect(await ctl.exited).toBe(0);
    expect(pidAlive(pid)).toBe(false);
    expect(pidAlive(taskPid(dir, `${id}.0`) as number)).toBe(false);
    expect(existsSync(join(ctl.stateDir, 'controller.pid'))).toBe(false);
  }, 120_000);

  it('a kept worker whose controller stays gone checkpoints its task and exits, with one clear line', async () => {
    const ctl = await start('give-up', { args: ['--keep-workers', '--worker-give-up-seconds', '3'] });
    const { id, pid, dir } = await submitAndRun(ctl);
    const task = taskPid(dir, `${id}.0`) as number;
    ctl.process.kill('SIGINT');
    expect(await ctl.exited).toBe(0);
    expect(ctl.stdout()).toMatch(/each checkpoints its tasks and exits after 3 s/);
    await until('the worker to give up', () => (pidAlive(pid) ? undefined : true), 40_000, ctl.diagnostics);
    expect(pidAlive(task)).toBe(false);
    const lines = workerLog(dir)
      .split('\n')
      .filter((l) => l.includes('giving up:'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(
        `giving up: no answer from the controller at ${ctl.url} for \\d+ s; checkpointed and stopped 1 task\\(s\\) \\(${id}\\.0\\); exiting`,
      ),
    );
    // Its last checkpoint is in the object store for whichever controller comes next.
    const checkpoints = join(ctl.stateDir, 'objects', 'checkpoints', id, `${id}.0`);
    expect(readdirSync(checkpoints).length).toBeGreaterThan(0);
  }, 120_000);
});
