import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { JobArchive } from '../../src/controller/backup/job-archive.js';
import {
  restoreState,
  type RestoreOptions,
  type RestoreSummary,
} from '../../src/controller/backup/restore-state.js';
import { StateBackup } from '../../src/controller/backup/state-backup.js';
import { SystemClock } from '../../src/controller/clock.js';
import {
  recordSubmissionKey,
  requestHashOf,
  WITHDRAWN_AT_SUBMISSION,
} from '../../src/controller/submission-keys.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { JobRecord, JobState } from '../../src/controller/state-store.js';
import { secretFilesIn } from '../../src/cli/commands/controller/secrets.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { openObjectStore } from '../../src/storage/open-object-store.js';
import { recordingLogger, until } from './backup-fixtures.js';
import { catalog, CPU_SMALL, jobSpec } from './controller-fixtures.js';

/** Directories made so far, for names of their own under a test file's root. */
let counter = 0;

/**
 * A controller's state and object store, with the backup and the job archive the controller would run, in a directory
 * of its own under `root`; `restore` makes a new box beside it.
 */
export class RestoreCluster {
  readonly dir: string;
  readonly objectsDir: string;
  readonly objects: FsObjectStore;
  readonly state: SqliteStateStore;
  readonly backup: StateBackup;
  readonly archive: JobArchive;

  /** `nowSeconds`: the old box's clock, to tell its times from the restore's. */
  constructor(
    private readonly root: string,
    nowSeconds?: () => number,
  ) {
    this.dir = join(root, `cluster-${++counter}`);
    this.objectsDir = join(this.dir, 'objects');
    this.objects = new FsObjectStore(this.objectsDir);
    this.archive = new JobArchive({
      objectStore: this.objects,
      cluster: 'prod',
      clock: new SystemClock(),
      log: recordingLogger(),
    });
    mkdirSync(join(this.dir, 'state'), { recursive: true });
    this.state = new SqliteStateStore(join(this.dir, 'state', 'state.db'), {
      ...(nowSeconds === undefined ? {} : { nowSeconds }),
    });
    this.backup = new StateBackup({
      source: this.state,
      objectStore: this.objects,
      cluster: 'prod',
      workDir: join(this.dir, 'state', 'backup-tmp'),
      keep: 10,
      secrets: () => ({
        version: 1,
        workerToken: 'the-worker-token',
        adminToken: 'the-admin-token',
        metricsToken: 'the-metrics-token',
      }),
      nowSeconds: () => Date.now() / 1000,
    });
  }

  /** A submission as the API makes it: stored (with its idempotency key, if any), then archived before its answer. */
  async submit(name: string, spec: JobSpec = jobSpec(name, CPU_SMALL), key?: string): Promise<JobRecord> {
    const submissionKey =
      key === undefined ? undefined : { team: spec.team, key, requestHash: requestHashOf(spec) };
    const job = this.state.transaction(() => {
      const made = this.state.submitJob(spec);
      if (submissionKey !== undefined) recordSubmissionKey(this.state, submissionKey, [made]);
      return made;
    });
    // A job with an index stands for one of an array submission here, as the API archives those.
    await this.archive.keepSubmitted(job, submissionKey, {
      ofArray: spec.arrayProperties?.index !== undefined,
    });
    return job;
  }

  /**
   * A job ends as the controller ends it: the store, then the archive in the background. Its end has `reason`, or for
   * a failure `exit code 3`.
   */
  async end(id: string, path: readonly JobState[], reason?: string): Promise<void> {
    let job = this.state.getJob(id) as JobRecord;
    for (const [i, state] of path.entries())
      job = this.state.setJobState(
        id,
        state,
        i === path.length - 1 ? (reason ?? (state === 'failed' ? 'exit code 3' : undefined)) : undefined,
      );
    this.archive.keepEnded(job);
    await until(`the end of ${id} archived`, () => (this.archive.pendingEndCount === 0 ? true : undefined));
  }

  /** A job withdrawn as the API withdraws one its archive did not take, its end archived. */
  async withdraw(id: string): Promise<void> {
    this.archive.keepEnded(
      this.state.setJobState(id, 'cancelled', `${WITHDRAWN_AT_SUBMISSION}: the object store did not take it`),
    );
    await until(`the withdrawal of ${id} archived`, () =>
      this.archive.pendingEndCount === 0 ? true : undefined,
    );
  }

  /** A new box: an empty state directory, restored from `from`. */
  async restore(
    from: string,
    overrides: Partial<RestoreOptions> = {},
  ): Promise<{ dir: string; summary: RestoreSummary }> {
    const dir = join(this.root, `restored-${++counter}`);
    mkdirSync(dir, { recursive: true });
    const summary = await restoreState({
      from,
      cluster: 'prod',
      dbFile: join(dir, 'state.db'),
      secretFiles: secretFilesIn(dir),
      openObjectStore: (location) => openObjectStore(location),
      catalog,
      ...overrides,
    });
    return { dir, summary };
  }
}
