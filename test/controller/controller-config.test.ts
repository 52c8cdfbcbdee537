import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { ValidationError } from '../../src/core/validation.js';
import { ensureSecretFile } from '../../src/cli/commands/controller.js';
import { parseListen } from '../../src/controller/config.js';
import { loadControllerConfig } from '../../src/controller/config-loading.js';
import { loadConfigAndCatalog } from '../../src/cli/commands/controller/config-and-catalog.js';
import type { Catalog } from '../../src/core/catalog.js';
import { contextLimitsFrom, settingsFromConfig } from '../../src/controller/settings.js';
import { DEFAULT_CONTEXT_LIMITS } from '../../src/protocol/context-limits.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-config-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(scratch, name);
  writeFileSync(path, text);
  return path;
}

function problemsOf(fn: () => unknown): { source: string; problems: readonly string[] } {
  try {
    fn();
  } catch (e) {
    if (e instanceof ValidationError) return { source: e.source, problems: e.problems };
    throw e;
  }
  throw new Error('expected a ValidationError');
}

describe('controller configuration', () => {
  it('applies defaults and the acceptance-check flags', () => {
    const config = loadControllerConfig({
      flags: {
        provider: 'aws',
        cluster: 'bars',
        stateDir: 'state',
        listen: '127.0.0.1:8080',
        roundSeconds: '5',
        bucket: 'fleetwise-bars',
      },
      env: { AWS_REGION: 'eu-west-1' },
      cwd: scratch,
    });
    expect(config).toMatchObject({
      provider: 'aws',
      cluster: 'bars',
      region: 'eu-west-1',
      stateDir: join(scratch, 'state'),
      objectStore: 's3://fleetwise-bars',
      listen: '127.0.0.1:8080',
      roundSeconds: 5,
      pollSeconds: 5,
      dryRun: false,
      // An instance the state does not know may run work nobody accounts for: kept and reported unless told otherwise.
      orphans: 'keep',
      caps: {},
      reportEverySeconds: 3600,
      // A week of hourly reports; checkpoint events for 30 days.
      reportsKept: 168,
      checkpointEventDays: 30,
      workerRegistration: { timeoutSeconds: 900, backoffBaseSeconds: 60, backoffMaxSeconds: 3600 },
    });
    const defaults = loadControllerConfig({
      flags: { cluster: 'c', stateDir: '/var/lib/fw' },
      env: {},
      defaultRegion: 'us-east-1',
    });
    expect(defaults).toMatchObject({
      roundSeconds: 300,
      pollSeconds: 15,
      region: 'us-east-1',
      objectStore: '/var/lib/fw/objects',
      backupSeconds: 60,
      backupKeep: 10,
    });
  });

  it('refuses a localBootSeconds type the catalog lacks, naming its line and the type it likely meant', () => {
    const catalog: Catalog = JSON.parse(
      readFileSync(join(PROJECT_ROOT, 'instance-catalogs', 'aws-us-east-1.json'), 'utf8'),
    ) as Catalog;
    const path = file('boot.yaml', 'provider: local\nlocalBootSeconds:\n  c7i.large: 5\n  c7i.larg: 5\n');
    const refused = problemsOf(() =>
      loadControllerConfig({ flags: { config: path }, env: {}, defaultRegion: 'us-east-1', catalog }),
    );
    expect(refused.problems).toEqual([
      'localBootSeconds.c7i.larg (line 4): not an instance type of the catalog, did you mean c7i.large?',
    ]);
    const fine = file('boot-ok.yaml', 'provider: local\nlocalBootSeconds:\n  c7i.large: 5\n');
    expect(
      loadControllerConfig({ flags: { config: fine }, env: {}, defaultRegion: 'us-east-1', catalog })
        .localBootSeconds,
    ).toEqual({ 'c7i.large': 5 });
  });

  it('refuses a key given twice, naming the key and the line and column of the repeat', () => {
    const path = file('twice.yaml', 'cluster: a\nroundSeconds: 60\nroundSeconds: 120\n');
    const refused = problemsOf(() =>
      loadControllerConfig({ flags: { config: path }, env: {}, defaultRegion: 'us-east-1' }),
    );
    expect(refused.source).toBe(path);
    expect(refused.problems).toEqual([
      'not valid YAML: the key "roundSeconds" is given more than once, again at line 3, column 1',
    ]);
    const nested = file('twice-nested.yaml', 'cluster: a\nqueue:\n  classifyBy: team\n  classifyBy: size\n');
    expect(
      problemsOf(() =>
        loadControllerConfig({ flags: { config: nested }, env: {}, defaultRegion: 'us-east-1' }),
      ).problems,
    ).toEqual(['not valid YAML: the key "classifyBy" is given more than once, again at line 4, column 3']);
  });

  it('takes the backup period and how many backups to keep from the file or flags, bounded', () => {
    const path = file(
      'backups.yaml',
      ['cluster: c', 'stateDir: s', 'backupSeconds: 30', 'backupKeep: 48'].join('\n'),
    );
    expect(
      loadControllerConfig({ flags: { config: path }, env: {}, defaultRegion: 'us-east-1' }),
    ).toMatchObject({
      backupSeconds: 30,
      backupKeep: 48,
    });
    const flagged = loadControllerConfig({
      flags: { config: path, backupSeconds: '0', backupKeep: '3' },
      env: {},
      defaultRegion: 'us-east-1',
    });
    expect(flagged).toMatchObject({ backupSeconds: 0, backupKeep: 3 });
    const bad = problemsOf(() =>
      loadControllerConfig({
        flags: { cluster: 'c', stateDir: 's', backupSeconds: '1e300', backupKeep: '0' },
        env: {},
        defaultRegion: 'us-east-1',
      }),
    );
    expect(bad.problems).toContain('--backup-seconds: at most a day (86400)');
    expect(bad.problems).toContain('--backup-keep: must be ≥ 1');
  });

  it('takes priceRefreshHours of 0 (off) or from 0.1 to 744, and names the field and the bounds otherwise', () => {
    const hoursOf = (value: string) =>
      loadControllerConfig({
        flags: { cluster: 'c', stateDir: 's', priceRefreshHours: value },
        env: {},
        defaultRegion: 'us-east-1',
      }).priceRefreshHours;
    expect(['0', '0.1', '24', '744'].map(hoursOf)).toEqual([0, 0.1, 24, 744]);
    const bounds = 'must be 0 (no refresh) or from 0.1 (6 minutes) to 744 (31 days)';
    // A millionth of an hour refreshed prices back to back: over a thousand GetProducts calls in two seconds.
    for (const value of ['0.000001', '0.09', '745', '-1'])
      expect([value, problemsOf(() => hoursOf(value)).problems]).toEqual([
        value,
        [`--price-refresh-hours: ${bounds}`],
      ]);
    const path = file(
      'price-refresh.yaml',
      ['cluster: c', 'stateDir: s', 'priceRefreshHours: 0.01'].join('\n'),
    );
    const fromFile = problemsOf(() =>
      loadControllerConfig({ flags: { config: path }, env: {}, defaultRegion: 'us-east-1' }),
    );
    expect(fromFile.problems).toEqual([`priceRefreshHours (line 3): ${bounds}`]);
  });

  it('lets flags override the file, and resolves the file’s state directory next to it', () => {
    const path = file(
      'fleetwise.yaml',
      [
        'cluster: from-file',
        'region: us-west-2',
        'stateDir: ./state',
        'roundSeconds: 120',
        'caps:',
        '  maxCostPerHour: 50',
        '  maxInstances: 10',
        'ec2:',
        '  amiId: ami-0123456789abcdef0',
        '  securityGroupIds: [sg-0123456789abcdef0]',
        '  tags: { owner: ml-team }',
        'orphans: terminate',
      ].join('\n'),
    );
    const config = loadControllerConfig({
      flags: {
        config: path,
        cluster: 'from-flag',
        maxInstances: '3',
        dryRun: true,
        subnets: 'subnet-0123456789abcdef0, subnet-0123456789abcdef1',
      },
      env: { AWS_REGION: 'eu-west-1' },
      cwd: '/',
    });
    expect(config.cluster).toBe('from-flag');
    expect(config.region).toBe('us-west-2'); // the file beats the environment
    expect(config.stateDir).toBe(join(scratch, 'state'));
    expect(config.caps).toEqual({ maxCostPerHour: 50, maxInstances: 3 });
    expect(config.dryRun).toBe(true);
    expect(config.orphans).toBe('terminate');
    expect(config.ec2).toMatchObject({
      amiId: 'ami-0123456789abcdef0',
      securityGroupIds: ['sg-0123456789abcdef0'],
      subnetIds: ['subnet-0123456789abcdef0', 'subnet-0123456789abcdef1'],
      tags: { owner: 'ml-team' },
    });
    expect(config.pollSeconds).toBe(15);
  });

  it('lets --subnets replace the file’s ec2.placements, and refuses a file giving both', () => {
    const placed = file(
      'placed.yaml',
      ['cluster: c', 'stateDir: s', 'ec2:', '  placements:', '    - availabilityZone: us-east-1c'].join('\n'),
    );
    const flagged = loadControllerConfig({
      flags: { config: placed, subnets: 'subnet-0123456789abcdef0' },
      env: {},
      defaultRegion: 'us-east-1',
    });
    expect(flagged.ec2.subnetIds).toEqual(['subnet-0123456789abcdef0']);
    expect(flagged.ec2.placements).toBeUndefined();
    // Without the flag, the file's placements stand.
    const filed = loadControllerConfig({ flags: { config: placed }, env: {}, defaultRegion: 'us-east-1' });
    expect(filed.ec2.placements).toEqual([{ availabilityZone: 'us-east-1c' }]);
    expect(filed.ec2.subnetIds).toBeUndefined();

    const both = file(
      'both.yaml',
      [
        'cluster: c',
        'stateDir: s',
        'ec2:',
        '  placements:',
        '    - availabilityZone: us-east-1c',
        '  subnetIds: [subnet-0123456789abcdef0]',
      ].join('\n'),
    );
    expect(
      problemsOf(() =>
        loadControllerConfig({ flags: { config: both }, env: {}, defaultRegion: 'us-east-1' }),
      ),
    ).toEqual({
      source: both,
      problems: ['ec2.subnetIds (line 6): give either ec2.placements or ec2.subnetIds, not both'],
    });
  });

  it('names the flag, or the file field and its line, in errors', () => {
    const flagged = problemsOf(() =>
      loadControllerConfig({
        flags: { cluster: 'c', stateDir: 's', roundSeconds: 'soon', maxInstances: '0', orphans: 'drop' },
        env: {},
        defaultRegion: 'us-east-1',
      }),
    );
    expect(flagged.source).toBe('controller options');
    expect(flagged.problems.some((p) => p.startsWith('--round-seconds: '))).toBe(true);
    expect(flagged.problems).toContain('--max-instances: must be ≥ 1');
    expect(flagged.problems.some((p) => p.startsWith('--orphans: '))).toBe(true);

    const path = file(
      'bad.yaml',
      ['cluster: ok', 'stateDir: s', 'caps:', '  maxInstances: -2', 'bogus: 1', 'listen: nowhere'].join('\n'),
    );
    const filed = problemsOf(() =>
      loadControllerConfig({ flags: { config: path }, env: {}, defaultRegion: 'us-east-1' }),
    );
    expect(filed.source).toBe(path);
    expect(filed.problems).toContain('caps.maxInstances (line 4): must be ≥ 1');
    expect(filed.problems.some((p) => p.startsWith('listen (line 6): HOST:PORT'))).toBe(true);
    expect(filed.problems.some((p) => p.includes('bogus'))).toBe(true);

    const missing = problemsOf(() =>
      loadControllerConfig({ flags: { stateDir: 's' }, env: {}, defaultRegion: 'us-east-1' }),
    );
    expect(missing.problems.join('\n')).toMatch(/^cluster: .*\(set it in the file or with --cluster\)$/m);
    // A value of the wrong type was set: pointing at the flag to set it would mislead.
    const wrongType = file('wrong-type.yaml', ['cluster: 5', 'stateDir: s'].join('\n'));
    expect(
      problemsOf(() =>
        loadControllerConfig({ flags: { config: wrongType }, env: {}, defaultRegion: 'us-east-1' }),
      ).problems,
    ).toEqual(['cluster (line 1): Invalid input: expected string, received number']);

    const both = problemsOf(() =>
      loadControllerConfig({
        flags: { cluster: 'c', stateDir: 's', bucket: 'b-b-b', objectStore: '/tmp/x' },
        env: {},
        defaultRegion: 'us-east-1',
      }),
    );
    expect(both.problems).toContain('--bucket: give either objectStore or bucket, not both');

    // Any scheme parses as a URL; only an http(s) one can be a queue, and a mistyped one would fail every receive.
    for (const queue of ['mailto:ops@example.com', 'sqs:fleetwise', 'ftp://sqs.example.com/1/q'])
      expect(
        problemsOf(() =>
          loadControllerConfig({
            flags: { cluster: 'c', stateDir: 's', interruptionQueue: queue },
            env: {},
            defaultRegion: 'us-east-1',
          }),
        ).problems,
        queue,
      ).toEqual([
        '--interruption-queue: an SQS queue URL, e.g. https://sqs.us-east-1.amazonaws.com/123456789012/fleetwise-interruptions',
      ]);

    const yaml = file('broken.yaml', 'cluster: [unclosed');
    expect(problemsOf(() => loadControllerConfig({ flags: { config: yaml }, env: {} })).problems[0]).toMatch(
      /^not valid YAML/,
    );
  });

  it('names a misspelled key itself, its own line and the field it most likely meant, at any depth', () => {
    const problemsIn = (name: string, lines: readonly string[]): readonly string[] =>
      problemsOf(() =>
        loadControllerConfig({
          flags: { config: file(name, lines.join('\n')) },
          env: {},
          defaultRegion: 'us-east-1',
        }),
      ).problems;
    expect(problemsIn('top-typo.yaml', ['cluster: c', 'stateDir: s', 'roundSecond: 60'])).toEqual([
      'roundSecond (line 3): unknown field, did you mean roundSeconds?',
    ]);
    // The key's own line, not the line its section's first key is on.
    expect(
      problemsIn('nested-typo.yaml', [
        'cluster: c',
        'stateDir: s',
        'caps:',
        '  maxInstances: 4',
        '  maxCostPerHr: 20',
      ]),
    ).toEqual(['caps.maxCostPerHr (line 5): unknown field, did you mean maxCostPerHour?']);
    // A misspelled section is on its key's line, not on the line of its first field below.
    const sections = problemsIn('section-typo.yaml', [
      'cluster: c',
      'stateDir: s',
      'shceduler:',
      '  paybackMargin: 2',
      'ec2:',
      '  worker:',
      '    controllerUrl: http://10.0.0.1:7070',
      '    nodeVer: "20"',
    ]);
    expect(sections).toContain('shceduler (line 3): unknown field, did you mean scheduler?');
    expect(sections).toContain('ec2.worker.nodeVer (line 8): unknown field, did you mean nodeVersion?');
    expect(sections).toHaveLength(2);
    // A section's field written at the top level names its section; a name near none lists the fields.
    const misplaced = problemsIn('misplaced.yaml', [
      'cluster: c',
      'stateDir: s',
      'maxInstances: 4',
      'zzz: 1',
    ]);
    expect(misplaced[0]).toBe('maxInstances (line 3): a field of the caps section: put it under caps:');
    expect(misplaced[1]).toMatch(
      /^zzz \(line 4\): unknown field \(known: provider, executor, .*, roundSeconds, /,
    );
    expect(misplaced).toHaveLength(2);
    // A key that is not a plain name is quoted: it cannot read as another field or a problem of its own.
    expect(problemsIn('odd-key.yaml', ['cluster: c', 'stateDir: s', '"caps: x": 1'])).toEqual([
      expect.stringMatching(/^\["caps: x"\] \(line 3\): unknown field/),
    ]);
    // A dotted key is one key: it is said so, and how to nest it, rather than passing for the field it spells.
    expect(
      problemsIn('dotted.yaml', [
        'cluster: c',
        'stateDir: s',
        'caps.maxInstances: 3',
        'ec2.worker.nodeVersion: "20"',
      ]),
    ).toEqual([
      'caps.maxInstances (line 3): the key "caps.maxInstances" is one key, a dot does not nest it: write caps: { maxInstances: … }',
      'ec2.worker.nodeVersion (line 4): the key "ec2.worker.nodeVersion" is one key, a dot does not nest it: write ec2: { worker: { nodeVersion: … } }',
    ]);
  });

  it('names a local-mode workerRegistration that is no section, instead of failing on it', () => {
    const problems = problemsOf(() =>
      loadControllerConfig({
        flags: {
          config: file(
            'registration-scalar.yaml',
            ['provider: local', 'workerRegistration: fast'].join('\n'),
          ),
        },
        env: {},
        defaultRegion: 'us-east-1',
      }),
    ).problems;
    expect(problems).toEqual([expect.stringMatching(/^workerRegistration \(line 2\): /)]);
  });

  it('says that a policy name given as the scheduler section goes under scheduler.name', () => {
    const problemsFor = (value: string): readonly string[] =>
      problemsOf(() =>
        loadControllerConfig({
          flags: {
            config: file(
              `scheduler-${value}.yaml`,
              ['cluster: c', 'stateDir: s', `scheduler: ${value}`].join('\n'),
            ),
          },
          env: {},
          defaultRegion: 'us-east-1',
        }),
      ).problems;
    expect(problemsFor('owl')).toEqual([
      'scheduler (line 3): a section, not a policy name: the policy goes under scheduler.name, e.g. scheduler: { name: owl }',
    ]);
    // A misspelled policy: the example names the nearest one, and the valid names follow.
    const [typo] = problemsFor('evaa');
    expect(typo).toMatch(
      /^scheduler \(line 3\): a section, not a policy name: the policy goes under scheduler\.name, e\.g\. scheduler: \{ name: eva \}; unknown scheduler "evaa"; valid: eva, /,
    );
    // Written as the section says, it loads.
    const config = loadControllerConfig({
      flags: {
        config: file(
          'scheduler-name.yaml',
          ['cluster: c', 'stateDir: s', 'scheduler:', '  name: owl'].join('\n'),
        ),
      },
      env: {},
      defaultRegion: 'us-east-1',
    });
    expect(config.scheduler.name).toBe('owl');
  });

  it('refuses ec2.tags every launch would be refused for: a reserved prefix, or more than EC2 leaves room for', () => {
    const load = (tags: string[]): readonly string[] =>
      problemsOf(() =>
        loadControllerConfig({
          flags: {
            config: file('tags.yaml', ['cluster: c', 'stateDir: s', 'ec2:', '  tags:', ...tags].join('\n')),
          },
          env: {},
          defaultRegion: 'us-east-1',
        }),
      ).problems;
    const reserved = load(['    fleetwise:team: a', '    AWS:created: b', '    owner: ml']);
    expect(reserved.find((p) => p.startsWith('ec2.tags.fleetwise:team'))).toMatch(
      /"fleetwise:" prefix is reserved/,
    );
    expect(reserved.find((p) => p.startsWith('ec2.tags.AWS:created'))).toMatch(/"aws:" prefix is reserved/);
    expect(reserved.some((p) => p.startsWith('ec2.tags.owner'))).toBe(false);
    const many = (n: number): string[] => Array.from({ length: n }, (_, i) => `    k${i}: v`);
    expect(load(many(45)).join('\n')).toMatch(/^ec2\.tags.*45 tags: at most 44, since EC2 allows 50/m);
    // A Name of the caller's own replaces fleetwise's: one more fits.
    const withName = loadControllerConfig({
      flags: {
        config: file(
          'ok.yaml',
          ['cluster: c', 'stateDir: s', 'ec2:', '  tags:', '    Name: n', ...many(44)].join('\n'),
        ),
      },
      env: {},
      defaultRegion: 'us-east-1',
    });
    expect(Object.keys(withName.ec2?.tags ?? {})).toHaveLength(45);
  });

  it('takes priceOverrides, refusing an unknown field, a 100% discount or a type the catalog lacks with its line', () => {
    const base = ['cluster: c', 'stateDir: s', 'provider: local', 'priceOverrides:'];
    const good = file(
      'prices.yaml',
      [...base, '  discountPercent: 30', '  pricePerType:', '    c7i.large: 0.05'].join('\n'),
    );
    const loaded = loadConfigAndCatalog({ config: good }, {});
    expect(loaded.config.priceOverrides).toEqual({
      discountPercent: 30,
      pricePerType: { 'c7i.large': 0.05 },
    });
    const priceIn = (c: Catalog, name: string) => c.types.find((t) => t.name === name)?.costPerHour;
    expect(priceIn(loaded.catalog, 'c7i.large')).toBe(0.05);
    expect(priceIn(loaded.catalog, 'p3.2xlarge')).toBeCloseTo(3.06 * 0.7, 12);
    expect(priceIn(loaded.listCatalog, 'p3.2xlarge')).toBe(3.06);

    const typo = file('typo.yaml', [...base, '  discountPct: 30'].join('\n'));
    expect(problemsOf(() => loadConfigAndCatalog({ config: typo }, {})).problems).toEqual([
      'priceOverrides.discountPct (line 5): unknown field, did you mean discountPercent?',
    ]);
    const free = file('free.yaml', [...base, '  discountPercent: 100'].join('\n'));
    expect(problemsOf(() => loadConfigAndCatalog({ config: free }, {})).problems).toEqual([
      'priceOverrides.discountPercent (line 5): must be under 100 (a 100% discount would make instances free)',
    ]);
    const unknown = file('unknown.yaml', [...base, '  pricePerType:', '    p4d.24xlarge: 20'].join('\n'));
    expect(problemsOf(() => loadConfigAndCatalog({ config: unknown }, {}))).toEqual({
      source: unknown,
      problems: ['priceOverrides.pricePerType.p4d.24xlarge (line 6): not an instance type of the catalog'],
    });
  });

  it('refuses a heartbeat timeout within three heartbeat intervals, naming both fields', () => {
    const aws = (extra: string[]): ReturnType<typeof problemsOf> =>
      problemsOf(() =>
        loadControllerConfig({
          flags: { config: file('heartbeat.yaml', ['cluster: c', 'stateDir: s', ...extra].join('\n')) },
          env: {},
          defaultRegion: 'us-east-1',
        }),
      );
    // The interval alone, at or past the default 60 s timeout: every worker would be declared lost.
    expect(aws(['workerHeartbeatSeconds: 90']).problems).toEqual([
      'workerHeartbeatTimeoutSeconds: 60 s is under 3 × workerHeartbeatSeconds (90 s): at least 270 s, or healthy workers are declared lost',
    ]);
    expect(aws(['workerHeartbeatSeconds: 10', 'workerHeartbeatTimeoutSeconds: 20']).problems).toEqual([
      'workerHeartbeatTimeoutSeconds (line 4): 20 s is under 3 × workerHeartbeatSeconds (10 s): at least 30 s, or healthy workers are declared lost',
    ]);
    const flagged = problemsOf(() =>
      loadControllerConfig({
        flags: { cluster: 'c', stateDir: 's', heartbeatTimeoutSeconds: '12' },
        env: {},
        defaultRegion: 'us-east-1',
      }),
    );
    expect(flagged.problems).toEqual([
      '--heartbeat-timeout-seconds: 12 s is under 3 × workerHeartbeatSeconds (5 s): at least 15 s, or healthy workers are declared lost',
    ]);
    // Three intervals is enough.
    const edge = loadControllerConfig({
      flags: { cluster: 'c', stateDir: 's', heartbeatTimeoutSeconds: '15' },
      env: {},
      defaultRegion: 'us-east-1',
    });
    expect([edge.workerHeartbeatSeconds, edge.workerHeartbeatTimeoutSeconds]).toEqual([5, 15]);

    // Local mode: the timeout is ten intervals unless given, never under its 10 s default.
    const local = (extra: string[], flags = {}): [number, number] => {
      const c = loadControllerConfig({
        flags: { provider: 'local', config: file('local-heartbeat.yaml', extra.join('\n')), ...flags },
        env: {},
        cwd: scratch,
        defaultRegion: 'us-east-1',
      });
      return [c.workerHeartbeatSeconds, c.workerHeartbeatTimeoutSeconds];
    };
    expect(local([])).toEqual([1, 10]);
    expect(local(['workerHeartbeatSeconds: 0.5'])).toEqual([0.5, 10]);
    expect(local(['workerHeartbeatSeconds: 15'])).toEqual([15, 150]);
    expect(local(['workerHeartbeatSeconds: 15'], { heartbeatTimeoutSeconds: '60' })).toEqual([15, 60]);
    expect(() => local(['workerHeartbeatSeconds: 15'], { heartbeatTimeoutSeconds: '30' })).toThrow(
      /--heartbeat-timeout-seconds: 30 s is under 3 × workerHeartbeatSeconds \(15 s\)/,
    );
  });

  it('takes Eva’s tunables from the scheduler section and rejects bad or unknown ones', () => {
    const path = file(
      'eva.yaml',
      [
        'cluster: c',
        'stateDir: s',
        'scheduler:',
        '  paybackMargin: 1',
        '  prices: standalone',
        '  valueOfTimePerJobHour: 0.75',
      ].join('\n'),
    );
    const config = loadControllerConfig({ flags: { config: path }, env: {}, defaultRegion: 'us-east-1' });
    expect(settingsFromConfig(config).eva).toEqual({
      paybackMargin: 1,
      reservationPrice: 'standalone',
      valueOfTimePerJobHour: 0.75,
    });
    const plain = loadControllerConfig({
      flags: { cluster: 'c', stateDir: 's' },
      env: {},
      defaultRegion: 'us-east-1',
    });
    expect(settingsFromConfig(plain).eva).toEqual({}); // Eva's defaults
    const learned = file(
      'auto.yaml',
      [
        'cluster: c',
        'stateDir: s',
        'scheduler:',
        '  valueOfTimePerJobHour: auto',
        '  targetSlowdown: 0.12',
      ].join('\n'),
    );
    expect(
      settingsFromConfig(
        loadControllerConfig({ flags: { config: learned }, env: {}, defaultRegion: 'us-east-1' }),
      ).eva,
    ).toEqual({ valueOfTimePerJobHour: 'auto', targetSlowdown: 0.12 });
    const both = file(
      'both.yaml',
      [
        'cluster: c',
        'stateDir: s',
        'scheduler:',
        '  valueOfTimePerJobHour: 2',
        '  targetSlowdown: 0.12',
      ].join('\n'),
    );
    expect(
      problemsOf(() => loadControllerConfig({ flags: { config: both }, env: {}, defaultRegion: 'us-east-1' }))
        .problems,
    ).toEqual([
      'scheduler.targetSlowdown (line 5): applies to a learned value of time only: valueOfTimePerJobHour must be auto or unset',
    ]);

    const bad = file(
      'bad-eva.yaml',
      [
        'cluster: c',
        'stateDir: s',
        'scheduler:',
        '  paybackMargin: 0.5',
        '  packingEfficiency: 2',
        '  k: 3',
        '  valueOfTimePerJobHour: -2',
        '  targetSlowdown: 1',
      ].join('\n'),
    );
    const problems = problemsOf(() =>
      loadControllerConfig({ flags: { config: bad }, env: {}, defaultRegion: 'us-east-1' }),
    ).problems;
    expect(problems).toContain('scheduler.paybackMargin (line 4): must be ≥ 1');
    expect(problems).toContain('scheduler.packingEfficiency (line 5): must be ≤ 1');
    expect(problems).toContain('scheduler.valueOfTimePerJobHour (line 7): must be ≥ 0 ($ per job-hour)');
    expect(problems).toContain('scheduler.targetSlowdown (line 8): must be < 1');
    expect(problems.some((p) => p.startsWith('scheduler') && p.includes('k'))).toBe(true);
  });

  it('takes build context limits for everyone and per team, field by field, and the loop-stuck threshold', () => {
    const path = file(
      'contexts.yaml',
      [
        'cluster: c',
        'stateDir: s',
        'loopStuckSeconds: 90',
        'buildContexts:',
        '  maxArchiveBytes: 1000000',
        '  teams:',
        '    vision: { maxExpandedBytes: 5000000, maxExpansionRatio: 20 }',
      ].join('\n'),
    );
    const config = loadControllerConfig({ flags: { config: path }, env: {}, defaultRegion: 'us-east-1' });
    const limits = contextLimitsFrom(config.buildContexts);
    expect(limits('vision')).toEqual({
      maxArchiveBytes: 1_000_000,
      maxExpandedBytes: 5_000_000,
      maxExpansionRatio: 20,
    });
    expect(limits('nlp')).toEqual({ ...DEFAULT_CONTEXT_LIMITS, maxArchiveBytes: 1_000_000 });
    expect(limits(undefined)).toEqual(limits('nlp'));
    expect(settingsFromConfig(config).loopStuckSeconds).toBe(90);
    const plain = loadControllerConfig({
      flags: { cluster: 'c', stateDir: 's' },
      env: {},
      defaultRegion: 'us-east-1',
    });
    expect(contextLimitsFrom(plain.buildContexts)('vision')).toEqual(DEFAULT_CONTEXT_LIMITS);
    expect(settingsFromConfig(plain).loopStuckSeconds).toBe(60);

    const bad = file(
      'bad-contexts.yaml',
      [
        'cluster: c',
        'stateDir: s',
        'buildContexts:',
        '  maxExpansionRatio: 0.5',
        '  teams:',
        '    v: { maxArchiveBytes: 1.5 }',
      ].join('\n'),
    );
    const problems = problemsOf(() =>
      loadControllerConfig({ flags: { config: bad }, env: {}, defaultRegion: 'us-east-1' }),
    ).problems;
    expect(problems).toContain('buildContexts.maxExpansionRatio (line 4): must be ≥ 1');
    expect(problems).toContain('buildContexts.teams.v.maxArchiveBytes (line 6): a whole number of bytes');
  });

  it("resolves a relative path in the file against the file's directory, one in a flag against the current one", () => {
    const dir = join(scratch, 'cfg');
    mkdirSync(dir, { recursive: true });
    const path = join(dir, 'fw.yaml');
    writeFileSync(
      path,
      [
        'cluster: c',
        'stateDir: st',
        'objectStore: objs',
        'catalog: cat.json',
        'ec2:',
        '  worker:',
        '    templatePath: user-data.sh',
        '    controllerUrl: http://10.0.0.5:7070',
        '    identityCertificate: certs/aws-identity.pem',
      ].join('\n'),
    );
    const elsewhere = join(scratch, 'elsewhere');
    const fromFile = loadControllerConfig({
      flags: { config: path },
      env: {},
      defaultRegion: 'us-east-1',
      cwd: elsewhere,
    });
    expect(fromFile.stateDir).toBe(join(dir, 'st'));
    expect(fromFile.objectStore).toBe(join(dir, 'objs'));
    expect(fromFile.catalog).toBe(join(dir, 'cat.json'));
    expect(fromFile.ec2.worker?.templatePath).toBe(join(dir, 'user-data.sh'));
    expect(fromFile.ec2.worker?.identityCertificate).toBe(join(dir, 'certs', 'aws-identity.pem'));
    const fromFlags = loadControllerConfig({
      flags: { config: path, objectStore: 'mine', catalog: 'other.json', identityCertificate: 'mine.pem' },
      env: {},
      defaultRegion: 'us-east-1',
      cwd: elsewhere,
    });
    expect(fromFlags.objectStore).toBe(join(elsewhere, 'mine'));
    expect(fromFlags.catalog).toBe(join(elsewhere, 'other.json'));
    expect(fromFlags.ec2.worker?.identityCertificate).toBe(join(elsewhere, 'mine.pem'));
    expect(fromFlags.stateDir).toBe(join(dir, 'st'));
    // A URL is not a path.
    const s3 = loadControllerConfig({
      flags: { config: path, objectStore: 's3://bucket/prefix' },
      env: {},
      defaultRegion: 'us-east-1',
      cwd: elsewhere,
    });
    expect(s3.objectStore).toBe('s3://bucket/prefix');
  });

  it("loads the README's queue section, a class's maxShare included", () => {
    const readme = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8');
    const section = /```yaml\n(caps:\n  maxCostPerHour: 40\n[\s\S]*?)```/.exec(readme)?.[1];
    expect(section).toBeDefined();
    const path = file('readme-queue.yaml', `cluster: c\nstateDir: s\n${section as string}`);
    const config = loadControllerConfig({ flags: { config: path }, env: {}, defaultRegion: 'us-east-1' });
    expect(config.queue?.classes.map((c) => [c.id, c.maxShare])).toEqual([
      ['small', undefined],
      ['large', 0.5],
    ]);
  });

  it('refuses a port past 65535; takes port 0 (any free one), in local mode too', () => {
    const problems = (flags: Record<string, string>): readonly string[] => {
      try {
        loadControllerConfig({
          flags: { cluster: 'c', stateDir: 's', ...flags },
          env: {},
          defaultRegion: 'us-east-1',
        });
        return [];
      } catch (e) {
        return (e as ValidationError).problems;
      }
    };
    expect(problems({ listen: '127.0.0.1:99999' })).toEqual([
      expect.stringMatching(/^--listen: the port must be at most 65535/),
    ]);
    expect(problems({ provider: 'local', listen: '127.0.0.1:0' })).toEqual([]);
    expect(problems({ listen: '127.0.0.1:0' })).toEqual([]);
  });

  it('splits listen addresses', () => {
    expect(parseListen('127.0.0.1:8080')).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(parseListen('[::1]:9000')).toEqual({ host: '::1', port: 9000 });
    expect(() => parseListen('localhost:99999')).toThrow(ValidationError);
  });

  it('creates secrets readable by the owner only, and reuses them', () => {
    const path = join(scratch, 'admin-token');
    const first = ensureSecretFile(path);
    expect(first.created).toBe(true);
    expect(first.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(ensureSecretFile(path)).toEqual({ value: first.value, created: false });
  });
});
