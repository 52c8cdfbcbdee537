import { execFile, spawn } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { CLI, ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';
import {
  bareEnv,
  LOCAL_ADMIN_TOKEN,
  oneLocalController,
  until,
  type StartedController,
} from '../helpers/local-controller.js';

/**
 * Under --json stderr holds only the error a command ends with (one JSON object): what text mode tells on stderr
 * along the way is left out there. submit's warnings are its lines' `warnings` (a dry run's, its view's), `wait
 * --json` and `jobs --watch --json` wait through a controller gone a while unsaid, the watch ending with the error on
 * any other failure, and `submit -` typed at a terminal is not prompted for on a stderr a script reads; resubmit's
 * notes and a local state passed over are not told either (an error for want of an address or token names it). And
 * stdout stays empty when the command fails: a dry run of several files prints its views once every file passed,
 * and `jobs --state` is checked before anything is asked. Text mode tells each as before. The built CLI in a
 * subprocess against a real local controller (process executor), reached through an HTTP proxy that drops every
 * request for a while, as a controller restarting is seen from the client.
 */

const controller = oneLocalController('fleetwise-json-quiet-');
let ctl: StartedController;

interface JsonError {
  readonly error: string;
  readonly status?: number;
  readonly reason?: string;
  readonly details?: readonly string[];
}

/** An answered job, as `submit --json` prints each. */
interface SubmittedLine {
  readonly id: string;
  readonly state: string;
  readonly warnings: readonly string[];
}

/** A task whose image the process executor ignores: its submission is warned, and its command runs on the host. */
function specFile(name: string, command: readonly string[]): string {
  const file = join(controller.scratch, `${name}.yaml`);
  writeFileSync(
    file,
    [
      `name: ${name}`,
      'team: examples',
      'tasks:',
      '  - name: main',
      '    image: busybox:latest',
      `    command: ${JSON.stringify(command)}`,
      '    demand: {any: [0, 0.25, 0.5]}',
      '',
    ].join('\n'),
  );
  return file;
}

const IMAGE_IGNORED = /^task main: no Docker engine \(process executor\): image busybox:latest is ignored/;

function cli(args: readonly string[], server = ctl.url): Promise<CliResult> {
  return runCli(args, { ...bareEnv(), FLEETWISE_SERVER: server, FLEETWISE_TOKEN: LOCAL_ADMIN_TOKEN });
}

/** stderr as --json promises it on an error: exactly one JSON object. */
function jsonError(stderr: string): JsonError {
  expect(stderr.trim().split('\n'), stderr).toHaveLength(1);
  return JSON.parse(stderr) as JsonError;
}

/** A job that runs until cancelled, submitted through the API; its id. */
async function sleeper(name: string): Promise<string> {
  const answer = await ctl.api('POST', '/v1/jobs', {
    name,
    team: 'examples',
    tasks: [{ name: 'main', command: ['sleep', '600'], demand: { any: [0, 0.25, 0.5] } }],
  });
  expect(answer.status, answer.text).toBe(201);
  return (answer.json as { id: string }).id;
}

async function cancel(id: string): Promise<void> {
  const answer = await ctl.api('POST', `/v1/jobs/${id}/cancel`);
  expect(answer.status, answer.text).toBe(200);
}

/**
 * The controller behind a proxy that forwards each request, or in `drop` mode closes its connection unanswered (no
 * answer at all: the controller unreachable, a failure a later poll may not meet). Counts both.
 */
interface DroppingProxy {
  readonly url: string;
  drop: boolean;
  readonly answered: number;
  readonly dropped: number;
  close(): Promise<void>;
}

async function droppingProxy(target: string): Promise<DroppingProxy> {
  const counts = { answered: 0, dropped: 0 };
  let drop = false;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (drop) {
        counts.dropped += 1;
        req.socket.destroy();
        return;
      }
      const headers: Record<string, string> = {};
      for (const name of ['authorization', 'content-type', 'idempotency-key'])
        if (typeof req.headers[name] === 'string') headers[name] = req.headers[name];
      const body = Buffer.concat(chunks);
      void fetch(`${target}${req.url ?? '/'}`, {
        method: req.method ?? 'GET',
        headers,
        ...(body.length > 0 ? { body } : {}),
      }).then(async (answer) => {
        const type = answer.headers.get('content-type');
        res.writeHead(answer.status, type === null ? {} : { 'content-type': type });
        res.end(Buffer.from(await answer.arrayBuffer()), () => (counts.answered += 1));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy has no port');
  return {
    url: `http://127.0.0.1:${address.port}`,
    get drop() {
      return drop;
    },
    set drop(value: boolean) {
      drop = value;
    },
    get answered() {
      return counts.answered;
    },
    get dropped() {
      return counts.dropped;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Once the proxy has answered `answers` more requests, drops the next three, then forwards again. */
async function outageAfter(proxy: DroppingProxy, answers: number): Promise<void> {
  const answered = proxy.answered;
  await until('the first polls answered', () => (proxy.answered >= answered + answers ? true : undefined));
  proxy.drop = true;
  const dropped = proxy.dropped;
  await until('three polls dropped', () => (proxy.dropped >= dropped + 3 ? true : undefined));
  proxy.drop = false;
}

/** A command that runs until stopped, as a subprocess: its output so far, and its exit. */
interface Running {
  readonly out: { stdout: string; stderr: string };
  readonly exited: Promise<number | null>;
  stop(): void;
}

function started(args: readonly string[], env: NodeJS.ProcessEnv): Running {
  const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (d: Buffer) => (out.stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out.stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { out, exited, stop: () => child.kill('SIGINT') };
}

function lines(text: string): string[] {
  return text.split('\n').filter((line) => line !== '');
}

beforeAll(async () => {
  ensureBuiltCli();
  ctl = await controller.start();
}, 240_000);

describe('submit --json: warnings are in the JSON on stdout, not plain lines on stderr', () => {
  it('a submission, one job or an array; text mode still tells them on stderr', async () => {
    const file = specFile('warned', ['true']);
    const json = await cli(['submit', file, '--json']);
    expect(json.code, json.stderr).toBe(0);
    expect(json.stderr).toBe('');
    const [line, ...more] = lines(json.stdout).map((l) => JSON.parse(l) as SubmittedLine);
    expect(more).toEqual([]);
    expect(line?.warnings[0]).toMatch(IMAGE_IGNORED);

    const array = await cli(['submit', file, '--json', '--array', '2']);
    expect(array.code, array.stderr).toBe(0);
    expect(array.stderr).toBe('');
    const jobs = lines(array.stdout).map((l) => JSON.parse(l) as SubmittedLine);
    expect(jobs).toHaveLength(2);
    for (const job of jobs) expect(job.warnings[0]).toMatch(IMAGE_IGNORED);

    const text = await cli(['submit', file]);
    expect(text.code, text.stderr).toBe(0);
    const id = /^submitted (job-\d+) /.exec(text.stdout)?.[1];
    expect(text.stderr).toMatch(
      new RegExp(`^warning: ${id}: task main: no Docker engine \\(process executor\\)`),
    );
  }, 120_000);

  it('a dry run: in its view; text mode still tells them on stderr', async () => {
    const file = specFile('dry-warned', ['true']);
    const dry = await cli(['submit', file, '--dry-run', '--json']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stderr).toBe('');
    expect((JSON.parse(dry.stdout) as { warnings: string[] }).warnings[0]).toMatch(IMAGE_IGNORED);

    const text = await cli(['submit', file, '--dry-run']);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stderr.startsWith(`warning: ${file}: task main: no Docker engine`), text.stderr).toBe(true);
  }, 120_000);

  it('submit - --json from a terminal: no prompt on a stderr a script reads; text mode prompts', async () => {
    const spec = [
      'name: typed',
      'team: examples',
      'tasks:',
      '  - command: ["true"]',
      '    demand: [0, 0.25, 0.5]',
    ];
    const typed = async (json: boolean): Promise<CliResult> => {
      const result = await atTerminal(['submit', '-', ...(json ? ['--json'] : [])], `${spec.join('\n')}\n`);
      expect(result.code, result.stderr).toBe(0);
      return result;
    };
    const json = await typed(true);
    expect(json.stderr).toBe('');
    expect((JSON.parse(json.stdout) as SubmittedLine).state).toBe('queued');
    const text = await typed(false);
    expect(text.stderr).toBe('reading the job spec from standard input (end with Ctrl-D)\n');
    expect(text.stdout).toMatch(/^submitted job-\d+ \(typed, team examples\): queued\n$/);
  }, 120_000);
});

/**
 * The CLI with `input` typed at a terminal (its stdin a pseudo-terminal, then Ctrl-D), its stdout and stderr pipes as
 * a script's: Node opens no pseudo-terminal, Python's pty module does.
 */
function atTerminal(args: readonly string[], input: string): Promise<CliResult> {
  const program = [
    'import json, os, pty, subprocess, sys, threading',
    'master, slave = pty.openpty()',
    'child = subprocess.Popen(json.loads(sys.argv[1]), stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE)',
    'os.close(slave)',
    'def echo():',
    '    try:',
    '        while os.read(master, 4096): pass',
    '    except OSError: pass',
    'threading.Thread(target=echo, daemon=True).start()',
    // Ctrl-D at the start of a line ends the input.
    "os.write(master, sys.argv[2].encode() + b'\\x04')",
    'out, err = child.communicate(timeout=120)',
    "print(json.dumps({'code': child.returncode, 'stdout': out.decode(), 'stderr': err.decode()}))",
  ].join('\n');
  const env = { ...bareEnv(), FLEETWISE_SERVER: ctl.url, FLEETWISE_TOKEN: LOCAL_ADMIN_TOKEN };
  return new Promise((resolve, reject) => {
    execFile(
      'python3',
      ['-c', program, JSON.stringify([process.execPath, CLI, ...args]), input],
      { env },
      (error, stdout, stderr) => {
        if (error !== null) reject(new Error(`${error.message}\n${stderr}`));
        else resolve(JSON.parse(stdout) as CliResult);
      },
    );
  });
}

describe('wait --json through a controller gone a while', () => {
  it('says nothing of it: stdout the ended jobs, stderr empty; text mode tells it', async () => {
    const proxy = await droppingProxy(ctl.url);
    try {
      for (const json of [true, false]) {
        const id = await sleeper(`waited-${json ? 'json' : 'text'}`);
        const args = ['wait', id, '--interval', '0.2', '--timeout', '120s', ...(json ? ['--json'] : [])];
        const waiting = cli(args, proxy.url);
        await outageAfter(proxy, 1);
        // Answered again (the controller back) before the job ends.
        const answered = proxy.answered;
        await until('a poll answered again', () => (proxy.answered > answered ? true : undefined));
        await cancel(id);
        const result = await waiting;
        expect(result.code, result.stderr).toBe(1);
        if (json) {
          expect(result.stderr).toBe('');
          const ended = JSON.parse(result.stdout) as { id: string; state: string }[];
          expect(ended.map((j) => [j.id, j.state])).toEqual([[id, 'cancelled']]);
        } else {
          expect(result.stdout).toMatch(new RegExp(`^${id} \\(waited-text\\): cancelled`));
          expect(result.stderr).toMatch(
            new RegExp(`^fleetwise: cannot reach the controller at ${proxy.url}`),
          );
          expect(result.stderr).toContain('; trying again\n');
          expect(result.stderr).toContain('fleetwise: the controller answers again\n');
        }
      }
    } finally {
      await proxy.close();
    }
  }, 180_000);

  it('a timeout after it: the timeout alone, one JSON object', async () => {
    const proxy = await droppingProxy(ctl.url);
    const id = await sleeper('timed-out');
    try {
      const waiting = cli(['wait', id, '--interval', '0.2', '--timeout', '8s', '--json'], proxy.url);
      await outageAfter(proxy, 1);
      const result = await waiting;
      expect(result.code, result.stderr).toBe(1);
      expect(result.stdout).toBe('');
      expect(jsonError(result.stderr)).toEqual({ error: `timed out after 8s: 1 of 1 not ended (${id})` });
    } finally {
      await proxy.close();
      await cancel(id);
    }
  }, 120_000);
});

describe('jobs --watch --json', () => {
  it('waits through a controller gone a while unsaid: stderr empty, an array per line; text tells it', async () => {
    const proxy = await droppingProxy(ctl.url);
    const env = { ...bareEnv(), FLEETWISE_SERVER: proxy.url, FLEETWISE_TOKEN: LOCAL_ADMIN_TOKEN };
    try {
      for (const json of [true, false]) {
        const watch = started(['jobs', '--watch', '--interval', '0.2', ...(json ? ['--json'] : [])], env);
        try {
          await until('the first listing', () => (watch.out.stdout.includes('\n') ? true : undefined));
          await outageAfter(proxy, 0);
          const before = watch.out.stdout.length;
          await until('a listing after it', () =>
            watch.out.stdout.slice(before).includes('\n') ? true : undefined,
          );
        } finally {
          watch.stop();
        }
        expect(await watch.exited, watch.out.stderr).toBe(0);
        if (json) {
          expect(watch.out.stderr).toBe('');
          for (const line of lines(watch.out.stdout)) expect(Array.isArray(JSON.parse(line))).toBe(true);
        } else expect(watch.out.stderr).toMatch(/^fleetwise: cannot reach the controller at /);
      }
    } finally {
      await proxy.close();
    }
  }, 180_000);

  it('ends on a failure other than that (its token revoked) with the error, one JSON object', async () => {
    const created = await cli(['token', 'create', '--team', 'examples', '--label', 'watch', '--json']);
    expect(created.code, created.stderr).toBe(0);
    const { id, token } = JSON.parse(created.stdout) as { id: string; token: string };
    const watch = started(['jobs', '--watch', '--interval', '0.2', '--json'], {
      ...bareEnv(),
      FLEETWISE_SERVER: ctl.url,
      FLEETWISE_TOKEN: token,
    });
    let code: number | null | undefined;
    try {
      await until('the first listing', () => (watch.out.stdout.includes('\n') ? true : undefined));
      const revoked = await cli(['token', 'revoke', id]);
      expect(revoked.code, revoked.stderr).toBe(0);
      code = await until('the watch to end', async () => {
        const ended = await Promise.race([
          watch.exited,
          new Promise<'running'>((r) => setTimeout(r, 200, 'running')),
        ]);
        return ended === 'running' ? undefined : ended;
      });
    } finally {
      watch.stop();
    }
    expect(code, watch.out.stderr).toBe(1);
    const e = jsonError(watch.out.stderr);
    expect(e.error).toMatch(/^GET \/v1\/jobs\S*: the controller answered 401: invalid or revoked token/);
    expect(e).toMatchObject({ status: 401, reason: 'invalid or revoked token' });
    for (const line of lines(watch.out.stdout)) expect(Array.isArray(JSON.parse(line))).toBe(true);
  }, 120_000);
});

/** The lines of `submit --dry-run --json` or `resubmit --json`, each a JSON object. */
function jsonLines<T>(stdout: string): T[] {
  return lines(stdout).map((l) => JSON.parse(l) as T);
}

describe('submit --dry-run --json of several files', () => {
  it('prints the views once every file passed: one refused leaves stdout empty; text prints as it goes', async () => {
    const ok = specFile('dry-ok', ['true']);
    const next = specFile('dry-next', ['true']);
    // Only the controller knows no such job exists.
    const waits = join(controller.scratch, 'dry-waits.yaml');
    writeFileSync(
      waits,
      [
        'name: dry-waits',
        'team: examples',
        'dependsOn: [job-999999]',
        'tasks:',
        '  - command: ["true"]',
        '    demand: {any: [0, 0.25, 0.5]}',
        '',
      ].join('\n'),
    );
    const before = ((await ctl.api('GET', '/v1/jobs?limit=1000')).json as { jobs: unknown[] }).jobs.length;

    const refused = await cli(['submit', '--dry-run', '--json', ok, waits]);
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stdout).toBe('');
    const e = jsonError(refused.stderr);
    expect(e.error.startsWith(`${waits}: `), e.error).toBe(true);
    expect(JSON.stringify(e)).toContain('job-999999');

    // Text prints each file's view as it is checked, then the error.
    const text = await cli(['submit', '--dry-run', ok, waits]);
    expect(text.code).toBe(2);
    expect(text.stdout).toContain(ok);
    expect(text.stdout).not.toContain(waits);
    expect(text.stderr).toContain(`fleetwise: ${waits}: `);

    const both = await cli(['submit', '--dry-run', '--json', ok, next]);
    expect(both.code, both.stderr).toBe(0);
    expect(both.stderr).toBe('');
    const views = jsonLines<{ dryRun: boolean; name: string }>(both.stdout);
    expect(views.map((v) => [v.dryRun, v.name])).toEqual([
      [true, 'dry-ok'],
      [true, 'dry-next'],
    ]);
    // A dry run submits nothing.
    const after = ((await ctl.api('GET', '/v1/jobs?limit=1000')).json as { jobs: unknown[] }).jobs.length;
    expect(after).toBe(before);
  }, 120_000);
});

describe('jobs --state', () => {
  const STATES = 'queued, starting, running, migrating, succeeded, failed, cancelled, unsuccessful';

  it('names the flag and each value that is not a job state, asking nothing; valid states list', async () => {
    const json = await cli(['jobs', '--state', 'bogus,running,Queued,bogus', '--json']);
    expect(json.code).toBe(2);
    expect(json.stdout).toBe('');
    expect(jsonError(json.stderr)).toEqual({
      error: 'invalid input: --state',
      details: [
        `"bogus": not a job state; expected one of ${STATES}`,
        `"Queued": not a job state; expected one of ${STATES}`,
      ],
    });
    // Checked before the controller is asked: one that is not there does not change the answer.
    const unreachable = await cli(['jobs', '--state', 'bogus', '--json'], 'http://127.0.0.1:9');
    expect(unreachable.code).toBe(2);
    expect(jsonError(unreachable.stderr).error).toBe('invalid input: --state');

    const text = await cli(['jobs', '--state', 'running,']);
    expect(text.code).toBe(2);
    expect(text.stderr).toBe(
      `fleetwise: invalid input: --state\n  - "": not a job state; expected one of ${STATES}\n`,
    );

    const listed = await cli(['jobs', '--state', 'queued, running', '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const jobs = JSON.parse(listed.stdout) as { state: string }[];
    for (const job of jobs) expect(['queued', 'running']).toContain(job.state);
  }, 60_000);
});

/** A job of team examples waiting for `blocker` (so it never starts), or an array of them; its answer. */
async function waitingJob(
  name: string,
  blocker: string,
  size?: number,
): Promise<{ id: string; arrayJobIds?: string[] }> {
  const answer = await ctl.api('POST', '/v1/jobs', {
    name,
    team: 'examples',
    dependsOn: [blocker],
    tasks: [{ name: 'main', command: ['true'], demand: { any: [0, 0.25, 0.5] } }],
    ...(size === undefined ? {} : { arrayProperties: { size } }),
  });
  expect(answer.status, answer.text).toBe(201);
  return answer.json as { id: string; arrayJobIds?: string[] };
}

/** `spec` submitted under an idempotency key, as `fleetwise resubmit` keys a rerun; the new job's id. */
async function keyedSubmit(spec: unknown, key: string): Promise<string> {
  const answer = await fetch(`${ctl.url}/v1/jobs`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${LOCAL_ADMIN_TOKEN}`,
      'content-type': 'application/json',
      'idempotency-key': key,
    },
    body: JSON.stringify(spec),
  });
  const text = await answer.text();
  expect(answer.status, text).toBe(201);
  return (JSON.parse(text) as { id: string }).id;
}

interface ResubmittedLine {
  readonly from: string;
  readonly id: string;
  readonly state: string;
  readonly replayed?: boolean;
  readonly failedBefore?: readonly string[];
}

describe('resubmit --json', () => {
  it("an array's jobs not ended yet are left alone unsaid: its lines are what was resubmitted; text tells them", async () => {
    const blocker = await sleeper('resubmit-blocker');
    try {
      const { arrayJobIds } = await waitingJob('left-alone', blocker, 2);
      const [ended, waiting] = arrayJobIds ?? [];
      await cancel(ended ?? '');
      const json = await cli(['resubmit', ended ?? '', '--array', '--json']);
      expect(json.code, json.stderr).toBe(0);
      expect(json.stderr).toBe('');
      const [line, ...more] = jsonLines<ResubmittedLine>(json.stdout);
      expect(more).toEqual([]);
      expect(line).toMatchObject({ from: ended, state: 'queued' });

      // The same command in text: its rerun answered again, and the job not ended named on stderr.
      const text = await cli(['resubmit', ended ?? '', '--array']);
      expect(text.code, text.stderr).toBe(0);
      expect(text.stdout).toContain(`${ended} (left-alone[0], cancelled) → ${line?.id}: queued`);
      expect(text.stderr).toBe(`left alone, not ended yet: ${waiting}\n`);
      await cancel(line?.id ?? '');
      await cancel(waiting ?? '');
    } finally {
      await cancel(blocker);
    }
  }, 60_000);

  it('a job whose last 100 reruns ended without succeeding: its line says so, unsaid on stderr; text tells it', async () => {
    const blocker = await sleeper('reruns-blocker');
    try {
      // What `fleetwise resubmit` run 101 times, each rerun cancelled, leaves: each rerun keyed by the one before.
      const first = (await waitingJob('rerun-often', blocker)).id;
      await cancel(first);
      const reruns: string[] = [];
      for (let i = 0; i < 101; i++) {
        const of = reruns.at(-1) ?? first;
        const spec = ((await ctl.api('GET', `/v1/jobs/${of}`)).json as { spec: unknown }).spec;
        const id = await keyedSubmit(spec, `resubmit/${of}`);
        await cancel(id);
        reruns.push(id);
      }
      const last = reruns.at(-1);
      const json = await cli(['resubmit', first, '--json']);
      expect(json.code, json.stderr).toBe(0);
      expect(json.stderr).toBe('');
      expect(jsonLines<ResubmittedLine>(json.stdout)).toEqual([
        expect.objectContaining({
          from: first,
          id: last,
          state: 'cancelled',
          replayed: true,
          failedBefore: reruns.slice(0, 100),
        }),
      ]);

      const text = await cli(['resubmit', first]);
      expect(text.code, text.stderr).toBe(0);
      expect(text.stderr).toBe(
        `${first}: its last 100 reruns ended without succeeding; not rerun again (resubmit ${last} to)\n`,
      );
    } finally {
      await cancel(blocker);
    }
  }, 180_000);
});

describe('a local controller state passed over (another user could have written it), under --json', () => {
  /** A `.fleetwise/` in `dir` naming `url`, with the admin token, its files mine alone; `open`: writable by all. */
  function localState(dir: string, url: string, open = false): string {
    const stateDir = join(dir, '.fleetwise');
    mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    writeFileSync(join(stateDir, 'api-url'), `${url}\n`, { mode: 0o600 });
    writeFileSync(join(stateDir, 'admin-token'), `${LOCAL_ADMIN_TOKEN}\n`, { mode: 0o600 });
    if (open) chmodSync(stateDir, 0o777);
    return stateDir;
  }

  it('is not told on stderr when a state further up is used; text warns', async () => {
    const home = join(controller.scratch, 'home');
    localState(home, ctl.url);
    const shared = localState(join(home, 'shared'), 'http://127.0.0.1:9', true);
    const cwd = join(home, 'shared', 'sub');
    mkdirSync(cwd, { recursive: true });
    const json = await runCli(['jobs', '--json'], bareEnv(), { cwd });
    expect(json.code, json.stderr).toBe(0);
    expect(json.stderr).toBe('');
    expect(Array.isArray(JSON.parse(json.stdout))).toBe(true);

    const text = await runCli(['jobs'], bareEnv(), { cwd });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stderr).toBe(
      `fleetwise: warning: ignoring the local controller state ${shared}: ${shared} is writable by other users\n`,
    );
  }, 60_000);

  it('an error for want of an address or a token is one JSON object naming it', async () => {
    const alone = join(controller.scratch, 'alone');
    const shared = localState(alone, ctl.url, true);
    const passedOver =
      'the local controller state found was not used, as another user could have written it: ' +
      `${shared} (${shared} is writable by other users)`;
    const noAddress = await runCli(['jobs', '--json'], bareEnv(), { cwd: alone });
    expect(noAddress.code).toBe(1);
    expect(noAddress.stdout).toBe('');
    expect(jsonError(noAddress.stderr).error).toContain(passedOver);

    const noToken = await runCli(['jobs', '--json', '--server', ctl.url], bareEnv(), { cwd: alone });
    expect(noToken.code).toBe(1);
    expect(noToken.stdout).toBe('');
    expect(jsonError(noToken.stderr)).toEqual({
      error: `no API token: pass --token TOKEN or set FLEETWISE_TOKEN; ${passedOver}`,
    });
  }, 60_000);
});
