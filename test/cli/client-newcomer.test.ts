import { UnknownRecordError, type JobRecord } from '../../src/controller/state-store.js';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import {
  ADMIN_TOKEN,
  FakeControllerService,
  NLP_TOKEN,
  VISION_TOKEN,
} from '../controller/api-fake-service.js';
import { CLI, ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';
import { bareEnv } from '../helpers/local-controller.js';
import { freePort } from '../helpers/test-ports.js';

/**
 * The client commands a newcomer meets, through the built CLI in a subprocess against a real API server (the fake
 * controller service of the API tests, with task logs): local discovery, errors that say what happened, --json
 * errors, stdin specs, dry runs, following and watching, cancel --all and per-job costs.
 */
const EXAMPLES = join(PROJECT_ROOT, 'examples', 'jobs');

/** The API fake, serving task logs from a map (the controller reads what workers upload). */
class LoggingFake extends FakeControllerService {
  readonly logs = new Map<string, string>();
  /** Jobs that end (succeed) between `cancel --all` listing them and their cancel arriving. */
  readonly endBeforeTheirCancel = new Set<string>();
  /** Jobs that are gone (not found) by the time their cancel arrives, though they were there when looked up. */
  readonly goneBeforeTheirCancel = new Set<string>();
  override cancel(jobId: string, reason?: string): JobRecord {
    const job = this.store.getJob(jobId);
    if (job !== undefined && this.endBeforeTheirCancel.has(jobId)) return { ...job, state: 'succeeded' };
    if (this.goneBeforeTheirCancel.has(jobId)) throw new UnknownRecordError('job', jobId);
    return super.cancel(jobId, reason);
  }
  async jobLogs(jobId: string): Promise<string> {
    return this.logs.get(jobId) ?? '';
  }
}

let server: ApiServer;
let service: LoggingFake;
let workDir = '';

/** The environment without any FLEETWISE_ variable: what a newcomer's shell has. */
function cli(
  args: readonly string[],
  token: string = VISION_TOKEN,
  options: { readonly cwd?: string; readonly input?: string } = {},
): Promise<CliResult> {
  return runCli(args, { ...bareEnv(), FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: token }, options);
}

/** A running CLI process whose output can be awaited while it runs (for --follow and --watch). */
function startCli(args: readonly string[], token: string) {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: PROJECT_ROOT,
    env: { ...bareEnv(), FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: token },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    exited,
    output: () => ({ stdout, stderr }),
    async until(predicate: (out: string) => boolean, timeoutMs = 15_000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(stdout)) {
        if (Date.now() > deadline || child.exitCode !== null)
          throw new Error(`CLI output never matched:\n${stdout}\n${stderr}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}

beforeAll(async () => {
  ensureBuiltCli();
  service = new LoggingFake();
  service.store.addTeamToken('vision', VISION_TOKEN, 'test');
  service.store.addTeamToken('nlp', NLP_TOKEN, 'test');
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
  workDir = mkdtempSync(join(tmpdir(), 'fleetwise-newcomer-'));
}, 240_000);

afterAll(async () => {
  await server?.close();
  if (workDir !== '') rmSync(workDir, { recursive: true, force: true });
});

/** Submit an example through the CLI (resnet is team vision's, gpt2 team nlp's); its job id. */
async function submitResnet(token = VISION_TOKEN): Promise<string> {
  const example = token === NLP_TOKEN ? 'gpt2.yaml' : 'resnet.yaml';
  const result = await cli(['submit', join(EXAMPLES, example), '--json'], token);
  expect(result.stderr).toBe('');
  return (JSON.parse(result.stdout) as { id: string }).id;
}

/**
 * Each test starts several CLI processes, and this file runs first beside the chaos run, whose fifty workers start at
 * the same moment on two cores: a test of five CLI calls took 47 s and then 60 s there (5 s alone). The limit guards
 * against a hang, not the speed.
 */
const CLI_TEST_TIMEOUT_MS = 180_000;

describe('the client a newcomer meets (CLI subprocess)', { timeout: CLI_TEST_TIMEOUT_MS }, () => {
  it("finds the local controller's address and admin token in .fleetwise/ (here or a parent directory)", async () => {
    const checkout = join(workDir, 'checkout');
    mkdirSync(join(checkout, '.fleetwise'), { recursive: true });
    mkdirSync(join(checkout, 'examples', 'deep'), { recursive: true });
    writeFileSync(join(checkout, '.fleetwise', 'api-url'), `${server.url}\n`);
    writeFileSync(join(checkout, '.fleetwise', 'admin-token'), `${ADMIN_TOKEN}\n`);
    const id = await submitResnet();
    const jobs = await runCli(['jobs', '--json'], bareEnv(), { cwd: join(checkout, 'examples', 'deep') });
    expect(jobs.stderr).toBe('');
    expect(jobs.code).toBe(0);
    expect((JSON.parse(jobs.stdout) as { id: string }[]).map((j) => j.id)).toContain(id);

    // The local admin token is never sent to a server named elsewhere.
    const elsewhere = await runCli(
      ['jobs'],
      { ...bareEnv(), FLEETWISE_SERVER: 'http://10.255.255.1:7070' },
      {
        cwd: checkout,
      },
    );
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toMatch(/no API token: .*has no admin token for http:\/\/10\.255\.255\.1:7070/);

    // Without .fleetwise/ anywhere up the tree: say what to set, with the real default port.
    const nowhere = mkdtempSync(join(tmpdir(), 'fleetwise-nowhere-'));
    try {
      const missing = await runCli(['jobs'], bareEnv(), { cwd: nowhere });
      expect(missing.code).toBe(1);
      expect(missing.stderr).toContain('FLEETWISE_SERVER (e.g. http://127.0.0.1:7070)');
      expect(missing.stderr).toContain('.fleetwise/');
    } finally {
      rmSync(nowhere, { recursive: true, force: true });
    }

    // A local controller that is not running: the error says where the address came from. (Not port 9 or another
    // of fetch's bad ports, which fetch refuses without trying: that error says so instead.)
    const downPort = await freePort();
    writeFileSync(join(checkout, '.fleetwise', 'api-url'), `http://127.0.0.1:${downPort}\n`);
    const down = await runCli(['jobs'], bareEnv(), { cwd: checkout });
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(
      new RegExp(
        `cannot reach the controller at http://127\\.0\\.0\\.1:${downPort} .*ECONNREFUSED.*is it running`,
      ),
    );

    // A controller at that address that refuses the local admin token keeps its state elsewhere: the error says so.
    writeFileSync(join(checkout, '.fleetwise', 'api-url'), `${server.url}\n`);
    writeFileSync(join(checkout, '.fleetwise', 'admin-token'), 'another-controllers-token-0123456789\n');
    const refused = await runCli(['jobs'], bareEnv(), { cwd: checkout });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('401: invalid or revoked token');
    expect(refused.stderr).toContain(
      `the token sent is the admin token in ${join(checkout, '.fleetwise', 'admin-token')}`,
    );
    expect(refused.stderr).toMatch(/keep its state in another directory/);
  });

  it('drain of a terminated instance says it is gone and exits non-zero', async () => {
    const instance = service.store.createInstance({ typeName: 'c7i.large' });
    service.store.setInstanceState(instance.id, 'terminated', { reason: 'test' });
    const result = await cli(['drain', instance.id], ADMIN_TOKEN);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(
      `instance ${instance.id} is terminated: it is gone, there is nothing to drain`,
    );
    expect(result.stderr).not.toMatch(/tasks move/);
  });

  it('logs of a job that never started says why; logs --follow prints new output until the job ends', async () => {
    const id = await submitResnet();
    const quiet = await cli(['logs', id]);
    expect(quiet.code).toBe(0);
    expect(quiet.stdout).toBe('');
    expect(quiet.stderr).toContain(`${id} has not started yet (queued)`);

    const follow = startCli(['logs', id, '--follow', '--interval', '0.1'], VISION_TOKEN);
    await follow.until(() => follow.output().stderr.includes('has not started yet'));
    service.store.setJobState(id, 'starting');
    service.store.setJobState(id, 'running');
    service.logs.set(id, '==> run-1 <==\nstep 1\n');
    await follow.until((out) => out.includes('step 1'));
    service.logs.set(id, '==> run-1 <==\nstep 1\nstep 2\n');
    await follow.until((out) => out.includes('step 2'));
    service.store.setJobState(id, 'succeeded');
    expect(await follow.exited).toBe(0);
    expect(follow.output().stdout).toBe('==> run-1 <==\nstep 1\nstep 2\n');
    expect(follow.output().stderr).toContain(`${id} succeeded`);
  });

  it('submit - reads the spec from standard input', async () => {
    const result = await cli(['submit', '-', '--json'], VISION_TOKEN, {
      input: readFileSync(join(EXAMPLES, 'resnet.yaml'), 'utf8'),
    });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ name: 'resnet18-cifar10', team: 'vision' });

    const bad = await cli(['submit', '-'], VISION_TOKEN, { input: 'name: x\ntasks: []\n' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('invalid input: standard input');
  });

  it('with --json, errors are one JSON object on stderr and a non-zero exit; stdout stays empty', async () => {
    const denied = await cli(['jobs', '--json'], 'wrong-token-0123456789abcdef');
    expect(denied.code).toBe(1);
    expect(denied.stdout).toBe('');
    expect(JSON.parse(denied.stderr)).toMatchObject({
      error: 'GET /v1/jobs: the controller answered 401: invalid or revoked token',
      status: 401,
      reason: 'invalid or revoked token',
    });

    const invalid = await cli(['submit', '-', '--json'], VISION_TOKEN, { input: 'name: x\ntasks: []\n' });
    expect(invalid.code).toBe(2);
    const body = JSON.parse(invalid.stderr) as { error: string; details: string[] };
    expect(body.error).toBe('invalid input: standard input');
    expect(body.details.length).toBeGreaterThan(0);

    // A usage error, before any command runs.
    const usage = await cli(['cancel', '--json', '--bogus']);
    expect(usage.code).toBe(2); // bad input, as every other
    expect(JSON.parse(usage.stderr)).toEqual({ error: "unknown option '--bogus'" });
  });

  it('submit --dry-run shows the instance type and $/h and creates nothing', async () => {
    const before = service.store.listJobs().length;
    const text = await cli(['submit', join(EXAMPLES, 'resnet.yaml'), '--dry-run']);
    expect(text.stderr).toBe('');
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('resnet18-cifar10 (team vision) is valid; dry run, nothing submitted');
    expect(text.stdout).toMatch(/^TASK\s+REPLICAS\s+INSTANCE TYPE\s+\$\/HOUR/m);
    const json = await cli(['submit', join(EXAMPLES, 'resnet.yaml'), '--dry-run', '--json']);
    const view = JSON.parse(json.stdout) as {
      dryRun: boolean;
      tasks: { instanceType: string; costPerHour: number }[];
      costPerHour: number;
      eta: unknown;
    };
    expect(view.dryRun).toBe(true);
    const type = service.catalog.types.find((t) => t.name === view.tasks[0]?.instanceType);
    expect(type?.costPerHour).toBe(view.tasks[0]?.costPerHour);
    expect(view.costPerHour).toBeGreaterThan(0);
    expect(view.eta).toBeNull(); // the fake predicts nothing; the controller test checks a real ETA
    expect(service.store.listJobs()).toHaveLength(before);
  });

  it("jobs shows each job's cost; --watch redraws until Ctrl-C", async () => {
    const id = await submitResnet();
    service.jobCosts.set(id, 1.25);
    const table = await cli(['jobs']);
    expect(table.stdout.split('\n')[0]).toMatch(/\bCOST\b/);
    expect(table.stdout).toMatch(new RegExp(`^${id}\\s.*\\$1\\.25`, 'm'));
    const json = JSON.parse((await cli(['jobs', '--json'])).stdout) as { id: string; cost: number }[];
    expect(json.find((j) => j.id === id)?.cost).toBe(1.25);

    const watch = startCli(['jobs', '--watch', '--interval', '0.2'], VISION_TOKEN);
    await watch.until((out) => out.split('Ctrl-C to stop').length >= 3); // two redraws
    watch.child.kill('SIGINT');
    expect(await watch.exited).toBe(0);
    expect(watch.output().stdout).toContain(id);
  });

  it("cancel --all cancels the live jobs of the token's team only and prints the count", async () => {
    const mine = [await submitResnet(), await submitResnet()];
    const theirs = await submitResnet(NLP_TOKEN);
    const result = await cli(['cancel', '--all']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(service.store.listJobs({ team: 'vision', states: ['queued', 'running'] })).toEqual([]);
    for (const id of mine) expect(service.store.getJob(id)?.state).toBe('cancelled');
    expect(service.store.getJob(theirs)?.state).toBe('queued');
    expect(result.stdout).toMatch(/^cancelled \d+ job\(s\) of team vision$/m);
    const again = await cli(['cancel', '--all']);
    expect(again.stdout).toContain('no jobs to cancel');
    // A job that ended before its cancel arrived is answered as it ended, and not counted as cancelled.
    const [stays, ends] = [await submitResnet(), await submitResnet()];
    service.endBeforeTheirCancel.add(ends);
    const raced = await cli(['cancel', '--all']);
    expect(raced.stdout).toContain(`${ends} (`);
    expect(raced.stdout).toMatch(/^cancelled 1 job\(s\) of team vision; 1 had ended meanwhile$/m);
    expect(service.store.getJob(stays)?.state).toBe('cancelled');
    const both = await cli(['cancel', 'job-1', '--all']);
    expect(both.code).toBe(2);
  });

  it('cancel ID… checks every id before cancelling any; a cancel failing midway names those already cancelled', async () => {
    const [first, second] = [await submitResnet(), await submitResnet()];
    // A mistyped id is bad input (exit 2) named as such, and the job before it stays queued.
    const typo = await cli(['cancel', first, 'jbo-58']);
    expect(typo.code).toBe(2);
    expect(typo.stdout).toBe('');
    expect(typo.stderr).toContain('  - "jbo-58": not a job id (job-<n>)\n');
    expect(service.store.getJob(first)?.state).toBe('queued');
    const typoJson = await cli(['cancel', first, 'jbo-58', '--json']);
    expect(typoJson.code).toBe(2);
    expect(typoJson.stdout).toBe('');
    expect(JSON.parse(typoJson.stderr)).toEqual({
      error: 'invalid input: arguments',
      details: ['"jbo-58": not a job id (job-<n>)'],
    });
    // A job that does not exist (or is another team's) stops the command before any cancel, naming it.
    const foreign = await submitResnet(NLP_TOKEN);
    for (const missing of ['job-987654', foreign]) {
      const result = await cli(['cancel', first, missing, second]);
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr).toContain(`GET /v1/jobs/${missing}: the controller answered 404`);
      expect(service.store.getJob(first)?.state).toBe('queued');
      expect(service.store.getJob(second)?.state).toBe('queued');
    }
    expect(service.store.getJob(foreign)?.state).toBe('queued');

    // A job gone between its check and its cancel: the error names the jobs cancelled before it.
    service.goneBeforeTheirCancel.add(second);
    const third = await submitResnet();
    const raced = await cli(['cancel', first, second, third, '--json']);
    expect(raced.code).toBe(1);
    expect(raced.stdout).toBe('');
    expect(JSON.parse(raced.stderr)).toEqual({
      error: `POST /v1/jobs/${second}/cancel: the controller answered 404: job ${second} not found`,
      status: 404,
      reason: `job ${second} not found`,
      details: [`already cancelled: ${first}`],
    });
    expect(service.store.getJob(first)?.state).toBe('cancelled');
    expect(service.store.getJob(third)?.state).toBe('queued');
    const fourth = await submitResnet();
    const racedText = await cli(['cancel', third, fourth, second]);
    expect(racedText.code).toBe(1);
    expect(racedText.stdout).toMatch(
      new RegExp(`^${third} \\(.*\\): cancelled\n${fourth} \\(.*\\): cancelled\n$`),
    );
    expect(racedText.stderr).toContain(`  - already cancelled: ${third}, ${fourth}\n`);
    service.goneBeforeTheirCancel.delete(second);
  });

  it('cancel of an id named twice cancels, prints and lists it once', async () => {
    const [first, second] = [await submitResnet(), await submitResnet()];
    const text = await cli(['cancel', first, first]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toBe(`${first} (resnet18-cifar10): cancelled\n`);
    const json = await cli(['cancel', second, first, second, '--json']);
    expect(json.code, json.stderr).toBe(0);
    expect((JSON.parse(json.stdout) as { id: string; state: string }[]).map((j) => [j.id, j.state])).toEqual([
      [second, 'cancelled'],
      [first, 'cancelled'],
    ]);
  });
});

describe('help agrees with behaviour (CLI subprocess)', () => {
  it('bench says it prints a table (--json: JSON), and does', async () => {
    const help = await runCli(['bench', '--help']);
    expect(help.stdout).toContain('print a table (--json: one JSON object)');
    const table = await runCli(['bench', 'scheduler', '--tasks', '20', '--repeats', '1']);
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^\s*tasks\s+seconds/);
    const json = await runCli(['bench', 'scheduler', '--tasks', '20', '--repeats', '1', '--json']);
    expect(JSON.parse(json.stdout)).toHaveProperty('results');
  });

  it('catalog refresh --help shows no test hook', async () => {
    const help = await runCli(['catalog', 'refresh', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--region');
    expect(help.stdout).not.toMatch(/test hook|FIXTURE/i);
  });
});
