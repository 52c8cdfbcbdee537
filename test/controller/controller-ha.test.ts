import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { readLocalInstances } from '../../src/cloud/local/instance-file.js';
import { LocalProvider } from '../../src/cloud/local/local-provider.js';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { TAG_LAUNCH_TOKEN } from '../../src/cloud/provider.js';
import { FAULT_POINTS, type FaultPoint } from '../../src/controller/faults.js';
import { PostgresStateStore } from '../../src/controller/state/postgres-state-store.js';
import { startActiveProxy, type ActiveProxy } from '../helpers/active-proxy.js';
import { CLI, ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { bareEnv, killLocalLeftovers } from '../helpers/local-controller.js';
import { freePort } from '../helpers/test-ports.js';
import { describeWithPostgres } from '../helpers/postgres.js';

/**
 * Two real controller processes (`node dist/cli/main.js controller --state postgres://…`) on one PostgreSQL and the
 * local provider, behind a load balancer that sends traffic to whichever answers /readyz (test/helpers/active-proxy.ts).
 * The active one SIGKILLs itself at every named fault point in turn (FLEETWISE_CRASH_AT, as in the SQLite SIGKILL
 * test); each time the standby takes the lease and carries on, and a new standby is started in the dead one's place,
 * armed with the next fault point. The workload is chosen so each point is reached: an orphan instance to adopt,
 * rounds, launches, starts, a cancel (stops) and the terminations that follow. At the end every job is accounted
 * for, each task ran exactly once, no launch token started a second instance, and every instance is gone. Then a clean
 * stop hands the lease and a running task over at once, and a paused (SIGSTOP) active controller, resumed after a
 * takeover, exits instead of acting on its lost lease.
 */

const ADMIN_TOKEN = 'ha-test-admin-token-0123456789abcdef';
const CLUSTER = 'ha';
/** Short leases: a takeover takes the lease's 3 s, a retry period and the recovery. */
// Shorter than the defaults (15/10/2 s) so the eleven takeovers take a minute, yet long enough that a busy CI host
// stalling a controller for a few seconds does not depose it.
const LEASE = { durationSeconds: 8, renewDeadlineSeconds: 6, retrySeconds: 0.5 };
const TAKEOVER_LIMIT_MS = 30_000;

/** In the order the workload reaches them (see the test). */
const SEQUENCE: readonly FaultPoint[] = [
  'orphan:recorded',
  'round:planned',
  'round:committed',
  'launch:before-call',
  'launch:after-call',
  'start:before-call',
  'start:after-call',
  'stop:before-call',
  'stop:after-call',
  'terminate:before-call',
  'terminate:after-call',
];

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-ha-'));
const stateDir = join(scratch, 'state');
const runsDir = join(scratch, 'runs');
const spawned: ChildProcess[] = [];
let proxy: ActiveProxy | undefined;

afterAll(async () => {
  for (const child of spawned)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  killLocalLeftovers(stateDir);
  await proxy?.close();
  rmSync(scratch, { recursive: true, force: true });
});

interface Generation {
  readonly index: number;
  readonly point: FaultPoint | undefined;
  readonly url: string;
  readonly child: ChildProcess;
  /** `at`: when this process noticed the exit (Date.now()). */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  output(): string;
  /** When its output first said it holds the lease (Date.now()), if it has. */
  activeSince(): number | undefined;
}

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs: number,
  context: () => string,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await Promise.resolve()
      .then(probe)
      .catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${context()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describeWithPostgres('active/standby controllers on one PostgreSQL', (pg) => {
  let url = '';
  let configFile = '';
  const generations: Generation[] = [];

  beforeAll(async () => {
    ensureBuiltCli();
    url = pg.server.createDatabase();
    mkdirSync(stateDir, { recursive: true });
    mkdirSync(runsDir, { recursive: true });
    configFile = join(scratch, 'ha.yaml');
    writeFileSync(
      configFile,
      [
        `cluster: ${CLUSTER}`,
        'roundSeconds: 1',
        'pollSeconds: 0.5',
        'workerHeartbeatSeconds: 0.5',
        // The workload makes an orphan instance for the orphan fault point: the controllers adopt it.
        'orphans: adopt',
        `lease: { durationSeconds: ${LEASE.durationSeconds}, renewDeadlineSeconds: ${LEASE.renewDeadlineSeconds}, retrySeconds: ${LEASE.retrySeconds} }`,
        '',
      ].join('\n'),
    );
    proxy = await startActiveProxy(() =>
      generations.filter((g) => g.child.exitCode === null && g.child.signalCode === null).map((g) => g.url),
    );
  });

  const diagnostics = (): string =>
    generations
      .slice(-3)
      .map((g) => {
        const { exitCode, signalCode } = g.child;
        const status =
          signalCode !== null
            ? `killed by ${signalCode}`
            : exitCode !== null
              ? `exited ${exitCode}`
              : 'running';
        return `--- controller ${g.index} (${g.point ?? 'no fault'}; ${status}):\n${g.output().slice(-2500)}`;
      })
      .join('\n');

  /**
   * A supervisor that restarts the dead: once the newest controller holds the lease, a new standby starts in the dead
   * one's place, armed with the next fault point, up to generation `lastIndex`. One standby at a time, so the takeovers
   * come in the test's order. It runs beside the test's steps because a controller that takes over may reach its own
   * fault point in its recovery, before the step that waits on it (a submission) is done: then only the next standby
   * can answer that step.
   */
  function superviseStandbys(lastIndex: number): { stop(): void; failure(): unknown } {
    let starting = false;
    let failure: unknown;
    const timer = setInterval(() => {
      const newest = generations[generations.length - 1];
      if (starting || newest === undefined || newest.index >= lastIndex) return;
      if (!newest.output().includes(`active with lease epoch ${newest.index + 1} on `)) return;
      starting = true;
      startGeneration()
        .catch((e: unknown) => (failure = e))
        .finally(() => (starting = false));
    }, 100);
    return { stop: () => clearInterval(timer), failure: () => failure };
  }

  async function startGeneration(): Promise<Generation> {
    const index = generations.length;
    const point = SEQUENCE[index];
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [
        CLI,
        'controller',
        '--config',
        configFile,
        '--provider',
        'local',
        '--executor',
        'process',
        '--state',
        url,
        '--state-dir',
        stateDir,
        '--listen',
        `127.0.0.1:${port}`,
        '--worker-controller-url',
        (proxy as ActiveProxy).url,
      ],
      {
        env: {
          ...bareEnv(),
          FLEETWISE_ADMIN_TOKEN: ADMIN_TOKEN,
          ...(point === undefined ? {} : { FLEETWISE_CRASH_AT: point }),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    spawned.push(child);
    let output = '';
    let activeSince: number | undefined;
    const take = (d: Buffer): void => {
      output = (output + d.toString()).slice(-20_000);
      if (activeSince === undefined && output.includes('active with lease epoch ')) activeSince = Date.now();
    };
    child.stdout?.on('data', take);
    child.stderr?.on('data', take);
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>(
      (resolve) => child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })),
    );
    const generation: Generation = {
      index,
      point,
      url: `http://127.0.0.1:${port}`,
      child,
      exited,
      output: () => output,
      activeSince: () => activeSince,
    };
    generations.push(generation);
    return generation;
  }

  const api = async (
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; json: unknown }> => {
    const response = await fetch(`${(proxy as ActiveProxy).url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${ADMIN_TOKEN}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, json: text === '' ? undefined : (JSON.parse(text) as unknown) };
  };

  const health = async (g: Generation): Promise<{ role: string; epoch: number | null }> => {
    const response = await fetch(`${g.url}/healthz`, { signal: AbortSignal.timeout(1000) });
    return (await response.json()) as { role: string; epoch: number | null };
  };

  const isActive = async (g: Generation): Promise<true | undefined> =>
    (await fetch(`${g.url}/readyz`, { signal: AbortSignal.timeout(1000) })).status === 200 ? true : undefined;

  const submit = async (name: string, seconds: number): Promise<string> => {
    const command = `echo run >> ${join(runsDir, name)}; sleep ${seconds}`;
    const spec = { name, team: 'ha', tasks: [{ command: ['sh', '-c', command], demand: [0, 1, 1] }] };
    const answer = await until(
      `the submission of ${name}`,
      async () => {
        const r = await api('POST', '/v1/jobs', spec);
        return r.status === 201 ? (r.json as { id: string }) : undefined;
      },
      // A takeover may fall between two submissions: its 30 s bound plus the new controller's start on a busy host.
      45_000,
      diagnostics,
    );
    return answer.id;
  };

  it('survives a SIGKILL of the active controller at every fault point: takeover within 30 s, no job lost, nothing launched or run twice', async () => {
    expect([...SEQUENCE].sort()).toEqual([...FAULT_POINTS].sort());
    const reader = new PostgresStateStore(url);
    const jobs: Record<string, string> = {};
    const takeoversMs: number[] = [];
    const first = await startGeneration();
    // Generation SEQUENCE.length runs with no fault; the one after it is the standby of the steps that follow.
    const supervisor = superviseStandbys(SEQUENCE.length + 1);
    try {
      await until('the first controller to take the lease', () => isActive(first), 30_000, diagnostics);
      await until(
        'the second controller to stand by',
        async () => {
          const second = generations[1];
          return second !== undefined && (await health(second)).role === 'standby' ? true : undefined;
        },
        30_000,
        diagnostics,
      );
      expect(await health(first)).toMatchObject({ role: 'active', epoch: 1 });
      // A standby answers nothing but its health, and says where the active one is.
      const standbyAnswer = await fetch(`${(generations[1] as Generation).url}/v1/jobs`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      expect(standbyAnswer.status).toBe(503);
      expect(await standbyAnswer.text()).toContain(`the active controller is`);

      for (let k = 0; k < SEQUENCE.length; k += 1) {
        const active = generations[k] as Generation;
        const point = SEQUENCE[k] as FaultPoint;
        // What makes the active controller reach its fault point (rounds run by themselves).
        if (point === 'orphan:recorded') {
          // An instance tagged with the cluster that the state does not know, as a lost launch record would leave.
          const orphanMaker = new LocalProvider({
            stateFile: join(stateDir, 'local-instances.json'),
            instancesDir: join(stateDir, 'instances'),
            catalog: loadCatalogFile(),
            spawner: { spawn: () => undefined, kill: async () => undefined },
          });
          await orphanMaker.launch({
            typeName: 'c7i.large',
            idempotencyToken: 'orphan-1',
            clusterName: CLUSTER,
            planId: 'lost',
            instanceKey: 'lost-1',
          });
        }
        if (point === 'launch:before-call') {
          jobs['long'] = await submit('long', 600);
          jobs['short'] = await submit('short', 2);
        }
        if (point === 'stop:before-call') {
          const id = jobs['long'] as string;
          // Running for real: its command has started on a worker.
          await until(
            `${id} running`,
            () =>
              reader.getJob(id)?.state === 'running' && existsSync(join(runsDir, 'long')) ? true : undefined,
            30_000,
            diagnostics,
          );
          await until(
            `the cancel of ${id}`,
            async () => ((await api('POST', `/v1/jobs/${id}/cancel`)).status === 200 ? true : undefined),
            20_000,
            diagnostics,
          );
        }
        const died = await Promise.race([
          active.exited,
          new Promise<undefined>((r) => setTimeout(() => r(undefined), 60_000)),
        ]);
        if (died === undefined) throw new Error(`controller ${k} never reached ${point}\n${diagnostics()}`);
        expect(died.signal, `controller ${k} at ${point}\n${diagnostics()}`).toBe('SIGKILL');
        expect(active.output()).toContain(`active with lease epoch ${k + 1}`);
        const next = generations[k + 1] as Generation;
        // Taken over once the standby holds the lease (it may reach its own fault point soon after, in recovery).
        await until(
          `controller ${k + 1} to take over after ${point}`,
          () => (next.output().includes(`active with lease epoch ${k + 2}`) ? true : undefined),
          TAKEOVER_LIMIT_MS,
          diagnostics,
        );
        // From the exit to the lease, as each was seen: a takeover may be over before the test's step gets here.
        takeoversMs.push((next.activeSince() as number) - died.at);
        await until(
          `the supervisor to start controller ${k + 2}`,
          () => (generations[k + 2] === undefined ? undefined : true),
          10_000,
          () => `${diagnostics()}\nthe supervisor's failure to start one: ${String(supervisor.failure())}`,
        );
      }
      supervisor.stop();

      // The last controller runs with no fault: everything settles.
      const last = generations[SEQUENCE.length] as Generation;
      await until(
        'every job to finish and every instance to be terminated',
        () => {
          const settled =
            reader.getJob(jobs['short'] as string)?.state === 'succeeded' &&
            reader.getJob(jobs['long'] as string)?.state === 'cancelled' &&
            reader.listInstances().every((i) => i.state === 'terminated');
          return settled ? true : undefined;
        },
        90_000,
        diagnostics,
      );
      await until(
        'the last controller to serve as the active one',
        () => isActive(last),
        30_000,
        diagnostics,
      );

      // No job lost: the two submitted are there, in the state the test drove them to.
      expect(reader.listJobs().map((j) => [j.name, j.state, j.attempts])).toEqual([
        ['long', 'cancelled', 1],
        ['short', 'succeeded', 1],
      ]);
      // Each task ran exactly once (its command appends a line per start).
      expect(readFileSync(join(runsDir, 'long'), 'utf8')).toBe('run\n');
      expect(readFileSync(join(runsDir, 'short'), 'utf8')).toBe('run\n');
      // No launch started a second instance: one local instance per launch token, each known to the state once.
      const local = readLocalInstances(join(stateDir, 'local-instances.json'));
      const tokens = local.map((i) => i.tags[TAG_LAUNCH_TOKEN]);
      expect(new Set(tokens).size).toBe(tokens.length);
      const records = reader.listInstances();
      expect(records.map((r) => r.cloudId).sort()).toEqual(local.map((i) => i.instanceId).sort());
      expect(local.every((i) => i.state === 'terminated')).toBe(true);
      expect(
        records.find(
          (r) => r.cloudId === local.find((i) => i.tags[TAG_LAUNCH_TOKEN] === 'orphan-1')?.instanceId,
        ),
      ).toMatchObject({ launchToken: expect.stringMatching(/^adopted-/) });
      // Every takeover within the limit (the figure: lease expiry plus a retry period and the recovery).
      expect(takeoversMs).toHaveLength(SEQUENCE.length);
      expect(Math.max(...takeoversMs)).toBeLessThan(TAKEOVER_LIMIT_MS);
      console.log(
        `takeover after SIGKILL: max ${Math.max(...takeoversMs)} ms, all ${takeoversMs.join(', ')} ms`,
      );

      const standby = generations[SEQUENCE.length + 1] as Generation;
      await until(
        'a standby',
        async () => ((await health(standby)).role === 'standby' ? true : undefined),
        30_000,
        diagnostics,
      );

      // `fleetwise cluster` says which controller answered and the lease's epoch (the active one, through the load
      // balancer); the standby, asked directly, answers only where the active one is.
      const cliEnv = (server: string): NodeJS.ProcessEnv => ({
        ...bareEnv(),
        FLEETWISE_SERVER: server,
        FLEETWISE_TOKEN: ADMIN_TOKEN,
      });
      const viaBalancer = await runCli(['cluster'], cliEnv((proxy as ActiveProxy).url));
      expect(viaBalancer.stdout, viaBalancer.stderr).toMatch(
        new RegExp(`^controller: active, lease epoch ${SEQUENCE.length + 1} held by \\S+$`, 'm'),
      );
      const direct = await fetch(`${standby.url}/v1/cluster`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      expect(direct.status).toBe(503);
      expect(((await direct.json()) as { error: string }).error).toMatch(
        /standby: the active controller is \S+ at http:\/\/127\.0\.0\.1:\d+ \(epoch \d+\)/,
      );

      // A clean stop hands the lease over at once, and the fleet with it: a task running on a worker through the
      // handover keeps running, and finishes under the new active controller.
      jobs['handover'] = await submit('handover', 2);
      await until(
        'the handover job to start',
        () => (existsSync(join(runsDir, 'handover')) ? true : undefined),
        30_000,
        diagnostics,
      );
      const stoppedAt = Date.now();
      last.child.kill('SIGTERM');
      expect((await last.exited).code).toBe(0);
      await until('the standby to take over a released lease', () => isActive(standby), 10_000, diagnostics);
      expect(Date.now() - stoppedAt).toBeLessThan(LEASE.durationSeconds * 1000);
      expect(await health(standby)).toMatchObject({ role: 'active', epoch: SEQUENCE.length + 2 });
      await until(
        'the handover job to succeed',
        () => (reader.getJob(jobs['handover'] as string)?.state === 'succeeded' ? true : undefined),
        60_000,
        diagnostics,
      );
      expect(readFileSync(join(runsDir, 'handover'), 'utf8')).toBe('run\n');

      // A paused active controller (SIGSTOP: a long GC pause, a frozen VM) loses its lease to the standby; resumed,
      // it finds its lease gone and exits rather than act on it.
      const paused = standby;
      const successor = await startGeneration();
      await until(
        'a standby',
        async () => ((await health(successor)).role === 'standby' ? true : undefined),
        30_000,
        diagnostics,
      );
      paused.child.kill('SIGSTOP');
      await until(
        'the standby to take over from the paused controller',
        () =>
          successor.output().includes(`active with lease epoch ${SEQUENCE.length + 3}`) ? true : undefined,
        TAKEOVER_LIMIT_MS,
        diagnostics,
      );
      paused.child.kill('SIGCONT');
      const resumed = await paused.exited;
      expect(resumed.code, paused.output()).toBe(75);
      expect(paused.output()).toContain('lost the controller lease');
      await until('the successor to serve', () => isActive(successor), 30_000, diagnostics);
    } finally {
      supervisor.stop();
      reader.close();
    }
  }, 400_000);
});
