import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import type { JobRecord } from '../../src/controller/state-store.js';
import { CPU_SMALL, jobSpec } from './controller-fixtures.js';
import { RestoreCluster } from './restore-cluster.js';

/**
 * A job the job archive says ended after the backup is restored ended by the same rule as a job ended by request
 * (job-end.ts): its tasks end with it. A task left `pending` under an ended job would never start, yet count as
 * waiting for good (`fleetwise_tasks{state="pending"}`, the job's view).
 */

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-restore-ended-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The old box is lost; a new one restores from its object store: the new box's state. */
async function restoreBox(box: RestoreCluster): Promise<SqliteStateStore> {
  box.state.close();
  const { dir } = await box.restore(box.objectsDir);
  return new SqliteStateStore(join(dir, 'state.db'));
}

const restoredNote = (job: JobRecord): string =>
  `ended ${new Date((job.finishedAtSeconds as number) * 1000).toISOString()}, after the backup restored; ` +
  'from the job archive';

describe('a job restored as ended from the job archive', () => {
  it('ends its tasks with it: none left pending, a placed one asked to stop, its pending start failed', async () => {
    const box = new RestoreCluster(scratch);
    await box.submit('waits'); // job-1: queued in the backup, cancelled after it
    // job-2: queued, then ran and succeeded
    await box.submit('queued-then-ran', jobSpec('queued-then-ran', CPU_SMALL, { replicas: 2 }));
    // job-3: starting in the backup, one task on its instance and a start there still to do; it failed after.
    const gang = await box.submit('gang', jobSpec('gang', CPU_SMALL, { replicas: 2 }));
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
    await box.submit('stays'); // job-4: queued in the backup and after it
    await box.backup.run();

    await box.submit('late-and-done'); // job-5: accepted and succeeded after the backup
    await box.end('job-1', ['cancelled']);
    await box.end('job-2', ['starting', 'running', 'succeeded']);
    await box.end('job-3', ['failed'], 'task job-3.0 failed: exit code 3');
    await box.end('job-5', ['starting', 'running', 'succeeded']);

    const restored = await restoreBox(box);
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
    const box = new RestoreCluster(scratch);
    await box.backup.run();
    const sweep = (index: number): JobSpec => ({
      ...jobSpec('sweep', CPU_SMALL),
      arrayProperties: { size: 2, index },
    });
    await box.submit(sweep(0).name, sweep(0)); // job-1
    box.state.submitJob(sweep(1)); // job-2: stored, the box lost before its spec was archived
    const restored = await restoreBox(box);
    expect(restored.listJobs().map((j) => [j.id, j.state])).toEqual([['job-1', 'cancelled']]);
    expect(restored.listTasks({ jobId: 'job-1' }).map((t) => [t.id, t.state])).toEqual([
      ['job-1.0', 'stopped'],
    ]);
    restored.close();
  });

  it('says why it ended once: the reason it ended with, if any, and when, never its state again', async () => {
    const box = new RestoreCluster(scratch);
    await box.submit('runs'); // job-1: succeeds after the backup, no reason given
    await box.submit('waits'); // job-2: cancelled after the backup, by request
    await box.backup.run();
    await box.end('job-1', ['starting', 'running', 'succeeded']);
    await box.end('job-2', ['cancelled'], 'cancelled by request');

    const restored = await restoreBox(box);
    const succeeded = restored.getJob('job-1') as JobRecord;
    expect(succeeded.reason).toBe(restoredNote(succeeded));
    const cancelled = restored.getJob('job-2') as JobRecord;
    expect(cancelled.reason).toBe(`cancelled by request (${restoredNote(cancelled)})`);
    // As the job's view shows it (`state (reason)`): the state once.
    expect(`${succeeded.state} (${succeeded.reason})`).not.toMatch(/succeeded \(succeeded/);
    restored.close();
  });
});
