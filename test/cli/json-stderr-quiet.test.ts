import { execFile, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
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
 * any other failure, and `submit -` typed at a terminal is not prompted for on a stderr a script reads. Text mode
 * tells each as before. The built CLI in a subprocess against a real local controller (process executor), reached
 * through an HTTP proxy that drops every request for a while, as a controller restarting is seen from the client.
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
