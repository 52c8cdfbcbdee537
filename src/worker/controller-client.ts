import { z } from 'zod';
import { CHECKPOINT_SIGNALS } from '../controller/job-spec/spec.js';

/**
 * The worker protocol (issue "Worker agent and task execution"), level-triggered over HTTP:
 *
 *   POST /v1/workers/register   bearer: the cluster's worker token (user data / local provider); body names the
 *                               instance by its cloud id. Answers a per-instance token (stored hashed by the
 *                               controller), the controller's instance id and where checkpoints and logs go.
 *   POST /v1/workers/heartbeat  bearer: the per-instance token. Body: every task the worker has, with its state,
 *                               progress and latest uploaded checkpoint. Answer: the tasks the controller wants on the
 *                               instance and what to do with each (run, possibly restoring; checkpoint and stop; stop).
 *
 * Nothing is an edge-triggered command: a lost request or a restarted worker or controller converges on the next
 * heartbeat. The schemas here are shared by the agent (client) and the controller (routes-workers.ts).
 */

const taskId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'a task id like job-7.0');

export const registerRequestSchema = z.strictObject({
  /** The cloud's id of the instance (EC2 i-…, or the local provider's local-…). */
  instanceId: z.string().min(1).max(128),
  executor: z.enum(['docker', 'process']),
  hostname: z.string().max(255).optional(),
});
export type RegisterRequest = z.infer<typeof registerRequestSchema>;

export const registerResponseSchema = z.object({
  /** The controller's record id (`inst-3`). */
  instanceId: z.string(),
  /** The per-instance bearer token for heartbeats. */
  workerToken: z.string().min(16),
  heartbeatSeconds: z.number().positive(),
  /** `s3://bucket/prefix` or a directory: checkpoints and task logs go there. */
  objectStore: z.string().min(1),
});
export type RegisterResponse = z.infer<typeof registerResponseSchema>;

export const REPORTED_TASK_STATES = [
  'starting',
  'running',
  'checkpointing',
  'stopped',
  'succeeded',
  'failed',
] as const;
export type ReportedTaskState = (typeof REPORTED_TASK_STATES)[number];

export const taskReportSchema = z.strictObject({
  taskId,
  state: z.enum(REPORTED_TASK_STATES),
  exitCode: z.number().int().optional(),
  /** Why a task failed (exit code, the last lines of its output, a start error). */
  reason: z.string().max(4000).optional(),
  /** Iterations completed so far (from the task's progress file), absolute. */
  completedIterations: z.number().nonnegative().optional(),
  /** Iterations per second over the worker's window; absent until the window has enough samples. */
  throughputPerSecond: z.number().nonnegative().optional(),
  /** The newest checkpoint of this task uploaded to the object store. */
  checkpoint: z.strictObject({ key: z.string().min(1).max(1024), atSeconds: z.number() }).optional(),
  /** The checkpoint this run restored, if any. */
  restoredFrom: z.string().max(1024).optional(),
});
export type TaskReport = z.infer<typeof taskReportSchema>;

export const heartbeatRequestSchema = z.strictObject({
  tasks: z.array(taskReportSchema).max(256),
});
export type HeartbeatRequest = z.infer<typeof heartbeatRequestSchema>;

export const taskLaunchSpecSchema = z.object({
  image: z.string().optional(),
  build: z.object({ context: z.string(), dockerfile: z.string().optional() }).optional(),
  command: z.array(z.string()),
  env: z.record(z.string(), z.string()),
  vcpus: z.number().positive(),
  memoryGiB: z.number().nonnegative(),
  gpus: z.number().int().nonnegative(),
  shmSizeGiB: z.number().nonnegative(),
});
export type TaskLaunchSpec = z.infer<typeof taskLaunchSpecSchema>;

export const DESIRED_ACTIONS = ['run', 'checkpoint-stop', 'stop'] as const;
export type DesiredAction = (typeof DESIRED_ACTIONS)[number];

export const desiredTaskSchema = z.object({
  taskId,
  jobId: z.string(),
  action: z.enum(DESIRED_ACTIONS),
  /** Start from the latest good checkpoint under the task's prefix (it has uploaded one before). */
  restore: z.boolean(),
  launch: taskLaunchSpecSchema,
  checkpoint: z.object({ signal: z.enum(CHECKPOINT_SIGNALS), timeoutSeconds: z.number().positive() }),
});
export type DesiredTask = z.infer<typeof desiredTaskSchema>;

export const heartbeatResponseSchema = z.object({ tasks: z.array(desiredTaskSchema) });
export type HeartbeatResponse = z.infer<typeof heartbeatResponseSchema>;

/** Object-store keys for a task's artefacts (shared by worker and controller). */
export function taskLogPrefix(jobId: string): string {
  return `logs/${jobId}/`;
}

/** One log object per run of a task, ordered by start time so concatenating them in key order reads in time order. */
export function taskLogKey(
  jobId: string,
  taskIdValue: string,
  startedAtMs: number,
  instanceId: string,
): string {
  return `${taskLogPrefix(jobId)}${String(Math.floor(startedAtMs)).padStart(14, '0')}-${taskIdValue}-${instanceId}.log`;
}

export class ControllerRequestError extends Error {
  constructor(
    message: string,
    readonly statusCode: number | undefined,
  ) {
    super(message);
    this.name = 'ControllerRequestError';
  }
}

export interface ControllerConnection {
  register(request: RegisterRequest): Promise<RegisterResponse>;
  heartbeat(request: HeartbeatRequest): Promise<HeartbeatResponse>;
}

/** The agent's HTTP client for the protocol above. Keeps the per-instance token once registered. */
export class ControllerClient implements ControllerConnection {
  private instanceToken: string | undefined;
  private readonly baseUrl: string;

  constructor(
    baseUrl: string,
    private readonly bootstrapToken: string,
    private readonly timeoutMs = 10_000,
  ) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
  }

  async register(request: RegisterRequest): Promise<RegisterResponse> {
    const answer = await this.post('/v1/workers/register', this.bootstrapToken, request);
    const parsed = registerResponseSchema.parse(answer);
    this.instanceToken = parsed.workerToken;
    return parsed;
  }

  async heartbeat(request: HeartbeatRequest): Promise<HeartbeatResponse> {
    if (this.instanceToken === undefined) throw new ControllerRequestError('not registered', undefined);
    return heartbeatResponseSchema.parse(
      await this.post('/v1/workers/heartbeat', this.instanceToken, request),
    );
  }

  private async post(path: string, token: string, body: unknown): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(`${this.baseUrl}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (e) {
      throw new ControllerRequestError(
        `cannot reach the controller at ${this.baseUrl}: ${(e as Error).message}`,
        undefined,
      );
    }
    const text = await response.text();
    if (!response.ok) {
      let message = text;
      try {
        const parsed = JSON.parse(text) as { error?: unknown };
        if (typeof parsed.error === 'string') message = parsed.error;
      } catch {
        // not JSON: keep the text
      }
      throw new ControllerRequestError(
        `${path}: HTTP ${response.status}: ${message.slice(0, 500)}`,
        response.status,
      );
    }
    return JSON.parse(text) as unknown;
  }
}
