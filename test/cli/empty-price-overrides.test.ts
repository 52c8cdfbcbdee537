/**
 * An empty `priceOverrides:` section of a settings file (a controller config under `--config`, a `--queue-config`
 * file) overrides nothing and is taken as none: no run is reported as priced by it. A `--price-overrides` file that
 * overrides nothing stays refused: the flag names a file of prices, and one without any is the wrong file.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readQueueConfigFile } from '../../src/cli/commands/sim-flags.js';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import { refusal } from '../helpers/validation-refusal.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-empty-price-overrides-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function file(name: string, lines: readonly string[]): string {
  const path = join(scratch, name);
  writeFileSync(path, [...lines, ''].join('\n'));
  return path;
}

const plan = (...args: string[]) =>
  simulationPlan(
    parseSimulateArgs(['--scheduler', 'no-packing', '--format', 'eva', '--jobs', '3', ...args], 'test'),
  );

describe('an empty priceOverrides section', () => {
  it("of a controller config runs at the catalog's prices, and the report names no overrides", () => {
    const config = file('config.yaml', ['cluster: c', 'stateDir: s', 'priceOverrides: {}']);
    const p = plan('--config', config);
    expect(p.priceOverridesSource).toBeUndefined();
    expect(p.requests[0]?.priceOverrides).toBeUndefined();
  });

  it('of a queue config is taken as none', () => {
    const queue = file('queue.yaml', ['queue:', '  classes: [{ id: all, weight: 1 }]', 'priceOverrides: {}']);
    expect(readQueueConfigFile(queue).priceOverrides).toBeUndefined();
    expect(plan('--queue-config', queue).priceOverridesSource).toBeUndefined();
  });

  it('given as the --price-overrides file is refused, naming the section', () => {
    const config = file('as-flag.yaml', ['cluster: c', 'stateDir: s', 'priceOverrides: {}']);
    expect(refusal(() => plan('--price-overrides', config))).toMatchObject({
      source: `${config}: priceOverrides`,
      problems: [expect.stringMatching(/^overrides no price: give discountPercent, /)],
    });
  });
});
