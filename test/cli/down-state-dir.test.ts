import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';

/**
 * `fleetwise down` given a directory that is no controller's state (a mistyped path) says so and fails: "nothing to
 * stop" would tell the user their controller and workers were stopped while they keep running.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-down-dir-'));
beforeAll(() => ensureBuiltCli(), 240_000);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('fleetwise down --state-dir', () => {
  it('refuses a directory that does not exist, or holds no controller state, naming the flag', async () => {
    for (const dir of [join(scratch, 'mistyped'), join(scratch, 'empty')]) {
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
