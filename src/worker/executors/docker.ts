import { Readable } from 'node:stream';
import type Docker from 'dockerode';
import {
  launchedAsOf,
  type Executor,
  type ImageReleaseLog,
  type LaunchedAs,
  type LogChunk,
  type LogPosition,
  type TaskLaunch,
  type TaskRunStatus,
} from '../executor.js';
import { buildTag, ImageCache } from '../image-cache.js';
import { readDockerLogs } from './docker-log-reads.js';
import { grantHostPaths, imageUser, prepareHostPaths } from './task-host-paths.js';
import { lastLines } from './log-tail.js';
import {
  DOCKER_CHANGE_TIMEOUT_MS,
  DOCKER_QUERY_TIMEOUT_MS,
  dockerFromEnv,
  withinTimeout,
} from './docker-engine.js';

/**
 * Tasks as Docker containers over the Engine API (dockerode). A container carries the labels `fleetwise.task`,
 * `fleetwise.job` and `fleetwise.instance`, which is how a restarted worker finds (adopts) it instead of starting a
 * duplicate. An executor scoped to an instance (`instanceId`) sees only that instance's containers (named
 * `fleetwise-<instance>-<task>`): local-mode instances share one engine, and during a move the same task id runs on
 * the source and the target, which must never see, adopt or kill each other's container. Checkpoint
 * directory and progress file are bind mounts at fixed paths inside the container.
 *
 * Networking is the engine's bridge, never the host's: on the host's network a task could reach the worker's own
 * loopback services and the instance metadata service (the worker role's credentials, the user data with the worker
 * token); behind the bridge it is one hop further, which the launch's IMDS hop limit of 1 refuses. A job spec cannot
 * ask for host networking. An engine started without a bridge (`--bridge=none`) gives its tasks no network at all.
 */
export const TASK_LABEL = 'fleetwise.task';
export const JOB_LABEL = 'fleetwise.job';
export const INSTANCE_LABEL = 'fleetwise.instance';
/**
 * The launch's attempt, checkpoint signal and timeout, and declared iterations: what a restarted worker whose own
 * record of the task is gone needs to adopt it (`LaunchedAs`).
 */
export const ATTEMPT_LABEL = 'fleetwise.attempt';
export const SIGNAL_LABEL = 'fleetwise.checkpoint-signal';
export const TIMEOUT_LABEL = 'fleetwise.checkpoint-timeout';
export const TOTAL_LABEL = 'fleetwise.total-iterations';
/** Paths inside the container. */
export const CONTAINER_CHECKPOINT_DIR = '/fleetwise/checkpoint';
export const CONTAINER_PROGRESS_FILE = '/fleetwise/progress';

const GIB = 1024 ** 3;
/**
 * Docker refuses a memory limit below 6 MiB (every start would fail with a 400). A smaller demand (a tiny task, or a
 * demand scaled down to a local instance's size) is given the least limit the engine takes.
 */
const DOCKER_MIN_MEMORY_BYTES = 6 * 1024 ** 2;
/** Docker's zero time for "never started/finished". */
const ZERO_TIME = '0001-01-01T00:00:00Z';

/**
 * Container names allow [a-zA-Z0-9][a-zA-Z0-9_.-]*; task ids (`job-7.0`) and instance ids (`local-…`, `i-…`) already
 * fit, anything else is replaced. Scoped: `fleetwise-<instance>-<task>`.
 */
export function containerName(taskId: string, instanceId?: string): string {
  const safe = (s: string): string => s.replace(/[^a-zA-Z0-9_.-]/g, '_');
  return instanceId === undefined
    ? `fleetwise-${safe(taskId)}`
    : `fleetwise-${safe(instanceId)}-${safe(taskId)}`;
}

export class UnknownTaskError extends Error {
  constructor(readonly taskId: string) {
    super(`no task ${taskId} on this host`);
    this.name = 'UnknownTaskError';
  }
}

function statusCode(e: unknown): number | undefined {
  return typeof e === 'object' && e !== null && 'statusCode' in e && typeof e.statusCode === 'number'
    ? e.statusCode
    : undefined;
}

function parseTime(value: string | undefined): Date | undefined {
  if (value === undefined || value === '' || value.startsWith(ZERO_TIME.slice(0, 4))) return undefined;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

/** The environment every task sees (user variables first: the FLEETWISE_ ones are the worker's). */
export function taskEnvironment(
  launch: TaskLaunch,
  checkpointDir: string,
  progressFile: string,
): Record<string, string> {
  return {
    ...launch.env,
    FLEETWISE_TASK_ID: launch.taskId,
    FLEETWISE_JOB_ID: launch.jobId,
    FLEETWISE_CHECKPOINT_DIR: checkpointDir,
    FLEETWISE_PROGRESS_FILE: progressFile,
    FLEETWISE_RESTORE: launch.restoring ? '1' : '0',
    FLEETWISE_ATTEMPT: String(launch.attempt ?? 1),
  };
}

/** Split Docker's multiplexed log stream (8-byte frame headers: stream, 0, 0, 0, size BE) into plain text. */
export function demuxLogs(buffer: Buffer): Buffer {
  const parts: Buffer[] = [];
  let offset = 0;
  while (offset + 8 <= buffer.length) {
    const kind = buffer[offset];
    const size = buffer.readUInt32BE(offset + 4);
    if (kind === undefined || kind > 2 || buffer[offset + 1] !== 0) return buffer; // not multiplexed (TTY)
    parts.push(buffer.subarray(offset + 8, offset + 8 + size));
    offset += 8 + size;
  }
  return Buffer.concat(parts);
}

/** A task container's network: the engine's bridge, or none when the engine has no bridge; never the host's. */
export type TaskNetworkMode = 'bridge' | 'none';

/**
 * How long after a container's removal the executor looks for built images to remove: the removals of one drain or
 * one job's end come close together and make one pass.
 */
export const IMAGE_RELEASE_DELAY_MS = 10_000;

/** What a pass of `releaseImages` is to keep and whom to tell: the latest caller's. */
interface ImageRelease {
  readonly held: () => Iterable<TaskLaunch>;
  readonly log: ImageReleaseLog;
}

export interface DockerExecutorOptions {
  readonly docker?: Docker;
  readonly images?: ImageCache;
  /** Bounds on one Engine API call (default DOCKER_QUERY_TIMEOUT_MS, DOCKER_CHANGE_TIMEOUT_MS; shorter in tests). */
  readonly queryTimeoutMs?: number;
  readonly changeTimeoutMs?: number;
  /**
   * The instance this executor works for (the worker's cloud instance id): its containers are labelled and named
   * with it, and it sees no other instance's. Without it, only containers without an instance label are seen.
   */
  readonly instanceId?: string | undefined;
  /** How long `releaseImages` waits before its pass (default IMAGE_RELEASE_DELAY_MS; 0 in tests). */
  readonly imageReleaseDelayMs?: number;
  /**
   * Whether `releaseImages` removes built images (default true). Off where several workers share one engine (local
   * mode): a worker's pass cannot see the tasks another holds prepared, whose images must stay until they start.
   */
  readonly evictBuiltImages?: boolean;
}

export class DockerExecutor implements Executor {
  readonly kind = 'docker' as const;
  /** Docker's State.OOMKilled says when the kernel killed a container for its memory. */
  readonly reportsOomKills = true;
  readonly docker: Docker;
  readonly images: ImageCache;
  readonly instanceId: string | undefined;
  private network: Promise<TaskNetworkMode> | undefined;
  private readonly queryTimeoutMs: number;
  private readonly changeTimeoutMs: number;
  private readonly imageReleaseDelayMs: number;
  private readonly evictBuiltImages: boolean;
  /** The image release asked for last (a pass uses the newest caller's held tasks and log). */
  private imageRelease: ImageRelease | undefined;
  /** A pass waiting for its delay, and one running: at most one of each. */
  private imageReleaseQueued: Promise<void> | undefined;
  private imageReleaseRunning: Promise<void> | undefined;
  /** Asked for again while a pass ran: another follows it (what it listed may predate the removal that asked). */
  private imageReleaseAgain = false;

  constructor(options: DockerExecutorOptions = {}) {
    this.docker = options.docker ?? dockerFromEnv();
    this.images = options.images ?? new ImageCache(this.docker);
    this.instanceId = options.instanceId;
    this.queryTimeoutMs = options.queryTimeoutMs ?? DOCKER_QUERY_TIMEOUT_MS;
    this.changeTimeoutMs = options.changeTimeoutMs ?? DOCKER_CHANGE_TIMEOUT_MS;
    this.imageReleaseDelayMs = options.imageReleaseDelayMs ?? IMAGE_RELEASE_DELAY_MS;
    this.evictBuiltImages = options.evictBuiltImages ?? true;
    if (!Number.isFinite(this.imageReleaseDelayMs) || this.imageReleaseDelayMs < 0)
      throw new Error(
        `imageReleaseDelayMs must be a number of milliseconds, at least 0 (got ${this.imageReleaseDelayMs})`,
      );
  }

  private query<T>(call: string, request: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
    return withinTimeout(call, this.queryTimeoutMs, request);
  }

  private change<T>(call: string, request: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
    return withinTimeout(call, this.changeTimeoutMs, request);
  }

  /** This executor's containers (stopped ones included) matching `labels`, by label: never another instance's. */
  private async containers(labels: readonly string[]): Promise<Docker.ContainerInfo[]> {
    const scope = this.instanceId === undefined ? [] : [`${INSTANCE_LABEL}=${this.instanceId}`];
    const found = await this.query('a container listing', (abortSignal) =>
      this.docker.listContainers({ all: true, filters: { label: [...labels, ...scope] }, abortSignal }),
    );
    // Unscoped: the engine cannot filter on a missing label, so drop every instance's containers here.
    return this.instanceId === undefined
      ? found.filter((c) => c.Labels[INSTANCE_LABEL] === undefined)
      : found;
  }

  /** Container id of a task, found by label (stopped ones included), or undefined. */
  private async find(taskId: string): Promise<string | undefined> {
    return (await this.containers([`${TASK_LABEL}=${taskId}`]))[0]?.Id;
  }

  async start(launch: TaskLaunch): Promise<void> {
    // Adoption: a container for this task already exists (a restarted worker, or a repeated reconcile). A stopped one
    // is left for the caller to inspect (status) and remove before starting the task again.
    const existing = await this.find(launch.taskId);
    if (existing !== undefined) {
      const info = await this.query(`the inspect of ${launch.taskId}'s container`, (abortSignal) =>
        this.docker.getContainer(existing).inspect({ abortSignal }),
      );
      if (info.State.Status === 'created') await this.startContainer(existing);
      return;
    }
    // Already done when the task was prepared (then only a look-up each: the image is there, the paths are granted).
    const image = await this.prepareImageAndPaths(launch);
    let id: string;
    try {
      const spec = this.containerSpec(launch, image, await this.networkMode());
      const container = await this.change(`the create of ${launch.taskId}'s container`, (abortSignal) =>
        this.docker.createContainer({ ...spec, abortSignal }),
      );
      id = container.id;
    } catch (e) {
      // Another reconcile created it between our lookup and now: adopt that one.
      if (statusCode(e) === 409) {
        const raced = await this.find(launch.taskId);
        if (raced !== undefined) return;
      }
      throw e;
    }
    await this.startContainer(id);
  }

  /** Pull or build the task's image and grant its host paths to the image's user: all of a start but the container. */
  async prepare(launch: TaskLaunch): Promise<void> {
    await this.prepareImageAndPaths(launch);
  }

  private async prepareImageAndPaths(launch: TaskLaunch): Promise<string> {
    const image = await this.resolveImage(launch);
    await prepareHostPaths(launch);
    // (dockerode's image and network inspects take no abort signal: only the race bounds them.)
    const inspected = await this.query(`the inspect of image ${image}`, () =>
      this.docker.getImage(image).inspect(),
    );
    await grantHostPaths(launch, imageUser(inspected.Config.User));
    return image;
  }

  private async startContainer(id: string): Promise<void> {
    try {
      await this.change(`the start of container ${id.slice(0, 12)}`, (abortSignal) =>
        this.docker.getContainer(id).start({ abortSignal }),
      );
    } catch (e) {
      if (statusCode(e) !== 304) throw e; // 304: already started
    }
  }

  private async resolveImage(launch: TaskLaunch): Promise<string> {
    if (launch.build !== undefined) return this.images.ensureBuilt(launch.build);
    if (launch.image !== undefined) return this.images.ensurePulled(launch.image);
    throw new Error(`task ${launch.taskId}: needs an image or a build context`);
  }

  /** 'bridge' when the engine has its default bridge network, else 'none' (asked once per executor). */
  private networkMode(): Promise<TaskNetworkMode> {
    this.network ??= this.query('the inspect of the bridge network', () =>
      this.docker.getNetwork('bridge').inspect(),
    ).then(
      (): TaskNetworkMode => 'bridge',
      (e: unknown): TaskNetworkMode => {
        if (statusCode(e) === 404) return 'none';
        this.network = undefined; // the engine did not answer: ask again next time
        throw e;
      },
    );
    return this.network;
  }

  /** The create request: labels, limits, mounts, environment (exported for tests and `fleetwise why`-style output). */
  containerSpec(
    launch: TaskLaunch,
    image: string,
    networkMode: TaskNetworkMode = 'bridge',
  ): Docker.ContainerCreateOptions {
    const env = taskEnvironment(launch, CONTAINER_CHECKPOINT_DIR, CONTAINER_PROGRESS_FILE);
    return {
      name: containerName(launch.taskId, this.instanceId),
      Image: image,
      ...(launch.command.length > 0 ? { Cmd: [...launch.command] } : {}),
      Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
      Labels: {
        [TASK_LABEL]: launch.taskId,
        [JOB_LABEL]: launch.jobId,
        ...(this.instanceId === undefined ? {} : { [INSTANCE_LABEL]: this.instanceId }),
        [ATTEMPT_LABEL]: String(launch.attempt ?? 1),
        ...(launch.checkpointSignal === undefined ? {} : { [SIGNAL_LABEL]: launch.checkpointSignal }),
        ...(launch.checkpointTimeoutSeconds === undefined
          ? {}
          : { [TIMEOUT_LABEL]: String(launch.checkpointTimeoutSeconds) }),
        ...(launch.totalIterations === undefined ? {} : { [TOTAL_LABEL]: String(launch.totalIterations) }),
      },
      HostConfig: {
        NetworkMode: networkMode,
        NanoCpus: Math.round(launch.vcpus * 1e9),
        // MemorySwap is memory and swap together: equal to Memory, no swap on top, so a task on a host with swap
        // cannot use twice its limit (Docker's default) where its instance type was chosen for the limit.
        ...(launch.memoryGiB > 0 ? memoryLimit(launch.memoryGiB) : {}),
        ...(launch.shmSizeGiB > 0 ? { ShmSize: Math.round(launch.shmSizeGiB * GIB) } : {}),
        ...(launch.gpus > 0
          ? { DeviceRequests: [{ Driver: 'nvidia', Count: launch.gpus, Capabilities: [['gpu']] }] }
          : {}),
        Binds: [
          `${launch.checkpointDir}:${CONTAINER_CHECKPOINT_DIR}`,
          `${launch.progressFile}:${CONTAINER_PROGRESS_FILE}`,
        ],
      },
    };
  }

  async signal(taskId: string, signal: NodeJS.Signals): Promise<void> {
    const id = await this.find(taskId);
    if (id === undefined) throw new UnknownTaskError(taskId);
    try {
      await this.query(`${signal} to ${taskId}'s container`, (abortSignal) =>
        this.docker.getContainer(id).kill({ signal, abortSignal }),
      );
    } catch (e) {
      if (statusCode(e) !== 409) throw e; // 409: not running; nothing to signal
    }
  }

  async kill(taskId: string): Promise<void> {
    const id = await this.find(taskId);
    if (id === undefined) return;
    try {
      await this.query(`SIGKILL to ${taskId}'s container`, (abortSignal) =>
        this.docker.getContainer(id).kill({ signal: 'SIGKILL', abortSignal }),
      );
      await this.change(`the end of ${taskId}'s container after SIGKILL`, (abortSignal) =>
        this.docker.getContainer(id).wait({ condition: 'not-running', abortSignal }),
      );
    } catch (e) {
      const code = statusCode(e);
      if (code !== 409 && code !== 404) throw e;
    }
  }

  async remove(taskId: string): Promise<void> {
    const id = await this.find(taskId);
    if (id === undefined) return;
    try {
      await this.change(`the removal of ${taskId}'s container`, (abortSignal) =>
        this.docker.getContainer(id).remove({ force: true, abortSignal }),
      );
    } catch (e) {
      if (statusCode(e) === 404) return;
      // Another caller's removal of it is under way (a termination's stops going on in the background): done once
      // that one is, as a removal it made itself would be.
      if (statusCode(e) === 409 && /already in progress/i.test((e as Error).message)) {
        const until = Date.now() + this.changeTimeoutMs;
        while (Date.now() < until) {
          if ((await this.find(taskId)) === undefined) return;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        throw new Error(
          `the removal of ${taskId}'s container, already under way, did not end within the time allowed`,
          {
            cause: e,
          },
        );
      }
      throw e;
    }
  }

  /**
   * Remove built images nothing needs any more (ImageCache.evictBuilt), IMAGE_RELEASE_DELAY_MS from now, in the
   * background: calls meanwhile join that pass, and a call while a pass runs queues one more after it.
   */
  releaseImages(held: () => Iterable<TaskLaunch>, log: ImageReleaseLog): void {
    if (!this.evictBuiltImages) return;
    this.imageRelease = { held, log };
    if (this.imageReleaseRunning !== undefined) this.imageReleaseAgain = true;
    else this.queueImageRelease();
  }

  /** Resolves once no image release is waiting or running (tests; a worker about to exit). */
  async imagesReleased(): Promise<void> {
    for (;;) {
      const pending = this.imageReleaseQueued ?? this.imageReleaseRunning;
      if (pending === undefined) return;
      await pending;
    }
  }

  private queueImageRelease(): void {
    if (this.imageReleaseQueued !== undefined) return;
    this.imageReleaseQueued = new Promise<void>((resolve) => {
      // Unreferenced: a pass still waiting never keeps an exiting worker alive.
      setTimeout(resolve, this.imageReleaseDelayMs).unref();
    }).then(() => {
      this.imageReleaseQueued = undefined;
      const release = this.imageRelease;
      if (release === undefined) return;
      const running = this.releaseImagesNow(release).finally(() => {
        this.imageReleaseRunning = undefined;
        if (this.imageReleaseAgain) {
          this.imageReleaseAgain = false;
          this.queueImageRelease();
        }
      });
      this.imageReleaseRunning = running;
      return running;
    });
  }

  /** One pass; never throws (what fails is the log's). */
  private async releaseImagesNow({ held, log }: ImageRelease): Promise<void> {
    try {
      // Built images go by their build tag, whatever else a held task names (a pulled image is never removed).
      const refs = [...held()].flatMap((launch) =>
        launch.build !== undefined
          ? [buildTag(launch.build.contentHash, launch.build.dockerfile)]
          : launch.image !== undefined
            ? [launch.image]
            : [],
      );
      const { removed, failed } = await this.images.evictBuilt(refs, {
        query: (call, request) => this.query(call, request),
        change: (call, request) => this.change(call, request),
      });
      if (removed.length > 0)
        log.info(
          `removed ${removed.length} built image${removed.length === 1 ? '' : 's'} no task uses: ${removed.join(', ')}`,
        );
      for (const f of failed) log.warn(`could not remove built image ${f.tag}: ${f.message}`);
    } catch (e) {
      log.warn(`removing built images no task uses failed: ${(e as Error).message}`);
    }
  }

  async status(taskId: string): Promise<TaskRunStatus | undefined> {
    const id = await this.find(taskId);
    return id === undefined ? undefined : this.inspectStatus(id, taskId);
  }

  private async inspectStatus(id: string, taskId: string): Promise<TaskRunStatus | undefined> {
    let info: Docker.ContainerInspectInfo;
    try {
      info = await this.query(`the inspect of ${taskId}'s container`, (abortSignal) =>
        this.docker.getContainer(id).inspect({ abortSignal }),
      );
    } catch (e) {
      if (statusCode(e) === 404) return undefined; // removed meanwhile
      throw e;
    }
    const s = info.State;
    const state = s.Running || s.Restarting ? 'running' : s.Status === 'created' ? 'starting' : 'exited';
    return {
      taskId,
      state,
      ...(state === 'exited' ? { exitCode: s.ExitCode } : {}),
      startedAt: parseTime(s.StartedAt),
      finishedAt: state === 'exited' ? parseTime(s.FinishedAt) : undefined,
      limitsEnforced: true,
      ...(s.OOMKilled ? { oomKilled: true } : {}),
      ...(info.HostConfig.Memory !== undefined && info.HostConfig.Memory > 0
        ? { memoryLimitGiB: info.HostConfig.Memory / GIB }
        : {}),
      launched: launchedOfLabels(info.Config.Labels),
    };
  }

  async list(): Promise<TaskRunStatus[]> {
    const containers = await this.containers([TASK_LABEL]);
    const out: TaskRunStatus[] = [];
    for (const c of containers) {
      const taskId = c.Labels[TASK_LABEL];
      if (taskId === undefined) continue;
      const s = await this.inspectStatus(c.Id, taskId);
      if (s !== undefined) out.push(s);
    }
    return out.sort((a, b) => a.taskId.localeCompare(b.taskId));
  }

  async logs(taskId: string): Promise<Readable> {
    const id = await this.find(taskId);
    if (id === undefined) throw new UnknownTaskError(taskId);
    const raw = await this.change(`the log of ${taskId}`, (abortSignal) =>
      this.docker.getContainer(id).logs({ stdout: true, stderr: true, follow: false, abortSignal }),
    );
    return Readable.from([demuxLogs(raw)]);
  }

  async readLogs(taskId: string, from: LogPosition, maxBytes: number): Promise<LogChunk> {
    const id = await this.find(taskId);
    if (id === undefined) throw new UnknownTaskError(taskId);
    return readDockerLogs(this.docker, id, from, maxBytes);
  }

  async logTail(taskId: string, lines: number): Promise<string> {
    const id = await this.find(taskId);
    if (id === undefined) throw new UnknownTaskError(taskId);
    const raw = await this.query(`the last lines of ${taskId}'s log`, (abortSignal) =>
      this.docker
        .getContainer(id)
        .logs({ stdout: true, stderr: true, follow: false, tail: lines, abortSignal }),
    );
    return lastLines(demuxLogs(raw).toString('utf8'), lines, false);
  }
}

/**
 * What a container's labels kept of its launch. A container created before the attempt label existed has none:
 * undefined, as the attempt is not known (FLEETWISE_ATTEMPT in its environment is the task's to override).
 */
export function launchedOfLabels(
  labels: Readonly<Record<string, string>> | undefined,
): LaunchedAs | undefined {
  const attempt = labels?.[ATTEMPT_LABEL];
  if (labels === undefined || attempt === undefined) return undefined;
  const number = (label: string): number | undefined => {
    const v = labels[label];
    return v === undefined ? undefined : Number(v);
  };
  return launchedAsOf({
    jobId: labels[JOB_LABEL],
    attempt: Number(attempt),
    checkpointSignal: labels[SIGNAL_LABEL],
    checkpointTimeoutSeconds: number(TIMEOUT_LABEL),
    totalIterations: number(TOTAL_LABEL),
  });
}

/** Memory and MemorySwap for a demand of `memoryGiB` (> 0), at least the engine's minimum. */
function memoryLimit(memoryGiB: number): { readonly Memory: number; readonly MemorySwap: number } {
  const bytes = Math.max(DOCKER_MIN_MEMORY_BYTES, Math.round(memoryGiB * GIB));
  return { Memory: bytes, MemorySwap: bytes };
}
