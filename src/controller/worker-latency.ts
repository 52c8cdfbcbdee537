import type { MeasuredRtt } from '../core/network.js';
import type { NetworkReport, ProbePeer } from '../protocol/worker-protocol.js';
import { networkAwareness } from '../scheduler/latency-view.js';
import { LatencyMatrix, type LatencyMatrixView } from './latency-matrix.js';
import type { ControllerLogger } from './seams.js';
import { PLACED_TASK_STATES } from './state/lifecycle.js';
import type { InstanceRecord, JobRecord, StateStore, TaskRecord } from './state-store.js';

/**
 * Round trips (latency-matrix.ts): a worker with a latency probe says where it listens and what it measured; the
 * answer names its peers, the other instances running tasks of its jobs.
 */

/** The latest latency matrix, saved once per round (round trips are re-measured within a minute anyway). */
export const LATENCY_MATRIX_KEY = 'network.latencyMatrix';

export class WorkerLatency {
  private readonly latency: LatencyMatrix;

  constructor(
    private readonly store: StateStore,
    /** Round trips older than this are neither shown nor planned with (default latency-matrix.ts's). */
    staleSeconds: number | undefined,
    log: ControllerLogger,
  ) {
    this.latency = new LatencyMatrix(staleSeconds, log);
    this.latency.load(this.store.getValue(LATENCY_MATRIX_KEY));
  }

  /** What a heartbeat says of its worker's probe and round trips (from `remoteAddress` when it names none). */
  observe(
    instanceId: string,
    network: NetworkReport,
    remoteAddress: string | undefined,
    nowSeconds: number,
  ): void {
    this.latency.observe(instanceId, network, remoteAddress, nowSeconds);
  }

  /**
   * The other instances running tasks of the network-aware jobs (the scheduler's own test, latency-view.ts networkAwareness)
   * that have tasks on this one, whose probes are known; round trips of other jobs are planned with by nobody. The
   * latency-sensitive jobs' peers come first, then those of jobs that only declare traffic, each by submission: an
   * answer names at most the protocol's limit, and what falls beyond it stays the same from one answer to the next.
   */
  peersOf(inst: InstanceRecord): ProbePeer[] {
    const jobIds = new Set(
      this.store
        .listTasks({ instanceId: inst.id })
        .filter((t) => PLACED_TASK_STATES.includes(t.state))
        .map((t) => t.jobId),
    );
    const jobs: { job: JobRecord; tasks: TaskRecord[] }[] = [];
    for (const jobId of jobIds) {
      const job = this.store.getJob(jobId);
      if (job !== undefined) jobs.push({ job, tasks: this.store.listTasks({ jobId }) });
    }
    const aware = new Map(
      jobs.flatMap(({ job, tasks }) => {
        const awareness = networkAwareness(job.spec.network, tasks.length);
        return awareness === undefined ? [] : [[job.id, awareness] as const];
      }),
    );
    const peers: string[] = [];
    for (const { tasks } of jobs
      .filter(({ job }) => aware.has(job.id))
      .sort(
        (a, b) =>
          Number(aware.get(b.job.id)?.sensitive) - Number(aware.get(a.job.id)?.sensitive) ||
          a.job.submittedAtSeconds - b.job.submittedAtSeconds ||
          a.job.id.localeCompare(b.job.id, 'en', { numeric: true }),
      ))
      peers.push(
        ...tasks
          .flatMap((t) =>
            PLACED_TASK_STATES.includes(t.state) && t.instanceId !== undefined && t.instanceId !== inst.id
              ? [t.instanceId]
              : [],
          )
          .sort(),
      );
    return this.latency.probePeers(inst.id, peers);
  }

  /** Instances that may still answer probes: pairs to any other are history. */
  private liveInstanceIds(): Set<string> {
    return new Set(
      this.store.listInstances({ states: ['launching', 'running', 'draining'] }).map((i) => i.id),
    );
  }

  /**
   * The fresh measured round trips for a round's snapshot; saved in the store at the same time (once per round), so a
   * restarted controller plans with them until its workers report again.
   */
  roundRtts(nowSeconds: number): MeasuredRtt[] {
    // Read first: reading drops the pairs of instances gone, so the saved matrix holds only live ones.
    const rtts = this.latency.measuredRtts(nowSeconds, this.liveInstanceIds());
    this.store.setValue(LATENCY_MATRIX_KEY, this.latency.toJson());
    return rtts;
  }

  /** The matrix as shown by the API, `fleetwise cluster` and Prometheus. */
  view(nowSeconds: number): LatencyMatrixView {
    return this.latency.view(nowSeconds, this.liveInstanceIds());
  }

  /** The instance is lost: its probe and round trips are forgotten. */
  forget(instanceId: string): void {
    this.latency.forget(instanceId);
  }
}
