import { execFile } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';
import { writeShortCounterSpec } from '../helpers/counter-spec.js';
import {
  killLocalLeftovers,
  pidAlive,
  startLocalController,
  until,
  type StartedController,
} from '../helpers/local-controller.js';
import { freePort } from '../helpers/test-ports.js';

/**
 * A lost state file, through the real CLI in local mode (process executor): with `state.db` emptied while its
 * instance still runs a job, the controller refuses to start as a new cluster, saying what it found and what `--init`
 * does; with `--init` it starts, and the instance whose tasks it cannot account for is kept running and reported (an
 * error in the log, `fleetwise cluster`, `/metrics`), never terminated.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-empty-state-'));
const stateDirs: string[] = [];

beforeAll(() => ensureBuiltCli());
afterAll(() => {
  for (const dir of stateDirs) killLocalLeftovers(dir);
  rmSync(scratch, { recursive: true, force: true });
});

interface JobDoc {
  state: string;
  progress: { completed: number };
  instances: { id: string; cloudId?: string }[];
}

/** Empty the state as a failed disk or a careless `> state.db` would: a zero-length file, no WAL beside it. */
function emptyStateFile(stateDir: string): void {
  closeSync(openSync(join(stateDir, 'state.db'), 'w'));
  for (const suffix of ['-wal', '-shm']) rmSync(join(stateDir, `state.db${suffix}`), { force: true });
}

/** The CLI run to its exit, or killed after `timeoutMs` (a controller that started instead of refusing). */
function runToExit(args: readonly string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { env, timeout: timeoutMs, killSignal: 'SIGKILL' },
      (error, stdout, stderr) =>
        resolve({
          code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1,
          stdout,
          stderr: `${stderr}${error?.killed === true ? `\n(still running after ${timeoutMs} ms: killed)` : ''}`,
        }),
    );
  });
}

describe('an emptied state file (real CLI, local mode)', () => {
  it('is refused as a new cluster unless --init, and --init keeps and reports the instance it cannot account for', async () => {
    const stateDir = join(scratch, 'emptied');
    stateDirs.push(stateDir);
    const first: StartedController = await startLocalController(stateDir);
    const spec = writeShortCounterSpec(join(scratch, 'counter.yaml'), {
      countTo: 2000,
      stepSeconds: 0.05,
      checkpointSeconds: 1,
    });
    const submitted = await runCli(['submit', spec, '--json'], first.env);
    expect(submitted.code, submitted.stderr).toBe(0);
    const id = (JSON.parse(submitted.stdout) as { id: string }).id;
    const running = await until(
      `${id} to run and checkpoint`,
      async () => {
        const job = (await first.api('GET', `/v1/jobs/${id}`)).json as JobDoc;
        return job.state === 'running' && existsSync(join(stateDir, 'objects', 'checkpoints', id, `${id}.0`))
          ? job
          : undefined;
      },
      40_000,
      first.diagnostics,
    );
    const cloudId = running.instances[0]?.cloudId as string;
    const worker = first.instances().find((i) => i.instanceId === cloudId);
    if (worker?.pid === undefined) throw new Error(`no worker for ${id}\n${first.diagnostics()}`);
    // The controller's box dies (its workers are detached and run on), and the state file is lost.
    first.process.kill('SIGKILL');
    await first.exited;
    emptyStateFile(stateDir);

    const port = await freePort();
    const refused = await runToExit(
      [
        'controller',
        '--config',
        `${stateDir}.yaml`,
        '--provider',
        'local',
        '--state-dir',
        stateDir,
        '--listen',
        `127.0.0.1:${port}`,
        '--executor',
        'process',
      ],
      first.env,
      15_000,
    );
    expect(refused.stderr).not.toMatch(/still running after/);
    expect(refused.code, refused.stdout + refused.stderr).not.toBe(0);
    // What was found, and what --init would do.
    expect(refused.stderr).toContain(cloudId);
    expect(refused.stderr).toContain('local-instances.json');
    expect(refused.stderr).toMatch(/checkpoints\//);
    expect(refused.stderr).toMatch(/--init/);
    expect(refused.stderr).toMatch(/--orphans/);
    expect(pidAlive(worker.pid)).toBe(true);

    // The operator decides this is a new cluster: the instance is kept (its job is unaccounted for) and reported.
    const second = await startLocalController(stateDir, { args: ['--init'] });
    try {
      const cluster = await until(
        'the orphan in the cluster view',
        async () => {
          const doc = (await second.api('GET', '/v1/cluster')).json as {
            orphans?: { cloudId: string; policy: string }[];
          };
          return (doc.orphans ?? []).length > 0 ? doc : undefined;
        },
        20_000,
        second.diagnostics,
      );
      expect(cluster.orphans).toEqual([expect.objectContaining({ cloudId, policy: 'keep' })]);
      // Several reconcile passes and rounds later it still runs, with its worker.
      await new Promise((r) => setTimeout(r, 3000));
      expect(second.instances().find((i) => i.instanceId === cloudId)?.state).toBe('running');
      expect(pidAlive(worker.pid)).toBe(true);
      const metrics = await fetch(`${second.url}/metrics`).then((r) => r.text());
      expect(metrics).toMatch(/^fleetwise_orphan_instances 1$/m);
      expect(second.stderr()).toMatch(/"level":50[^\n]*orphan[^\n]*local-/);
      const shown = await runCli(['cluster'], second.env);
      expect(shown.code, shown.stderr).toBe(0);
      expect(shown.stdout).toContain(cloudId);
      expect(shown.stdout).toMatch(/orphan/i);
      // A restart of the now initialised state needs no --init.
      second.process.kill('SIGKILL');
      await second.exited;
      const third = await startLocalController(stateDir);
      third.process.kill('SIGKILL');
      await third.exited;
    } finally {
      if (second.process.exitCode === null) second.process.kill('SIGKILL');
    }
  });

  it('--init over the object store of an earlier run gives new jobs ids above the old ones, so they run on keys of their own', async () => {
    const stateDir = join(scratch, 'reinit');
    stateDirs.push(stateDir);
    const job = (name: string, output: string): Record<string, unknown> => ({
      name,
      team: 'examples',
      tasks: [{ name: 't', demand: { any: [0, 0.25, 1.5] }, command: ['sh', '-c', `echo ${output}`] }],
    });
    const succeeded = async (ctl: StartedController, id: string): Promise<string> => {
      await until(
        `${id} to succeed`,
        async () =>
          ((await ctl.api('GET', `/v1/jobs/${id}`)).json as JobDoc).state === 'succeeded' || undefined,
        60_000,
        ctl.diagnostics,
      );
      return (await ctl.api('GET', `/v1/jobs/${id}/logs`)).text;
    };
    const first = await startLocalController(stateDir);
    const old = await first.api('POST', '/v1/jobs', job('old', 'OUTPUT-OF-THE-OLD-JOB'));
    expect(old.status, old.text).toBe(201);
    const oldId = (old.json as { id: string }).id;
    expect(await succeeded(first, oldId)).toContain('OUTPUT-OF-THE-OLD-JOB');
    const down = await runCli(['down', '--state-dir', stateDir], first.env);
    expect(down.code, down.stderr).toBe(0);
    await first.exited;
    for (const suffix of ['', '-wal', '-shm']) rmSync(join(stateDir, `state.db${suffix}`), { force: true });

    const second = await startLocalController(stateDir, { args: ['--init'] });
    try {
      const added = await second.api('POST', '/v1/jobs', job('new', 'OUTPUT-OF-THE-NEW-JOB'));
      expect(added.status, added.text).toBe(201);
      const newId = (added.json as { id: string }).id;
      // It ran (an old job's exit record is not its own) and shows its own output only: its id is new.
      const logs = await succeeded(second, newId);
      expect(logs).toContain('OUTPUT-OF-THE-NEW-JOB');
      expect(logs).not.toContain('OUTPUT-OF-THE-OLD-JOB');
      expect(Number(newId.slice(4))).toBeGreaterThan(Number(oldId.slice(4)));
      // The operator is told why the numbering does not start at job-1.
      expect(second.stderr()).toMatch(
        new RegExp(
          `holds objects of jobs up to ${oldId} .*new jobs start at job-${Number(oldId.slice(4)) + 1}`,
        ),
      );
    } finally {
      second.process.kill('SIGTERM');
      await second.exited;
    }
  });
});
