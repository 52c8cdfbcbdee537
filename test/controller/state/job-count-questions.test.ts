import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { submitOnStart } from '../../../src/cli/commands/controller/quick-start-submit.js';
import { CLUSTER_INITIALIZED_KEY, isEmptyState } from '../../../src/controller/state/initialization.js';
import { SqliteStateStore } from '../../../src/controller/state/sqlite-state-store.js';
import type { JobFilter, JobRecord } from '../../../src/controller/state-store.js';
import { CPU_SMALL, jobSpec } from '../controller-fixtures.js';

/**
 * "Does the state hold any jobs, and how many" is asked at every start (the empty-state guard, the quick start's
 * --submit) of a state that may hold a long history: it is answered by counting, never by reading every job.
 */

/** A real SQLite state that records each time every job of it is read. */
class JobReadsRecordingStore extends SqliteStateStore {
  jobListings = 0;
  override listJobs(filter?: JobFilter): JobRecord[] {
    this.jobListings++;
    return super.listJobs(filter);
  }
}

let dir = '';
let store: JobReadsRecordingStore;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'fw-job-count-'));
  store = new JobReadsRecordingStore(join(dir, 'state.db'));
});

afterEach(() => {
  vi.restoreAllMocks();
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('whether a state holds jobs', () => {
  it('an unmarked state is empty until it holds a job, and saying so reads no job', () => {
    expect(isEmptyState(store)).toBe(true);
    for (const name of ['a', 'b', 'c']) store.submitJob(jobSpec(name, CPU_SMALL));
    expect(isEmptyState(store)).toBe(false);
    expect(store.jobListings).toBe(0);
    // A marked state is not empty whatever it holds (the mark is read first).
    store.setValue(CLUSTER_INITIALIZED_KEY, { clusterName: 'c', how: 'new', atSeconds: 1 });
    expect(isEmptyState(store)).toBe(false);
  });

  it("the quick start's --submit names how many jobs the state holds, submits nothing, and reads no job", async () => {
    for (const name of ['a', 'b', 'c']) store.submitJob(jobSpec(name, CPU_SMALL));
    const written: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    await submitOnStart({
      files: ['examples/jobs/resnet.yaml'],
      apiUrl: 'http://127.0.0.1:1',
      adminToken: 'unused-admin-token-0123456789abcdef',
      store,
    });
    expect(written.join('')).toBe(
      'not submitting examples/jobs/resnet.yaml: the state already has 3 job(s) (fleetwise jobs lists them)\n',
    );
    expect(store.jobListings).toBe(0);
    expect(store.countJobs()).toBe(3);
  });
});
