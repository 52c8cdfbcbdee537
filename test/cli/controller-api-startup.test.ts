import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ensureBuiltCli, type CliResult } from '../helpers/built-cli.js';
import { bareEnv, killLocalLeftovers, startLocalController, until } from '../helpers/local-controller.js';

/**
 * `fleetwise controller` as operators run it (a subprocess): an admin or metrics token from the environment that is
 * short or holds whitespace stops the start with a message naming the variable; and the API's failures are in the
 * controller's log (stderr).
 */

let scratch = '';

beforeAll(() => {
  ensureBuiltCli();
  scratch = mkdtempSync(join(tmpdir(), 'fleetwise-api-startup-'));
});
afterAll(() => {
  if (scratch !== '') rmSync(scratch, { recursive: true, force: true });
});

describe('tokens from the environment', () => {
  /** The controller's start, killed after 30 s: one that wrongly starts must not outlive the test. */
  const start = (name: string, env: NodeJS.ProcessEnv, args: readonly string[] = []): Promise<CliResult> =>
    new Promise((resolve) => {
      const stateDir = join(scratch, name);
      execFile(
        process.execPath,
        [
          CLI,
          'controller',
          '--provider',
          'local',
          '--state-dir',
          stateDir,
          '--listen',
          '127.0.0.1:0',
          ...args,
        ],
        { env: { ...bareEnv(), ...env }, timeout: 30_000, killSignal: 'SIGKILL' },
        (error, stdout, stderr) => {
          killLocalLeftovers(stateDir);
          resolve({
            code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1,
            stdout,
            stderr,
          });
        },
      );
    });

  it('refuses an admin or metrics token shorter than a team token, or holding whitespace', async () => {
    const cases: [string, NodeJS.ProcessEnv, readonly string[], string][] = [
      [
        'short-admin',
        { FLEETWISE_ADMIN_TOKEN: 'x' },
        [],
        'invalid input: FLEETWISE_ADMIN_TOKEN\n  - has 1 character; a token needs at least 16',
      ],
      [
        'spaced-admin',
        { FLEETWISE_ADMIN_TOKEN: 'admin-token-0123 456789abcdef' },
        [],
        'invalid input: FLEETWISE_ADMIN_TOKEN\n  - contains whitespace',
      ],
      [
        'short-metrics',
        { FLEETWISE_ADMIN_TOKEN: 'admin-token-0123456789abcdef', FLEETWISE_METRICS_TOKEN: 'scrape' },
        ['--metrics-auth', 'token'],
        'invalid input: FLEETWISE_METRICS_TOKEN\n  - has 6 characters; a token needs at least 16',
      ],
    ];
    for (const [name, env, args, message] of cases) {
      const result = await start(name, env, args);
      expect(result.code, result.stderr).not.toBe(0);
      expect(result.stderr).toContain(message);
      expect(result.stdout).not.toContain('API http://');
    }
  }, 60_000);

  it("refuses the state directory's admin or metrics token file when the token in it is short or holds whitespace", async () => {
    const cases: [string, string, string, readonly string[], string][] = [
      ['short-admin-file', 'admin-token', 'abc\n', [], 'has 3 characters; a token needs at least 16'],
      [
        'spaced-metrics-file',
        'metrics-token',
        'metrics-token 0123456789\n',
        ['--metrics-auth', 'token'],
        'contains whitespace',
      ],
    ];
    for (const [name, file, content, args, problem] of cases) {
      const stateDir = join(scratch, name);
      mkdirSync(stateDir, { recursive: true });
      writeFileSync(join(stateDir, file), content, { mode: 0o600 });
      const result = await start(name, {}, args);
      expect(result.code, result.stderr).not.toBe(0);
      expect(result.stderr).toContain(`invalid input: ${join(stateDir, file)}\n  - ${problem}`);
      expect(result.stderr).toContain('delete the file to have a new token generated there');
      expect(result.stdout).not.toContain('API http://');
    }
  }, 60_000);
});

describe("the API's failures in the controller's log", () => {
  it('a 5xx answer leaves an error line on stderr; ordinary requests leave none', async () => {
    const stateDir = join(scratch, 'logged');
    const controller = await startLocalController(stateDir);
    try {
      expect((await controller.api('GET', '/v1/cluster')).status).toBe(200);
      // The report cannot be written: where its directory should be is a file.
      const reports = join(stateDir, 'objects', 'reports');
      rmSync(reports, { recursive: true, force: true });
      writeFileSync(reports, 'not a directory');
      const failed = await controller.api('POST', '/v1/reports');
      expect(failed.status).toBeGreaterThanOrEqual(500);
      const logged = await until('the error line', () =>
        controller
          .stderr()
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map(
            (l) =>
              JSON.parse(l) as { level: number; msg?: string; err?: unknown; url?: string; req?: unknown },
          )
          .find((l) => l.level === 50 && l.err !== undefined),
      );
      expect(JSON.stringify(logged)).toMatch(/reports/);
      expect(controller.stderr()).not.toContain('incoming request');
    } finally {
      controller.process.kill('SIGTERM');
      await controller.exited;
      killLocalLeftovers(stateDir);
    }
  }, 120_000);
});
