/**
 * `simulate --config FILE` reads a controller config for what a simulation takes of it (caps, queue, round period,
 * tunables): a file without the cluster's name or a state directory, which only a controller needs, is simulated, and
 * what it is refused for names only what simulate takes (the file, not the controller's flags).
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-simulate-config-state-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function file(name: string, lines: readonly string[]): string {
  const path = join(scratch, name);
  writeFileSync(path, `${lines.join('\n')}\n`);
  return path;
}

const TRACE = ['simulate', '--format', 'eva', '--jobs', '3', '--scheduler', 'no-packing', '--json'];

interface JsonRun {
  readonly totalCost: number;
  readonly peakCostPerHour: number;
}

describe('simulate --config with a config that names no cluster nor state directory', () => {
  beforeAll(() => {
    ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
  });

  it('runs it in both runtimes, under its caps, and leaves no state beside it', async () => {
    // Uncapped, the three jobs' fleet peaks at $27.54/h on the bundled catalog.
    const capped = file('capped.yaml', ['caps:', '  maxCostPerHour: 20']);
    for (const runtime of ['engine', 'controller']) {
      const r = await runCli([...TRACE, '--config', capped, '--runtime', runtime], process.env, {
        cwd: scratch,
      });
      expect(r.code, r.stderr).toBe(0);
      const run = (JSON.parse(r.stdout) as { runs: JsonRun[] }).runs[0] as JsonRun;
      expect(run.totalCost, runtime).toBeGreaterThan(0);
      expect(run.peakCostPerHour, runtime).toBeLessThanOrEqual(20);
    }
    expect(existsSync(join(scratch, '.fleetwise'))).toBe(false);
  });

  it('refuses a field left out naming the file alone, not a controller flag simulate does not take', async () => {
    const bad = file('no-url.yaml', ['ec2:', '  worker:', '    templatePath: user-data.sh']);
    const r = await runCli([...TRACE, '--config', bad], process.env, { cwd: scratch });
    expect(r.code).toBe(2);
    const refused = JSON.parse(r.stderr) as { error: string; details: string[] };
    expect(refused.error).toBe(`invalid input: ${bad}`);
    expect(refused.details).toEqual([
      'ec2.worker.controllerUrl (line 2): Invalid input: expected string, received undefined (set it in the file)',
    ]);
  });
});
