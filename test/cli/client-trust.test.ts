import type { ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { bareEnv, spawnDryRunController } from '../helpers/local-controller.js';
import { untrustedReason } from '../../src/cli/local-state.js';

/**
 * Whom the client sends a token to, as users run it (a subprocess), against a listener on a real socket that records
 * every Authorization header: a token given by flag or environment goes only to a server given so, never to the
 * address a `.fleetwise/api-url` found up the tree names (a cloned repository or another user's /tmp/.fleetwise could
 * name any); a state directory another user owns or can write to is passed over with a warning. And the local
 * controller says on start that the process executor isolates nothing.
 */
let listener: Server;
let listenerUrl = '';
const received: (string | undefined)[] = [];
let workDir = '';
const children: ChildProcess[] = [];

const TEAM_TOKEN = 'team-token-of-the-user-0123456789';
const PLANTED_TOKEN = 'planted-admin-token-0123456789';

beforeAll(async () => {
  ensureBuiltCli();
  listener = createServer((req, res) => {
    received.push(req.headers.authorization);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"jobs":[]}');
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  listenerUrl = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;
  workDir = mkdtempSync(join(tmpdir(), 'fleetwise-trust-'));
}, 240_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await new Promise((resolve) => listener?.close(resolve));
  if (workDir !== '') rmSync(workDir, { recursive: true, force: true });
});

beforeEach(() => {
  received.length = 0;
});

/** A checkout with a `.fleetwise/` naming the listener (and holding `adminToken`, if given); its subdirectory. */
function checkout(
  name: string,
  adminToken?: string,
): { readonly root: string; readonly stateDir: string; readonly sub: string } {
  const root = join(workDir, name);
  const stateDir = join(root, '.fleetwise');
  const sub = join(root, 'src', 'deep');
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  mkdirSync(sub, { recursive: true });
  writeFileSync(join(stateDir, 'api-url'), `${listenerUrl}\n`, { mode: 0o600 });
  if (adminToken !== undefined)
    writeFileSync(join(stateDir, 'admin-token'), `${adminToken}\n`, { mode: 0o600 });
  return { root, stateDir, sub };
}

describe('whom the client sends a token to (CLI subprocess)', { timeout: 60_000 }, () => {
  it('a token from FLEETWISE_TOKEN or --token is never sent to the address a found .fleetwise/ names', async () => {
    const repo = checkout('cloned-repo');
    const fromEnv = await runCli(['jobs'], { ...bareEnv(), FLEETWISE_TOKEN: TEAM_TOKEN }, { cwd: repo.sub });
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toMatch(/FLEETWISE_TOKEN.*pass --server URL or set FLEETWISE_SERVER/s);
    const fromFlag = await runCli(['jobs', '--token', TEAM_TOKEN], bareEnv(), { cwd: repo.sub });
    expect(fromFlag.code).toBe(2);
    expect(fromFlag.stderr).toMatch(/--token.*pass --server URL or set FLEETWISE_SERVER/s);
    expect(received).toEqual([]);

    // Given with a server, it goes there.
    const named = await runCli(
      ['jobs', '--json'],
      { ...bareEnv(), FLEETWISE_SERVER: listenerUrl, FLEETWISE_TOKEN: TEAM_TOKEN },
      { cwd: repo.sub },
    );
    expect(named.code).toBe(0);
    expect(received).toEqual([`Bearer ${TEAM_TOKEN}`]);
  });

  it("the local controller's own admin token goes to its address when no token is given", async () => {
    const mine = checkout('my-checkout', PLANTED_TOKEN);
    const local = await runCli(['jobs', '--json'], bareEnv(), { cwd: mine.sub });
    expect(local.stderr).toBe('');
    expect(local.code).toBe(0);
    expect(received).toEqual([`Bearer ${PLANTED_TOKEN}`]);
  });

  it('a .fleetwise/ others can write to is passed over, with a warning', async () => {
    const shared = checkout('shared', PLANTED_TOKEN);
    chmodSync(shared.stateDir, 0o777);
    const result = await runCli(['jobs'], bareEnv(), { cwd: shared.sub });
    expect(result.stderr).toContain(
      `fleetwise: warning: ignoring the local controller state ${shared.stateDir}: `,
    );
    expect(result.stderr).toContain('is writable by other users');
    expect(result.code).toBe(1); // no controller address left
    // The error says a state was found and why it was not used, not that there is none.
    expect(result.stderr).toContain('the local controller state found was not used');
    expect(result.stderr).not.toContain('no local controller state');
    expect(received).toEqual([]);

    // Its files too.
    chmodSync(shared.stateDir, 0o700);
    chmodSync(join(shared.stateDir, 'api-url'), 0o620);
    const groupFile = await runCli(['jobs'], bareEnv(), { cwd: shared.sub });
    expect(groupFile.stderr).toMatch(/api-url is writable by its group/);
    expect(received).toEqual([]);
  });

  it('a .fleetwise/ another user owns is passed over', () => {
    const foreign = checkout('foreign', PLANTED_TOKEN);
    // As seen by another uid than the owner's (no chown needed, so the test runs as any user).
    const owner = statSync(foreign.stateDir).uid;
    expect(untrustedReason(foreign.stateDir, owner + 1)).toBe(
      `${foreign.stateDir} is owned by uid ${owner}, not by you (uid ${owner + 1})`,
    );
    expect(untrustedReason(foreign.stateDir, owner)).toBeUndefined();
  });
});

describe('the local controller with the process executor (CLI subprocess)', { timeout: 90_000 }, () => {
  it('warns on start that tasks can read its state directory and team tokens are no boundary', async () => {
    const stateDir = join(workDir, 'process-executor-state');
    const controller = spawnDryRunController(stateDir, ['--listen', '127.0.0.1:0'], children);
    await controller.until('API http://');
    controller.child.kill('SIGTERM');
    await controller.exited;
    expect(controller.output().stderr).toContain(
      `the process executor runs every task as this user with no isolation: a task can read ${stateDir} ` +
        '(the admin token, worker credentials), so team tokens are no boundary',
    );
  });
});
