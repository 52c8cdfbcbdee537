import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { FleetwiseClient } from '../../src/cli/client.js';
import { normalizeServer } from '../../src/cli/client-connection.js';
import { ApiError } from '../../src/cli/client-errors.js';
import { registerCancel } from '../../src/cli/commands/cancel.js';
import { registerCluster } from '../../src/cli/commands/cluster.js';
import { registerDrain } from '../../src/cli/commands/drain.js';
import { registerJob } from '../../src/cli/commands/job.js';
import { registerJobs } from '../../src/cli/commands/jobs.js';
import { registerLogs } from '../../src/cli/commands/logs.js';
import { registerReport } from '../../src/cli/commands/report.js';
import { registerWhy } from '../../src/cli/commands/why.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { ValidationError } from '../../src/core/validation.js';
import { nextUtcMonth, utcMonthBounds, utcMonthOf } from '../../src/core/utc-month.js';
import {
  buildReportDocument,
  writeMonthlyReportFiles,
  writeReportFiles,
  type CostReportDocument,
} from '../../src/controller/reports.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import {
  ADMIN_TOKEN,
  type FakeControllerService,
  fakeWithTeams,
  NLP_TOKEN,
  RESNET_SPEC,
  VISION_TOKEN,
} from '../controller/api-fake-service.js';

/**
 * The client and the commands in-process (fast) against a real API server on a socket; the subprocess checks of
 * `node dist/cli/main.js` are in client-commands.test.ts.
 */

let server: ApiServer;
let service: FakeControllerService;
let workDir = '';

const SPEC: JobSpec = RESNET_SPEC;

interface Output {
  readonly stdout: string;
  readonly error: Error | undefined;
}

/** Run one command as `fleetwise …` would, with --server/--token flags, capturing stdout. */
async function run(args: readonly string[], token = VISION_TOKEN): Promise<Output> {
  const program = new Command('fleetwise').exitOverride();
  for (const register of [
    registerJobs,
    registerJob,
    registerCancel,
    registerCluster,
    registerWhy,
    registerDrain,
    registerReport,
    registerLogs,
  ])
    register(program);
  let stdout = '';
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  let error: Error | undefined;
  try {
    await program.parseAsync(['node', 'fleetwise', ...args, '--server', server.url, '--token', token]);
  } catch (e) {
    error = e as Error;
  } finally {
    spy.mockRestore();
  }
  return { stdout, error };
}

beforeAll(async () => {
  service = fakeWithTeams();
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
  workDir = mkdtempSync(join(tmpdir(), 'fleetwise-client-'));
});

afterAll(async () => {
  await server.close();
  rmSync(workDir, { recursive: true, force: true });
});

describe('FleetwiseClient', () => {
  it('normalizes server addresses and refuses other schemes', () => {
    expect(normalizeServer('10.0.0.5:8080/')).toBe('http://10.0.0.5:8080');
    expect(normalizeServer('https://fw.example.com')).toBe('https://fw.example.com');
    expect(() => normalizeServer('ftp://x')).toThrow(/only http/);
  });

  it('takes server and token from flags, then FLEETWISE_SERVER/FLEETWISE_TOKEN, and says which is missing', () => {
    const env = { FLEETWISE_SERVER: 'h:1', FLEETWISE_TOKEN: 't' };
    expect(FleetwiseClient.fromOptions({}, env).server).toBe('http://h:1');
    expect(FleetwiseClient.fromOptions({ server: 'other:2' }, env).server).toBe('http://other:2');
    expect(() => FleetwiseClient.fromOptions({}, { FLEETWISE_TOKEN: 't' })).toThrow(
      /--server URL or set FLEETWISE_SERVER/,
    );
    expect(() => FleetwiseClient.fromOptions({}, { FLEETWISE_SERVER: 'h:1' })).toThrow(
      /--token TOKEN or set FLEETWISE_TOKEN/,
    );
  });

  it('turns error responses into ApiError with status, reason and field details', async () => {
    const client = new FleetwiseClient(server.url, ADMIN_TOKEN);
    const error = await client
      .submitJob({ name: 'x', team: 'vision', tasks: [{ image: 'i', demand: [0, 0, 1] }] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    const api = error as ApiError;
    expect(api.status).toBe(400);
    expect(api.reason).toBe('invalid job spec');
    expect(api.details).toEqual([expect.stringMatching(/^tasks\.0\.demand: vcpus must be > 0/)]);
    expect(api.message).toContain('\n  - tasks.0.demand: vcpus must be > 0');
  });

  it('reports an unreachable controller by address', async () => {
    // A port that was just free: nothing listens there.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const client = new FleetwiseClient(`http://127.0.0.1:${port}`, ADMIN_TOKEN);
    await expect(client.listJobs()).rejects.toThrow(
      new RegExp(
        `^cannot reach the controller at http://127\\.0\\.0\\.1:${port} \\(GET /v1/jobs\\): ECONNREFUSED$`,
      ),
    );
  });

  it('rejects a response that is not what this client understands', async () => {
    const fake = async (): Promise<Response> =>
      new Response(JSON.stringify({ jobs: [{ id: 1 }] }), { status: 200 });
    const client = new FleetwiseClient('http://x', 't', fake);
    await expect(client.listJobs()).rejects.toThrow(/unexpected response from the controller/);
  });
});

describe('client commands (in-process)', () => {
  it('jobs filters by state; job prints the document; cancel cancels', async () => {
    const a = service.submit(SPEC, 'vision');
    const b = service.submit({ ...SPEC, name: 'other' }, 'vision');
    service.store.setJobState(b.id, 'starting');
    const queued = await run(['jobs', '--state', 'queued', '--json']);
    expect((JSON.parse(queued.stdout) as { id: string }[]).map((j) => j.id)).toEqual([a.id]);
    // Checked by the client, naming the flag and the value.
    const badState = await run(['jobs', '--state', 'sleeping']);
    expect(badState.error).toBeInstanceOf(ValidationError);
    expect((badState.error as ValidationError).source).toBe('--state');
    expect((badState.error as ValidationError).problems).toEqual([
      '"sleeping": not a job state; expected one of queued, starting, running, migrating, succeeded, failed, ' +
        'cancelled, unsuccessful',
    ]);

    const job = await run(['job', a.id]);
    expect(job.stdout).toMatch(
      new RegExp(
        `^job\\s+${a.id} \\(resnet\\)\\nteam\\s+vision\\nstate\\s+queued\\nprogress\\s+0/1000 iterations \\(0%\\)`,
      ),
    );
    expect(job.stdout).toMatch(new RegExp(`${a.id}\\.0\\s+trainer\\s+pending\\s+-`));

    const cancel = await run(['cancel', a.id, b.id, '--json']);
    expect((JSON.parse(cancel.stdout) as { state: string }[]).map((j) => j.state)).toEqual([
      'cancelled',
      'cancelled',
    ]);
  });

  it('cluster shows where instances are (zone/placement group) and the round trips measured between them', async () => {
    const a = service.store.createInstance({
      typeName: 'c7i.large',
      availabilityZone: 'us-east-1b',
      placementGroup: 'job-9',
    });
    const b = service.store.createInstance({ typeName: 'c7i.large', availabilityZone: 'us-east-1c' });
    const now = Date.now() / 1000;
    service.latency = () => ({
      pairs: [
        {
          fromInstanceId: a.id,
          toInstanceId: b.id,
          maxMicroseconds: 5210,
          p99Microseconds: 412,
          samples: 6,
          failures: 0,
          windowSeconds: 60,
          atSeconds: now - 2,
        },
        {
          fromInstanceId: b.id,
          toInstanceId: a.id,
          samples: 0,
          failures: 6,
          windowSeconds: 60,
          atSeconds: now - 2,
        },
      ],
      probes: [],
    });
    try {
      const shown = (await run(['cluster'], ADMIN_TOKEN)).stdout;
      expect(shown).toMatch(new RegExp(`${a.id}\\s+-\\s+c7i\\.large\\s+requested\\s+us-east-1b/job-9\\s`));
      expect(shown).toMatch(new RegExp(`${b.id}\\s+-\\s+c7i\\.large\\s+requested\\s+us-east-1c\\s`));
      expect(shown).toContain('round trips measured by the workers');
      expect(shown).toMatch(new RegExp(`${a.id}\\s+${b.id}\\s+5\\.21 ms\\s+412 µs\\s+6\\s+0\\s+2 s`));
      expect(shown).toMatch(new RegExp(`${b.id}\\s+${a.id}\\s+-\\s+-\\s+0\\s+6\\s`));
      const json = JSON.parse((await run(['cluster', '--json'], ADMIN_TOKEN)).stdout) as {
        latency: { pairs: unknown[] };
      };
      expect(json.latency.pairs).toHaveLength(2);
    } finally {
      service.latency = undefined;
      service.store.setInstanceState(a.id, 'terminated');
      service.store.setInstanceState(b.id, 'terminated');
    }
    // Nothing measured: no round-trip table at all.
    expect((await run(['cluster'], ADMIN_TOKEN)).stdout).not.toContain('round trips');
  });

  it("cluster and why show a team's own tasks and decisions", async () => {
    const job = service.submit(SPEC, 'vision');
    const foreign = service.submit({ ...SPEC, team: 'nlp', name: 'theirs' }, 'nlp');
    const instance = service.store.createInstance({ typeName: 'p3.2xlarge' });
    service.store.setInstanceState(instance.id, 'launching', { cloudId: 'i-0cli' });
    service.store.setInstanceState(instance.id, 'running');
    service.store.setJobState(job.id, 'starting');
    service.store.setTaskState(`${job.id}.0`, 'starting', instance.id);
    service.store.setJobState(foreign.id, 'starting');
    service.store.setTaskState(`${foreign.id}.0`, 'starting', instance.id);
    const cluster = await run(['cluster']);
    expect(cluster.stdout).toMatch(
      new RegExp(
        `${instance.id}\\s+i-0cli\\s+p3\\.2xlarge\\s+running\\s+-\\s+on-demand\\s+\\$3\\.06\\s+${job.id}\\.0\\n`,
      ),
    );
    expect(cluster.stdout).not.toContain(foreign.id);
    expect(cluster.stdout).toMatch(/of your team, \$3\.06\/hour/);

    service.store.recordRound({
      configuration: {
        instances: [{ id: instance.id, typeName: 'p3.2xlarge', isNew: false, taskIds: [`${job.id}.0`] }],
      },
      decision: {
        scheduler: 'eva',
        nowSeconds: 0,
        candidates: [],
        chosen: 'baseline',
        reason: 'nothing to gain',
        waiting: [],
        pinned: [],
      },
    });
    const why = await run(['why', job.id]);
    expect(why.stdout).toMatch(
      new RegExp(
        `^${job.id}: starting\\nmarket: ${instance.id} \\(p3\\.2xlarge\\) on demand\\nround \\d+ at .*: placed\\n  plan baseline: nothing to gain\\n$`,
      ),
    );
  });

  it("why refuses a --limit over the controller's maximum itself, naming the flag and the maximum", async () => {
    const job = service.submit({ ...SPEC, name: 'limits' }, 'vision');
    const over = await run(['why', job.id, '--limit', '1001']);
    expect(over.error).toBeInstanceOf(ValidationError);
    expect((over.error as ValidationError).source).toBe('--limit');
    expect((over.error as ValidationError).problems).toEqual([
      'expected a whole number from 1 to 1000, got 1001',
    ]);
    // The maximum itself is one the controller answers.
    expect((await run(['why', job.id, '--limit', '1000'])).error).toBeUndefined();
    const program = new Command('fleetwise');
    registerWhy(program);
    expect(program.commands[0]?.helpInformation()).toMatch(
      /--limit <n>\s+at most this many decisions, newest\s+first \(at most 1000\)/,
    );
  });

  it('report --from a path that is no directory is bad input naming --from', async () => {
    const missing = join(workDir, 'no-such-store');
    const file = join(workDir, 'a-file');
    writeFileSync(file, 'not a store');
    for (const [location, problem] of [
      [missing, `${missing} does not exist`],
      [
        file,
        `${file} is not a directory (give the controller's objectStore: a directory or s3://bucket/prefix)`,
      ],
      [join(file, 'below'), `${join(file, 'below')} cannot be read (ENOTDIR)`],
      [
        'ftp://host/x',
        'object store location ftp://host/x: unsupported scheme (expected s3:// or a directory)',
      ],
    ]) {
      const { error } = await run(['report', '--from', location ?? '']);
      expect(error, location).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).source).toBe('--from');
      expect((error as ValidationError).problems).toEqual([problem]);
    }
  });

  it('drain needs the admin token', async () => {
    const instance = service.store.createInstance({ typeName: 'c7i.large' });
    const refused = await run(['drain', instance.id]);
    expect((refused.error as ApiError).status).toBe(403);
    expect(refused.error?.message).toMatch(/needs the admin token: send it with --token or FLEETWISE_TOKEN/);
    service.store.setInstanceState(instance.id, 'launching');
    service.store.setInstanceState(instance.id, 'running');
    const drained = await run(['drain', instance.id], ADMIN_TOKEN);
    expect(drained.stdout).toMatch(new RegExp(`^${instance.id} c7i\\.large: draining`));
  });

  it("report renders the controller's costs; a team sees its own lines only", async () => {
    const team = await run(['report'], NLP_TOKEN);
    expect(team.error).toBeUndefined();
    expect(team.stdout).toMatch(/^costs from .* \(your team\): \$0\.00\n/);
    expect(team.stdout).not.toContain('vision');
    const admin = await run(['report', '--since', '2024-01-01T00:00:00Z'], ADMIN_TOKEN);
    expect(admin.stdout).toMatch(
      /^costs from 2024-01-01 00:00:00Z to .*: \$0\.50\nidle instance time: \$0\.50/,
    );
    expect(admin.stdout).toMatch(
      /by instance\nINSTANCE\s+TYPE\s+COST\s+IDLE\ninst-1\s+p3\.2xlarge\s+\$0\.50\s+\$0\.50/,
    );
    const bad = await run(['report', '--since', 'last week']);
    expect(bad.error?.message).toMatch(/^--since: expected epoch seconds/);
    const now = await run(['report', '--now'], ADMIN_TOKEN);
    expect(now.stdout).toMatch(/^wrote memory:\/\/reports\/\d+\.json\n$/);
  });

  it('report --from reads reports written by the controller back from a directory store', async () => {
    const store = new FsObjectStore(join(workDir, 'bucket'));
    const report = (generatedAtSeconds: number, totalCost: number): CostReportDocument =>
      buildReportDocument({
        cluster: 'bars',
        reason: 'hourly',
        report: {
          generatedAtSeconds,
          sinceSeconds: 0,
          totalCost,
          byJob: [{ id: 'job-1', team: 'vision', name: 'r', cost: totalCost - 0.25, migrationCost: 0 }],
          byTeam: [{ id: 'vision', cost: totalCost - 0.25 }],
          byInstance: [
            { id: 'inst-1', typeName: 'p3.2xlarge', cost: totalCost, idleCost: 0.25, billedSeconds: 3600 },
          ],
          idleCost: 0.25,
          migrationOverheadCost: 0,
          costPerHourNow: 3.06,
        },
        instances: [],
      });
    await writeReportFiles(store, report(1_700_000_000, 3.06));
    const newest = report(1_700_003_600, 6.12);
    await writeReportFiles(store, newest);

    const json = await run(['report', '--from', store.location, '--json']);
    const parsed = JSON.parse(json.stdout) as { reports: { key: string }[]; latest: CostReportDocument };
    expect(parsed.reports).toHaveLength(7); // two reports × JSON, CSV, HTML, plus latest.json
    expect(parsed.latest).toEqual(JSON.parse(JSON.stringify(newest)));
    const human = await run(['report', '--from', store.location]);
    expect(human.stdout).toMatch(
      /latest: reports\/costs-[^\n]+\.json\ncosts from .*: \$6\.12\nidle instance time: \$0\.25/,
    );
    expect(human.stdout).toMatch(/by job\nJOB\s+NAME\s+TEAM\s+COST\njob-1\s+r\s+vision\s+\$5\.87/);
    const future = await run([
      'report',
      '--from',
      store.location,
      '--since',
      String(Date.now() / 1000 + 3600),
    ]);
    expect(future.stdout).toMatch(/^no reports under reports\/ in .* since then\n$/);

    // A month's report: listed by month, never taken for the newest, printed with --month.
    await writeMonthlyReportFiles(store, report(1_700_000_000 - 86400, 99.5), '2023-10');
    const withMonth = await run(['report', '--from', store.location]);
    expect(withMonth.stdout).toMatch(/latest: reports\/costs-[^\n]+\.json\ncosts from .*: \$6\.12/);
    expect(withMonth.stdout).toContain('\nmonths: 2023-10 (--month YYYY-MM prints one)\n');
    const listed = JSON.parse((await run(['report', '--from', store.location, '--json'])).stdout) as {
      reports: { key: string }[];
      months: string[];
    };
    expect(listed.reports).toHaveLength(7);
    expect(listed.months).toEqual(['2023-10']);
    const month = await run(['report', '--from', store.location, '--month', '2023-10']);
    expect(month.stdout).toMatch(/^reports\/months\/2023-10\.json\ncosts from .*: \$99\.50\n/);
    const missing = await run(['report', '--from', store.location, '--month', '2023-09']);
    expect(missing.error?.message).toBe(
      `no report of 2023-09 in ${store.location} (a month's report is written once it has ended)`,
    );
    const malformed = await run(['report', '--from', store.location, '--month', '2023-9']);
    expect(malformed.error?.message).toBe('--month: expected a month as YYYY-MM (UTC), got "2023-9"');
    const until = await run(['report', '--from', store.location, '--until', '2023-11-01T00:00:00Z']);
    expect(until.error?.message).toBe(
      '--until: asks the controller for a period: leave out --from (or use --month)',
    );
  });

  it('report --month asks the controller for a month: an ended one as at its end, this one so far', async () => {
    const ended = await run(['report', '--month', '2023-10'], ADMIN_TOKEN);
    expect(ended.error).toBeUndefined();
    expect(service.costPeriods.at(-1)).toEqual([Date.UTC(2023, 9, 1) / 1000, Date.UTC(2023, 10, 1) / 1000]);
    expect(ended.stdout).toMatch(
      /^month 2023-10\ncosts from 2023-10-01 00:00:00Z to 2023-11-01 00:00:00Z: \$0\.50\n/,
    );
    const thisMonth = utcMonthOf(Date.now() / 1000);
    const soFar = await run(['report', '--month', thisMonth], ADMIN_TOKEN);
    expect(soFar.error).toBeUndefined();
    expect(service.costPeriods.at(-1)).toEqual([utcMonthBounds(thisMonth).startSeconds, undefined]);
    expect(soFar.stdout.split('\n')[0]).toBe(`month ${thisMonth} so far`);
    const json = await run(['report', '--month', '2023-10', '--json'], ADMIN_TOKEN);
    expect(JSON.parse(json.stdout)).toMatchObject({ generatedAtSeconds: Date.UTC(2023, 10, 1) / 1000 });

    const next = nextUtcMonth(thisMonth);
    expect((await run(['report', '--month', next])).error?.message).toBe(`--month: ${next} has not begun`);
    expect((await run(['report', '--month', '2023-10', '--since', '7d'])).error?.message).toBe(
      '--month: gives the period: leave out --since and --until',
    );
    expect((await run(['report', '--month', 'October'])).error?.message).toBe(
      '--month: expected a month as YYYY-MM (UTC), got "October"',
    );
    const backwards = await run([
      'report',
      '--since',
      '2023-11-01T00:00:00Z',
      '--until',
      '2023-10-01T00:00:00Z',
    ]);
    expect(backwards.error?.message).toBe(
      '--until: must come after --since (2023-11-01T00:00:00Z), got "2023-10-01T00:00:00Z"',
    );
    const period = await run([
      'report',
      '--since',
      '2023-10-01T00:00:00Z',
      '--until',
      '2023-10-08T00:00:00Z',
    ]);
    expect(period.stdout).toMatch(/^costs from 2023-10-01 00:00:00Z to 2023-10-08 00:00:00Z \(your team\)/);
  });

  it('logs fails with the 501 "no worker yet"', async () => {
    const job = service.submit(SPEC, 'vision');
    const logs = await run(['logs', job.id]);
    expect((logs.error as ApiError).status).toBe(501);
    expect(logs.error?.message).toContain('no worker yet');
  });
});
