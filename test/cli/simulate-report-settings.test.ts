/**
 * The settings `simulate`'s report.json and report.html state: Eva's only where an Eva run took them, and each as the
 * runs took it.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import { reportSettings } from '../../src/cli/commands/simulate-report-settings.js';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { DEFAULT_PAYBACK_MARGIN } from '../../src/scheduler/eva.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-report-settings-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const settingsOf = (...args: string[]) =>
  reportSettings(simulationPlan(parseSimulateArgs(['--format', 'eva', '--jobs', '3', ...args], 'test')));

const EVA_SETTINGS = [
  'evaDefaultRate',
  'colocationTable',
  'evaPrices',
  'evaPackingEfficiency',
  'evaPaybackMargin',
  'valueOfTimePerJobHour',
  'targetSlowdown',
];

describe("simulate's report settings", () => {
  it("leaves Eva's settings out when no run is Eva, even under a config that tunes Eva", () => {
    const capped = join(PROJECT_ROOT, 'examples', 'config', 'fleetwise-capped.yaml');
    for (const args of [
      ['--scheduler', 'no-packing,stratus'],
      ['--scheduler', 'no-packing', '--config', capped],
    ]) {
      const settings = settingsOf(...args);
      expect(settings['schedulers']).toBe(args[1]?.replace(',', ', '));
      for (const key of EVA_SETTINGS) expect(settings, `${args.join(' ')}: ${key}`).not.toHaveProperty(key);
    }
  });

  it('states them, as the Eva runs took them, when one is', () => {
    const settings = settingsOf('--scheduler', 'eva,no-packing', '--eva-payback-margin', '3');
    for (const key of EVA_SETTINGS) expect(settings).toHaveProperty(key);
    expect(settings['evaPaybackMargin']).toBe(3);
    expect(settings['valueOfTimePerJobHour']).toBe('auto');
  });

  it("says a tuned queue config's Eva tunable applies to its policy's runs only", () => {
    const tuned = join(scratch, 'tuned.yaml');
    writeFileSync(
      tuned,
      'queue:\n  classes:\n    - { id: all, weight: 1 }\ncaps:\n  maxCostPerHour: 200\n' +
        'scheduler:\n  name: eva-rp\n  paybackMargin: 4\n',
    );
    expect(settingsOf('--scheduler', 'eva-rp', '--queue-config', tuned)['evaPaybackMargin']).toBe(4);
    expect(settingsOf('--scheduler', 'eva,eva-rp', '--queue-config', tuned)['evaPaybackMargin']).toBe(
      `4 for eva-rp (${tuned}), ${DEFAULT_PAYBACK_MARGIN} for eva`,
    );
    // Tuned for a baseline, which takes no Eva tunable: the Eva runs took the default.
    const baseline = join(scratch, 'baseline.yaml');
    writeFileSync(
      baseline,
      'queue:\n  classes:\n    - { id: all, weight: 1 }\nscheduler:\n  name: no-packing\n  paybackMargin: 4\n',
    );
    expect(settingsOf('--scheduler', 'eva,no-packing', '--queue-config', baseline)['evaPaybackMargin']).toBe(
      DEFAULT_PAYBACK_MARGIN,
    );
  });
});
