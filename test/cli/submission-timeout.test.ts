import { expect, it } from 'vitest';
import { submissionTimeoutMs } from '../../src/cli/client.js';
import { JOB_SPEC_LIMITS } from '../../src/controller/job-spec/spec.js';

it('waits longer for an array, whose every spec is archived before the answer, than for one job', () => {
  const one = submissionTimeoutMs({ name: 'train' });
  expect(one).toBe(30_000);
  // A job with its index is one job of an array, submitted alone.
  expect(submissionTimeoutMs({ name: 'p', arrayProperties: { size: 10_000, index: 3 } })).toBe(one);
  // What validation will refuse waits no longer than one job.
  expect(submissionTimeoutMs({ name: 'p', arrayProperties: { size: 'many' } })).toBe(one);
  const small = submissionTimeoutMs({ name: 'p', arrayProperties: { size: 4 } });
  const largest = submissionTimeoutMs({ name: 'p', arrayProperties: { size: JOB_SPEC_LIMITS.maxArraySize } });
  expect(small).toBeGreaterThan(one);
  // The largest array: 10,000 puts, 48 at a time, at up to a quarter of a second each.
  expect(largest).toBeGreaterThanOrEqual(one + (JOB_SPEC_LIMITS.maxArraySize / 48) * 250);
  expect(submissionTimeoutMs({ name: 'p', arrayProperties: { size: 10 ** 9 } })).toBe(largest);
});
