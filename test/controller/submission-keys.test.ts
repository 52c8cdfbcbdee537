import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { JobRecord, StateStore } from '../../src/controller/state-store.js';
import {
  findSubmission,
  recordSubmissionKey,
  requestHashOf,
  SubmissionKeyReusedError,
  SubmissionKeyTakenError,
} from '../../src/controller/submission-keys.js';
import { CPU_SMALL, jobSpec, rig } from './controller-fixtures.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-submission-keys-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const stores: [string, () => StateStore][] = [
  ['memory', () => new MemoryStateStore()],
  ['sqlite', () => new SqliteStateStore(join(scratch, `${Math.random().toString(36).slice(2)}.db`))],
];

describe.each(stores)('submission keys on the %s store', (_name, open) => {
  it('are recorded with their jobs, or not at all when the submission rolls back', () => {
    const store = open();
    const spec = jobSpec('train', CPU_SMALL);
    const key = { team: 'research', key: 'k-1', requestHash: requestHashOf(spec) };
    expect(() =>
      store.transaction(() => {
        recordSubmissionKey(store, key, [store.submitJob(spec)]);
        throw new Error('the submission failed after its key');
      }),
    ).toThrow('failed after its key');
    expect(findSubmission(store, 'research', 'k-1')).toBeUndefined();
    expect(store.listJobs()).toHaveLength(0);

    const job = store.transaction(() => {
      const made = store.submitJob(spec);
      recordSubmissionKey(store, key, [made]);
      return made;
    });
    expect(findSubmission(store, 'research', 'k-1')).toMatchObject({
      requestHash: key.requestHash,
      jobIds: [job.id],
    });
    // Another team's key of the same name is another key.
    expect(findSubmission(store, 'vision', 'k-1')).toBeUndefined();
    // Recorded again: the same request is taken (answer the first), another is a reuse.
    expect(() => recordSubmissionKey(store, key, [job])).toThrow(SubmissionKeyTakenError);
    expect(() => recordSubmissionKey(store, { ...key, requestHash: 'other' }, [job])).toThrow(
      SubmissionKeyReusedError,
    );
    store.close();
  });
});

it('hashes a spec whatever the order of its keys, and tells specs apart', () => {
  const spec = jobSpec('train', CPU_SMALL);
  const reordered = Object.fromEntries(Object.entries(spec).reverse()) as typeof spec;
  expect(requestHashOf(reordered)).toBe(requestHashOf(spec));
  expect(requestHashOf({ ...spec, name: 'train-2' })).not.toBe(requestHashOf(spec));
});

it('rolls back the second of two sends of one key committed in one batch, keeping the first whole', async () => {
  const r = rig();
  const spec = jobSpec('batched', CPU_SMALL);
  const key = { team: 'research', key: 'batched-1', requestHash: requestHashOf(spec) };
  const hook = (jobs: readonly JobRecord[]): void => recordSubmissionKey(r.store, key, jobs);
  // Both in one turn of the event loop: one group commit.
  const [first, second] = await Promise.allSettled([
    r.controller.submitBatched(spec, 'research', hook),
    r.controller.submitBatched(spec, 'research', hook),
  ]);
  expect(first.status).toBe('fulfilled');
  expect(second.status === 'rejected' && second.reason instanceof SubmissionKeyTakenError).toBe(true);
  const jobs = r.store.listJobs().filter((j) => j.name === 'batched');
  expect(jobs.map((j) => j.id)).toEqual([(first as PromiseFulfilledResult<JobRecord>).value.id]);
  expect(findSubmission(r.store, 'research', 'batched-1')?.jobIds).toEqual([jobs[0]?.id]);
});
