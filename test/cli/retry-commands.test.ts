import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import {
  catalog,
  CPU_SMALL,
  jobSpec,
  rig,
  RUNS_ON,
  ScriptedExits,
  type Rig,
} from '../controller/controller-fixtures.js';
import { ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * `fleetwise job` shows a job's attempts and how each retried one failed; `fleetwise jobs` adds an ATTEMPTS column
 * once a job has retried: the built CLI in a subprocess against a real controller's API.
 */

const ADMIN = 'admin-token-cli-retry-0123456789abcdef';

let r: Rig;
let server: ApiServer;

function cli(args: readonly string[]): Promise<CliResult> {
  return runCli(args, { ...process.env, FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: ADMIN });
}

beforeAll(async () => {
  ensureBuiltCli();
  const control = new ScriptedExits(new Map([['job-1.0', [137, RUNS_ON]]]));
  r = rig({}, { tasks: control });
  control.store = r.store;
  server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
  r.controller.submit({ ...jobSpec('flaky', CPU_SMALL), retryStrategy: { attempts: 3 } }, 'research');
}, 240_000);

afterAll(async () => {
  await server?.close();
});

describe('fleetwise jobs/job with retried attempts (CLI subprocess)', () => {
  it('jobs shows no ATTEMPTS column until a job retries, then attempt/attempts', async () => {
    const before = await cli(['jobs']);
    expect(before.code).toBe(0);
    expect(before.stdout.split('\n')[0]).not.toContain('ATTEMPTS');
    await r.controller.runRound('test'); // started; its first run exits 137 at once: retried
    await r.controller.runRound('retry');
    expect(r.store.getJob('job-1')).toMatchObject({ state: 'running', attempts: 2 });
    const after = await cli(['jobs']);
    expect(after.stderr).toBe('');
    const [header, row] = after.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^ID\s+NAME\s+TEAM\s+STATE\s+PROGRESS\s+MIGRATIONS\s+ATTEMPTS\s+COST\s/);
    expect(row).toMatch(/^job-1\s+flaky\s+research\s+running\s.*\s2\/3\s/);
  });

  it('job shows the attempt and the failure of each earlier one; --json carries them', async () => {
    const out = await cli(['job', 'job-1']);
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/^attempts {3}attempt 2 of 3$/m);
    expect(out.stdout).toMatch(
      /^attempt 1 {2}failed \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ: task job-1\.0\n {11}exit code 137; last output:\n {11}Killed$/m,
    );
    const json = await cli(['job', 'job-1', '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({
      attempts: 2,
      maxAttempts: 3,
      attemptFailures: [
        { attempt: 1, taskId: 'job-1.0', exitCode: 137, reason: 'exit code 137; last output:\nKilled' },
      ],
    });
  });
});
