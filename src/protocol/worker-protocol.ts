import { z } from 'zod';
import { contextLimitsSchema } from './context-limits.js';
import { noticeTimeSchema } from './notice-time.js';

/**
 * The worker protocol, level-triggered over HTTP, shared by the worker agent (its client, src/worker/) and the
 * controller (src/controller/api/routes-workers.ts, worker-task-control.ts). It lives apart from both so neither side
 * imports the other:
 *
 *   POST /v1/workers/register   body names the instance by its cloud id and says how the worker proves it runs
 *                               there (`identity`, below); the bearer is the credential that kind names. Answers a
 *                               per-instance token (stored hashed by the controller), the controller's instance id
 *                               and where checkpoints and logs go.
 *   POST /v1/workers/heartbeat  bearer: the per-instance token. Body: every task the worker has, with its state,
 *                               progress and latest uploaded checkpoint; optionally its latency probe's endpoint and
 *                               the round trips it measured to its peers. Answer: the tasks the controller wants on
 *                               the instance and what to do with each (run, possibly restoring; checkpoint and stop;
 *                               stop), and, to a worker that announced a probe, the peers to measure.
 *
 * Nothing is an edge-triggered command: a lost request or a restarted worker or controller converges on the next
 * heartbeat. Where the worker puts checkpoints and logs is object-keys.ts.
 */

export const WORKER_ROUTES = {
  register: '/v1/workers/register',
  heartbeat: '/v1/workers/heartbeat',
} as const;

/**
 * Signals a worker may send to ask a task to checkpoint and exit (`docker kill --signal`). The job spec accepts the
 * same list (src/controller/job-spec.ts; test/protocol/worker-protocol.test.ts keeps the two equal).
 */
export const CHECKPOINT_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'] as const;
export type CheckpointSignal = (typeof CHECKPOINT_SIGNALS)[number];

const taskId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'a task id like job-7.0');

/**
 * How a registering worker proves it runs on the instance it names (ARCHITECTURE.md "Worker identity"). A launch
 * credential is good once per instance: once a worker holds the instance's per-instance token, only that token
 * registers it again (a restarted worker), so whoever else presents the launch credential later is refused.
 *
 *   launch-secret          bearer: the one-time secret the controller derived for this launch and handed the worker
 *                          at spawn (local provider; `FLEETWISE_LAUNCH_SECRET`).
 *   ec2-instance-identity  bearer: the cluster's worker token (user data); the body carries the instance identity
 *                          document and its RSA-2048 PKCS #7 signature from IMDSv2, which the controller verifies
 *                          against AWS's certificate for its region and checks against its launch record.
 *   instance-token         bearer: the per-instance token an earlier registration of this instance answered (a
 *                          restarted worker saved it).
 */
export const workerIdentitySchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('launch-secret') }),
  z.strictObject({
    kind: z.literal('ec2-instance-identity'),
    /** /latest/dynamic/instance-identity/document, as served (JSON text). */
    document: z.string().min(2).max(8192),
    /** /latest/dynamic/instance-identity/rsa2048: base64 PKCS #7 SignedData with the document as its content. */
    rsa2048: z
      .string()
      .min(16)
      .max(16384)
      .regex(/^[A-Za-z0-9+/=\s]+$/, 'base64 (the body of /latest/dynamic/instance-identity/rsa2048)'),
  }),
  z.strictObject({ kind: z.literal('instance-token') }),
]);
export type WorkerIdentity = z.infer<typeof workerIdentitySchema>;
export type WorkerIdentityKind = WorkerIdentity['kind'];

export const registerRequestSchema = z.strictObject({
  /** The cloud's id of the instance (EC2 i-…, or the local provider's local-…). */
  instanceId: z.string().min(1).max(128),
  executor: z.enum(['docker', 'process']),
  hostname: z.string().max(255).optional(),
  /**
   * Required by this controller; optional in the schema only so that a worker of an older release (which sent the
   * shared token alone) gets a 401 saying what to present rather than a validation error.
   */
  identity: workerIdentitySchema.optional(),
  /**
   * With a launch credential: the per-instance token the worker chose (and saved) for itself. The same request sent
   * again after its answer was lost (a timeout, a controller killed between committing and answering) is then
   * answered again instead of refused as a second registration. Without it the controller picks the token.
   */
  proposedToken: z
    .string()
    .regex(/^[A-Za-z0-9_-]{43,128}$/, '43 to 128 base64url characters (32 random bytes or more)')
    .optional(),
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

/** How a worker's host kept a task from starting (TaskReport.hostFault). */
export const HOST_FAULT_KINDS = ['space', 'broken'] as const;
export type HostFaultKind = (typeof HOST_FAULT_KINDS)[number];

export const REPORTED_TASK_STATES = [
  'starting',
  /** Co-start: prepared (checkpoint restored, image pulled or built) and held until its job's release. */
  'ready',
  'running',
  'checkpointing',
  'stopped',
  'succeeded',
  'failed',
] as const;
export type ReportedTaskState = (typeof REPORTED_TASK_STATES)[number];

/** Bounds on what a worker reports: finite, and far beyond any real value (a worker drops a count past them). */
export const MAX_REPORTED_COUNT = 1e15;
/** Far beyond the stops from outside a worker lets one attempt of a task have (src/worker/outside-stops.ts). */
export const MAX_REPORTED_OUTSIDE_STOPS = 1000;
const EXIT_CODE = z.number().int().min(-2_147_483_648).max(2_147_483_647);

export const taskReportSchema = z.strictObject({
  taskId,
  state: z.enum(REPORTED_TASK_STATES),
  exitCode: EXIT_CODE.optional(),
  /** Why a task failed (exit code, the last lines of its output, a start error). */
  reason: z.string().max(4000).optional(),
  /**
   * With `failed`: the task could not start because of this worker's host, not its job (src/worker/host-fault.ts).
   * `space`: the host's disk had no room for what the start needed (its checkpoint, build context or image), which may
   * be this job's alone; `broken`: the host can start nothing (its disk read-only or failing, its container engine down
   * or hung). The controller places the job again elsewhere without counting an attempt, and drains a `broken`
   * instance. Absent: the failure is the job's.
   */
  hostFault: z.enum(HOST_FAULT_KINDS).optional(),
  /** Iterations completed so far (from the task's progress file), absolute. */
  completedIterations: z.number().nonnegative().max(MAX_REPORTED_COUNT).optional(),
  /** Iterations per second over the worker's window; absent until the window has enough samples. */
  throughputPerSecond: z.number().nonnegative().max(MAX_REPORTED_COUNT).optional(),
  /** The newest checkpoint of this task uploaded to the object store. */
  checkpoint: z
    .strictObject({ key: z.string().min(1).max(1024), atSeconds: z.number().finite().nonnegative() })
    .optional(),
  /** The checkpoint this run restored, if any. */
  restoredFrom: z.string().max(1024).optional(),
  /**
   * Why the running task's checkpoints are not uploaded, when the store is not to blame (the task's checkpoint cannot
   * be packed: a link out of its directory, a file that cannot be read). The worker tries again once the task changes
   * the directory, and stops reporting this once an upload succeeds. The controller tells the job's owner.
   */
  checkpointError: z.string().max(4000).optional(),
  /**
   * Stops from outside the worker (a host shutdown, `docker stop`, a signal not from the worker) that this attempt of
   * the task has had on this worker, each of which it resumed from its last checkpoint; absent when none. Kept with
   * the task's record on the host: a restarted worker goes on counting; a new attempt, or a worker that lost the
   * record, counts from 0. The controller records each as a restart of the job.
   */
  outsideStops: z.number().int().positive().max(MAX_REPORTED_OUTSIDE_STOPS).optional(),
  /** The job attempt this run belongs to (DesiredTask.attempt), so an older attempt's exit is not taken for this one's. */
  attempt: z.number().int().positive().max(1000).optional(),
  /**
   * With `succeeded` or `failed`: how long ago the task exited, in seconds, as of this report (its exit record's time,
   * src/worker/exit-record.ts, against the worker's clock as it sends the report). An age, not a time, so the worker's
   * clock and the controller's need not agree: an exit heard late (the controller was down, a later worker replayed
   * the record) is dated that long before the controller heard the report, kept within the task's run and now. A
   * negative age is now. Absent (an older worker): the controller dates the exit when it hears of it.
   */
  exitedSecondsAgo: z.number().finite().optional(),
});
export type TaskReport = z.infer<typeof taskReportSchema>;

/** The controller's id of an instance (`inst-3`), as peers are named in the latency reports. */
const instanceId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/, 'an instance id like inst-3');
/**
 * An IP address or a host name that other workers connect to. An IPv6 address goes bare: a probe connects to the host
 * as given, and `[fd00::5]` is no address the resolver knows.
 */
const probeHost = z
  .string()
  .refine((h) => !/[[\]]/.test(h), { message: 'give an IPv6 address without brackets', abort: true })
  .regex(/^[A-Za-z0-9:][A-Za-z0-9.:%-]{0,254}$/, 'an IP address or a host name');
const port = z.number().int().min(1, 'a TCP port, 1–65535').max(65535, 'a TCP port, 1–65535');
/** A round trip over a minute is no network a job could use; a larger value is a broken report. */
export const MAX_RTT_MICROSECONDS = 60_000_000;
const microseconds = z
  .number()
  .nonnegative('a duration cannot be negative')
  .max(MAX_RTT_MICROSECONDS, 'at most 60 s in microseconds');

/**
 * Round trips from this instance to one peer over the worker's window (latency-aware placement, research digest
 * nomora-latency-placement.md §10.4): the maximum (what NoMora uses: ECMP spreads flows over paths of different
 * length) and the 99th percentile. A peer no probe reached in the window has no sample and no figures.
 */
export const rttReportSchema = z
  .strictObject({
    peerInstanceId: instanceId,
    maxMicroseconds: microseconds.optional(),
    p99Microseconds: microseconds.optional(),
    samples: z.number().int().min(0).max(100_000),
    failures: z.number().int().min(0).max(100_000),
    windowSeconds: z.number().positive().max(3600, 'at most an hour'),
  })
  .superRefine((r, ctx) => {
    const measured = r.maxMicroseconds !== undefined && r.p99Microseconds !== undefined;
    if (r.samples > 0 && !measured)
      ctx.addIssue({ code: 'custom', path: ['maxMicroseconds'], message: 'required with samples > 0' });
    if (r.samples === 0 && (r.maxMicroseconds !== undefined || r.p99Microseconds !== undefined))
      ctx.addIssue({ code: 'custom', path: ['samples'], message: 'figures without samples' });
    if (measured && (r.p99Microseconds as number) > (r.maxMicroseconds as number))
      ctx.addIssue({
        code: 'custom',
        path: ['p99Microseconds'],
        message: 'at most maxMicroseconds (a percentile cannot exceed the maximum)',
      });
  });
export type RttReport = z.infer<typeof rttReportSchema>;

/** Where a worker's latency probe listens: `host` defaults to the address the controller sees it heartbeat from. */
export const probeEndpointSchema = z.strictObject({ host: probeHost.optional(), port });

/** The most peers one answer names, and so the most round trips one report carries. */
export const MAX_PROBE_PEERS = 256;

export const networkReportSchema = z.strictObject({
  probe: probeEndpointSchema.optional(),
  rtts: z.array(rttReportSchema).max(MAX_PROBE_PEERS).default([]),
});
export type NetworkReport = z.input<typeof networkReportSchema>;

/**
 * A warning from EC2 that this spot instance is at risk (the worker reads it from the instance metadata service,
 * src/worker/interruption-notices.ts): `spot-interruption`, EC2 will reclaim it at `time` (about two minutes after the
 * notice); `rebalance-recommendation`, it is at elevated risk of one. A worker reports the strongest notice it has seen
 * in every heartbeat from then on (level-triggered: a lost heartbeat loses nothing).
 */
export const interruptionNoticeSchema = z.strictObject({
  kind: z.enum(['spot-interruption', 'rebalance-recommendation']),
  /** spot-interruption only: what EC2 will do to the instance. */
  action: z.enum(['terminate', 'stop', 'hibernate']).optional(),
  /**
   * When EC2 acts (spot-interruption) or when it recommended a rebalance, as the metadata service says (ISO 8601, a
   * date and time that exist, between 2000 and 2200: notice-time.ts). A time that is none would leave the controller
   * no reclaim to cap a checkpoint-stop at, so it is refused with the heartbeat.
   */
  time: noticeTimeSchema,
});
export type InterruptionNotice = z.infer<typeof interruptionNoticeSchema>;

/** The most task reports one heartbeat carries (every task a worker has, so at most this many per instance). */
export const MAX_TASKS_PER_HEARTBEAT = 256;

export const heartbeatRequestSchema = z
  .strictObject({
    tasks: z.array(taskReportSchema).max(MAX_TASKS_PER_HEARTBEAT),
    /** EC2 warned that this instance is about to be reclaimed (absent: no warning). */
    interruption: interruptionNoticeSchema.optional(),
    /** The worker's latency probe and what it measured (absent: this worker does not probe). */
    network: networkReportSchema.optional(),
    /**
     * The worker process that sent this (an id it draws at start) and this heartbeat's number in it (1, 2, …). A
     * heartbeat that reaches the controller after a later one of the same process (its request timed out at the
     * worker, and arrived anyway) is answered, and what it reports is ignored. Both or neither (an older worker).
     */
    bootId: z
      .string()
      .min(1)
      .max(64)
      .regex(/^[A-Za-z0-9_-]+$/, 'letters, digits, - and _ only')
      .optional(),
    seq: z.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional(),
  })
  .superRefine((r, ctx) => {
    if (r.bootId !== undefined && r.seq === undefined)
      ctx.addIssue({ code: 'custom', path: ['seq'], message: 'required with bootId' });
    if (r.seq !== undefined && r.bootId === undefined)
      ctx.addIssue({ code: 'custom', path: ['bootId'], message: 'required with seq' });
  });
export type HeartbeatRequest = z.infer<typeof heartbeatRequestSchema>;

export const taskLaunchSpecSchema = z.object({
  image: z.string().optional(),
  build: z
    .object({
      /** An uploaded context's reference (object-keys.ts buildContextKey); nothing else is fetched or used. */
      context: z.string(),
      dockerfile: z.string().optional(),
      /** The job's team's limits, checked again while unpacking; DEFAULT_CONTEXT_LIMITS when absent. */
      limits: contextLimitsSchema.optional(),
    })
    .optional(),
  command: z.array(z.string()),
  env: z.record(z.string(), z.string()),
  vcpus: z.number().positive(),
  memoryGiB: z.number().nonnegative(),
  gpus: z.number().int().nonnegative(),
  shmSizeGiB: z.number().nonnegative(),
});
export type TaskLaunchSpec = z.infer<typeof taskLaunchSpecSchema>;

/**
 * What the worker is to do with a task. `checkpoint-stop`: signal it, wait up to its checkpoint timeout, kill it if
 * need be, upload what it left. `stop`: kill it, no checkpoint; asked while a checkpoint-stop of the task is under
 * way (its job ended meanwhile), it kills the task now instead of waiting out the timeout (a worker from before that
 * waited, then stopped it all the same).
 */
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
  /**
   * The job's attempt (1 when absent). A task that ended in an earlier attempt is run again when asked to run in a
   * later one; without it, a `run` for a task that already exited is the controller not having seen the exit yet.
   */
  attempt: z.number().int().positive().optional(),
  /**
   * The iterations the job runs in all (its spec's totalIterations), when it says. A task that exits 0 having reported
   * them all has ended, even when a checkpoint signal reached it during its last step.
   */
  totalIterations: z.number().int().positive().optional(),
  /**
   * Co-start of a multi-task job (round/co-start.ts): with `run`, prepare the task (restore its checkpoint, fetch its
   * build context, pull or build its image) and report it `ready`, but start it only once an answer asks to run it without the hold (the
   * controller releases a job's tasks together when the last is ready). Absent: run at once.
   */
  hold: z.boolean().optional(),
});
export type DesiredTask = z.infer<typeof desiredTaskSchema>;

/** Another instance running tasks of the same jobs, to measure the round trip to. */
export const probePeerSchema = z.object({ instanceId, host: probeHost, port });
export type ProbePeer = z.infer<typeof probePeerSchema>;

export const heartbeatResponseSchema = z.object({
  tasks: z.array(desiredTaskSchema),
  /** The peers to probe: the complete list (absent or empty: none). Only for workers that announced a probe. */
  peers: z.array(probePeerSchema).max(MAX_PROBE_PEERS).optional(),
});
export type HeartbeatResponse = z.infer<typeof heartbeatResponseSchema>;
