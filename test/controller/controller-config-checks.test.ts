/**
 * The configuration checks its schema cannot make (src/controller/config-checks.ts), as the loader runs them: local
 * boot times against the registration timeout, `caps.familyGroups` and quota groups against the catalog, the
 * registration backoff's base against its max.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { loadControllerConfig, type LoadConfigOptions } from '../../src/controller/config-loading.js';
import type { ControllerFlags } from '../../src/controller/config-flags.js';
import { settingsFromConfig } from '../../src/controller/settings.js';
import { refusal } from '../helpers/validation-refusal.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-config-checks-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The bundled catalog: families p3, c7i and r7i, in quota groups p and standard. */
const catalog = loadCatalogFile();

let files = 0;
/** A config file of `lines` (line 1 is the first), loaded with `flags` over it and the bundled catalog. */
function load(
  lines: readonly string[],
  flags: Omit<ControllerFlags, 'config'> = {},
  options: Partial<LoadConfigOptions> = {},
) {
  const path = join(scratch, `c${(files += 1)}.yaml`);
  writeFileSync(path, lines.join('\n'));
  return loadControllerConfig({
    flags: { config: path, ...flags },
    env: {},
    defaultRegion: 'us-east-1',
    catalog,
    ...options,
  });
}

const problems = (...args: Parameters<typeof load>): readonly string[] =>
  refusal(() => load(...args)).problems;

const LOCAL = ['provider: local', 'localBootSeconds:'];

describe('local boot times against the registration timeout', () => {
  it("refuses a boot the timeout cannot hold, naming both and what to change, the timeout's default", () => {
    expect(problems([...LOCAL, '  c7i.large: 90'])).toEqual([
      "localBootSeconds.c7i.large (line 3): 90 s of boot, with the worker's start and registration after it (about " +
        '3 s), reaches the registration timeout, workerRegistration.timeoutSeconds, 60 s by default in local mode: ' +
        'every c7i.large would be replaced before its worker registers, and its jobs would never start; raise ' +
        'workerRegistration.timeoutSeconds (or --registration-timeout-seconds) above 93 s, or lower this boot below 57 s',
    ]);
  });

  it('counts the worker’s own start and registration after the boot', () => {
    // 57 + 3 reaches 60; 56 + 3 leaves a second.
    expect(problems([...LOCAL, '  c7i.large: 57'])).toEqual([
      expect.stringMatching(/^localBootSeconds\.c7i\.large \(line 3\): 57 s of boot/),
    ]);
    expect(load([...LOCAL, '  c7i.large: 56']).localBootSeconds).toEqual({ 'c7i.large': 56 });
  });

  it('names the timeout where it was set: its line in the file, or its flag', () => {
    const inFile = problems([
      ...LOCAL,
      '  c7i.large: 90',
      '  r7i.large: 10',
      'workerRegistration:',
      '  timeoutSeconds: 60', // line 6
    ]);
    expect(inFile).toEqual([
      expect.stringContaining(
        'reaches the registration timeout, workerRegistration.timeoutSeconds (line 6), 60 s: every c7i.large',
      ),
    ]);
    const byFlag = problems([...LOCAL, '  c7i.large: 90'], { registrationTimeoutSeconds: '60' });
    expect(byFlag).toEqual([
      expect.stringContaining(
        'reaches the registration timeout, --registration-timeout-seconds 60: every c7i.large would be replaced ' +
          'before its worker registers, and its jobs would never start; raise --registration-timeout-seconds above 93 s',
      ),
    ]);
  });

  it('takes a boot the timeout holds, raised by the file or the flag', () => {
    const raised = load([...LOCAL, '  c7i.large: 90', 'workerRegistration: { timeoutSeconds: 120 }']);
    expect(settingsFromConfig(raised).registrationTimeoutSeconds).toBe(120);
    expect(
      load([...LOCAL, '  c7i.large: 90'], { registrationTimeoutSeconds: '94' }).localBootSeconds,
    ).toEqual({
      'c7i.large': 90,
    });
  });

  it('names no flag to a command that takes none of them (simulate --config)', () => {
    const found = problems([...LOCAL, '  c7i.large: 90'], {}, { forSimulation: true });
    expect(found).toEqual([expect.stringContaining('raise workerRegistration.timeoutSeconds above 93 s')]);
    expect(found[0]).not.toContain('--');
  });
});

describe('caps.familyGroups and quota groups against the catalog', () => {
  it('refuses a family the catalog lacks with its line and the family it likely meant, and a quota on its group', () => {
    expect(
      problems([
        'cluster: c',
        'stateDir: s',
        'caps:',
        '  familyGroups: { c7: compute }', // line 4
        '  quotas:',
        '    - { group: compute, maxVcpus: 64 }', // line 6
      ]),
    ).toEqual([
      'caps.familyGroups.c7 (line 4): not an instance family of the catalog, did you mean c7i?',
      'caps.quotas.0.group (line 6): no family of the catalog is in quota group compute, so this quota would hold ' +
        "nothing back (the catalog's groups: p, standard, each with its -spot twin); map a family to it in " +
        'caps.familyGroups, or name the group its families are in',
    ]);
  });

  it("lists the catalog's families when no name is near", () => {
    expect(problems(['cluster: c', 'stateDir: s', 'caps:', '  familyGroups: { trn1: big }'])).toEqual([
      'caps.familyGroups.trn1 (line 4): not an instance family of the catalog (its families: p3, c7i, r7i)',
    ]);
  });

  it('refuses a quota on a group no family of the catalog is in, an AWS group or one familyGroups emptied', () => {
    expect(
      problems(['cluster: c', 'stateDir: s', 'caps:', '  quotas:', '    - { group: g-vt, maxGpus: 4 }']),
    ).toEqual([
      expect.stringMatching(
        /^caps\.quotas\.0\.group \(line 5\): no family of the catalog is in quota group g-vt,/,
      ),
    ]);
    // p3 moved to a group of its own leaves AWS's p group, and its spot twin, empty.
    const moved = problems([
      'cluster: c',
      'stateDir: s',
      'caps:',
      '  familyGroups: { p3: big-gpu }',
      '  quotas:',
      '    - { group: p, maxGpus: 8 }', // line 6
      '    - { group: p-spot, maxGpus: 8 }', // line 7
      '    - { group: big-gpu-spot, maxGpus: 8 }',
    ]);
    expect(moved).toEqual([
      expect.stringMatching(
        /^caps\.quotas\.0\.group \(line 6\): no family of the catalog is in quota group p,/,
      ),
      expect.stringMatching(
        /^caps\.quotas\.1\.group \(line 7\): no family of the catalog is in quota group p-spot,/,
      ),
    ]);
  });

  it('takes families of the catalog, and quotas on the groups they are in, spot twins included', () => {
    const config = load([
      'cluster: c',
      'stateDir: s',
      'caps:',
      '  familyGroups: { c7i: compute, p3: big-gpu }',
      '  quotas:',
      '    - { group: compute, maxVcpus: 64 }',
      '    - { group: compute-spot, maxVcpus: 32 }',
      '    - { group: big-gpu, maxGpus: 8 }',
      '    - { group: standard, maxVcpus: 128 }', // r7i is still in AWS's standard group
    ]);
    expect(config.caps.familyGroups).toEqual({ c7i: 'compute', p3: 'big-gpu' });
    expect(settingsFromConfig(config).caps.quotas?.map((q) => q.group)).toEqual([
      'compute',
      'compute-spot',
      'big-gpu',
      'standard',
    ]);
  });

  it('checks nothing against a catalog it is not given (the read before the catalog is known)', () => {
    const config = load(
      [
        'cluster: c',
        'stateDir: s',
        'caps:',
        '  familyGroups: { p5: big-gpu }',
        '  quotas: [{ group: big-gpu, maxGpus: 8 }]',
      ],
      {},
      { catalog: undefined },
    );
    expect(config.caps.familyGroups).toEqual({ p5: 'big-gpu' });
  });
});

describe('the registration backoff: its base against its max', () => {
  const backoff = (...args: Parameters<typeof load>) => {
    const s = settingsFromConfig(load(...args));
    return [s.registrationBackoffBaseSeconds, s.registrationBackoffMaxSeconds];
  };

  it('refuses a base above the max when both were given, naming both', () => {
    expect(
      problems([
        'cluster: c',
        'stateDir: s',
        'workerRegistration:',
        '  backoffBaseSeconds: 7200', // line 4
        '  backoffMaxSeconds: 3600', // line 5
      ]),
    ).toEqual([
      'workerRegistration.backoffBaseSeconds (line 4): 7200 s is above workerRegistration.backoffMaxSeconds ' +
        '(line 5), 3600 s: the launch backoff doubles from its base up to its max; lower the base or raise the max',
    ]);
    expect(
      problems(['cluster: c', 'stateDir: s', 'workerRegistration:', '  backoffMaxSeconds: 600'], {
        registrationBackoffSeconds: '900',
      }),
    ).toEqual([
      '--registration-backoff-seconds: 900 s is above workerRegistration.backoffMaxSeconds (line 4), 600 s: the ' +
        'launch backoff doubles from its base up to its max; lower the base or raise the max',
    ]);
  });

  it('raises the default max to a base given alone, as the flag’s first backoff', () => {
    expect(backoff(['cluster: c', 'stateDir: s'], { registrationBackoffSeconds: '7200' })).toEqual([
      7200, 7200,
    ]);
    // Local mode's max is a minute.
    expect(backoff(['provider: local'], { registrationBackoffSeconds: '120' })).toEqual([120, 120]);
    expect(
      backoff(['cluster: c', 'stateDir: s', 'workerRegistration: { backoffBaseSeconds: 5000 }']),
    ).toEqual([5000, 5000]);
  });

  it('lowers the default base to a max given alone, and leaves a base within the max as it is', () => {
    expect(backoff(['cluster: c', 'stateDir: s', 'workerRegistration: { backoffMaxSeconds: 30 }'])).toEqual([
      30, 30,
    ]);
    expect(backoff(['cluster: c', 'stateDir: s'], { registrationBackoffSeconds: '120' })).toEqual([
      120, 3600,
    ]);
    expect(backoff(['provider: local'])).toEqual([5, 60]);
  });
});

describe('the registration timeout a local worker needs', () => {
  it('refuses a timeout the worker’s own start reaches, naming where it was set and the least that works', () => {
    const WHY =
      'a local worker starts and registers about 3 s after its launch (later while others start), so every ' +
      'instance would be replaced before its worker registers, and no job would start; in local mode it must be ' +
      'above 3 s';
    expect(problems(['provider: local', 'workerRegistration:', '  timeoutSeconds: 3'])).toEqual([
      `workerRegistration.timeoutSeconds (line 3): 3 s: ${WHY}`,
    ]);
    expect(problems(['provider: local'], { registrationTimeoutSeconds: '2' })).toEqual([
      `--registration-timeout-seconds: 2 s: ${WHY}`,
    ]);
  });

  it('names the slowest local boot in the least that works, in one problem', () => {
    expect(
      problems([...LOCAL, '  c7i.large: 20', '  r7i.large: 5', 'workerRegistration: { timeoutSeconds: 1 }']),
    ).toEqual([
      expect.stringMatching(
        /^workerRegistration\.timeoutSeconds \(line 5\): 1 s: .* must be above 23 s \(the slowest localBootSeconds, 20 s, and the worker's start after it\)$/,
      ),
    ]);
  });

  it('takes a timeout above the worker’s start, and leaves an EC2 timeout to EC2', () => {
    const local = load(['provider: local', 'workerRegistration: { timeoutSeconds: 3.5 }']);
    expect(settingsFromConfig(local).registrationTimeoutSeconds).toBe(3.5);
    // On EC2 the worker is not a process of this host: the local figure says nothing of it.
    const ec2 = load(['cluster: c', 'stateDir: s', 'workerRegistration: { timeoutSeconds: 3 }']);
    expect(settingsFromConfig(ec2).registrationTimeoutSeconds).toBe(3);
  });
});

describe('local boot times outside local mode', () => {
  const WHY =
    'applies to the local provider only (its instances are worker processes, started that much later), and the ' +
    'provider is aws';

  it('refuses them with the default provider, naming their line and how to choose local mode', () => {
    expect(problems(['cluster: c', 'stateDir: s', 'localBootSeconds:', '  c7i.large: 30'])).toEqual([
      `localBootSeconds (line 3): ${WHY} by default: an EC2 instance boots in EC2's own time; remove it, or ` +
        'choose local mode with provider: local (or --provider local)',
    ]);
  });

  it('names the provider where it was set: its line, or its flag', () => {
    const boot = ['cluster: c', 'stateDir: s', 'localBootSeconds: { c7i.large: 30 }'];
    expect(problems(['provider: aws', ...boot])).toEqual([
      expect.stringContaining(`${WHY} (line 1): an EC2 instance`),
    ]);
    // The flag over a file written for local mode.
    expect(problems(['provider: local', ...boot], { provider: 'aws' })).toEqual([
      expect.stringContaining(`${WHY} (--provider): an EC2 instance`),
    ]);
  });

  it('names no flag to simulate --config, and takes an empty mapping, which delays nothing', () => {
    const found = problems(
      ['cluster: c', 'stateDir: s', 'localBootSeconds: { c7i.large: 30 }'],
      {},
      {
        forSimulation: true,
      },
    );
    expect(found).toEqual([expect.stringMatching(/choose local mode with provider: local$/)]);
    expect(load(['cluster: c', 'stateDir: s', 'localBootSeconds: {}']).localBootSeconds).toEqual({});
  });
});

describe('an empty priceOverrides section', () => {
  it('is taken as none: it overrides nothing', () => {
    const config = load(['cluster: c', 'stateDir: s', 'priceOverrides: {}']);
    expect(config.priceOverrides).toBeUndefined();
    expect(
      load(['cluster: c', 'stateDir: s', 'priceOverrides: { discountPercent: 10 }']).priceOverrides,
    ).toEqual({
      discountPercent: 10,
    });
  });
});
