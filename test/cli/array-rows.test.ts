import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { groupArrays, stateCounts, type ListedArrayJob } from '../../src/cli/array-rows.js';

const job = (seq: number, name: string, array?: [number, number], team = 'sims'): ListedArrayJob => ({
  id: `job-${seq}`,
  name,
  team,
  ...(array === undefined ? {} : { array: { index: array[0], size: array[1] } }),
});

describe('groupArrays', () => {
  it("makes an array's jobs listed one after another one row, and leaves everything else a row of its own", () => {
    const listing = [
      job(1, 'prep'),
      job(2, 'sweep', [0, 3]),
      job(3, 'sweep', [1, 3]),
      job(4, 'sweep', [2, 3]),
      job(5, 'sweep', [0, 2]), // another array of the same name, right after
      job(6, 'sweep', [1, 2]),
      job(8, 'lone', [3, 4]), // one job of an array listed alone
      job(9, 'other', [0, 2]),
      job(11, 'other', [1, 2]), // not consecutive ids: not one array
    ];
    expect(
      groupArrays(listing).map((r) => (r.kind === 'job' ? r.job.id : r.jobs.map((j) => j.id).join('+'))),
    ).toEqual(['job-1', 'job-2+job-3+job-4', 'job-5+job-6', 'job-8', 'job-9', 'job-11']);
  });

  it('keeps every job exactly once, in order (property)', () => {
    const listed = fc
      .array(
        fc.record({
          gap: fc.integer({ min: 1, max: 2 }),
          name: fc.constantFrom('a', 'b'),
          array: fc.option(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.constant(4)), { nil: undefined }),
        }),
        { maxLength: 30 },
      )
      .map((items) => {
        let seq = 0;
        return items.map((i) => job((seq += i.gap), i.name, i.array));
      });
    fc.assert(
      fc.property(listed, (jobs) => {
        const rows = groupArrays(jobs);
        expect(rows.flatMap((r) => (r.kind === 'job' ? [r.job] : r.jobs))).toEqual(jobs);
        for (const r of rows) if (r.kind === 'array') expect(r.jobs.length).toBeGreaterThan(1);
      }),
    );
  });
});

it('stateCounts puts live states first', () => {
  expect(stateCounts(['succeeded', 'queued', 'running', 'queued', 'failed'])).toBe(
    '1 running, 2 queued, 1 succeeded, 1 failed',
  );
});
