import { CHECKPOINT_SIGNALS, type CheckpointSignal } from '../../protocol/worker-protocol.js';
import type { FamilyDemand } from '../../core/resources.js';
import { successModelSeconds, type SuccessSpec } from '../../queue/success.js';
import { MAX_DURATION_SECONDS } from '../../core/duration.js';
import type { NetworkDeclaration } from '../../core/network.js';
import type { SpotPreference } from '../../core/spot.js';

/**
 * The job spec users submit (YAML or JSON). A job is one or more task templates, each run as `replicas` identical
 * tasks that are gang-scheduled (all start together; Eva §4.4 multi-task jobs). Demands are per instance family or
 * `any` (Eva §5: a CPU task may need more vCPUs on a P3 than on a C7i). Checkpoint settings tell the worker how to
 * ask a task to checkpoint before a move; the delay estimates seed the migration cost until measured (digest §2).
 */

/** A job id as the state store gives it: `job-<n>`, n from 1, exactly representable. */
export const JOB_ID_PATTERN = /^job-[1-9]\d{0,14}$/;

/** Limits that keep one request from exhausting the controller or a worker; exceeding one is a clear error. */
export const JOB_SPEC_LIMITS = {
  maxSpecBytes: 1024 * 1024,
  /**
   * A spec the API is sent as YAML: its parser takes a few µs a node on the controller's loop, where JSON.parse
   * reads 1 MiB in milliseconds; 1 MiB of `[],` held every request and heartbeat for 7 s. Within these limits the
   * worst text found took 0.15 s of CPU on a busy 2-core host, as did 64 task templates of 20 env vars and a 1 KiB
   * command each (130 KiB, 8,800 nodes). A larger spec is sent as JSON (as `fleetwise submit` always sends it).
   */
  maxYamlSpecBytes: 256 * 1024,
  /** Nodes of such a spec, as api/body.ts yamlNodeCount counts them. */
  maxYamlNodes: 10_000,
  /** Levels a spec, or any request body, may nest (a valid spec nests a few): validation and storage recurse. */
  maxDepth: 64,
  maxNameLength: 63,
  /** Tasks after expanding replicas (a gang larger than this is not a batch job we can place atomically). */
  maxTasks: 64,
  maxEnvVars: 256,
  maxEnvBytes: 64 * 1024,
  maxCommandArgs: 1024,
  maxCommandBytes: 64 * 1024,
  maxDescriptionLength: 1024,
  maxCheckpointTimeoutSeconds: 3600,
  /** A job's expected run, its no-move window, a checkpoint period (core/duration.ts MAX_DURATION_SECONDS). */
  maxDurationSeconds: MAX_DURATION_SECONDS,
  /** Estimated restore and init delays: a day is far beyond any measured one (Eva: 2–30 s). */
  maxDelaySeconds: 86_400,
  /** Iterations a job declares (exactly representable as a double, with room to spare). */
  maxIterations: 1e15,
  /** Per task: more than any instance type offers, so the catalog check names the real problem. */
  maxGpus: 64,
  maxVcpus: 4096,
  maxMemoryGiB: 65_536,
  /** `queue.priority` lies within ±this. */
  maxPriority: 1e6,
  maxQueueStages: 64,
  /** Jobs one job may depend on: as many as an array holds, so one job can wait for a whole array. */
  maxDependencies: 10_000,
  /**
   * Jobs in one array (as AWS Batch allows): an array is submitted in one transaction and each of its jobs' specs is
   * archived before the submission is answered (10,000 jobs: about 4 s with moto_server's S3 on one 2-core
   * host; rounds with 10,000–20,000 jobs waiting take 1–5 s).
   */
  maxArraySize: 10_000,
  /**
   * Ids an array's jobs wait for in all (its size × its plain `dependsOn`; N_TO_N and SEQUENTIAL add one each):
   * each job is stored with its own, so 10,000 jobs each waiting for 10,000 would store 10⁸. 10⁶ still lets an array
   * of 1,000 wait for all of another.
   */
  maxArrayWaits: 1_000_000,
  /**
   * Bytes of spec one array stores in all (its size × its spec's stored JSON): each of its jobs is stored, archived
   * and read by the rounds and predictions with a copy of its own. 10,000 jobs of a 40 KiB spec (400 MB) took 34 s to
   * submit, held the API meanwhile and grew the controller by 1.7 GB; 64 MiB still takes 10,000 jobs of a 6 KiB spec
   * (the bundled examples' are under 2 KiB).
   */
  maxArraySpecBytes: 64 * 1024 * 1024,
  /** AWS Batch's range for `retryStrategy.attempts`. */
  maxAttempts: 10,
  maxExitRules: 32,
} as const;

/** Signals a worker may send to ask a task to checkpoint and exit (`docker kill --signal`). */
// The signals are part of the worker protocol (the worker delivers them); the job spec accepts the same list.
export { CHECKPOINT_SIGNALS, type CheckpointSignal };

/**
 * Default grace period after the checkpoint signal. Under EC2's two-minute spot notice with room to upload, and far
 * above Eva's measured checkpoint delays (2–30 s, digest §3 "Job checkpointing").
 */
export const DEFAULT_CHECKPOINT_TIMEOUT_SECONDS = 60;

/** Env names the worker sets itself (checkpoint directory, task index, attempt); users may not override them. */
export const RESERVED_ENV_PREFIX = 'FLEETWISE_';

export interface BuildSpec {
  /** Docker build context directory, relative to the spec file unless absolute. */
  readonly context: string;
  /** Dockerfile path relative to the context (Docker's default `Dockerfile` when absent). */
  readonly dockerfile?: string | undefined;
}

export interface TaskTemplateSpec {
  readonly name: string;
  readonly image?: string | undefined;
  readonly build?: BuildSpec | undefined;
  readonly command?: readonly string[] | undefined;
  readonly env: Readonly<Record<string, string>>;
  readonly demand: FamilyDemand;
  readonly replicas: number;
  readonly shmSizeGiB: number;
  /** Co-location identity of this template's tasks (resolved: explicit, from the job's `workload`, or derived). */
  readonly workload: string;
}

export interface CheckpointSpec {
  readonly signal: CheckpointSignal;
  /** Seconds the task has to checkpoint and exit after the signal before it is killed (and its work since the last checkpoint lost). */
  readonly timeoutSeconds: number;
  /** How often the job checkpoints on its own, a hint for the lost-work estimate of a move. */
  readonly everySeconds?: number | undefined;
  /** Estimated seconds to fetch and restore a checkpoint on a new instance (Eva fetch delay), until measured. */
  readonly restoreDelaySeconds?: number | undefined;
  /** Estimated seconds from start until the job makes progress (Eva `init_delay`, the paper's "Launch"). */
  readonly initDelaySeconds?: number | undefined;
}

/** What a rule of `retryStrategy.evaluateOnExit` does when it matches a failed task's exit code. */
export const RETRY_ACTIONS = ['retry', 'exit'] as const;
export type RetryAction = (typeof RETRY_ACTIONS)[number];

export interface ExitRule {
  /** A glob of digits and `*` (any run of digits) matched against the whole exit code, e.g. `137` or `1*`. */
  readonly onExitCode: string;
  readonly action: RetryAction;
}

/**
 * AWS Batch's `retryStrategy`: a job whose task fails is run again, up to `attempts` times in all. Unlike Batch, a
 * retried attempt resumes from the tasks' last checkpoints rather than starting over.
 */
/**
 * An array job (AWS Batch's `arrayProperties`): submitted with `size` alone, the spec is `size` jobs, each the same
 * but for its `index` (0 to size − 1), which its tasks read from FLEETWISE_ARRAY_INDEX (and AWS_BATCH_JOB_ARRAY_INDEX,
 * for scripts written for Batch). A spec with an index is one of them (each job of an array is stored so).
 */
export interface ArrayProperties {
  readonly size: number;
  readonly index?: number | undefined;
  /**
   * Submitting an array: its job of index i waits for the job of index i of the array each of these jobs belongs to
   * (`dependsOn: [{ jobId, type: N_TO_N }]`). Its jobs carry the ids they wait for in `dependsOn` instead.
   */
  readonly sameIndexOf?: readonly string[] | undefined;
  /** Submitting an array: its job of index i waits for the one of index i − 1 (`{ type: SEQUENTIAL }`). */
  readonly sequential?: boolean | undefined;
}

/** AWS Batch's array dependency types (`dependsOn: [{ jobId, type }]`). */
export const ARRAY_DEPENDENCY_TYPES = ['N_TO_N', 'SEQUENTIAL'] as const;

/** The number of jobs a spec submits as an array (a size and no index), else undefined: it is one job. */
export function arraySubmissionSize(spec: Pick<JobSpec, 'arrayProperties'>): number | undefined {
  const array = spec.arrayProperties;
  return array === undefined || array.index !== undefined ? undefined : array.size;
}

export interface RetryStrategy {
  /** Attempts in all, the first included (1–10). */
  readonly attempts: number;
  /**
   * Rules tried in order on a failed task's exit code; the first match decides. When rules are given and none
   * matches, the job is retried (as in Batch).
   */
  readonly evaluateOnExit?: readonly ExitRule[] | undefined;
}

/**
 * A spec's `queue:` section: accepted and kept so specs written with it keep working, but not used. The controller
 * classes jobs by its own queue config (by size or team) and orders each class by its configured ordering; a
 * submission that sets class, priority or stages is warned so (queue-section.ts). Only loosely checked.
 */
export interface QueueSection {
  readonly class?: string | undefined;
  readonly priority?: number | undefined;
  readonly stages?: readonly unknown[] | undefined;
  readonly [key: string]: unknown;
}

export interface JobSpec {
  readonly name: string;
  readonly team: string;
  readonly description?: string | undefined;
  readonly tasks: readonly TaskTemplateSpec[];
  readonly checkpoint: CheckpointSpec;
  readonly totalIterations?: number | undefined;
  readonly expectedDurationSeconds?: number | undefined;
  /** Do not move the job while it initializes nor for this many seconds after (Karpenter's `do-not-disrupt: 30m`). */
  readonly noMoveSeconds?: number | undefined;
  /**
   * Earlier jobs of the same team that must succeed before this one starts (AWS Batch's `dependsOn`); if one ends
   * any other way, this one fails (job-dependencies.ts).
   */
  readonly dependsOn?: readonly string[] | undefined;
  /**
   * The most the job may run, seconds in `running` over all its moves and attempts (AWS Batch's attempt timeout,
   * Kubernetes' activeDeadlineSeconds): past it the job is stopped and ends `failed`, not retried (run-limits.ts).
   */
  readonly maxRunSeconds?: number | undefined;
  /** What an hour of the job's completion time is worth, $ (the scheduler weighs it against dollars). */
  readonly valueOfTimePerJobHour?: number | undefined;
  /** The job-level co-location identity as written, if any (each template holds its resolved key). */
  readonly workload?: string | undefined;
  readonly queue: QueueSection;
  /**
   * Success model for success-ranked ordering (Yao, Paolieri & Golubchik): stages with continuation
   * probabilities, or a success probability and an expected size, in seconds at full throughput.
   */
  readonly success?: SuccessSpec | undefined;
  /**
   * Exit codes with which a task says "stopped as unsuccessful at a stage" (e.g. a hyperparameter trial that
   * diverged): the job ends `unsuccessful` rather than `failed`, and its capacity is freed.
   */
  readonly unsuccessfulExitCodes?: readonly number[] | undefined;
  /** Run the job again when a task fails (one attempt when absent). */
  readonly retryStrategy?: RetryStrategy | undefined;
  /**
   * Latency-aware placement (NoMora): how the job's performance falls with the round trip between its tasks, its
   * communication pattern, its root task (an expanded task name, `worker-0` for a template with replicas) and its
   * traffic. Absent: latency-insensitive, no traffic.
   */
  readonly network?: NetworkDeclaration | undefined;
  /** Spot capacity: never, allowed (absent: the default) when cheaper at its expected cost, or preferred. */
  readonly spot?: SpotPreference | undefined;
  /** The most one spot interruption may delay the job, seconds; beyond it the job's next instance is on demand. */
  readonly spotMaxDelaySeconds?: number | undefined;
  /** One job of an array (with `index`), or an array to submit as `size` jobs (without). */
  readonly arrayProperties?: ArrayProperties | undefined;
}

/**
 * How long a job is expected to run at full throughput: its `expectedDurationSeconds`, else its success model's run
 * (the stages' sum, or the expected size), so a job that declares only the model is sized, predicted and ordered on
 * one time scale. Read here rather than stored: the spec stays as it was written (its request hash, its written form),
 * and jobs stored before the model gave it get it too.
 */
export function expectedDurationOf(
  spec: Pick<JobSpec, 'expectedDurationSeconds' | 'success'>,
): number | undefined {
  return (
    spec.expectedDurationSeconds ??
    (spec.success === undefined ? undefined : successModelSeconds(spec.success))
  );
}
