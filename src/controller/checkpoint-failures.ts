import { addJobWarning, removeJobWarning } from './execution-check.js';
import type { ControllerLogger } from './seams.js';
import type { InstanceRecord, StateStore, TaskRecord } from './state-store.js';

/** The job view's warning when a move's checkpoint did not reach the store (the newest one is kept). */
const CHECKPOINT_NOT_UPLOADED = 'checkpoint not uploaded at a move:';
/** The job view's warning when a running task's checkpoints cannot be uploaded (TaskReport.checkpointError). */
const CHECKPOINT_NOT_PACKED = 'checkpoint not uploaded while running:';

/** Checkpoints that workers report they could not upload: the events recorded, and the warnings in the job's view. */
export class CheckpointFailures {
  /** Task → the checkpoint error its worker reports, told to the job's owner once (TaskReport.checkpointError). */
  private readonly checkpointErrors = new Map<string, string>();
  /** Tasks whose reports said no checkpoint error, and whose job view holds no such warning of theirs. */
  private readonly checkpointsClean = new Set<string>();

  constructor(
    private readonly store: StateStore,
    private readonly log: ControllerLogger,
  ) {}

  /** A task stopped for a move without uploading its checkpoint, for `reason` (told once per stop by the caller). */
  notUploadedAtMove(task: TaskRecord, inst: InstanceRecord, reason: string): void {
    this.checkpointFailed(task, inst, CHECKPOINT_NOT_UPLOADED, reason);
    this.log.warn(`task ${task.id} stopped without its checkpoint: ${reason}`);
  }

  /**
   * A running task's checkpoints cannot be uploaded (its worker's `checkpointError`): the task goes on, but a lost
   * instance or a move would cost it the work since its last upload, so the job's owner hears why, once per reason,
   * unless the report of its stop without a checkpoint says it already. A report without it (an upload succeeded
   * since) ends it: should it come back, it is told again.
   */
  noteError(task: TaskRecord, inst: InstanceRecord, error: string | undefined, toldByStop: boolean): void {
    if (error === undefined) {
      // Over (an upload succeeded since), or not known in this process (a restarted controller): the view's warning
      // of this task goes, once.
      if (this.checkpointsClean.has(task.id)) return;
      this.checkpointErrors.delete(task.id);
      this.checkpointsClean.add(task.id);
      removeJobWarning(this.store, task.jobId, `${CHECKPOINT_NOT_PACKED} task ${task.id}:`);
      return;
    }
    this.checkpointsClean.delete(task.id);
    if (this.checkpointErrors.get(task.id) === error) return;
    this.checkpointErrors.set(task.id, error);
    if (toldByStop) return;
    this.checkpointFailed(
      task,
      inst,
      CHECKPOINT_NOT_PACKED,
      `${error}; it runs on, and would resume from its last uploaded checkpoint (tried again once its checkpoint ` +
        'directory changes)',
    );
    this.log.warn(`task ${task.id}: its checkpoints cannot be uploaded: ${error}`);
  }

  /** A `task.checkpoint-failed` event, and the job view's warning of that `kind` (the newest one kept). */
  private checkpointFailed(task: TaskRecord, inst: InstanceRecord, kind: string, reason: string): void {
    const message = `task ${task.id}: ${reason}`;
    this.store.appendEvent({
      kind: 'task.checkpoint-failed',
      jobId: task.jobId,
      taskId: task.id,
      instanceId: inst.id,
      message,
    });
    addJobWarning(this.store, task.jobId, kind, message);
  }
}
