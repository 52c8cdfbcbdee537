import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpError } from '../../src/controller/api/errors.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import type { SubmissionCommitHook } from '../../src/controller/service.js';
import type { JobRecord } from '../../src/controller/state-store.js';
import { ADMIN_TOKEN, FakeControllerService } from '../controller/api-fake-service.js';
import { CPU_SMALL, jobSpec } from '../controller/controller-fixtures.js';
import { bareEnv } from '../helpers/local-controller.js';
import { ensureBuiltCli, runCli, type CliResult } from '../helpers/built-cli.js';

/**
 * A command refused partway, after it had done part of its work (jobs submitted, jobs cancelled), says what it had
 * done; under --json that is part of the one JSON object on stderr (its `details`, after the controller's), and the
 * error keeps what the client adds to the controller's reason (a 401's hint about the token sent). The built CLI in a
 * subprocess against an API server in this process.
 */

const DRY_RUN_REFUSAL = 'the dependency this job waits for has just failed';
const SUBMISSION_REFUSAL = 'the team is over its submission quota';

/** The controller as a race between checks and actions leaves it: it refuses some names where it took them before. */
class ChangingService extends FakeControllerService {
  /** Names whose dry run is refused (their keyed submission is taken: the state changed in between). */
  readonly refuseDryRun = new Set<string>();
  /** Names whose submission is refused, with the status it is answered with. */
  readonly refuseSubmission = new Map<string, number>();
  /** Revoked once the job it names is cancelled: [job id, team token]. */
  revokeAfterCancel: readonly [string, string] | undefined;

  submissionWarnings(spec: JobSpec): string[] {
    if (this.refuseDryRun.has(spec.name)) throw new HttpError(409, DRY_RUN_REFUSAL);
    return [];
  }

  override submit(spec: JobSpec, team: string, inCommit?: SubmissionCommitHook): JobRecord {
    const status = this.refuseSubmission.get(spec.name);
    if (status !== undefined) throw new HttpError(status, SUBMISSION_REFUSAL);
    return super.submit(spec, team, inCommit);
  }

  override cancel(jobId: string, reason?: string): JobRecord {
    const job = super.cancel(jobId, reason);
    if (this.revokeAfterCancel?.[0] === jobId) this.store.revokeTeamToken(this.revokeAfterCancel[1]);
    return job;
  }
}

interface JsonError {
  readonly error: string;
  readonly status?: number;
  readonly reason?: string;
  readonly details?: readonly string[];
}

let server: ApiServer;
let service: ChangingService;
let dir = '';

function cli(args: readonly string[]): Promise<CliResult> {
  return runCli(args, { ...bareEnv(), FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: ADMIN_TOKEN });
}

/** stderr as --json promises it: exactly one JSON object. */
function jsonError(result: CliResult): JsonError {
  expect(result.stderr.trim().split('\n'), result.stderr).toHaveLength(1);
  return JSON.parse(result.stderr) as JsonError;
}

/** Job ids from `submit --json` output, one line per job. */
function idsOf(result: CliResult): string[] {
  return result.stdout
    .trim()
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => (JSON.parse(line) as { id: string }).id);
}

/** A valid one-task spec file named `name`, for `team`. */
function specFile(name: string, team = 'nlp'): string {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    [
      `name: ${name}`,
      `team: ${team}`,
      'tasks:',
      '  - image: busybox:latest',
      '    demand: {c7i: [0, 4, 8]}',
      '',
    ].join('\n'),
  );
  return file;
}

beforeAll(async () => {
  ensureBuiltCli();
  dir = mkdtempSync(join(tmpdir(), 'fw-json-after-progress-'));
  service = new ChangingService();
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
}, 240_000);

afterAll(async () => {
  await server?.close();
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

describe('submit --json refused after it submitted some files', () => {
  it('names the jobs already submitted in the JSON error, not on a plain line; text is as it was', async () => {
    const first = specFile('first');
    const quota = specFile('over-quota');
    service.refuseSubmission.set('over-quota', 409);
    const refused = await cli(['submit', first, quota, '--json']);
    expect(refused.code).toBe(1);
    const [made] = idsOf(refused);
    expect(service.store.getJob(made ?? '')?.name).toBe('first');
    expect(jsonError(refused)).toEqual({
      error: `${quota}: POST /v1/jobs: the controller answered 409: ${SUBMISSION_REFUSAL}`,
      status: 409,
      reason: SUBMISSION_REFUSAL,
      details: [`already submitted: ${made}`],
    });

    const text = await cli(['submit', first, quota]);
    expect(text.code).toBe(1);
    const again = /^submitted (job-\d+) \(first, team nlp\): queued\n$/.exec(text.stdout)?.[1];
    expect(again, text.stdout).toBeDefined();
    expect(text.stderr).toBe(
      `already submitted: ${again}\n` +
        `fleetwise: ${quota}: POST /v1/jobs: the controller answered 409: ${SUBMISSION_REFUSAL}\n`,
    );
  });

  it('an answer lost after an array was submitted: the array by its first and last job, then how to send again', async () => {
    const sweep = specFile('sweep');
    const lost = specFile('lost');
    service.refuseSubmission.set('lost', 500);
    const key = 'after-progress-lost';
    const refused = await cli(['submit', sweep, lost, '--array', '3', '--idempotency-key', key, '--json']);
    expect(refused.code).toBe(1);
    const ids = idsOf(refused);
    expect(ids).toHaveLength(3);
    const e = jsonError(refused);
    expect(e).toMatchObject({ status: 500 });
    expect(e.error).toMatch(new RegExp(`^${lost}: POST /v1/jobs: the controller answered 500: `));
    expect(e.details).toEqual([
      `already submitted: ${ids[0]} … ${ids[2]}`,
      `to send it again without risking a second copy, run the same command with --idempotency-key ${key}`,
    ]);
  });

  it('a file whose dry run was refused, yet its keyed submission taken, is named when the next one is refused', async () => {
    const taken = specFile('taken-after-all');
    const both = specFile('refused-both-ways');
    service.refuseDryRun.add('taken-after-all');
    service.refuseDryRun.add('refused-both-ways');
    service.refuseSubmission.set('refused-both-ways', 409);
    const before = service.store.listJobs().length;
    const refused = await cli(['submit', taken, both, '--idempotency-key', 'after-progress-keyed', '--json']);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    const made = service.store.listJobs().slice(before);
    expect(made.map((j) => j.name)).toEqual(['taken-after-all']);
    expect(jsonError(refused)).toEqual({
      error: `${both}: POST /v1/jobs: the controller answered 409: ${SUBMISSION_REFUSAL}`,
      status: 409,
      reason: SUBMISSION_REFUSAL,
      details: [`already submitted: ${made[0]?.id}`],
    });
  });

  it('a --chain of files for two teams, refused after a keyed file was taken: the refusal, then the job made', async () => {
    const vision = specFile('vision-step', 'vision');
    const nlp = specFile('nlp-step');
    service.refuseDryRun.add('vision-step');
    const problem = `${nlp} is for team nlp, ${vision} before it for team vision: a job waits only for jobs of its own team`;
    const chain = (key: string, ...more: string[]): Promise<CliResult> =>
      cli(['submit', vision, nlp, '--chain', '--idempotency-key', key, ...more]);
    const before = service.store.listJobs().length;
    const refused = await chain('after-progress-chain-json', '--json');
    expect(refused.code).toBe(2);
    expect(refused.stdout).toBe('');
    const made = service.store.listJobs().slice(before);
    expect(made.map((j) => j.name)).toEqual(['vision-step']);
    expect(jsonError(refused)).toEqual({
      error: 'invalid input: --chain',
      details: [problem, `already submitted: ${made[0]?.id}`],
    });

    const text = await chain('after-progress-chain-text');
    expect(text.code).toBe(2);
    const madeByText = service.store.listJobs().at(-1);
    expect(madeByText?.name).toBe('vision-step');
    expect(text.stderr).toBe(
      `already submitted: ${madeByText?.id}\nfleetwise: invalid input: --chain\n  - ${problem}\n`,
    );
  });
});

describe('cancel refused partway by a 401', () => {
  /** A checkout whose .fleetwise/ names the API and holds `token` as its admin token; its token file. */
  function checkout(name: string, token: string): { readonly cwd: string; readonly tokenFile: string } {
    const cwd = join(dir, name);
    mkdirSync(join(cwd, '.fleetwise'), { recursive: true });
    writeFileSync(join(cwd, '.fleetwise', 'api-url'), `${server.url}\n`);
    const tokenFile = join(cwd, '.fleetwise', 'admin-token');
    writeFileSync(tokenFile, `${token}\n`);
    return { cwd, tokenFile };
  }

  it('keeps the hint about the token sent, next to the jobs already cancelled, in --json and in text', async () => {
    for (const json of [true, false]) {
      const token = `nlp-token-revoked-midway-${json ? 'json' : 'text'}-0123456789`;
      service.store.addTeamToken('nlp', token, 'test');
      const [first, second] = ['one', 'two'].map((n) =>
        service.store.submitJob(jobSpec(n, CPU_SMALL, { team: 'nlp' })),
      );
      service.revokeAfterCancel = [first?.id ?? '', token];
      const { cwd, tokenFile } = checkout(`checkout-${json ? 'json' : 'text'}`, token);
      const args = ['cancel', first?.id ?? '', second?.id ?? '', ...(json ? ['--json'] : [])];
      const result = await runCli(args, bareEnv(), { cwd });
      expect(result.code, result.stderr).toBe(1);
      expect(service.store.getJob(first?.id ?? '')?.state).toBe('cancelled');
      expect(service.store.getJob(second?.id ?? '')?.state).toBe('queued');
      const headline =
        `POST /v1/jobs/${second?.id}/cancel: the controller answered 401: invalid or revoked token ` +
        `(the token sent is the admin token in ${tokenFile}; `;
      if (json) {
        const e = jsonError(result);
        expect(e.error.startsWith(headline), e.error).toBe(true);
        expect(e).toMatchObject({
          status: 401,
          reason: 'invalid or revoked token',
          details: [`already cancelled: ${first?.id}`],
        });
      } else {
        expect(result.stderr.startsWith(`fleetwise: ${headline}`), result.stderr).toBe(true);
        expect(result.stderr).toMatch(/\n {2}- already cancelled: job-\d+\n$/);
      }
    }
  });
});

/**
 * The API server behind a proxy that drops the connection of any request whose path ends with `drop` (no answer at
 * all: the connection lost), and forwards the rest.
 */
async function droppingProxy(drop: string): Promise<{ url: string; server: Server }> {
  const proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url?.endsWith(drop) === true) {
        req.socket.destroy();
        return;
      }
      const headers: Record<string, string> = {};
      for (const name of ['authorization', 'content-type', 'idempotency-key'])
        if (typeof req.headers[name] === 'string') headers[name] = req.headers[name];
      const body = Buffer.concat(chunks);
      void fetch(`${server.url}${req.url ?? '/'}`, {
        method: req.method ?? 'GET',
        headers,
        ...(body.length > 0 ? { body } : {}),
      }).then(async (answer) => {
        const type = answer.headers.get('content-type');
        res.writeHead(answer.status, type === null ? {} : { 'content-type': type });
        res.end(Buffer.from(await answer.arrayBuffer()));
      });
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const address = proxy.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy has no port');
  return { url: `http://127.0.0.1:${address.port}`, server: proxy };
}

describe('a connection lost after some of the work was done', () => {
  it('cancel --json: one JSON object, the jobs already cancelled in its details; text as before', async () => {
    for (const json of [true, false]) {
      const [first, second] = ['one', 'two'].map((n) =>
        service.store.submitJob(jobSpec(`${n}-lost-${json ? 'json' : 'text'}`, CPU_SMALL, { team: 'nlp' })),
      );
      const proxy = await droppingProxy(`/v1/jobs/${second?.id}/cancel`);
      try {
        const args = ['cancel', first?.id ?? '', second?.id ?? '', ...(json ? ['--json'] : [])];
        const result = await runCli(args, {
          ...bareEnv(),
          FLEETWISE_SERVER: proxy.url,
          FLEETWISE_TOKEN: ADMIN_TOKEN,
        });
        expect(result.code, result.stderr).toBe(1);
        expect(service.store.getJob(first?.id ?? '')?.state).toBe('cancelled');
        expect(service.store.getJob(second?.id ?? '')?.state).toBe('queued');
        if (json) {
          const e = jsonError(result);
          expect(e.error).toMatch(
            new RegExp(`^cannot reach the controller at ${proxy.url} \\(POST /v1/jobs/`),
          );
          expect(e.error).not.toContain('already cancelled');
          expect(e.details).toEqual([`already cancelled: ${first?.id}`]);
        } else expect(result.stderr).toMatch(new RegExp(`\\nalready cancelled: ${first?.id}\\n$`));
      } finally {
        await new Promise((resolve) => proxy.server.close(resolve));
      }
    }
  }, 120_000);
});
