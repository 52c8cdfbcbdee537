/**
 * `simulate --quota` against the catalog the runs take: a group no family of it is in would hold nothing back, so it is
 * refused as a controller config's `caps.quotas` entry is, with the same words (one check, config-checks.ts).
 */
import { describe, expect, it } from 'vitest';
import { parseQuotaFlag, parseQuotaFlags } from '../../src/cli/commands/simulate-options.js';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { refusal } from '../helpers/validation-refusal.js';

/** The bundled catalog: families p3, c7i and r7i, in quota groups p and standard. */
const catalog = loadCatalogFile();

describe('a --quota on a group no family of the catalog is in', () => {
  it('is refused naming the flag as typed, the catalog’s groups and how to fill the group', () => {
    const e = refusal(() => parseQuotaFlags(['p:gpus=8', 'g-vt:gpus=4'], undefined, catalog));
    expect(e.source).toBe('--quota');
    expect(e.problems).toEqual([
      '"g-vt:gpus=4": no family of the catalog is in quota group g-vt, so this quota would hold nothing back ' +
        "(the catalog's groups: p, standard, each with its -spot twin); map a family to it in the --config file's " +
        'caps.familyGroups, or name the group its families are in',
    ]);
    // A spot twin of an empty group holds nothing back either.
    expect(() => parseQuotaFlag('inf-spot:vcpus=64', undefined, catalog)).toThrow(
      /no family of the catalog is in quota group inf-spot/,
    );
  });

  it('counts the families a controller config moves: out of their AWS group, into its own', () => {
    const moved = { p3: 'big-gpu' };
    expect(() => parseQuotaFlag('p:gpus=8', moved, catalog)).toThrow(
      /no family of the catalog is in quota group p,/,
    );
    expect(parseQuotaFlag('big-gpu:gpus=8', moved, catalog)).toMatchObject({ group: 'big-gpu', maxGpus: 8 });
    expect(parseQuotaFlag('big-gpu-spot:gpus=8', moved, catalog)).toMatchObject({ group: 'big-gpu-spot' });
  });

  it('takes the groups the catalog’s families are in, spot twins included', () => {
    expect(parseQuotaFlags(['p:gpus=8', 'standard-spot:vcpus=64'], undefined, catalog)).toEqual([
      { group: 'p', maxGpus: 8, source: '--quota p:gpus=8' },
      { group: 'standard-spot', maxVcpus: 64, source: '--quota standard-spot:vcpus=64' },
    ]);
  });

  it('is refused by simulate itself, before any run', () => {
    const e = refusal(() =>
      simulationPlan(
        parseSimulateArgs(
          ['--format', 'eva', '--jobs', '5', '--scheduler', 'eva', '--quota', 'g-vt:gpus=4'],
          'test',
        ),
      ),
    );
    expect(e.source).toBe('--quota');
    expect(e.problems[0]).toMatch(/^"g-vt:gpus=4": no family of the catalog is in quota group g-vt/);
  });
});
