import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { catalog, CPU_SMALL, jobSpec, rig, type Rig } from '../controller/controller-fixtures.js';
import { CLI, ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * `fleetwise jobs` / `fleetwise job` show the queue layer (class, position, wait reason, ETA and its basis), and
 * `fleetwise job --mark-unsuccessful` ends a job at a stage: the built CLI in a subprocess against a real controller's
 * API on a real socket.
 */

const ADMIN = 'admin-token-cli-queue-0123456789abcdef';
const TEAM = 'research-token-cli-queue-0123456789';

let r: Rig;
let server: ApiServer;

function cli(args: readonly string[]): Promise<CliResult> {
  return runCli(args, { ...process.env, FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: TEAM });
}

beforeAll(async () => {
  ensureBuiltCli();
  expect(existsSync(CLI), `${CLI} is missing: run npm run build`).toBe(true);
  r = rig({ caps: { quotas: [{ group: 'standard', maxVcpus: 4 }] } });
  r.store.addTeamToken('research', TEAM);
  server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
  // Its stages are what --mark-unsuccessful --stage names.
  r.controller.submit(
    {
      ...jobSpec('first', CPU_SMALL, { expectedDurationSeconds: 3600 }),
      success: { kind: 'stages', stageSeconds: [600, 3000], continueProbabilities: [0.5] },
    },
    'research',
  );
  r.controller.submit(jobSpec('second', CPU_SMALL, { expectedDurationSeconds: 1800 }), 'research');
  await r.controller.runRound('test');
  await r.controller.predictionsSettled();
}, 240_000);

afterAll(async () => {
  await server?.close();
});

describe('fleetwise jobs/job with the queue layer (CLI subprocess)', () => {
  it('jobs lists the queue place and the ETA of every job', async () => {
    const out = await cli(['jobs']);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    const [header, first, second] = out.stdout.trimEnd().split('\n');
    expect(header).toMatch(
      /^ID\s+NAME\s+TEAM\s+STATE\s+PROGRESS\s+MIGRATIONS\s+COST\s+SUBMITTED\s+QUEUE\s+ETA$/,
    );
    expect(first).toMatch(
      /^job-1\s+first\s+research\s+running\s.*\sall admitted\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/,
    );
    expect(second).toMatch(
      /^job-2\s+second\s+research\s+queued\s.*\sall #1 \(caps\)\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/,
    );
  });

  it('job shows the queue place, the ETA with its basis and the submission prediction', async () => {
    const out = await cli(['job', 'job-2']);
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(
      /^queue {6}class all, position 1 \(caps\): admitting it now would break quota standard maxVcpus/m,
    );
    expect(out.stdout).toMatch(/^eta {8}\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ, start \d{4}-/m);
    expect(out.stdout).toMatch(
      /^basis {6}simulated \d+ round\(s\) ahead with eva .*no future arrivals; 0 job\(s\) ahead in class all$/m,
    );
    expect(out.stdout).toMatch(
      /^predicted  \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ at submission \(simulated \d+ round/m,
    );
  });

  it('job --mark-unsuccessful ends the job at a stage; the next round admits the waiting one', async () => {
    // job-2 declares no stages: a stage for it is bad input, and it stays as it was.
    const stageless = await cli(['job', 'job-2', '--mark-unsuccessful', '--stage', '1']);
    expect(stageless.code).toBe(2);
    expect(stageless.stderr).toContain('  - stage: job-2 declares no success stages\n');
    expect(r.store.getJob('job-2')?.state).toBe('queued');
    const out = await cli(['job', 'job-1', '--mark-unsuccessful', '--stage', '1', '--reason', 'diverged']);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    expect(out.stdout).toBe('job-1 unsuccessful (stopped as unsuccessful at stage 1: diverged)\n');
    expect(r.store.getJob('job-1')?.state).toBe('unsuccessful');
    // Ended: its last ETA is no estimate of anything; what was predicted at submission stays.
    const view = await cli(['job', 'job-1']);
    expect(view.stdout).toMatch(/^eta {8}- \(the job ended\)$/m);
    expect(view.stdout).not.toMatch(/^basis /m);
    expect(view.stdout).toMatch(/^predicted  /m);
    await r.controller.runRound('unsuccessful');
    await r.controller.runRound('period');
    expect(r.store.getJob('job-2')?.state).toBe('running');
    const bad = await cli(['job', 'job-2', '--stage', '1']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('invalid input: --stage\n  - goes with --mark-unsuccessful');
    const ended = await cli(['job', 'job-1', '--mark-unsuccessful', '--stage', 'x']);
    expect(ended.code).toBe(2);
    expect(ended.stderr).toContain('invalid input: --stage\n  - expected a stage number ≥ 1, got x');
  });

  it('an ETA past the prediction horizon reads "beyond 30 days" in job and jobs', async () => {
    // 40 days of work at full throughput: past the 30-day horizon, whatever the queue does.
    const long = r.controller.submit(
      jobSpec('long', CPU_SMALL, { expectedDurationSeconds: 40 * 86_400 }),
      'research',
    );
    await r.controller.predictionsSettled();
    const job = await cli(['job', long.id]);
    expect(job.code).toBe(0);
    expect(job.stdout).toMatch(/^eta {8}beyond 30 days \(computed \d{4}-/m);
    expect(job.stdout).toMatch(/^basis {6}beyond 30 days: its remaining work at full throughput alone/m);
    expect(job.stdout).toMatch(/^predicted  beyond 30 days at submission/m);
    const jobs = await cli(['jobs']);
    expect(jobs.stdout.split('\n').find((l) => l.startsWith(long.id))).toMatch(/beyond 30 days$/);
  });
});
