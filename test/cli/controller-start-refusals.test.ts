import { type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { bareEnv, spawnDryRunController, type DryRunController } from '../helpers/local-controller.js';

/**
 * What a local controller refuses before it starts, as every wrong flag is (exit 2, naming the flag): an API port
 * every fleetwise client's fetch would refuse, and a --submit file its submission would fail on. And the client's
 * side: an address with a user and password, and one on such a port. Through the built CLI in subprocesses.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-start-refusals-'));
const children: ChildProcess[] = [];
const COUNTER = join(PROJECT_ROOT, 'examples', 'jobs', 'counter.yaml');

beforeAll(() => ensureBuiltCli(), 240_000);

afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

/** How a start ends: the controller's exit code, or `served` once it printed its startup summary. */
async function outcome(controller: DryRunController): Promise<number | 'served'> {
  return Promise.race([
    controller.exited.then((code) => code ?? -1),
    controller.until('fleetwise controller: cluster').then(
      () => 'served' as const,
      // It exited first: its exit code answers.
      () => new Promise<never>(() => undefined),
    ),
  ]);
}

/** The lines the CLI itself wrote among the controller's log lines. */
function cliLines(controller: DryRunController): string[] {
  return controller
    .output()
    .stderr.split('\n')
    .filter((l) => l.startsWith('fleetwise:') || l.startsWith('  - '));
}

describe('a local controller refuses before it starts', () => {
  it('an API port fetch refuses, naming --listen, and writes no address for clients to find', async () => {
    const stateDir = join(scratch, 'bad-port');
    const controller = spawnDryRunController(stateDir, ['--listen', '127.0.0.1:6000'], children);
    expect(await outcome(controller)).toBe(2);
    expect(cliLines(controller)).toEqual([
      'fleetwise: invalid input: controller options',
      "  - --listen: port 6000 is one HTTP clients refuse (fetch's bad ports); choose another",
    ]);
    expect(existsSync(join(stateDir, 'api-url'))).toBe(false);
  });

  it('a --submit file that does not exist, or is not a job spec, naming --submit and the file', async () => {
    const missing = join(scratch, 'nonexistent.yaml');
    const first = spawnDryRunController(
      join(scratch, 'missing-spec'),
      ['--listen', '127.0.0.1:0', '--submit', COUNTER, missing],
      children,
    );
    expect(await outcome(first)).toBe(2);
    expect(cliLines(first)).toEqual([
      'fleetwise: invalid input: --submit',
      expect.stringMatching(new RegExp(`^  - ${missing}: cannot read: ENOENT`)),
    ]);

    const wrong = join(scratch, 'wrong.yaml');
    writeFileSync(wrong, 'name: w\nteam: t\ntasks:\n  - command: [sleep, "1"]\n    demand: [0, -1, 1]\n');
    const second = spawnDryRunController(
      join(scratch, 'wrong-spec'),
      ['--listen', '127.0.0.1:0', '--submit', wrong],
      children,
    );
    expect(await outcome(second)).toBe(2);
    const lines = cliLines(second);
    expect(lines[0]).toBe('fleetwise: invalid input: --submit');
    expect(lines.slice(1)).toEqual([
      expect.stringMatching(new RegExp(`^  - ${wrong}: tasks\\.0\\.demand.*line 5`)),
    ]);
  });

  it('and still starts and submits a file that is a job spec; a restart, which submits none, checks none', async () => {
    const stateDir = join(scratch, 'good-spec');
    const controller = spawnDryRunController(
      stateDir,
      ['--listen', '127.0.0.1:0', '--submit', COUNTER],
      children,
    );
    await controller.until('submitted job-1');
    controller.child.kill('SIGTERM');
    expect(await controller.exited).toBe(0);
    // The state has a job now: the file is not submitted again, so its being gone stops nothing.
    const missing = join(scratch, 'moved-away.yaml');
    const restarted = spawnDryRunController(
      stateDir,
      ['--listen', '127.0.0.1:0', '--submit', missing],
      children,
    );
    expect(await outcome(restarted)).toBe('served');
    await restarted.until(`not submitting ${missing}: the state already has 1 job(s)`);
    restarted.child.kill('SIGTERM');
    expect(await restarted.exited).toBe(0);
  });
});

describe('a client given a controller address', () => {
  it('with a user and password refuses it (exit 2, naming --server) without printing them', async () => {
    const result = await runCli(['jobs', '--server', 'http://user:s3cret@127.0.0.1:2'], {
      ...bareEnv(),
      FLEETWISE_TOKEN: 'x',
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('invalid input: --server');
    expect(result.stderr).not.toMatch(/s3cret|user:/);
  });

  it("on one of fetch's bad ports says so, not whether the controller runs", async () => {
    const result = await runCli(['jobs', '--server', 'http://127.0.0.1:6000'], {
      ...bareEnv(),
      FLEETWISE_TOKEN: 'x',
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      "cannot reach the controller at http://127.0.0.1:6000 (GET /v1/jobs): port 6000 is one HTTP clients refuse (fetch's bad ports)",
    );
    expect(result.stderr).not.toContain('is it running');
  });
});
