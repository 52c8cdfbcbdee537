import type { ObjectStore } from '../storage/object-store.js';
import type { NetworkReport, ProbePeer } from '../protocol/worker-protocol.js';
import type { ControllerConnection } from './controller-client.js';
import type { LaunchCredentialSource } from './launch-credential.js';
import type { SavedCredential } from './saved-credential.js';
import type { Executor } from './executor.js';
import type { InterruptionNoticeSource } from './interruption-notices.js';

/** What a worker agent is given (agent.ts): its controller, credentials, executor, work directory, and its logger. */

export interface AgentLogger {
  /** Every heartbeat, checkpoint upload and failure (FLEETWISE_LOG_LEVEL=debug): for a worker the controller says went silent. */
  debug?(message: string, data?: Record<string, unknown>): void;
  info(message: string, data?: Record<string, unknown>): void;
  warn(message: string, data?: Record<string, unknown>): void;
}

/**
 * How the agent registers its instance (ARCHITECTURE.md "Worker identity"): with the per-instance token it saved at an
 * earlier registration when it has one (a restarted worker), else with the launch credential, good once per instance.
 */
export interface AgentCredentials {
  /** The launch credential; absent, only a saved per-instance token can register. */
  readonly launch?: LaunchCredentialSource | undefined;
  /** Where the per-instance token is kept across restarts of the worker. */
  readonly saved?: SavedCredential | undefined;
}

export interface AgentOptions {
  readonly connection: ControllerConnection;
  readonly credentials: AgentCredentials;
  readonly executor: Executor;
  /** Opens the object store the controller names at registration. */
  readonly openStore: (location: string) => ObjectStore | Promise<ObjectStore>;
  /** The cloud's id of this instance (EC2 i-…, local-…). */
  readonly cloudInstanceId: string;
  /** Agent state: per-task checkpoint directories, progress files, fetched build contexts. */
  readonly workDir: string;
  /** Override the controller's heartbeat period (tests). */
  readonly heartbeatSeconds?: number;
  readonly checkpointPollMs?: number;
  /** Upload a running task's log at most this often (default 5 s). */
  readonly logUploadSeconds?: number;
  /** The size a log segment is sealed at (default task-log.ts's LOG_SEGMENT_BYTES; smaller in tests). */
  readonly logSegmentBytes?: number;
  /** Throughput window (default progress.ts's 300 s; shorter in local mode and tests). */
  readonly throughputWindowSeconds?: number;
  /**
   * Give up after this many seconds without a working controller (no successful registration or heartbeat):
   * checkpoint and stop every task, then return from run(). Without it a worker whose controller is gone (a local
   * controller stopped with its workers kept, an instance the controller forgot) would retry forever while its tasks
   * run unsupervised. Default 300; 0 never gives up.
   */
  readonly giveUpAfterSeconds?: number;
  /** On a stop (run's signal), checkpoint and stop the tasks instead of leaving them for a restarted agent to adopt. */
  readonly stopTasksOnExit?: boolean;
  /** Where the controller is, for log lines. */
  readonly controllerUrl?: string;
  /** Round trips to the instances of this worker's jobs (latency-probe.ts), reported with each heartbeat. */
  readonly latencyProbe?: {
    heartbeatReport(): NetworkReport;
    setPeers(peers: readonly ProbePeer[]): void;
  };
  /** EC2's spot interruption notices and rebalance recommendations (absent: not on spot, or not on EC2). */
  readonly interruptionNotices?: {
    readonly source: InterruptionNoticeSource;
    /** Poll this often (default 5 s, as AWS advises). */
    readonly pollSeconds?: number;
  };
  readonly logger?: AgentLogger;
}

export const DEFAULT_GIVE_UP_AFTER_SECONDS = 300;
