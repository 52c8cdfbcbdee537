import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { secretFilesIn } from '../../src/cli/commands/controller/secrets.js';
import { JobArchive } from '../../src/controller/backup/job-archive.js';
import { restoreState } from '../../src/controller/backup/restore-state.js';
import { StateBackup } from '../../src/controller/backup/state-backup.js';
import { SystemClock } from '../../src/controller/clock.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { JobRecord, JobState } from '../../src/controller/state-store.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { openObjectStore } from '../../src/storage/open-object-store.js';
import { recordingLogger, until } from './backup-fixtures.js';
import { catalog, CPU_SMALL, jobSpec } from './controller-fixtures.js';

/**
 * A job the job archive says ended after the backup is restored ended by the same rule as a job ended by request
 * (job-end.ts): its tasks end with it. A task left `pending` under an ended job would never start, yet count as
 * waiting for good (`fleetwise_tasks{state="pending"}`, the job's view).
 */

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-restore-ended-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let counter = 0;

/** An old box: its state, the backup it takes and the job archive it writes, in an object store on disk. */
class OldBox {
  readonly dir = join(scratch, `old-${++counter}`);
  readonly objectsDir = join(this.dir, 'objects');
  readonly objects = new FsObjectStore(this.objectsDir);
  readonly state: SqliteStateStore;
  readonly backup: StateBackup;
  readonly archive = new JobArchive({
    objectStore: this.objects,
    cluster: 'prod',
    clock: new SystemClock(),
    log: recordingLogger(),
  });

  constructor() {
    mkdirSync(join(this.dir, 'state'), { recursive: true });
    this.state = new SqliteStateStore(join(this.dir, 'state', 'state.db'));
    this.backup = new StateBackup({
      source: this.state,
      objectStore: this.objects,
      cluster: 'prod',
      workDir: join(this.dir, 'state', 'backup-tmp'),
      keep: 10,
      secrets: () => ({ version: 1 }),
      nowSeconds: () => Date.now() / 1000,
    });
  }

  async submit(spec: JobSpec): Promise<JobRecord> {
    const job = this.state.submitJob(spec);
    await this.archive.keepSubmitted(job, undefined, { ofArray: spec.arrayProperties?.index !== undefined });
    return job;
  }

  /** The job ends along `path` with `reason` at its end, and the archive keeps how. */
  async end(id: string, path: readonly JobState[], reason?: string): Promise<void> {
    let job = this.state.getJob(id) as JobRecord;
    for (const [i, state] of path.entries())
      job = this.state.setJobState(id, state, i === path.length - 1 ? reason : undefined);
    this.archive.keepEnded(job);
    await until(`the end of ${id} archived`, () => (this.archive.pendingEndCount === 0 ? true : undefined));
  }

  /** The box is lost; a new one restores from the object store. */
  async restore(): Promise<SqliteStateStore> {
    this.state.close();
    const dir = join(scratch, `new-${++counter}`);
    mkdirSync(dir, { recursive: true });
    await restoreState({
      from: this.objectsDir,
      cluster: 'prod',
      dbFile: join(dir, 'state.db'),
      secretFiles: secretFilesIn(dir),
      openObjectStore: (location) => openObjectStore(location),
      catalog,
    });
    return new SqliteStateStore(join(dir, 'state.db'));
  }
}

const restoredNote = (job: JobRecord): string =>
  `ended ${new Date((job.finishedAtSeconds as number) * 1000).toISOString()}, after the backup restored; ` +
  'from the job archive';

describe('a job restored as ended from the job archive', () => {
  it('ends its tasks with it: none left pending, a placed one asked to stop, its pending start failed', async () => {
    const box = new OldBox();
    await box.submit(jobSpec('waits', CPU_SMALL)); // job-1: queued in the backup, cancelled after it
    await box.submit(jobSpec('queued-then-ran', CPU_SMALL, { replicas: 2 })); // job-2: queued, then ran and succeeded
    // job-3: starting in the backup, one task on its instance and a start there still to do; it failed after.
    const gang = await box.submit(jobSpec('gang', CPU_SMALL, { replicas: 2 }));
    const inst = box.state.createInstance({ typeName: 'c7i.2xlarge' });
    box.state.setInstanceState(inst.id, 'launching', { cloudId: 'i-0123' });
    box.state.setInstanceState(inst.id, 'running');
    box.state.setJobState(gang.id, 'starting');
    box.state.setTaskState('job-3.0', 'starting', inst.id);
    box.state.setTaskState('job-3.0', 'running');
    const start = box.state.recordIntent({
      kind: 'start-task',
      payload: { taskId: 'job-3.1', instanceId: inst.id },
    });
    box.state.setTaskState('job-3.1', 'starting', inst.id);
    await box.submit(jobSpec('stays', CPU_SMALL)); // job-4: queued in the backup and after it
    await box.backup.run();

    await box.submit(jobSpec('late-and-done', CPU_SMALL)); // job-5: accepted and succeeded after the backup
    await box.end('job-1', ['cancelled']);
    await box.end('job-2', ['starting', 'running', 'succeeded']);
    await box.end('job-3', ['failed'], 'task job-3.0 failed: exit code 3');
    await box.end('job-5', ['starting', 'running', 'succeeded']);

    const restored = await box.restore();
    expect(restored.listJobs().map((j) => [j.id, j.state])).toEqual([
      ['job-1', 'cancelled'],
      ['job-2', 'succeeded'],
      ['job-3', 'failed'],
      ['job-4', 'queued'],
      ['job-5', 'succeeded'],
    ]);
    // Only the job still queued waits to be placed; the ended jobs' tasks never placed ended with them.
    expect(restored.listTasks({ states: ['pending'] }).map((t) => t.id)).toEqual(['job-4.0']);
    for (const id of ['job-1.0', 'job-2.0', 'job-2.1', 'job-5.0'])
      expect([id, restored.getTask(id)?.state]).toEqual([id, 'stopped']);
    // The failed job's placed tasks are asked to stop (no checkpoint: it ended), and its start is never carried out.
    expect(restored.getIntent(start.id)?.state).toBe('failed');
    expect(
      restored
        .listIntents({ states: ['pending'], kind: 'stop-task' })
        .map((i) =>
          i.kind === 'stop-task' ? [i.payload.taskId, i.payload.instanceId, i.payload.checkpoint] : [],
        ),
    ).toEqual([
      ['job-3.0', inst.id, false],
      ['job-3.1', inst.id, false],
    ]);
    restored.close();
  });

  it('withdraws the jobs of an array the loss cut short with their tasks', async () => {
    const box = new OldBox();
    await box.backup.run();
    const sweep = (index: number): JobSpec => ({
      ...jobSpec('sweep', CPU_SMALL),
      arrayProperties: { size: 2, index },
    });
    await box.submit(sweep(0)); // job-1
    box.state.submitJob(sweep(1)); // job-2: stored, the box lost before its spec was archived
    const restored = await box.restore();
    expect(restored.listJobs().map((j) => [j.id, j.state])).toEqual([['job-1', 'cancelled']]);
    expect(restored.listTasks({ jobId: 'job-1' }).map((t) => [t.id, t.state])).toEqual([
      ['job-1.0', 'stopped'],
    ]);
    restored.close();
  });

  it('says why it ended once: the reason it ended with, if any, and when, never its state again', async () => {
    const box = new OldBox();
    await box.submit(jobSpec('runs', CPU_SMALL)); // job-1: succeeds after the backup, no reason given
    await box.submit(jobSpec('waits', CPU_SMALL)); // job-2: cancelled after the backup, by request
    await box.backup.run();
    await box.end('job-1', ['starting', 'running', 'succeeded']);
    await box.end('job-2', ['cancelled'], 'cancelled by request');

    const restored = await box.restore();
    const succeeded = restored.getJob('job-1') as JobRecord;
    expect(succeeded.reason).toBe(restoredNote(succeeded));
    const cancelled = restored.getJob('job-2') as JobRecord;
    expect(cancelled.reason).toBe(`cancelled by request (${restoredNote(cancelled)})`);
    // As the job's view shows it (`state (reason)`): the state once.
    expect(`${succeeded.state} (${succeeded.reason})`).not.toMatch(/succeeded \(succeeded/);
    restored.close();
  });
});
