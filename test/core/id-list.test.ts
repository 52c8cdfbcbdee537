import { describe, expect, it } from 'vitest';
import { formatIdList } from '../../src/core/id-list.js';

describe('formatIdList', () => {
  it('prints a few ids in full, a run of consecutive ones as a range in any order, others as the first three', () => {
    expect(formatIdList(['job-3', 'job-1'])).toBe('job-3, job-1');
    expect(formatIdList(['job-9', 'job-10', 'job-11', 'job-12', 'job-13'])).toBe('job-9 … job-13 (5 jobs)');
    // dependsOn as written: the same set in another order is the same range.
    expect(formatIdList(['job-9', 'job-4', 'job-6', 'job-5', 'job-8', 'job-7'])).toBe(
      'job-4 … job-9 (6 jobs)',
    );
    expect(formatIdList(['job-1', 'job-2', 'job-4', 'job-5', 'job-6'])).toBe(
      'job-1, job-2, job-4 and 2 more',
    );
    expect(formatIdList(['job-1', 'job-2', 'job-2', 'job-3', 'job-4'])).toBe(
      'job-1, job-2, job-2 and 2 more',
    );
    expect(formatIdList(['a-1', 'b-2', 'a-3', 'a-4', 'a-5'])).toBe('a-1, b-2, a-3 and 2 more');
  });
});
