import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpError } from '../../src/controller/api/errors.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import type { JobRecord } from '../../src/controller/state-store.js';
import { ADMIN_TOKEN, FakeControllerService } from '../controller/api-fake-service.js';
import { CPU_SMALL, jobSpec } from '../controller/controller-fixtures.js';
import { ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * With --json, a refusal a command names (the file, the job it was for) is one JSON object on stderr with the
 * controller's status, reason and details (a spec file's with their lines), as an unnamed one is; the text without
 * --json is the same message laid out on lines. The built CLI in a subprocess against an API server in this process.
 */

/** The controller's cancel answers a conflict for this job; every other job is cancelled. */
const BUSY_REASON = 'the job is writing its checkpoint: cancel it again in a moment';

class CancelRefusingService extends FakeControllerService {
  busy = '';
  override cancel(jobId: string, reason?: string): JobRecord {
    if (jobId === this.busy) throw new HttpError(409, BUSY_REASON);
    return super.cancel(jobId, reason);
  }
}

interface JsonError {
  readonly error: string;
  readonly status?: number;
  readonly reason?: string;
  readonly details?: readonly string[];
}

let server: ApiServer;
let service: CancelRefusingService;
let dir = '';

function cli(args: readonly string[]): Promise<CliResult> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const key of Object.keys(env)) if (key.startsWith('FLEETWISE_')) delete env[key];
  return runCli(args, { ...env, FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: ADMIN_TOKEN });
}

/** stderr as --json promises it: exactly one JSON object. */
function jsonError(result: CliResult): JsonError {
  expect(result.stderr.trim().split('\n'), result.stderr).toHaveLength(1);
  return JSON.parse(result.stderr) as JsonError;
}

/** The text a JSON error stands for: its error line, then a line per detail. */
function asText(e: JsonError): string {
  return `fleetwise: ${[e.error, ...(e.details ?? []).map((d) => `  - ${d}`)].join('\n')}\n`;
}

/** A task no instance type of the catalog holds (500 vCPU): refused for its demand, on line 6. */
const BIG_SPEC = [
  'name: big',
  'team: nlp',
  'tasks:',
  '  - name: main',
  '    image: busybox:latest',
  '    demand: {any: [0, 500, 0.25]}',
  '',
].join('\n');

const OK_SPEC = [
  'name: ok',
  'team: nlp',
  'tasks:',
  '  - name: main',
  '    image: busybox:latest',
  '    demand: {c7i: [0, 4, 8]}',
  '',
].join('\n');

const UNHOSTED = /^tasks\.0\.demand: no instance type in the us-east-1 catalog can host this task \(.*\)/;

beforeAll(async () => {
  ensureBuiltCli();
  dir = mkdtempSync(join(tmpdir(), 'fw-json-refusals-'));
  writeFileSync(join(dir, 'big.yaml'), BIG_SPEC);
  writeFileSync(join(dir, 'ok.yaml'), OK_SPEC);
  service = new CancelRefusingService();
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
}, 240_000);

afterAll(async () => {
  await server?.close();
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

describe('a named refusal under --json', () => {
  it('submit: the file named, the status, reason and the details with their lines; nothing on stdout', async () => {
    const file = join(dir, 'big.yaml');
    const refused = await cli(['submit', file, '--json']);
    expect(refused.code).toBe(2);
    expect(refused.stdout).toBe('');
    const e = jsonError(refused);
    expect(e).toMatchObject({
      error: `${file}: POST /v1/jobs: the controller answered 400: invalid job spec`,
      status: 400,
      reason: 'invalid job spec',
    });
    expect(e.details).toHaveLength(1);
    expect(e.details?.[0]).toMatch(UNHOSTED);
    expect(e.details?.[0]).toMatch(/ \(line 6\)$/);
    // Keyed, the refused dry run is followed by the keyed submission, refused the same way.
    const keyed = await cli(['submit', file, '--json', '--idempotency-key', 'json-refusals-big']);
    expect(keyed.code).toBe(2);
    expect(jsonError(keyed)).toEqual(e);
    // Without --json, the same message as text.
    const text = await cli(['submit', file]);
    expect(text.code).toBe(2);
    expect(text.stderr).toBe(asText(e));
    expect(service.store.listJobs()).toHaveLength(0);
  });

  it('submit --depends-on a job that does not exist: the dependency refused, as a detail', async () => {
    const file = join(dir, 'ok.yaml');
    const refused = await cli(['submit', file, '--depends-on', 'job-999', '--json']);
    expect(refused.code).toBe(2);
    expect(refused.stdout).toBe('');
    const e = jsonError(refused);
    expect(e).toEqual({
      error: `${file}: POST /v1/jobs: the controller answered 400: invalid job spec`,
      status: 400,
      reason: 'invalid job spec',
      details: ['dependsOn: no job job-999 of team nlp'],
    });
    const text = await cli(['submit', file, '--depends-on', 'job-999']);
    expect(text.stderr).toBe(asText(e));
  });

  it('resubmit: the job named, its refusal with its details, and the jobs already resubmitted', async () => {
    const good = service.store.submitJob({ ...jobSpec('prep', CPU_SMALL), team: 'nlp' });
    // A spec a controller with a larger catalog took once: this one refuses to run it again.
    const taken = jobSpec('huge', CPU_SMALL);
    const huge = service.store.submitJob({
      ...taken,
      team: 'nlp',
      tasks: taken.tasks.map((t) => ({ ...t, demand: { c7i: [0, 500, 8] } })),
    });
    for (const job of [good, huge]) service.store.setJobState(job.id, 'failed', 'exit code 3');
    const refused = await cli(['resubmit', good.id, huge.id, '--json']);
    expect(refused.code).toBe(2);
    const rerun = (JSON.parse(refused.stdout) as { from: string; id: string }).id;
    const e = jsonError(refused);
    expect(e).toMatchObject({
      error: `${huge.id}: POST /v1/jobs: the controller answered 400: invalid job spec`,
      status: 400,
      reason: 'invalid job spec',
    });
    expect(e.details, refused.stderr).toHaveLength(2);
    expect(e.details?.[0]).toMatch(UNHOSTED);
    expect(e.details?.[1]).toBe(`already resubmitted: ${good.id} → ${rerun}`);
    // Again without --json: the keyed rerun of the first job is answered again, then the same refusal as text, the
    // jobs already resubmitted on a line of their own.
    const text = await cli(['resubmit', good.id, huge.id]);
    expect(text.code).toBe(2);
    expect(text.stderr).toBe(
      `fleetwise: ${e.error}\n  - ${e.details?.[0]}\nalready resubmitted: ${good.id} → ${rerun}\n`,
    );
  });

  it('cancel: a refusal after other jobs were cancelled lists them as a detail', async () => {
    const first = service.store.submitJob({ ...jobSpec('first', CPU_SMALL), team: 'nlp' });
    const busy = service.store.submitJob({ ...jobSpec('busy', CPU_SMALL), team: 'nlp' });
    service.busy = busy.id;
    const refused = await cli(['cancel', first.id, busy.id, '--json']);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    const e = jsonError(refused);
    expect(e).toEqual({
      error: `POST /v1/jobs/${busy.id}/cancel: the controller answered 409: ${BUSY_REASON}`,
      status: 409,
      reason: BUSY_REASON,
      details: [`already cancelled: ${first.id}`],
    });
    expect(service.store.getJob(first.id)?.state).toBe('cancelled');
    expect(service.store.getJob(busy.id)?.state).toBe('queued');
    const second = service.store.submitJob({ ...jobSpec('second', CPU_SMALL), team: 'nlp' });
    const text = await cli(['cancel', second.id, busy.id]);
    expect(text.code).toBe(1);
    expect(text.stdout).toBe(`${second.id} (second): cancelled\n`);
    expect(text.stderr).toBe(
      `fleetwise: POST /v1/jobs/${busy.id}/cancel: the controller answered 409: ${BUSY_REASON}\n` +
        `  - already cancelled: ${second.id}\n`,
    );
  });
});
