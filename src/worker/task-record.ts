import { mkdir, open, readdir, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { checkpointKeys } from '../protocol/object-keys.js';
import { HOST_FAULT_KINDS } from '../protocol/worker-protocol.js';
import type { CheckpointManifest } from './checkpoints.js';
import type { CheckpointWatcher } from './checkpoint-watcher.js';
import type { TaskLaunch } from './executor.js';
import type { ProgressTracker } from './progress.js';
import type { TaskLogShipper } from './task-log.js';

/** What the agent knows of each task on this host, and the part of it that survives the agent's own restarts. */

/** What the agent remembers of a task across its own restarts (`<task dir>/agent.json`). */
const persistedSchema = z.object({
  jobId: z.string(),
  phase: z.enum(['starting', 'ready', 'running', 'checkpointing', 'stopped', 'succeeded', 'failed']),
  startedAtMs: z.number(),
  stopRequested: z.boolean(),
  exitCode: z.number().optional(),
  /**
   * When it exited (epoch ms), as its exit record says: kept so that a restarted worker still reports the exit's age
   * from when it exited, not from when a controller came to hear of it.
   */
  exitedAtMs: z.number().optional(),
  reason: z.string().optional(),
  /**
   * Its start failed because of this host, not its job (host-fault.ts): kept so that a restarted worker still reports
   * the failure as the host's, and the controller does not count it against the job.
   */
  hostFault: z.enum(HOST_FAULT_KINDS).optional(),
  restoredFrom: z.string().optional(),
  checkpoint: z.object({ key: z.string(), atSeconds: z.number() }).optional(),
  signal: z.string().optional(),
  timeoutSeconds: z.number().optional(),
  attempt: z.number().optional(),
  /** The iterations its job declares (a task adopted after it exited during a stop may have done them all). */
  total: z.number().optional(),
  /**
   * The most iterations it had done when an exit was taken for a stop from outside (task-exit.ts
   * stoppedOutside), and how many such stops in a row got no further than that: a run that resumes here after one
   * is a rerun, and one that keeps ending without getting further is taken at its word.
   */
  stoppedOutsideAt: z.number().optional(),
  outsideStops: z.number().int().nonnegative().optional(),
  /**
   * The stops from outside its attempt (`attempt`) has had on this host, got further or not: bounded per attempt
   * (outside-stops.ts), and reported for the controller to record each as a restart. Kept here so that it only grows
   * within an attempt: a worker that restarts goes on counting, and a stop after the restart is not taken for a
   * repeat of the one before.
   */
  attemptOutsideStops: z.number().int().nonnegative().optional(),
  /** How far the log's stored segments reach, with the executor's note to find that point again (task-log.ts). */
  logPosition: z.object({ bytes: z.number(), resume: z.string().optional() }).optional(),
});
export type PersistedTask = z.infer<typeof persistedSchema>;

export interface LocalTask extends PersistedTask {
  readonly taskId: string;
  watcher?: CheckpointWatcher | undefined;
  progress?: ProgressTracker | undefined;
  completed?: number | undefined;
  perSecond?: number | undefined;
  busy?: Promise<void> | undefined;
  /** The latest write of this record (task-lifecycle.ts persists one at a time). */
  persisting?: Promise<void> | undefined;
  lastLogUploadMs: number;
  /** When the log position was last saved with the record (task-log-uploads.ts saves it at most once a minute). */
  lastLogPositionPersistMs?: number | undefined;
  /** The task's log uploads, chained (the newest settles last); undefined before the first. */
  logUploads?: Promise<void> | undefined;
  /** Ships this run's output (created with the first upload; a restarted agent's resumes from the store). */
  logShipper?: TaskLogShipper | undefined;
  /** A periodic log upload is under way (at most one at a time). */
  shippingLog?: boolean | undefined;
  /** Co-start: the prepared start, held (phase `ready`) until the controller releases the task's job. */
  prepared?: TaskLaunch | undefined;
}

let writes = 0;

/** Write the task's record to `<taskDir>/agent.json`, atomically (a crash leaves the old record or the new one). */
export async function persistTask(taskDir: string, t: LocalTask): Promise<void> {
  const data: PersistedTask = {
    jobId: t.jobId,
    phase: t.phase,
    startedAtMs: t.startedAtMs,
    stopRequested: t.stopRequested,
    ...(t.exitCode === undefined ? {} : { exitCode: t.exitCode }),
    ...(t.exitedAtMs === undefined ? {} : { exitedAtMs: t.exitedAtMs }),
    ...(t.reason === undefined ? {} : { reason: t.reason }),
    ...(t.hostFault === undefined ? {} : { hostFault: t.hostFault }),
    ...(t.restoredFrom === undefined ? {} : { restoredFrom: t.restoredFrom }),
    ...(t.checkpoint === undefined ? {} : { checkpoint: t.checkpoint }),
    ...(t.signal === undefined ? {} : { signal: t.signal }),
    ...(t.timeoutSeconds === undefined ? {} : { timeoutSeconds: t.timeoutSeconds }),
    ...(t.attempt === undefined ? {} : { attempt: t.attempt }),
    ...(t.total === undefined ? {} : { total: t.total }),
    ...(t.stoppedOutsideAt === undefined ? {} : { stoppedOutsideAt: t.stoppedOutsideAt }),
    ...(t.outsideStops === undefined ? {} : { outsideStops: t.outsideStops }),
    ...(t.attemptOutsideStops === undefined ? {} : { attemptOutsideStops: t.attemptOutsideStops }),
    ...(t.logPosition === undefined ? {} : { logPosition: t.logPosition }),
  };
  const path = join(taskDir, 'agent.json');
  // A temporary file of its own per write: two writes at once must not rename each other's file away.
  writes += 1;
  const temp = `${path}.${process.pid}.${writes}.tmp`;
  await mkdir(taskDir, { recursive: true });
  // Synced before the rename: after a power loss the rename alone may land with an empty file behind it.
  const file = await open(temp, 'w');
  try {
    await file.writeFile(JSON.stringify(data));
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(temp, path);
}

/** Every task directory under `tasksDir` with its record: undefined for one whose record is missing or unreadable. */
export async function readPersistedTasks(tasksDir: string): Promise<Map<string, PersistedTask | undefined>> {
  let names: string[];
  try {
    names = await readdir(tasksDir);
  } catch {
    return new Map();
  }
  const out = new Map<string, PersistedTask | undefined>();
  for (const name of names.sort()) out.set(name, await readPersistedTask(join(tasksDir, name)));
  return out;
}

/** The task's record, or undefined when there is none or it cannot be read. */
export async function readPersistedTask(taskDir: string): Promise<PersistedTask | undefined> {
  try {
    const parsed = persistedSchema.safeParse(JSON.parse(await readFile(join(taskDir, 'agent.json'), 'utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** The newest checkpoint as the task reports it: the manifest's object key and when it was taken. */
export function checkpointOf(
  ref: { jobId: string; taskId: string },
  manifest: CheckpointManifest,
): { key: string; atSeconds: number } {
  return {
    key: checkpointKeys(ref, manifest.seq).manifest,
    atSeconds: Date.parse(manifest.createdAt) / 1000,
  };
}

/** A task as its record on this host describes it. */
export function taskFromRecord(taskId: string, saved: PersistedTask): LocalTask {
  return {
    taskId,
    jobId: saved.jobId,
    phase: saved.phase,
    startedAtMs: saved.startedAtMs,
    stopRequested: saved.stopRequested,
    exitCode: saved.exitCode,
    exitedAtMs: saved.exitedAtMs,
    reason: saved.reason,
    hostFault: saved.hostFault,
    restoredFrom: saved.restoredFrom,
    checkpoint: saved.checkpoint,
    signal: saved.signal,
    timeoutSeconds: saved.timeoutSeconds,
    attempt: saved.attempt,
    total: saved.total,
    stoppedOutsideAt: saved.stoppedOutsideAt,
    outsideStops: saved.outsideStops,
    attemptOutsideStops: saved.attemptOutsideStops,
    logPosition: saved.logPosition,
    lastLogUploadMs: 0,
  };
}
