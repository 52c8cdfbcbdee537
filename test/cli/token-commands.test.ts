import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import {
  killLocalLeftovers,
  LOCAL_ADMIN_TOKEN,
  startLocalController,
  type StartedController,
} from '../helpers/local-controller.js';

/**
 * `fleetwise token create|list|revoke` through the real CLI against a local controller (a dry run): the admin
 * creates a team token, shown once; the listing names it by its hash prefix, never the token; revoked, it no longer
 * authenticates. Team tokens cannot manage tokens.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-tokens-'));
const stateDir = join(scratch, 'state');
let controller: StartedController;

function env(token: string): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env };
  for (const key of Object.keys(e)) if (key.startsWith('FLEETWISE_')) delete e[key];
  return { ...e, FLEETWISE_SERVER: controller.url, FLEETWISE_TOKEN: token };
}

beforeAll(async () => {
  ensureBuiltCli();
  controller = await startLocalController(stateDir, { args: ['--dry-run'] });
}, 240_000);

afterAll(async () => {
  controller.process.kill('SIGTERM');
  await controller.exited;
  killLocalLeftovers(stateDir);
  rmSync(scratch, { recursive: true, force: true });
});

describe('fleetwise token (CLI subprocess)', () => {
  it('creates a team token shown once, lists it by hash prefix, and revokes it', async () => {
    const created = await runCli(
      ['token', 'create', '--team', 'vision', '--label', 'ci', '--json'],
      env(LOCAL_ADMIN_TOKEN),
    );
    expect(created.code, created.stderr).toBe(0);
    const record = JSON.parse(created.stdout) as { token: string; team: string; id: string; label: string };
    expect(record).toMatchObject({ team: 'vision', label: 'ci' });
    expect(record.token.length).toBeGreaterThanOrEqual(32);
    expect(record.id).toMatch(/^[0-9a-f]{12}$/);

    // The new token authenticates as its team.
    const jobs = await runCli(['jobs', '--json'], env(record.token));
    expect(jobs.code, jobs.stderr).toBe(0);

    // Without --json, stdout is the token alone and the note about it goes to stderr.
    const plain = await runCli(
      ['token', 'create', '--team', 'nlp', '--label', 'etl'],
      env(LOCAL_ADMIN_TOKEN),
    );
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toMatch(/^\S{32,}\n$/);
    const nlpId = createHash('sha256').update(plain.stdout.slice(0, -1)).digest('hex').slice(0, 12);
    expect(plain.stderr).toBe(
      `token ${nlpId} for team nlp (etl): shown once, the controller keeps only its hash; ` +
        'give it to the team as FLEETWISE_TOKEN\n',
    );

    const listed = await runCli(['token', 'list'], env(LOCAL_ADMIN_TOKEN));
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain(record.id);
    expect(listed.stdout).toContain('vision');
    expect(listed.stdout).toContain('nlp');
    expect(listed.stdout).not.toContain(record.token);
    const visionOnly = JSON.parse(
      (await runCli(['token', 'list', '--team', 'vision', '--json'], env(LOCAL_ADMIN_TOKEN))).stdout,
    ) as { id: string; team: string; revokedAtSeconds?: number }[];
    expect(visionOnly.map((t) => t.team)).toEqual(['vision']);

    // Stored hashed: the raw token is nowhere in the state.
    expect(readFileSync(join(stateDir, 'state.db')).includes(Buffer.from(record.token))).toBe(false);

    // A team token manages no tokens.
    const forbidden = await runCli(['token', 'create', '--team', 'nlp', '--json'], env(record.token));
    expect(forbidden.code).toBe(1);
    expect(JSON.parse(forbidden.stderr)).toMatchObject({ status: 403 });

    const revoked = await runCli(['token', 'revoke', record.id], env(LOCAL_ADMIN_TOKEN));
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toContain(record.id);
    const after = await runCli(['jobs', '--json'], env(record.token));
    expect(after.code).toBe(1);
    expect(JSON.parse(after.stderr)).toMatchObject({ status: 401 });
    const again = await runCli(['token', 'revoke', record.id, '--json'], env(LOCAL_ADMIN_TOKEN));
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stderr)).toMatchObject({ status: 409 });
    const unknown = await runCli(['token', 'revoke', '000000000000', '--json'], env(LOCAL_ADMIN_TOKEN));
    expect(JSON.parse(unknown.stderr)).toMatchObject({ status: 404 });
  }, 120_000);

  it('refuses an invalid team name or id, naming the field', async () => {
    const bad = await runCli(['token', 'create', '--team', 'Not A Team', '--json'], env(LOCAL_ADMIN_TOKEN));
    // The controller refused the input: exit 2, as for the client's own checks.
    expect(bad.code).toBe(2);
    const body = JSON.parse(bad.stderr) as { status: number; details: string[] };
    expect(body.status).toBe(400);
    expect(body.details).toEqual([expect.stringMatching(/^team: /)]);
    const badId = await runCli(['token', 'revoke', 'xyz', '--json'], env(LOCAL_ADMIN_TOKEN));
    expect(JSON.parse(badId.stderr)).toMatchObject({ status: 400 });
  }, 60_000);

  it('refuses a team name over the length limit saying so, as a job spec does', async () => {
    const long = await runCli(
      ['token', 'create', '--team', 'a'.repeat(64), '--json'],
      env(LOCAL_ADMIN_TOKEN),
    );
    expect(long.code).toBe(2);
    const body = JSON.parse(long.stderr) as { status: number; details: string[] };
    expect(body.status).toBe(400);
    expect(body.details).toEqual(['team: at most 63 characters']);
    const longest = await runCli(['token', 'create', '--team', 'a'.repeat(63)], env(LOCAL_ADMIN_TOKEN));
    expect(longest.code, longest.stderr).toBe(0);
  }, 60_000);

  it('refuses a label with a line break or tab, naming label: a listing shows one row per token', async () => {
    for (const label of ['ci\nzzzzzzzzzzzz  forged    -', 'ci\tforged', 'ci\r\nforged']) {
      const bad = await runCli(
        ['token', 'create', '--team', 'forge', '--label', label, '--json'],
        env(LOCAL_ADMIN_TOKEN),
      );
      expect(bad.code).toBe(2);
      expect(JSON.parse(bad.stderr)).toMatchObject({
        status: 400,
        details: ['label: one line: line breaks, tabs and other control characters are not allowed'],
      });
    }
    const listed = JSON.parse(
      (await runCli(['token', 'list', '--team', 'forge', '--json'], env(LOCAL_ADMIN_TOKEN))).stdout,
    ) as unknown[];
    expect(listed).toEqual([]);
  }, 60_000);

  it('refuses a token no header can carry, naming where it came from and never echoing it', async () => {
    const flag = await runCli(['token', 'list', '--token', 'secretabc\nsecretdef'], env(LOCAL_ADMIN_TOKEN));
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/--token\n {2}- the token holds whitespace, a line break/);
    expect(flag.stderr).not.toContain('secret');
    expect(flag.stderr).not.toContain('cannot reach');
    const fromEnv = await runCli(['jobs'], env('secret token-0123456789'));
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toMatch(/FLEETWISE_TOKEN\n {2}- the token holds whitespace/);
    expect(fromEnv.stderr).not.toContain('secret');
    const beyondLatin1 = await runCli(['jobs'], env('secret-token-\u{1f511}-0123456789'));
    expect(beyondLatin1.code).toBe(2);
    expect(beyondLatin1.stderr).toMatch(/FLEETWISE_TOKEN\n {2}- the token holds whitespace/);
    expect(beyondLatin1.stderr).not.toContain('secret');
  }, 60_000);

  it('prints a token a shell capture or redirect can use as FLEETWISE_TOKEN as it is', async () => {
    const tokenFile = join(scratch, 'team.token');
    // As a user would: capture the one showing, then use it, through sh.
    const script =
      `T=$("$NODE" "$CLI" token create --team capture) && FLEETWISE_TOKEN=$T "$NODE" "$CLI" jobs --json && ` +
      `"$NODE" "$CLI" token create --team capture > "$FILE" && FLEETWISE_TOKEN=$(cat "$FILE") "$NODE" "$CLI" jobs --json`;
    const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        'sh',
        ['-c', script],
        { env: { ...env(LOCAL_ADMIN_TOKEN), NODE: process.execPath, CLI, FILE: tokenFile } },
        (error, stdout, stderr) => {
          resolve({
            code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1,
            stdout,
            stderr,
          });
        },
      );
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).not.toMatch(/holds whitespace/);
    // Both team listings answered (the team has no jobs), and the explanations went to the terminal.
    expect(run.stdout).toBe('[]\n[]\n');
    expect(run.stderr.match(/for team capture: shown once/g)).toHaveLength(2);
    expect(readFileSync(tokenFile, 'utf8')).toMatch(/^\S{32,}\n$/);
  }, 60_000);
});
