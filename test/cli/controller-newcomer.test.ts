import { type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { bareEnv, spawnDryRunController, type DryRunController } from '../helpers/local-controller.js';

/**
 * `npm start` as a newcomer runs it, in a subprocess: a local controller (a dry run: no worker is launched) with
 * `--submit`, found by the client through `.fleetwise/` without any exported variable; a restart does not submit the
 * example again; a second controller on the same address fails with one line naming --listen.
 */
const COUNTER = join(PROJECT_ROOT, 'examples', 'jobs', 'counter.yaml');
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-npm-start-'));
const children: ChildProcess[] = [];

function startController(stateDir: string, listen: string): DryRunController {
  return spawnDryRunController(stateDir, ['--listen', listen, '--submit', COUNTER], children);
}

beforeAll(() => ensureBuiltCli(), 240_000);

afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

describe('npm start, then the client (CLI subprocesses)', () => {
  it('finds the local controller by itself; --submit only into an empty state; a taken --listen is one line', async () => {
    const stateDir = join(scratch, '.fleetwise');
    const first = startController(stateDir, '127.0.0.1:0');
    await first.until('submitted job-1');
    const url = readFileSync(join(stateDir, 'api-url'), 'utf8').trim();
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(existsSync(join(stateDir, 'admin-token'))).toBe(true);

    // No FLEETWISE_SERVER, no FLEETWISE_TOKEN: the client reads both from .fleetwise/.
    const jobs = await runCli(['jobs', '--json'], bareEnv(), { cwd: scratch });
    expect(jobs.stderr).toBe('');
    expect((JSON.parse(jobs.stdout) as { id: string; name: string }[]).map((j) => [j.id, j.name])).toEqual([
      ['job-1', 'counter'],
    ]);

    // A dry run against the real controller: the reservation-price type, its $/h, and a predicted ETA.
    const dry = await runCli(['submit', COUNTER, '--dry-run', '--json'], bareEnv(), { cwd: scratch });
    // Under --json stderr holds only an error: what a submission would be told is in the view's warnings.
    expect(dry.stderr).toBe('');
    const view = JSON.parse(dry.stdout) as {
      tasks: { instanceType: string; costPerHour: number }[];
      eta: { completionSeconds: number | null } | null;
    };
    expect(view.tasks[0]?.instanceType).toMatch(/\./);
    expect(view.tasks[0]?.costPerHour).toBeGreaterThan(0);
    expect(view.eta?.completionSeconds).toBeGreaterThan(Date.now() / 1000 - 5);
    // In text, only what a submission would be told (without Docker: how the process executor runs it), and its
    // build context uploaded first, as a submission's is, so the controller checks it.
    const text = await runCli(['submit', COUNTER, '--dry-run'], bareEnv(), { cwd: scratch });
    expect(text.code, text.stderr).toBe(0);
    const told = text.stderr.split('\n').filter((l) => l !== '');
    expect(told.filter((l) => l.startsWith('uploaded build context '))).toHaveLength(1);
    for (const line of told.filter((l) => !l.startsWith('uploaded build context ')))
      expect(line).toMatch(/^warning: .*counter\.yaml: task counter: /);
    expect(
      (JSON.parse((await runCli(['jobs', '--json'], bareEnv(), { cwd: scratch })).stdout) as []).length,
    ).toBe(1);

    // Another controller on the same address.
    const port = new URL(url).host;
    const clash = startController(join(scratch, 'other'), port);
    expect(await clash.exited).toBe(1);
    // One line of its own among the controller's JSON log lines, which are flushed in no fixed order with it.
    const lines = clash.output().stderr.trimEnd().split('\n');
    expect(lines.filter((l) => l.startsWith('fleetwise:'))).toEqual([
      `fleetwise: cannot serve the API on ${port}: the address is in use (another controller?); choose another with --listen HOST:PORT`,
    ]);

    // A restart (the next `npm start`) does not queue the example again.
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    const second = startController(stateDir, '127.0.0.1:0');
    await second.until('not submitting');
    expect(second.output().stdout).toContain('the state already has 1 job(s)');
    expect(second.output().stdout).not.toContain('submitted job-2');
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  }, 180_000);

  it('refuses --submit where the controller serves no API (an AWS controller without --listen), before it starts', async () => {
    const result = await runCli(
      [
        'controller',
        '--dry-run',
        '--cluster',
        'c1',
        '--state-dir',
        join(scratch, 'no-api'),
        '--submit',
        COUNTER,
      ],
      bareEnv(),
    );
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      'invalid input: --submit\n  - submits through the API, which this controller does not serve',
    );
    expect(existsSync(join(scratch, 'no-api'))).toBe(false);
  });

  it('fleetwise down from a subdirectory finds the controller as the client commands do, and stops it', async () => {
    const project = join(scratch, 'project');
    const ctl = startController(join(project, '.fleetwise'), '127.0.0.1:0');
    await ctl.until('fleetwise controller: cluster');
    const sub = join(project, 'src', 'deep');
    mkdirSync(sub, { recursive: true });
    const down = await runCli(['down'], bareEnv(), { cwd: sub });
    expect(down.code, down.stderr).toBe(0);
    expect(down.stdout).toMatch(new RegExp(`stopping the controller \\(pid ${ctl.child.pid}\\)`));
    expect(await ctl.exited).toBe(0);
  }, 60_000);
});
