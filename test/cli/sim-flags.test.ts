import { describe, expect, it } from 'vitest';
import {
  MAX_SPOT_BURSTS,
  parseQuotaFlag,
  parseQuotaFlags,
  parseSimulateOptions,
} from '../../src/cli/commands/simulate-options.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  flagName,
  inferFormat,
  readQueueConfigFile,
  roundSecondsFlag,
  traceOptionFields,
} from '../../src/cli/commands/sim-flags.js';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { ValidationError } from '../../src/core/validation.js';
import { refusal } from '../helpers/validation-refusal.js';

describe('simulate/tune flag parsing', () => {
  it('names option fields as their flags', () => {
    expect(flagName('capDollarsPerHour')).toBe('--cap-dollars-per-hour');
    expect(flagName('jobs')).toBe('--jobs');
  });

  it('bounds --round-seconds to a round a day (a longer one never ends a simulation)', () => {
    expect(roundSecondsFlag.parse('300')).toBe(300);
    expect(roundSecondsFlag.parse('86400')).toBe(86_400);
    const refused = roundSecondsFlag.safeParse('1e12');
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.message).toBe('at most 86400 s (a round a day)');
    expect(roundSecondsFlag.safeParse('0.001').error?.issues[0]?.message).toBe(
      'at least 1 s (a simulation spans weeks)',
    );
  });

  it('bounds --arrival-rate-scale to 0.001..1000 (far slower, arrivals land centuries out and a run never ends)', () => {
    const scale = traceOptionFields.arrivalRateScale;
    expect(scale.parse('0.001')).toBe(0.001);
    expect(scale.parse('1000')).toBe(1000);
    for (const tiny of ['1e-15', '0.0009'])
      expect(scale.safeParse(tiny).error?.issues[0]?.message, tiny).toBe('must be ≥ 0.001');
    expect(scale.safeParse('1001').error?.issues[0]?.message).toBe('must be ≤ 1000');
  });

  it('parses --quota group:vcpus=N,gpus=M, naming each quota by the flag as typed', () => {
    expect(parseQuotaFlag('p:gpus=16')).toEqual({ group: 'p', maxGpus: 16, source: '--quota p:gpus=16' });
    expect(parseQuotaFlag(' Standard : vcpus=256 , gpus=0 ')).toEqual({
      group: 'standard',
      maxVcpus: 256,
      maxGpus: 0,
      source: '--quota Standard : vcpus=256 , gpus=0',
    });
    // AWS's separate spot quota of a group.
    expect(parseQuotaFlag('p-spot:gpus=8')).toMatchObject({ group: 'p-spot', maxGpus: 8 });
  });

  it('takes a --quota on a group a controller config maps families to', () => {
    expect(() => parseQuotaFlag('lab:gpus=4')).toThrow(/no instance counts against group lab/);
    expect(parseQuotaFlag('lab:gpus=4', { p3: 'lab' })).toMatchObject({ group: 'lab', maxGpus: 4 });
    expect(parseQuotaFlag('lab-spot:gpus=4', { p3: 'lab' })).toMatchObject({ group: 'lab-spot' });
  });

  it('refuses a --quota of part of a GPU or vCPU, or with a key given twice, naming the flag', () => {
    for (const [bad, why] of [
      ['p:gpus=1.5', '"gpus=1.5" is not vcpus=N or gpus=N with N a whole number'],
      ['standard:vcpus=0.5', '"vcpus=0.5" is not vcpus=N or gpus=N with N a whole number'],
      ['p:gpus=2,gpus=100', 'gpus given twice'],
      ['p:vcpus=8,gpus=1,VCPUS=64', 'vcpus given twice'],
    ] as const) {
      let error: unknown;
      try {
        parseQuotaFlag(bad);
      } catch (e) {
        error = e;
      }
      expect(error, bad).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).source).toBe('--quota');
      expect((error as ValidationError).problems[0]).toContain(`"${bad}": ${why}`);
    }
  });

  it('refuses a group given twice among the --quota flags (a controller config refuses it too)', () => {
    expect(parseQuotaFlags(['p:gpus=2', 'standard:vcpus=64'])).toMatchObject([
      { group: 'p', maxGpus: 2 },
      { group: 'standard', maxVcpus: 64 },
    ]);
    // A group and its spot twin are two quotas.
    expect(parseQuotaFlags(['p:gpus=2', 'p-spot:gpus=8'])).toHaveLength(2);
    expect(() => parseQuotaFlags(['p:gpus=2', 'standard:vcpus=64', 'P:gpus=100'])).toThrow(
      new ValidationError('--quota', [
        'group p given twice ("p:gpus=2", "P:gpus=100"): give one --quota per group',
      ]),
    );
  });

  it('bounds --spot-bursts to a burst per pool per hour on average', () => {
    const bursts = (n: string) =>
      parseSimulateOptions({ scheduler: 'karpenter-spot', spotBursts: n }).spotBursts;
    expect(bursts('30')).toBe(30);
    expect(bursts(String(MAX_SPOT_BURSTS))).toBe(720);
    for (const tooMany of ['721', '100000'])
      expect(() => bursts(tooMany), tooMany).toThrow(
        new ValidationError('fleetwise simulate options', [
          '--spot-bursts: must be ≤ 720 (a burst per pool per hour on average; denser bursts take spot instances back before they can work)',
        ]),
      );
    expect(() => bursts('-1')).toThrow(/--spot-bursts: must be ≥ 0/);
  });

  it('rejects a malformed --quota, naming the flag and the bad part', () => {
    // A group nothing counts against (zzz) would be a cap that never binds.
    for (const bad of ['p', 'p:gpus', 'p:gpus=x', 'p:cpus=4', ':vcpus=4', 'zzz:gpus=3']) {
      const error = (() => {
        try {
          parseQuotaFlag(bad);
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(error, bad).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).source).toBe('--quota');
      expect((error as ValidationError).problems[0]).toContain(bad.trim());
    }
  });

  it('infers the trace format from the extension, or says to give --format', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fw-infer-ext-'));
    const file = (name: string): string => {
      writeFileSync(join(dir, name), '{}');
      return join(dir, name);
    };
    expect(inferFormat(undefined)).toBe('synthetic');
    expect(inferFormat(file('t.JSON'))).toBe('eva');
    expect(inferFormat(file('pods.csv'))).toBe('alibaba');
    expect(() => inferFormat(file('trace.txt'))).toThrow(/^--format: cannot tell the format of .*trace\.txt/);
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a trace path that is not there as such, whatever its extension', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fw-infer-missing-'));
    const notFile = join(dir, 'a-file');
    writeFileSync(notFile, 'x');
    for (const missing of [
      'nonexistdir/',
      join(dir, 'gone'),
      join(dir, 'gone.json'),
      join(notFile, 'x.csv'),
    ]) {
      const error = refusal(() => inferFormat(missing));
      expect(error.source).toBe('--trace');
      expect(error.problems).toEqual([`no such file or directory: ${missing}`]);
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('infers specs for a directory, and fleetwise for a JSON file whose format field says so', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fw-infer-'));
    expect(inferFormat(dir)).toBe('specs');
    const exported = join(dir, 'history.json');
    writeFileSync(exported, JSON.stringify({ format: 'fleetwise-trace/v1', jobs: [] }));
    expect(inferFormat(exported)).toBe('fleetwise');
    expect(inferFormat(join(PROJECT_ROOT, 'data/eva-reference/pai_200.json'))).toBe('eva');
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads a WFQ config file: bare JSON, or YAML with a queue: section (tune output, the example)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fw-queue-config-'));
    const bare = join(dir, 'bare.json');
    writeFileSync(bare, JSON.stringify({ classes: [{ id: 'all', weight: 1 }] }));
    expect(readQueueConfigFile(bare)).toEqual({
      queue: expect.objectContaining({ classes: [{ id: 'all', weight: 1, ordering: 'fifo' }] }),
    });
    const example = readQueueConfigFile(join(PROJECT_ROOT, 'examples/queue/wfq-3-classes.yaml'));
    expect(example.queue.classes.map((c) => c.weight)).toEqual([0.7, 0.2, 0.1]);
    expect(example.queue.preemption.enabled).toBe(true);
    expect(example.caps).toBeUndefined();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads the caps: section tune prints beside the queue, and refuses a section tune does not print', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fw-queue-config-'));
    const tuned = join(dir, 'tuned.yaml');
    writeFileSync(
      tuned,
      'queue:\n  classes:\n    - { id: all, weight: 1 }\ncaps:\n  maxCostPerHour: 20\n  admitBy: plan-cost\n',
    );
    expect(readQueueConfigFile(tuned).caps).toEqual({ maxCostPerHour: 20, admitBy: 'plan-cost' });
    const controllerConfig = join(dir, 'controller.yaml');
    writeFileSync(
      controllerConfig,
      'queue:\n  classes:\n    - { id: all, weight: 1 }\nroundSeconds: 60\ncluster: c\nstateDir: s\n',
    );
    const whole =
      "a controller config's setting: a queue config has a queue: section and what fleetwise tune prints beside " +
      'it (caps:, scheduler:, roundSeconds:, catalog:, priceOverrides:, coStart:, placeBetweenRounds:, ' +
      'bindBetweenRounds:, makeBeforeBreak:); give a whole controller config with --config';
    expect(refusal(() => readQueueConfigFile(controllerConfig)).problems).toEqual([
      `cluster (line 5): ${whole}`,
      `stateDir (line 6): ${whole}`,
    ]);
    const badCaps = join(dir, 'bad-caps.yaml');
    writeFileSync(badCaps, 'queue:\n  classes:\n    - { id: all, weight: 1 }\ncaps:\n  admitBy: cheapest\n');
    expect(() => readQueueConfigFile(badCaps)).toThrow(/caps[\s\S]*admitBy/);
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads the scheduler, period, catalog and prices tune prints, each checked as a controller config checks it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fw-queue-config-'));
    const queue = 'queue:\n  classes:\n    - { id: all, weight: 1 }\n';
    const tuned = join(dir, 'tuned.yaml');
    writeFileSync(
      tuned,
      queue +
        'scheduler:\n  name: no-packing\nroundSeconds: 60\ncatalog: catalogs/mine.json\n' +
        'priceOverrides:\n  discountPercent: 28\n',
    );
    expect(readQueueConfigFile(tuned)).toMatchObject({
      scheduler: { name: 'no-packing' },
      roundSeconds: 60,
      // A relative catalog is read from the file's directory, as a controller config's.
      catalog: join(dir, 'catalogs', 'mine.json'),
      priceOverrides: { overrides: { discountPercent: 28 }, source: `${tuned}: priceOverrides` },
    });
    const bad = join(dir, 'bad.yaml');
    writeFileSync(
      bad,
      queue +
        'scheduler:\n  name: nope\n  paybackMargin: 0.5\nroundSeconds: 0.5\ncatalog: ""\n' +
        'priceOverrides:\n  discountPercent: 120\n',
    );
    let refused: unknown;
    try {
      readQueueConfigFile(bad);
    } catch (e) {
      refused = e;
    }
    expect(refused).toBeInstanceOf(ValidationError);
    const problems = (refused as ValidationError).problems;
    expect((refused as ValidationError).source).toBe(bad);
    for (const field of [
      'scheduler.name',
      'scheduler.paybackMargin',
      'roundSeconds',
      'catalog',
      'priceOverrides.discountPercent',
    ])
      expect(
        problems.some((p) => p.startsWith(`${field} (line `)),
        field,
      ).toBe(true);
    expect(problems).toContain('roundSeconds (line 7): at least 1 s (a simulation spans weeks)');
    rmSync(dir, { recursive: true, force: true });
  });

  it('rejects a bad WFQ config naming the file and the field', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fw-queue-config-'));
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'queue:\n  classes:\n    - { id: small, weight: -1 }\n');
    expect(() => readQueueConfigFile(bad)).toThrow(ValidationError);
    try {
      readQueueConfigFile(bad);
    } catch (e) {
      expect((e as ValidationError).source).toBe(bad);
      expect((e as ValidationError).problems.join('\n')).toMatch(/classes\.0\.weight/);
    }
    expect(() => readQueueConfigFile(join(dir, 'missing.yaml'))).toThrow(/cannot read/);
    rmSync(dir, { recursive: true, force: true });
  });
});
