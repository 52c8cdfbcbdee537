import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { writeQueueRecord } from '../../src/controller/queue-records.js';
import {
  ADMIN_TOKEN,
  fakeWithTeams,
  VISION_TOKEN,
  type FakeControllerService,
} from '../controller/api-fake-service.js';
import { CLI, ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * The client commands as users run them: `node dist/cli/main.js …` in a subprocess against an API server started in
 * this process over a real socket. `npm test` builds dist/ first; run alone, this builds once when a module the CLI
 * loads is missing from dist/ or older than its source.
 */
const EXAMPLES = join(PROJECT_ROOT, 'examples', 'jobs');

let server: ApiServer;
let service: FakeControllerService;
let workDir = '';

/** Run the CLI with FLEETWISE_SERVER/FLEETWISE_TOKEN set to this test's server and `token`. */
function cli(args: readonly string[], token: string | null = VISION_TOKEN): Promise<CliResult> {
  const env: NodeJS.ProcessEnv = { ...process.env, FLEETWISE_SERVER: server.url };
  delete env['FLEETWISE_TOKEN'];
  if (token !== null) env['FLEETWISE_TOKEN'] = token;
  return runCli(args, env);
}

beforeAll(async () => {
  ensureBuiltCli();
  expect(existsSync(CLI), `${CLI} is missing: run npm run build`).toBe(true);
  service = fakeWithTeams();
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
  workDir = mkdtempSync(join(tmpdir(), 'fleetwise-client-'));
}, 240_000);

afterAll(async () => {
  await server?.close();
  if (workDir !== '') rmSync(workDir, { recursive: true, force: true });
});

describe('fleetwise client commands (CLI subprocess)', () => {
  it('submit --json prints {"id": …} per job, and jobs --json is an array with id, name and state', async () => {
    const submit = await cli([
      'submit',
      join(EXAMPLES, 'resnet.yaml'),
      join(EXAMPLES, 'resnet-ddp.yaml'),
      '--json',
    ]);
    expect(submit.stderr).toBe('');
    expect(submit.code).toBe(0);
    const lines = submit.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: string; name: string });
    expect(lines.map((l) => l.name)).toEqual(['resnet18-cifar10', 'resnet18-ddp']);
    for (const l of lines) expect(l.id).toMatch(/^job-\d+$/);
    expect(service.store.getJob(lines[0]?.id ?? '')?.team).toBe('vision');
    expect(service.store.listTasks({ jobId: lines[1]?.id ?? '' })).toHaveLength(2); // two replicas

    const jobs = await cli(['jobs', '--json']);
    expect(jobs.code).toBe(0);
    const list = JSON.parse(jobs.stdout) as { id: string; name: string; state: string }[];
    expect(Array.isArray(list)).toBe(true);
    expect(list.map((j) => [j.id, j.name, j.state])).toEqual(lines.map((l) => [l.id, l.name, 'queued']));

    const table = await cli(['jobs']);
    expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+TEAM\s+STATE\s+PROGRESS/);
    expect(table.stdout).toContain('resnet18-ddp');
  });

  it("a bad token exits non-zero with the server's reason", async () => {
    // Without --json the error is text (with --json, a JSON object: client-newcomer.test.ts).
    const result = await cli(['jobs'], 'wrong-token-0123456789abcdef');
    expect(result.code).not.toBe(0);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(
      /fleetwise: GET \/v1\/jobs: the controller answered 401: invalid or revoked token/,
    );
    const missing = await cli(['jobs'], null);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain('FLEETWISE_TOKEN');
  });

  it('submit checks the spec locally first: errors name file, field and line, and nothing is submitted', async () => {
    const bad = join(workDir, 'bad.yaml');
    writeFileSync(
      bad,
      readFileSync(join(EXAMPLES, 'resnet.yaml'), 'utf8').replace('any: [1, 4, 24]', 'any: [1, -4, 24]'),
    );
    const before = service.store.listJobs().length;
    const result = await cli(['submit', join(EXAMPLES, 'resnet.yaml'), bad]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(bad);
    expect(result.stderr).toMatch(/tasks\.0\.demand\.any: .*\(line \d+\)/);
    expect(service.store.listJobs()).toHaveLength(before);
  });

  it("shows the server's field errors when the controller refuses a spec", async () => {
    // Valid locally (no team: filled in by the token) but naming a team that is not the token's is refused remotely.
    const foreign = join(workDir, 'foreign.yaml');
    writeFileSync(foreign, readFileSync(join(EXAMPLES, 'gpt2.yaml'), 'utf8'));
    const result = await cli(['submit', foreign]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('answered 403');
    expect(result.stderr).toContain('team vision');
  });

  it('submit uploads a build context and points the spec at the stored copy', async () => {
    const dir = join(workDir, 'with-build');
    mkdirSync(join(dir, 'ctx'), { recursive: true });
    writeFileSync(join(dir, 'ctx', 'Dockerfile'), 'FROM busybox\nCOPY run.sh /run.sh\n');
    writeFileSync(join(dir, 'ctx', 'run.sh'), '#!/bin/sh\necho hi\n', { mode: 0o755 });
    writeFileSync(join(dir, 'ctx', 'secret.env'), 'TOKEN=x\n');
    writeFileSync(join(dir, 'ctx', '.dockerignore'), '*.env\n');
    const spec = join(dir, 'job.yaml');
    writeFileSync(
      spec,
      'name: built\ntasks:\n  - build: ./ctx\n    command: [/run.sh]\n    demand: [0, 1, 1]\n',
    );
    // Under --json stderr holds only an error: the upload is seen in the stored copy the job's spec points at.
    const result = await cli(['submit', spec, '--json']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const { id } = JSON.parse(result.stdout) as { id: string };
    const stored = service.store.getJob(id)?.spec.tasks[0]?.build?.context ?? '';
    expect(stored).toMatch(/^contexts\/[0-9a-f]{64}\.tar\.gz$/);
    const tar = gunzipSync(service.contexts.get(stored)?.archive ?? Buffer.alloc(0)).toString('latin1');
    expect(tar).toContain('run.sh');
    expect(tar).toContain('FROM busybox');
    expect(tar).not.toContain('secret.env');

    // Text mode tells the upload on stderr (a dry run uploads as a submission does).
    const text = await cli(['submit', spec, '--dry-run']);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stderr).toMatch(
      /^uploaded build context .*ctx \(3 files, \d+ bytes\) as contexts\/[0-9a-f]{64}/m,
    );
  });

  it('jobs lists the work still to end and what ended in the window, says what it left out, and --all lists all', async () => {
    const submitted = await cli(['submit', join(EXAMPLES, 'resnet.yaml'), '--json']);
    const { id } = JSON.parse(submitted.stdout) as { id: string };
    // Predicted while it waited; ended, the prediction is no estimate any more.
    const eta = {
      startSeconds: 1.9e9,
      completionSeconds: 1.9e9 + 600,
      computedAtSeconds: 1.8e9,
      basis: 'test',
    };
    writeQueueRecord(service.store, id, { eta });
    service.store.setJobState(id, 'cancelled');
    service.jobCosts.set(id, 1.5);
    const row = (out: string): string | undefined => out.split('\n').find((l) => l.startsWith(`${id} `));

    // The default window is the last day: a job cancelled just now is in it, with its cost.
    const recent = await cli(['jobs']);
    expect(recent.code).toBe(0);
    expect(row(recent.stdout)).toMatch(/\bcancelled\b.*\$1\.50 .* - +-$/);
    expect(recent.stdout).not.toContain('more job');

    const ahead = String(Math.ceil(Date.now() / 1000) + 60);
    const windowed = await cli(['jobs', '--ended-since', ahead]);
    expect(windowed.code).toBe(0);
    expect(row(windowed.stdout)).toBeUndefined();
    const ended = service.store.countJobs({
      team: 'vision',
      states: ['succeeded', 'failed', 'cancelled', 'unsuccessful'],
    });
    expect(windowed.stdout).toContain(
      `${ended} more ${ended === 1 ? 'job' : 'jobs'} ended before the window (--ended-since ${ahead}): --all lists every job\n`,
    );
    const asJson = JSON.parse((await cli(['jobs', '--ended-since', ahead, '--json'])).stdout) as {
      id: string;
    }[];
    expect(asJson.map((j) => j.id)).not.toContain(id);

    const all = await cli(['jobs', '--all', '--json']);
    const listed = JSON.parse(all.stdout) as { id: string; cost: number | null }[];
    expect(listed.find((j) => j.id === id)?.cost).toBe(1.5);
    expect(listed).toHaveLength(service.store.countJobs({ team: 'vision' }));

    // More jobs than one page holds (500): the client reads them all, page after page, in order.
    const spec = service.store.listJobs()[0]?.spec;
    if (spec === undefined) throw new Error('no job to copy');
    const bulk = Array.from({ length: 520 }, () => service.store.submitJob({ ...spec, team: 'bulk' }).id);
    const paged = await cli(['jobs', '--all', '--team', 'bulk', '--json'], ADMIN_TOKEN);
    expect(paged.code).toBe(0);
    expect((JSON.parse(paged.stdout) as { id: string }[]).map((j) => j.id)).toEqual(bulk);

    const both = await cli(['jobs', '--all', '--ended-since', '1h']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain(
      'invalid input: --ended-since\n  - --all lists every job: leave one of them out',
    );
    // Bad input of other commands is refused the same way, naming its flag, with exit 2.
    for (const [args, flag] of [
      [['why', 'job-1', '--limit', 'abc'], '--limit'],
      [['jobs', '--server', 'ftp://x'], '--server'],
      [['report', '--month', '2026-13'], '--month'],
      [['report', '--since', 'yesterday'], '--since'],
    ] as const) {
      const refused = await cli(args);
      expect(refused.code, args.join(' ')).toBe(2);
      expect(refused.stderr, args.join(' ')).toContain(`invalid input: ${flag}\n`);
    }
    const bad = await cli(['jobs', '--ended-since', 'last-week']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain(
      'endedSince: expected epoch seconds, an ISO 8601 time (UTC unless it names an offset, e.g. 2024-06-10T00:00:00Z) or an age like 24h or 7d',
    );
  });

  it('input the controller refuses (400) exits 2 like input the client refuses; other refusals exit 1', async () => {
    const noTeam = join(workDir, 'no-team.yaml');
    writeFileSync(noTeam, 'name: x\ntasks:\n  - image: busybox\n    demand: [0, 1, 1]\n');
    for (const args of [
      ['jobs', '--ended-since', 'last-week'],
      // This test's controller checks dependencies in dry runs only (a real one checks submissions too).
      ['submit', join(EXAMPLES, 'resnet.yaml'), '--depends-on', 'job-999999', '--dry-run'],
      ['submit', noTeam, '--json'],
    ]) {
      const refused = await cli(args, ADMIN_TOKEN);
      expect(refused.code, `${args.join(' ')}: ${refused.stderr}`).toBe(2);
      expect(refused.stderr, args.join(' ')).toMatch(/answered 400/);
      expect(refused.stdout).toBe('');
    }
    // A state the client knows is none is refused before anything is asked, naming the flag, as bad input too.
    const state = await cli(['jobs', '--state', 'bogus'], ADMIN_TOKEN);
    expect(state.code).toBe(2);
    expect(state.stderr).toMatch(/^fleetwise: invalid input: --state\n {2}- "bogus": not a job state/);
    // A token the controller does not take is not bad input to the command.
    expect((await cli(['jobs'], 'wrong-token-0123456789abcdef')).code).toBe(1);
  });

  it('a reader that closes the output (| head -1) ends the command quietly with 0, --watch too', async () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      FLEETWISE_SERVER: server.url,
      FLEETWISE_TOKEN: VISION_TOKEN,
    };
    for (const args of [['jobs', '--all'], ['cluster'], ['jobs', '--watch', '--interval', '1']]) {
      const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      // Closed before the command writes anything: its first write finds no reader.
      child.stdout.destroy();
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      expect(stderr, args.join(' ')).toBe('');
      expect(code, args.join(' ')).toBe(0);
    }
  }, 60_000);
});
