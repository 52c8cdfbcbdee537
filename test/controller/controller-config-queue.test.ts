import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { AWS_QUOTA_GROUPS } from '../../src/controller/config.js';
import { loadControllerConfig } from '../../src/controller/config-loading.js';
import { settingsFromConfig } from '../../src/controller/settings.js';
import { ValidationError } from '../../src/core/validation.js';
import { awsQuotaGroup } from '../../src/core/quota-groups.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-config-queue-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function load(lines: readonly string[]) {
  const path = join(scratch, `c${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(path, ['cluster: c', 'stateDir: s', ...lines].join('\n'));
  return loadControllerConfig({ flags: { config: path }, env: {}, defaultRegion: 'us-east-1' });
}

function problems(lines: readonly string[]): readonly string[] {
  try {
    load(lines);
  } catch (e) {
    if (e instanceof ValidationError) return e.problems;
    throw e;
  }
  throw new Error('expected a ValidationError');
}

describe('controller configuration: caps quotas and the queue section', () => {
  it('reads quotas per family group and a WFQ queue section with defaults filled in', () => {
    const config = load([
      'caps:', //                                     line 3
      '  maxCostPerHour: 20',
      '  quotas:',
      '    - { group: standard, maxVcpus: 64 }',
      '    - { group: p, maxGpus: 4, maxVcpus: 32 }',
      'queue:',
      '  classifyBy: size',
      '  classes:',
      '    - { id: small, weight: 0.95, maxSizeSeconds: 3600, ordering: srpt }',
      '    - { id: large, weight: 0.05, ordering: success-rank }',
    ]);
    expect(config.caps).toEqual({
      maxCostPerHour: 20,
      quotas: [
        { group: 'standard', maxVcpus: 64 },
        { group: 'p', maxGpus: 4, maxVcpus: 32 },
      ],
    });
    expect(config.queue).toMatchObject({
      classifyBy: 'size',
      classes: [
        { id: 'small', weight: 0.95, maxSizeSeconds: 3600, ordering: 'srpt' },
        { id: 'large', weight: 0.05, ordering: 'success-rank' },
      ],
      preemption: { enabled: true, marginShare: 0.05, minShortRounds: 2 },
    });
    const settings = settingsFromConfig(config);
    expect(settings.queue?.classes).toHaveLength(2);
    expect(settings.caps.quotas).toHaveLength(2);
    // Without a queue section the controller uses one FIFO class.
    expect(load([]).queue).toBeUndefined();
  });

  it('names the field and its line for bad quotas', () => {
    const typed = problems([
      'caps:',
      '  quotas:',
      '    - { group: p, maxGpus: 1.5 }', //          line 5
      '    - { group: standard, maxVcpu: 8 }', //     line 6
      '    - { group: x, maxVcpus: 95.5 }', //        line 7
    ]);
    expect(typed).toContain('caps.quotas.0.maxGpus (line 5): a whole number');
    expect(typed).toContain('caps.quotas.1.maxVcpu (line 6): unknown field, did you mean maxVcpus?');
    // AWS counts quotas in whole vCPUs, as simulate's --quota takes them.
    expect(typed).toContain('caps.quotas.2.maxVcpus (line 7): a whole number');
    // The example configs hold to it.
    const examples = join(PROJECT_ROOT, 'examples', 'config');
    const files = readdirSync(examples).filter((f) => /\.ya?ml$/.test(f));
    expect(files.length).toBeGreaterThan(0);
    for (const f of files)
      expect(
        loadControllerConfig({ flags: { config: join(examples, f) }, env: {}, defaultRegion: 'us-east-1' })
          .cluster,
      ).toEqual(expect.any(String));
    const found = problems([
      'caps:',
      '  quotas:',
      '    - { group: gpu, maxGpus: 4 }', // line 5
      '    - { group: p }', //              line 6
      '    - { group: p, maxGpus: 1 }', //  line 7
    ]);
    expect(
      found.some((p) =>
        /^caps\.quotas\.0\.group \(line 5\): unknown quota group gpu \(AWS groups: standard, p, g-vt/.test(p),
      ),
    ).toBe(true);
    expect(found).toContain('caps.quotas.1 (line 6): give maxVcpus, maxGpus or both');
    expect(found).toContain('caps.quotas.2.group (line 7): duplicate quota for group p');
    // A group named in familyGroups is known.
    const custom = load([
      'caps:',
      '  familyGroups: { p5: big-gpu }',
      '  quotas: [{ group: big-gpu, maxGpus: 8 }]',
    ]);
    expect(custom.caps.familyGroups).toEqual({ p5: 'big-gpu' });
    // AWS's spot request quotas: each group's spot twin, a custom group's too.
    const spot = load([
      'caps:',
      '  familyGroups: { p5: big-gpu }',
      '  quotas: [{ group: p-spot, maxGpus: 8 }, { group: big-gpu-spot, maxGpus: 16 }]',
    ]);
    expect(spot.caps.quotas?.map((q) => q.group)).toEqual(['p-spot', 'big-gpu-spot']);
  });

  it('sizes waiting jobs by the plan’s cost unless the caps say standalone; a bad value names the field', () => {
    const byDefault = settingsFromConfig(load(['caps:', '  maxCostPerHour: 20']));
    expect(byDefault.admitBy).toBe('plan-cost');
    // The setting sits beside the caps in the file, not among the caps the queue layer checks.
    expect(byDefault.caps).toEqual({ maxCostPerHour: 20 });
    expect(settingsFromConfig(load(['caps:', '  admitBy: standalone'])).admitBy).toBe('standalone');
    const bad = problems(['caps:', '  admitBy: packed']); // line 4
    expect(bad.some((p) => p.startsWith('caps.admitBy (line 4): ') && p.includes('plan-cost'))).toBe(true);
  });

  it('names the field and its line for a bad queue section', () => {
    const typed = problems([
      'queue:',
      '  classifyBy: size',
      '  clases: []', //                                                       line 5
      '  classes:',
      '    - { id: small, weight: 1, maxSizeSeconds: 600, ordering: lifo }', // line 7
      '    - { id: large, weight: 0, odering: srpt }', //                       line 8
    ]);
    expect(typed).toContain('queue.clases (line 5): unknown field, did you mean classes?');
    expect(typed).toContain('queue.classes.1.odering (line 8): unknown field, did you mean ordering?');
    expect(
      typed.some((p) => p.startsWith('queue.classes.0.ordering (line 7): ') && p.includes('success-rank')),
    ).toBe(true);
    expect(typed.some((p) => p.startsWith('queue.classes.1.weight (line 8): '))).toBe(true);
    const semantic = problems([
      'queue:',
      '  classes:',
      '    - { id: small, weight: 1, maxSizeSeconds: 600 }', // line 5
      '    - { id: mid, weight: 1 }', //                         line 6
      '    - { id: small, weight: 1, maxSizeSeconds: 60 }', //  line 7
    ]);
    expect(semantic).toContain('queue.classes.1.maxSizeSeconds (line 6): required (size threshold)');
    expect(semantic).toContain('queue.classes.2.id (line 7): duplicate class small');
    expect(semantic).toContain(
      'queue.classes.2.maxSizeSeconds (line 7): the last size class must be unbounded (omit maxSizeSeconds)',
    );
  });

  it('checks team classes: teams required but on the last class, no team twice, no size thresholds', () => {
    const found = problems([
      'queue:',
      '  classifyBy: team',
      '  classes:',
      '    - { id: vision, weight: 2, teams: [vision, robotics] }', // line 6
      '    - { id: nlp, weight: 1, maxSizeSeconds: 60 }', //           line 7
      '    - { id: rest, weight: 1, teams: [robotics] }', //           line 8
    ]);
    // One problem each: the WFQ schema's checks are not said a second time in other words.
    expect(found).toEqual([
      'queue.classes.1.maxSizeSeconds (line 7): a size threshold: classes are by team here (classifyBy: team); give teams, or classifyBy: size',
      'queue.classes.2.teams.0 (line 8): team robotics is in class vision already: a team belongs to one class',
      'queue.classes.1.teams (line 7): required with classifyBy: team (only the last class may leave it out: it takes every other team)',
    ]);
    const sized = problems(['queue:', '  classes:', '    - { id: all, weight: 1, teams: [a] }']);
    expect(sized).toEqual([
      'queue.classes.0.teams (line 5): classes are by size here (classifyBy: size); give classifyBy: team to class by team',
    ]);
  });

  it('lists every quota group the bundled catalog’s families fall into', () => {
    for (const t of loadCatalogFile().types)
      expect(AWS_QUOTA_GROUPS as readonly string[]).toContain(awsQuotaGroup(t.family));
  });
});
