import {
  curveOf,
  DEFAULT_DOMAIN_THRESHOLD,
  DEFAULT_MACHINE_THRESHOLD,
  isLatencySensitive,
  type LatencyCurve,
} from '../core/latency-curves.js';
import {
  DEFAULT_DOMAIN_RTT_MICROSECONDS,
  jobPerformance,
  latencyDomain,
  pairKey,
  RttEstimator,
  type DomainRtts,
  type PlacedInstance,
} from '../core/latency-model.js';
import type { ClusterSnapshot, SchedJob } from '../core/model.js';
import type { JobNetwork, LatencyDomain } from '../core/network.js';

/**
 * What Eva knows about the network in one round (NoMora, research digest §10): the jobs whose placement the network
 * matters to, where their tasks are, the round trips it estimates (measured, else its domain defaults), and NoMora's
 * preference thresholds that prune where a task may go relative to its root.
 */

/** Eva's latency-aware placement settings (digest §10.3–§10.4); every one has a default. */
export interface LatencyOptions {
  /** Round trips per domain until measured (default DEFAULT_DOMAIN_RTT_MICROSECONDS, the digest's placeholders). */
  readonly domainRtts?: Partial<DomainRtts> | undefined;
  /** p_m: an instance is a candidate for a task when its cost round(100/p) to the root is at most this (105). */
  readonly machineThreshold?: number | undefined;
  /** p_r: a placement group or zone is a candidate when its worst cost to the root is at most this (110). */
  readonly domainThreshold?: number | undefined;
  /** A job whose measured P_job stays below this is considered for a move (0.9; the paper's advice, §5.3). */
  readonly migrationThreshold?: number | undefined;
  /** ... for this many rounds in a row (2). */
  readonly persistRounds?: number | undefined;
  /** Consider moving such jobs at all (default true). */
  readonly migrate?: boolean | undefined;
  /** At most this share of the running latency-sensitive jobs is moved for latency in one round (0.05; at least 1). */
  readonly maxMoveShare?: number | undefined;
}

export interface ResolvedLatencyOptions {
  readonly domainRtts: DomainRtts;
  readonly machineThreshold: number;
  readonly domainThreshold: number;
  readonly migrationThreshold: number;
  readonly persistRounds: number;
  readonly migrate: boolean;
  readonly maxMoveShare: number;
}

export const DEFAULT_MIGRATION_THRESHOLD = 0.9;
export const DEFAULT_PERSIST_ROUNDS = 2;
export const DEFAULT_MAX_MOVE_SHARE = 0.05;

export function resolveLatencyOptions(o: LatencyOptions = {}): ResolvedLatencyOptions {
  const resolved: ResolvedLatencyOptions = {
    domainRtts: { ...DEFAULT_DOMAIN_RTT_MICROSECONDS, ...o.domainRtts },
    machineThreshold: o.machineThreshold ?? DEFAULT_MACHINE_THRESHOLD,
    domainThreshold: o.domainThreshold ?? DEFAULT_DOMAIN_THRESHOLD,
    migrationThreshold: o.migrationThreshold ?? DEFAULT_MIGRATION_THRESHOLD,
    persistRounds: o.persistRounds ?? DEFAULT_PERSIST_ROUNDS,
    migrate: o.migrate ?? true,
    maxMoveShare: o.maxMoveShare ?? DEFAULT_MAX_MOVE_SHARE,
  };
  const problems: string[] = [];
  for (const [domain, rtt] of Object.entries(resolved.domainRtts))
    if (!(Number.isFinite(rtt) && rtt >= 0)) problems.push(`domainRtts.${domain} must be ≥ 0 µs, got ${rtt}`);
  if (!(resolved.machineThreshold >= 100))
    problems.push('machineThreshold must be ≥ 100 (the cost of p = 1)');
  if (!(resolved.domainThreshold >= 100)) problems.push('domainThreshold must be ≥ 100 (the cost of p = 1)');
  if (!(resolved.migrationThreshold > 0 && resolved.migrationThreshold <= 1))
    problems.push('migrationThreshold must be in (0, 1]');
  if (!(Number.isInteger(resolved.persistRounds) && resolved.persistRounds >= 1))
    problems.push('persistRounds must be a whole number ≥ 1');
  if (!(resolved.maxMoveShare > 0 && resolved.maxMoveShare <= 1))
    problems.push('maxMoveShare must be in (0, 1]');
  if (problems.length > 0) throw new Error(`latency options: ${problems.join('; ')}`);
  return resolved;
}

/** A multi-task job whose placement the network matters to: latency-sensitive, or exchanging billed traffic. */
export interface AwareJob {
  readonly id: string;
  readonly taskIds: readonly string[];
  readonly rootTaskId: string;
  readonly rootIndex: number;
  readonly network: JobNetwork;
  readonly curve: LatencyCurve;
  /** Its performance depends on latency (not `none`, not a flat table). */
  readonly sensitive: boolean;
  /** It declares traffic, which costs money when it crosses zones. */
  readonly chatty: boolean;
}

/**
 * How a job's network matters to placement: `sensitive` (its speed depends on round trips), `chatty` (its traffic
 * costs money across zones), or undefined when neither does or it has a single task (nothing to place apart).
 */
export function networkAwareness(
  network: JobNetwork | undefined,
  taskCount: number,
): { readonly sensitive: boolean; readonly chatty: boolean } | undefined {
  if (network === undefined || taskCount < 2) return undefined;
  const sensitive = isLatencySensitive(network.sensitivity);
  const chatty = network.gibPerHour > 0;
  return sensitive || chatty ? { sensitive, chatty } : undefined;
}

/** The network-aware jobs of a snapshot (none for a snapshot of latency-insensitive, silent jobs). */
export function awareJobs(jobs: readonly SchedJob[]): Map<string, AwareJob> {
  const out = new Map<string, AwareJob>();
  for (const job of jobs) {
    const network = job.network;
    const awareness = networkAwareness(network, job.taskIds.length);
    if (network === undefined || awareness === undefined) continue;
    const curve = curveOf(network.sensitivity);
    const { sensitive, chatty } = awareness;
    const declared = network.rootTaskId === undefined ? -1 : job.taskIds.indexOf(network.rootTaskId);
    const rootIndex = declared < 0 ? 0 : declared;
    out.set(job.id, {
      id: job.id,
      taskIds: job.taskIds,
      rootTaskId: job.taskIds[rootIndex] as string,
      rootIndex,
      network,
      curve,
      sensitive,
      chatty,
    });
  }
  return out;
}

/** P_job where the job is committed now, and whether every round trip it depends on was measured. */
export interface CurrentPerformance {
  readonly performance: number;
  readonly measured: boolean;
  /** It spans more than one instance. */
  readonly spread: boolean;
  /** P_job by its instances' domains alone (the defaults, no measurement): what its placement should give. */
  readonly byDomain: number;
}

export class LatencyView {
  readonly estimator: RttEstimator;
  /** Round trips by domain only (what a placement should give, whatever was measured). */
  private readonly defaults: RttEstimator;
  readonly jobs: ReadonlyMap<string, AwareJob>;
  private readonly instances = new Map<string, PlacedInstance>();
  private readonly instanceOfTask = new Map<string, string | undefined>();
  private readonly worstCache = new Map<string, number>();
  private readonly currentCache = new Map<string, CurrentPerformance | undefined>();

  constructor(
    snapshot: ClusterSnapshot,
    readonly options: ResolvedLatencyOptions,
  ) {
    this.estimator = new RttEstimator(snapshot.measuredRtts ?? [], options.domainRtts);
    this.defaults = new RttEstimator([], options.domainRtts);
    this.jobs = awareJobs(snapshot.jobs);
    for (const i of snapshot.instances) this.instances.set(i.id, { id: i.id, placement: i.placement });
    for (const t of snapshot.tasks) this.instanceOfTask.set(t.id, t.instanceId);
  }

  /** The instance a task is committed to in the snapshot. */
  instanceOf(taskId: string): string | undefined {
    return this.instanceOfTask.get(taskId);
  }

  /** An instance of the snapshot by id (an unknown id: no known placement). */
  instance(id: string): PlacedInstance {
    return this.instances.get(id) ?? { id };
  }

  /** P of a job if it spans instances in `domain` (by the domain's default round trip). */
  domainPerformance(job: AwareJob, domain: LatencyDomain): number {
    return job.curve.at(this.options.domainRtts[domain]);
  }

  /** P_job where the job is committed now, or undefined when some task is not placed. */
  current(jobId: string): CurrentPerformance | undefined {
    if (this.currentCache.has(jobId)) return this.currentCache.get(jobId);
    const job = this.jobs.get(jobId);
    let result: CurrentPerformance | undefined;
    if (job !== undefined) {
      const ids = job.taskIds.map((t) => this.instanceOfTask.get(t));
      if (ids.every((id) => id !== undefined && this.instances.has(id))) {
        const placed = ids.map((id) => this.instance(id as string));
        const performance = jobPerformance(
          job.network.sensitivity,
          job.network.pattern,
          job.rootIndex,
          placed,
          (a, b) => this.estimator.between(a, b),
        );
        const pairs = neededPairs(job, ids as string[]);
        result = {
          performance,
          byDomain: jobPerformance(
            job.network.sensitivity,
            job.network.pattern,
            job.rootIndex,
            placed,
            (a, b) => this.defaults.between(a, b),
          ),
          measured:
            pairs.length > 0 && pairs.every(([a, b]) => this.estimator.measuredBetween(a, b) !== undefined),
          spread: pairs.length > 0,
        };
      }
    }
    this.currentCache.set(jobId, result);
    return result;
  }

  /**
   * NoMora's pruning (§5.2, digest §10.3 step 3) for a non-root task of `job` whose root is on `anchor`: `candidate`
   * qualifies directly when its own cost to the root is within p_m, or through its domain (the root's placement group,
   * else the root's zone) when the worst cost of that domain's instances is within p_r. Otherwise NoMora still lets the
   * task go anywhere at its cost (the arc to X); here the alternative is a new instance launched next to the root, so
   * a candidate is refused only when it is worse than that new instance would be (else a launch buys no latency). A
   * job that only declares traffic keeps its tasks in the root's zone.
   */
  admits(job: AwareJob, anchor: PlacedInstance, candidate: PlacedInstance): boolean {
    const domain = latencyDomain(anchor, candidate);
    if (!job.sensitive) return domain !== 'cross-zone';
    const cost = job.curve.costAt(this.estimator.between(anchor, candidate));
    if (cost <= this.options.machineThreshold) return true;
    if (
      (domain === 'placement-group' || domain === 'zone') &&
      this.worstDomainCost(job, anchor, domain) <= this.options.domainThreshold
    )
      return true;
    return cost <= this.newInstanceCost(job, anchor);
  }

  /**
   * The cost to the root on `anchor` of a new instance launched for one of its tasks: assignPlacements puts it in the
   * root's placement group, else the root's zone (else anywhere), so it gets that domain's default round trip.
   */
  private newInstanceCost(job: AwareJob, anchor: PlacedInstance): number {
    const p = anchor.placement;
    const domain: LatencyDomain =
      p?.placementGroup !== undefined ? 'placement-group' : p?.zone !== undefined ? 'zone' : 'cross-zone';
    return job.curve.costAt(this.options.domainRtts[domain]);
  }

  /** The worst cost to the root over the instances of the root's placement group or zone (NoMora's rack arc). */
  private worstDomainCost(job: AwareJob, anchor: PlacedInstance, domain: 'placement-group' | 'zone'): number {
    const key = `${job.id}\u0000${anchor.id}\u0000${domain}`;
    let worst = this.worstCache.get(key);
    if (worst === undefined) {
      worst = job.curve.costAt(this.options.domainRtts[domain]);
      for (const inst of this.instances.values()) {
        const d = latencyDomain(anchor, inst);
        const inside =
          domain === 'placement-group' ? d === 'placement-group' : d === 'placement-group' || d === 'zone';
        if (inside) worst = Math.max(worst, job.curve.costAt(this.estimator.between(anchor, inst)));
      }
      this.worstCache.set(key, worst);
    }
    return worst;
  }
}

/** The instance pairs a job's bounding round trip depends on (distinct instances only). */
export function neededPairs(job: AwareJob, instanceIds: readonly string[]): [string, string][] {
  const out = new Map<string, [string, string]>();
  if (job.network.pattern === 'star') {
    const root = instanceIds[job.rootIndex] as string;
    for (const id of instanceIds) if (id !== root) out.set(pairKey(root, id), [root, id]);
  } else {
    const distinct = [...new Set(instanceIds)];
    for (let i = 0; i < distinct.length; i++)
      for (let j = i + 1; j < distinct.length; j++)
        out.set(pairKey(distinct[i] as string, distinct[j] as string), [
          distinct[i] as string,
          distinct[j] as string,
        ]);
  }
  return [...out.values()];
}
