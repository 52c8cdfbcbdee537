import { z } from 'zod';

/**
 * Where, in its work directory (a local instance's directory), a worker that gave up or was retired records when it
 * exited: in local mode no controller saw it go, and the local provider ends its instance then rather than when a
 * controller next notices. The worker writes it (worker/worker-exit-file.ts), the local provider and local stops read it
 * (cloud/local/worker-exit-record.ts).
 */
export const WORKER_EXIT_FILE = 'worker-exit.json';

/** What a worker recorded of its exit. */
export const workerExitSchema = z.object({
  exitedAtMs: z.number().finite(),
  /**
   * gave-up: no controller answered for its give-up time; it checkpointed and stopped its tasks first.
   * retired: the controller answered that it had replaced the instance (HTTP 410, worker/retirement.ts); it killed
   * its tasks without a checkpoint, as the controller had resumed them elsewhere from their last ones.
   */
  reason: z.enum(['gave-up', 'retired']),
});
export type WorkerExit = z.output<typeof workerExitSchema>;
