import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { parseJobSpec, validateJobSpec } from '../../src/controller/job-spec/parse.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { writtenJobSpec } from '../../src/controller/job-spec/written-form.js';
import { PriceBook } from '../../src/scheduler/reservation-price.js';

/**
 * A stored spec validates again, to itself: the job archive holds specs as the controller stored them, and a restore
 * validates each before it submits the job again. Fields that validation renames (spotMaxDelayMinutes, network.root)
 * used to make such a spec invalid, so a restore refused the whole archive.
 */

const book = new PriceBook(loadCatalogFile());

/** What the archive holds (JSON) and what a restore makes of it. */
function restored(spec: JobSpec): JobSpec {
  return validateJobSpec(writtenJobSpec(JSON.parse(JSON.stringify(spec))), 'archived spec', book);
}

describe('writtenJobSpec', () => {
  it('gives back every example job as it was stored', () => {
    const dir = join(PROJECT_ROOT, 'examples/jobs');
    const files = readdirSync(dir).filter((f) => f.endsWith('.yaml'));
    expect(files.length).toBeGreaterThanOrEqual(4);
    for (const file of files) {
      const spec = parseJobSpec(readFileSync(join(dir, file), 'utf8'), file, book);
      expect(restored(spec), file).toEqual(spec);
    }
  });

  it('writes the fields validation converts back as a user writes them', () => {
    const spec = validateJobSpec(
      {
        name: 'sweep',
        team: 'sims',
        spotMaxDelayMinutes: 45,
        network: { sensitivity: 'memcached', pattern: 'star', root: 'server' },
        tasks: [
          { name: 'server', image: 'busybox', command: ['sleep', '1'], demand: { c7i: [0, 2, 4] } },
          { name: 'client', image: 'busybox', replicas: 2, demand: { c7i: [0, 1, 2] } },
        ],
      },
      'spec',
      book,
    );
    expect(spec.spotMaxDelaySeconds).toBe(2700);
    expect(spec.network?.rootTask).toBe('server');
    const written = writtenJobSpec(JSON.parse(JSON.stringify(spec))) as Record<string, unknown>;
    expect(written['spotMaxDelayMinutes']).toBe(45);
    expect(written).not.toHaveProperty('spotMaxDelaySeconds');
    expect(written['network']).toEqual({
      sensitivity: 'memcached',
      pattern: 'star',
      root: 'server',
      gibPerHour: 0,
    });
    expect(restored(spec)).toEqual(spec);
  });

  it('leaves what is not a stored spec for validation to name', () => {
    expect(writtenJobSpec(null)).toBeNull();
    expect(writtenJobSpec([1])).toEqual([1]);
    expect(() =>
      validateJobSpec(writtenJobSpec({ name: 'x', spotMaxDelaySeconds: 'soon' }), 'a', book),
    ).toThrow(/spotMaxDelayMinutes: must be a number of minutes/);
  });

  it('round-trips any valid spec using the optional fields (property)', () => {
    const task = (i: number) =>
      fc.record({
        name: fc.constant(`t${i}`),
        image: fc.constantFrom('busybox', 'python:3.12-slim'),
        command: fc.constantFrom(['true'], ['python', 'train.py']),
        demand: fc.constantFrom({ c7i: [0, 1, 2] }, { any: [0, 2, 4] }, { p3: [1, 8, 60] }),
        replicas: fc.integer({ min: 1, max: 3 }),
        env: fc.constantFrom({}, { EPOCHS: '10' }),
      });
    const arbitrary = fc
      .record({
        tasks: fc
          .integer({ min: 1, max: 3 })
          .chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => task(i)))),
        spotMaxDelayMinutes: fc.option(fc.integer({ min: 1, max: 10_080 }), { nil: undefined }),
        spot: fc.option(fc.constantFrom('never', 'allowed', 'preferred'), { nil: undefined }),
        network: fc.option(
          fc.record({
            sensitivity: fc.constantFrom<string | number[][]>('none', 'memcached', 'spark', [
              [40, 0.95],
              [1000, 0.5],
            ]),
            pattern: fc.constantFrom('star', 'all-to-all'),
            rootReplica: fc.option(fc.nat(), { nil: undefined }),
            gibPerHour: fc.integer({ min: 0, max: 100 }),
          }),
          { nil: undefined },
        ),
        expectedDurationSeconds: fc.option(fc.integer({ min: 1, max: 86_400 }), { nil: undefined }),
        unsuccessfulExitCodes: fc.option(fc.uniqueArray(fc.integer({ min: 1, max: 255 }), { maxLength: 4 }), {
          nil: undefined,
        }),
        // The longest a workload may be: a task's derived from it (`<workload>_<task>`) is longer.
        workload: fc.option(fc.constantFrom('train', 'sim', 'w'.repeat(128)), { nil: undefined }),
      })
      .map(({ network, ...rest }) => {
        const first = rest.tasks[0] as { name: string; replicas: number };
        // By its template's name, or (replicated) one replica's: name-0, name-1, …
        const root =
          network?.rootReplica === undefined
            ? undefined
            : first.replicas === 1 || network.rootReplica % 2 === 0
              ? first.name
              : `${first.name}-${network.rootReplica % first.replicas}`;
        return {
          name: 'job',
          team: 'team',
          ...rest,
          ...(network === undefined
            ? {}
            : {
                network: {
                  sensitivity: network.sensitivity,
                  pattern: network.pattern,
                  gibPerHour: network.gibPerHour,
                  ...(root === undefined ? {} : { root }),
                },
              }),
        };
      });
    fc.assert(
      fc.property(arbitrary, (raw) => {
        const spec = validateJobSpec(JSON.parse(JSON.stringify(raw)), 'spec', book);
        expect(restored(spec)).toEqual(spec);
      }),
      { numRuns: 200 },
    );
  });
});
