import { describe, expect, it } from 'vitest';
import { buildSnapshot, readSnapshotInputs } from '../../src/controller/snapshot.js';
import type {
  TaskControl,
  TaskStartRequest,
  TaskStatus,
  TaskStopRequest,
} from '../../src/controller/seams.js';
import { CPU_SMALL, handPlan, jobSpec, reconcilerFor, rig } from './controller-fixtures.js';

/**
 * A gang job a plan sends back to the queue while its instances stay (a WFQ preemption, a cap cut) stops task by
 * task: the first task's checkpoint is done while its sibling's still uploads, and the job stays `migrating` (pinned)
 * until the last one stops. The round must see it pinned with only the task that still holds its instance: shown
 * with the stopped task unplaced, every scheduler placed that task somewhere, a move of a pinned job the diff
 * refuses, and no job was placed anywhere until the upload ended.
 */

/** Task control whose stops each task answers as set (default: stopped at once). */
class SlowUploads implements TaskControl {
  readonly name = 'slow-uploads';
  /** Tasks whose checkpoint is still uploading: their stop stays under way. */
  readonly uploading = new Set<string>();
  readonly starts: string[] = [];
  async start(r: TaskStartRequest): Promise<void> {
    this.starts.push(`${r.task.id} on ${r.instance.id}`);
  }
  async stop(r: TaskStopRequest): Promise<'stopped' | 'pending'> {
    return this.uploading.has(r.task.id) ? 'pending' : 'stopped';
  }
  async status(): Promise<TaskStatus> {
    return 'running';
  }
}

describe('a gang job half checkpointed back to the queue', () => {
  it('rounds go on meanwhile, its room is not planned for others, and it is placed whole once stopped', async () => {
    const control = new SlowUploads();
    const r = rig({}, { tasks: control });
    const pair = r.controller.submit(jobSpec('pair', CPU_SMALL, { replicas: 2 }), 'research');
    const keep = r.controller.submit(jobSpec('keep', CPU_SMALL), 'research');
    const [t0, t1] = [`${pair.id}.0`, `${pair.id}.1`];
    await r.controller.runRound();
    expect(r.store.getJob(pair.id)?.state).toBe('running');
    const host0 = r.store.getTask(t0)?.instanceId as string;
    const host1 = r.store.getTask(t1)?.instanceId as string;
    const keepHost = r.store.getTask(`${keep.id}.0`)?.instanceId as string;
    expect(new Set([host0, host1, keepHost]).size).toBe(3);

    // A plan sends the pair back to the queue and keeps its instances; t1's checkpoint takes a while to upload.
    control.uploading.add(t1);
    const { plan, diff } = handPlan(r, {
      instances: [
        { id: host0, typeName: 'c7i.xlarge', isNew: false, taskIds: [] },
        { id: host1, typeName: 'c7i.xlarge', isNew: false, taskIds: [] },
        { id: keepHost, typeName: 'c7i.xlarge', isNew: false, taskIds: [`${keep.id}.0`] },
      ],
    });
    expect(diff.queuedJobIds).toEqual([pair.id]);
    const reconciler = reconcilerFor(r, control);
    reconciler.applyPlan(plan, diff);
    await reconciler.progress();
    expect(r.store.getJob(pair.id)?.state).toBe('migrating');
    expect(r.store.getTask(t0)).toMatchObject({ state: 'stopped' });
    expect(r.store.getTask(t1)).toMatchObject({ state: 'checkpointing', instanceId: host1 });

    // A job arrives meanwhile: the round places it (before, the round threw and placed nothing), not on host1.
    const fresh = r.controller.submit(jobSpec('fresh', CPU_SMALL), 'research');
    r.clock.advance(30);
    await r.controller.runRound();
    const freshHost = r.store.getTask(`${fresh.id}.0`)?.instanceId;
    expect(r.store.getJob(fresh.id)?.state).toBe('running');
    expect(freshHost).toBeDefined();
    expect(freshHost).not.toBe(host1);
    // Nothing of the pair started while it stops.
    expect(control.starts.filter((s) => s.startsWith(pair.id))).toEqual([
      `${t0} on ${host0}`,
      `${t1} on ${host1}`,
    ]);
    expect(r.store.getJob(pair.id)?.state).toBe('migrating');
    // The rounds see the pair pinned with t1 alone, where it still holds its instance.
    const snapshot = buildSnapshot(readSnapshotInputs(r.store, r.clock.nowSeconds()));
    expect(snapshot.jobs.find((j) => j.id === pair.id)).toMatchObject({
      reconfigurable: false,
      taskIds: [t1],
    });
    expect(snapshot.tasks.filter((t) => t.jobId === pair.id)).toEqual([
      expect.objectContaining({ id: t1, instanceId: host1 }),
    ]);

    // The upload ends: the pair goes back to the queue and the next round places it whole.
    control.uploading.delete(t1);
    r.clock.advance(30);
    await r.controller.runRound();
    expect(r.store.getJob(pair.id)?.state).toBe('running');
    expect(control.starts.filter((s) => s.startsWith(pair.id))).toHaveLength(4);
  });
});
