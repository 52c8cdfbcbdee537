import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { bareEnv } from '../helpers/local-controller.js';
import { UNREACHABLE_URL } from '../helpers/unreachable-url.js';

/**
 * `fleetwise worker` takes only http and https addresses for its controller and its metadata service, on ports fetch
 * connects to, refused at start as invalid input (exit 2) naming the flag or the environment variable: a worker given
 * `notaurl`, or a port fetch refuses without connecting (its bad ports), would otherwise run without registering, or
 * without spot notices behind one warning. Through the real CLI.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-worker-urls-'));

beforeAll(() => ensureBuiltCli(['cli/main.ts']));

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** A worker that gives up at once on a controller nothing answers for: an accepted address exits 1. */
function workerArgs(workDir: string, flags: readonly string[]): string[] {
  return [
    'worker',
    '--token',
    'worker-token-0123456789',
    '--instance-id',
    'i-urls',
    '--executor',
    'process',
    '--work-dir',
    workDir,
    '--give-up-after-seconds',
    '1',
    '--no-probe',
    ...flags,
  ];
}

describe('fleetwise worker: the addresses it is given', () => {
  it.each<[string, readonly string[], Record<string, string>, RegExp]>([
    [
      '--imds-url notaurl',
      ['--controller', UNREACHABLE_URL, '--imds-url', 'notaurl'],
      {},
      /--imds-url: an http:\/\/ or https:\/\/ URL/,
    ],
    [
      'FLEETWISE_IMDS_URL=ftp://x',
      ['--controller', UNREACHABLE_URL],
      { FLEETWISE_IMDS_URL: 'ftp://x' },
      /FLEETWISE_IMDS_URL: an http:\/\/ or https:\/\/ URL/,
    ],
    [
      '--controller on a bad port',
      ['--controller', 'http://127.0.0.1:9', '--spot-notices', 'off'],
      {},
      /--controller: port 9 is one HTTP clients refuse \(fetch's bad ports\); choose another/,
    ],
    [
      '--controller on a bad port over https',
      ['--controller', 'https://10.0.0.5:6000/', '--spot-notices', 'off'],
      {},
      /--controller: port 6000 is one HTTP clients refuse \(fetch's bad ports\); choose another/,
    ],
    [
      '--imds-url on a bad port',
      ['--controller', UNREACHABLE_URL, '--imds-url', 'http://127.0.0.1:10080'],
      {},
      /--imds-url: port 10080 is one HTTP clients refuse \(fetch's bad ports\); choose another/,
    ],
    [
      '--controller notaurl',
      ['--controller', 'notaurl', '--spot-notices', 'off'],
      {},
      /--controller: an http:\/\/ or https:\/\/ URL/,
    ],
  ])('refuses %s at start, as invalid input naming it', async (label, flags, env, reason) => {
    const workDir = join(scratch, label.replace(/[^A-Za-z0-9]+/g, '-'));
    const r = await runCli(workerArgs(workDir, flags), { ...bareEnv(), ...env });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/fleetwise: invalid input: fleetwise worker/);
    expect(r.stderr).toMatch(reason);
    // Refused before it claimed a work directory or started anything.
    expect(existsSync(workDir)).toBe(false);
  });

  it('takes https for the controller and http for the metadata service (it starts, then gives up on them)', async () => {
    const workDir = join(scratch, 'accepted');
    const r = await runCli(
      workerArgs(workDir, [
        '--controller',
        UNREACHABLE_URL.replace('http:', 'https:'),
        '--imds-url',
        UNREACHABLE_URL,
      ]),
      bareEnv(),
    );
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/giving up/);
    expect(r.stderr).not.toMatch(/invalid input/);
  });
});
