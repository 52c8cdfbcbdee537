import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import { bareEnv, pidAlive, spawnDryRunController } from '../helpers/local-controller.js';

/**
 * `fleetwise down` given a directory that is no controller's state (a mistyped path) says so and fails: "nothing to
 * stop" would tell the user their controller and workers were stopped while they keep running. Stopping a controller,
 * it says what that does to the workers: a local controller stops its workers' tasks; an EC2 controller's instances
 * keep running, and billing, and it says how to end them.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-down-dir-'));
const children: ChildProcess[] = [];
beforeAll(() => ensureBuiltCli(), 240_000);
afterAll(async () => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }
  rmSync(scratch, { recursive: true, force: true });
});

describe('fleetwise down --state-dir', () => {
  it('refuses a directory that does not exist, or holds no controller state, naming the flag', async () => {
    // A file given for the directory (e.g. /etc/passwd), or a path through one, is no state directory either.
    writeFileSync(join(scratch, 'a-file'), 'not a directory');
    for (const dir of [
      join(scratch, 'mistyped'),
      join(scratch, 'empty'),
      join(scratch, 'a-file'),
      join(scratch, 'a-file', 'below'),
    ]) {
      if (dir.endsWith('empty')) mkdirSync(dir);
      const out = await runCli(['down', '--state-dir', dir]);
      expect(out.code, out.stderr).toBe(2);
      expect(out.stderr).toMatch(/--state-dir/);
      expect(out.stderr).toContain(`${dir} is not a controller's state directory`);
      expect(out.stdout).not.toMatch(/nothing to stop/);
    }
  });

  it('without one, outside any state, says where it looked; a state with nothing running has nothing to stop', async () => {
    const outside = join(scratch, 'nowhere');
    mkdirSync(outside);
    const none = await runCli(['down'], process.env, { cwd: outside });
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/no controller state here or in a directory above/);
    const state = join(scratch, 'state');
    mkdirSync(state);
    writeFileSync(join(state, 'admin-token'), 'x'.repeat(43));
    const idle = await runCli(['down', '--state-dir', state]);
    expect(idle.code, idle.stderr).toBe(0);
    expect(idle.stdout).toMatch(/nothing to stop in /);
  });
});

/** A dry-run controller (no cloud call) started as a user starts it, from `scratch`; resolves once it is up. */
async function startDryRun(args: readonly string[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, [CLI, 'controller', '--dry-run', ...args], {
    cwd: scratch,
    env: bareEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  const deadline = Date.now() + 60_000;
  while (!output.includes('fleetwise controller: cluster')) {
    if (Date.now() > deadline || child.exitCode !== null)
      throw new Error(`the controller did not start:\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return child;
}

const EC2_KEEP_RUNNING = /its EC2 instances keep running, and billing, without it: to end them/;
const LOCAL_STOPS = "it checkpoints and stops its workers' tasks";

describe('fleetwise down says what stopping the controller does to its workers', () => {
  it('an EC2 controller (--provider aws, or provider: aws in its --config file) leaves its instances running', async () => {
    const byFlag = join(scratch, 'aws-flag');
    const byFile = join(scratch, 'aws-file');
    // A relative --config, read from the controller's working directory as it read it.
    writeFileSync(
      join(scratch, 'aws.yaml'),
      'provider: aws\ncluster: down-aws-file\nregion: us-east-1\nstateDir: aws-file\n',
    );
    const started = [
      {
        stateDir: byFlag,
        child: await startDryRun([
          '--provider',
          'aws',
          '--cluster',
          'down-aws',
          '--region',
          'us-east-1',
          '--state-dir',
          byFlag,
        ]),
      },
      { stateDir: byFile, child: await startDryRun(['--config', 'aws.yaml']) },
    ];
    for (const { stateDir, child } of started) {
      const down = await runCli(['down', '--state-dir', stateDir]);
      expect(down.code, down.stderr).toBe(0);
      expect(down.stdout).toContain(`stopping the controller (pid ${child.pid})`);
      expect(down.stdout).toMatch(EC2_KEEP_RUNNING);
      expect(down.stdout).toContain('fleetwise:cluster=<cluster>');
      expect(down.stdout).toContain('fleetwise cancel --all');
      expect(down.stdout).not.toContain(LOCAL_STOPS);
      expect(down.stdout).toContain(`controller stopped (pid ${child.pid})`);
      expect(pidAlive(child.pid as number)).toBe(false);
    }
  });

  it('a local controller checkpoints and stops its workers’ tasks, and says nothing of EC2', async () => {
    const stateDir = join(scratch, 'local');
    const controller = spawnDryRunController(stateDir, [], children);
    await controller.until('fleetwise controller: cluster');
    const down = await runCli(['down', '--state-dir', stateDir]);
    expect(down.code, down.stderr).toBe(0);
    expect(down.stdout).toContain(`stopping the controller (pid ${controller.child.pid}); ${LOCAL_STOPS}`);
    expect(down.stdout).not.toMatch(/EC2/);
    await controller.exited;
  });
});
