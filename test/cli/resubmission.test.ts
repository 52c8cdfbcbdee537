import fc from 'fast-check';
import { expect, it } from 'vitest';
import { inSubmissionOrder, keptDependencies, withRenamedDependencies } from '../../src/cli/resubmission.js';

it('orders job ids as they were submitted, each once (job-9 before job-10)', () => {
  expect(inSubmissionOrder(['job-10', 'job-9', 'job-100', 'job-9', 'job-2'])).toEqual([
    'job-2',
    'job-9',
    'job-10',
    'job-100',
  ]);
  fc.assert(
    fc.property(fc.uniqueArray(fc.integer({ min: 1, max: 1e9 }), { maxLength: 30 }), (numbers) => {
      const ordered = inSubmissionOrder(numbers.map((n) => `job-${n}`));
      expect(ordered).toEqual([...numbers].sort((a, b) => a - b).map((n) => `job-${n}`));
    }),
  );
});

it('renames what a job waits for among the jobs run again, plain ids and { jobId } entries, and keeps the rest', () => {
  const renamed = new Map([
    ['job-1', 'job-11'],
    ['job-3', 'job-12'],
  ]);
  const spec = {
    name: 'train',
    dependsOn: ['job-1', 'job-2', { jobId: 'job-3', type: 'N_TO_N' }, { type: 'SEQUENTIAL' }],
  };
  expect(withRenamedDependencies(spec, renamed)).toEqual({
    name: 'train',
    dependsOn: ['job-11', 'job-2', { jobId: 'job-12', type: 'N_TO_N' }, { type: 'SEQUENTIAL' }],
  });
  // The spec read is not changed.
  expect(spec.dependsOn[0]).toBe('job-1');
  expect(withRenamedDependencies({ name: 'alone' }, renamed)).toEqual({ name: 'alone' });
  expect(keptDependencies(spec, new Set(renamed.keys()))).toEqual(['job-2']);
  expect(keptDependencies({ name: 'alone' }, new Set())).toEqual([]);
});
