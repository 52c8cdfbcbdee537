import { z } from 'zod';
import type { MeasuredRtt } from '../core/network.js';
import {
  MAX_PROBE_PEERS,
  type NetworkReport,
  type ProbePeer,
  type RttReport,
} from '../protocol/worker-protocol.js';
import type { ControllerLogger } from './seams.js';
import type { JsonValue } from './state-store.js';

/**
 * The controller's latency matrix (latency-aware placement, research digest nomora-latency-placement.md §10.4): the
 * latest round trips each worker measured to its peers, and where each worker's probe listens. Kept in memory from
 * the heartbeats; the scheduler gets the fresh pairs in each round's snapshot (`ClusterSnapshot.measuredRtts`), and
 * the API, `fleetwise cluster` and Prometheus show them. A worker's report replaces all its earlier pairs: it is the
 * whole of its current window, of the pairs the controller asked it to measure (the peers named in the last answer to
 * it). What goes stale, and whatever involves an instance no longer live, is dropped for good (instances do not come
 * back), so the matrix and what the store keeps of it stay the size of the live cluster.
 */

/** A pair as shown (the API, the CLI, Prometheus): the measured figures and how they were measured. */
export interface LatencyPair {
  readonly fromInstanceId: string;
  readonly toInstanceId: string;
  /**
   * Absent when every probe of the window was refused outright (`failures` says how many tried); a probe that timed out
   * counts at its timeout (latency-probe.ts).
   */
  readonly maxMicroseconds?: number | undefined;
  readonly p99Microseconds?: number | undefined;
  readonly samples: number;
  readonly failures: number;
  readonly windowSeconds: number;
  /** When the report arrived (the controller's clock, seconds). */
  readonly atSeconds: number;
}

export interface ProbeEndpoint {
  readonly instanceId: string;
  readonly host: string;
  readonly port: number;
  readonly atSeconds: number;
}

export interface LatencyMatrixView {
  readonly pairs: readonly LatencyPair[];
  readonly probes: readonly ProbeEndpoint[];
}

/** Reports older than this are not shown nor planned with: their workers stopped reporting. Default: a round. */
export const DEFAULT_LATENCY_STALE_SECONDS = 300;

const persistedSchema = z.object({
  pairs: z.array(
    z.object({
      fromInstanceId: z.string(),
      toInstanceId: z.string(),
      maxMicroseconds: z.number().optional(),
      p99Microseconds: z.number().optional(),
      samples: z.number(),
      failures: z.number(),
      windowSeconds: z.number(),
      atSeconds: z.number(),
    }),
  ),
});

/** `::ffff:10.0.0.7` (an IPv4 peer on a dual-stack socket) → `10.0.0.7`. */
export function plainAddress(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice('::ffff:'.length) : address;
}

/**
 * Of two reports of one pair in one heartbeat, the one kept: the larger maximum (the planner takes a pair's round trip
 * as the largest measured, so the larger is the conservative one), a measured one over one that reached nothing.
 */
function slower(a: RttReport, b: RttReport): boolean {
  if (a.maxMicroseconds === undefined) return false;
  return b.maxMicroseconds === undefined || a.maxMicroseconds > b.maxMicroseconds;
}

export class LatencyMatrix {
  private readonly byFrom = new Map<string, readonly LatencyPair[]>();
  private readonly endpoints = new Map<string, ProbeEndpoint>();
  /**
   * Per instance, the peers named in the last answer to it: the pairs its next report may carry. A worker probes what
   * the latest answer names (the complete list), so a pair to anything else is to an instance no longer its peer, to
   * itself, or made up.
   */
  private readonly named = new Map<string, ReadonlySet<string>>();
  /**
   * Per address, the instances whose probe host is the address their heartbeats came from (their workers named none).
   * Behind a load balancer or proxy in front of the controller that is the balancer's, the same for every worker: an
   * address several instances are seen at is none of theirs, and their probes stay unknown until their workers name one.
   */
  private readonly seenAt = new Map<string, Set<string>>();
  /** The address each of those instances was seen at. */
  private readonly seenHostOf = new Map<string, string>();
  /**
   * Addresses several instances were seen at, for as long as any still is (one left behind a balancer is no more at its
   * address than before): warned of once, and no probe is handed out there.
   */
  private readonly sharedHosts = new Set<string>();
  /** The latest time the matrix has heard of (a report or a view): what the saved pairs must be fresh at. */
  private latestSeconds = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly staleSeconds: number = DEFAULT_LATENCY_STALE_SECONDS,
    private readonly log: Pick<ControllerLogger, 'warn'> = { warn() {} },
  ) {}

  /**
   * One heartbeat's network report from `instanceId`. The probe's host is the one the worker named, else the address
   * its heartbeat came from (what the controller reaches it at, so what its peers in the VPC reach it at too) unless
   * other instances' heartbeats come from there too (a load balancer or proxy's address: the probe is unknown). Only
   * pairs to the peers named in the last answer to it are kept, one per peer. Before this process named it any (a
   * restarted controller), its pairs are left as they are, the saved ones included, until a report follows an answer.
   */
  observe(
    instanceId: string,
    report: NetworkReport,
    remoteAddress: string | undefined,
    atSeconds: number,
  ): void {
    this.latestSeconds = Math.max(this.latestSeconds, atSeconds);
    const namedHost = report.probe?.host;
    const host = namedHost ?? (remoteAddress === undefined ? undefined : plainAddress(remoteAddress));
    if (report.probe !== undefined && host !== undefined) {
      this.endpoints.set(instanceId, { instanceId, host, port: report.probe.port, atSeconds });
      this.seen(instanceId, namedHost === undefined ? host : undefined);
    }
    const named = this.named.get(instanceId);
    if (named === undefined) return;
    const byPeer = new Map<string, RttReport>();
    for (const r of report.rtts ?? []) {
      if (!named.has(r.peerInstanceId)) continue;
      const kept = byPeer.get(r.peerInstanceId);
      if (kept === undefined || slower(r, kept)) byPeer.set(r.peerInstanceId, r);
    }
    this.byFrom.set(
      instanceId,
      [...byPeer.values()].map((r) => ({
        fromInstanceId: instanceId,
        toInstanceId: r.peerInstanceId,
        ...(r.maxMicroseconds === undefined ? {} : { maxMicroseconds: r.maxMicroseconds }),
        ...(r.p99Microseconds === undefined ? {} : { p99Microseconds: r.p99Microseconds }),
        samples: r.samples,
        failures: r.failures,
        windowSeconds: r.windowSeconds,
        atSeconds,
      })),
    );
  }

  /** The instance is gone: its probe and every pair from or to it. */
  forget(instanceId: string): void {
    this.endpoints.delete(instanceId);
    this.seen(instanceId, undefined);
    this.byFrom.delete(instanceId);
    this.named.delete(instanceId);
    for (const [from, pairs] of this.byFrom)
      this.byFrom.set(
        from,
        pairs.filter((p) => p.toInstanceId !== instanceId),
      );
  }

  /** Where the probe of `instanceId` is, if known: not at an address the controller sees other instances at too. */
  endpointOf(instanceId: string): ProbeEndpoint | undefined {
    const seenHost = this.seenHostOf.get(instanceId);
    if (seenHost !== undefined && this.sharedHosts.has(seenHost)) return undefined;
    return this.endpoints.get(instanceId);
  }

  /**
   * `instanceId`'s probe host is `host`, the address its heartbeat came from (undefined: its worker named one, or its
   * probe is forgotten). The first time an address is shared, the warning names it and the instances seen there.
   */
  private seen(instanceId: string, host: string | undefined): void {
    const before = this.seenHostOf.get(instanceId);
    if (before === host) return;
    if (before !== undefined) {
      const ids = this.seenAt.get(before);
      ids?.delete(instanceId);
      if (ids?.size === 0) {
        this.seenAt.delete(before);
        this.sharedHosts.delete(before);
      }
      this.seenHostOf.delete(instanceId);
    }
    if (host === undefined) return;
    this.seenHostOf.set(instanceId, host);
    const ids = this.seenAt.get(host) ?? new Set<string>();
    ids.add(instanceId);
    this.seenAt.set(host, ids);
    if (ids.size > 1 && !this.sharedHosts.has(host)) {
      this.sharedHosts.add(host);
      const instances = [...ids].sort();
      this.log.warn(
        `the heartbeats of ${instances.join(', ')} come from one address, ${host} (a load balancer or proxy in ` +
          'front of the controller?): no worker is told to probe them there; start their workers with --probe-host ' +
          'and their own address',
        { address: host, instances },
      );
    }
  }

  /**
   * The peers to name in an answer to `fromInstanceId`: those of `peerIds` whose probe is known, other than itself,
   * in the order given (the most wanted first), at most the protocol's MAX_PROBE_PEERS (a worker refuses an answer
   * naming more). Remembered as what its next report may measure.
   */
  probePeers(fromInstanceId: string, peerIds: Iterable<string>): ProbePeer[] {
    const peers: ProbePeer[] = [];
    const seen = new Set<string>([fromInstanceId]);
    for (const id of peerIds) {
      if (peers.length >= MAX_PROBE_PEERS) break;
      if (seen.has(id)) continue;
      seen.add(id);
      const e = this.endpointOf(id);
      if (e !== undefined) peers.push({ instanceId: id, host: e.host, port: e.port });
    }
    this.named.set(fromInstanceId, new Set(peers.map((p) => p.instanceId)));
    return peers;
  }

  /**
   * Fresh pairs among `live` instances (all when undefined), by from then to, and the probes of live instances. What
   * it leaves out is dropped: stale pairs and probes (their workers stopped reporting), and any of an instance not live.
   */
  view(nowSeconds: number, live?: ReadonlySet<string>): LatencyMatrixView {
    this.prune(nowSeconds, live);
    const pairs = [...this.byFrom.values()]
      .flat()
      .sort(
        (a, b) =>
          a.fromInstanceId.localeCompare(b.fromInstanceId) || a.toInstanceId.localeCompare(b.toInstanceId),
      );
    const probes = [...this.endpoints.values()]
      .filter((e) => this.endpointOf(e.instanceId) !== undefined)
      .sort((a, b) => a.instanceId.localeCompare(b.instanceId));
    return { pairs, probes };
  }

  private fresh(atSeconds: number, nowSeconds: number): boolean {
    return nowSeconds - atSeconds <= this.staleSeconds;
  }

  private prune(nowSeconds: number, live: ReadonlySet<string> | undefined): void {
    this.latestSeconds = Math.max(this.latestSeconds, nowSeconds);
    const isLive = (id: string): boolean => live === undefined || live.has(id);
    for (const [from, pairs] of this.byFrom) {
      const kept = isLive(from)
        ? pairs.filter((p) => this.fresh(p.atSeconds, nowSeconds) && isLive(p.toInstanceId))
        : [];
      if (kept.length === 0) this.byFrom.delete(from);
      else if (kept.length < pairs.length) this.byFrom.set(from, kept);
    }
    for (const [id, e] of this.endpoints)
      if (!isLive(id) || !this.fresh(e.atSeconds, nowSeconds)) {
        this.endpoints.delete(id);
        this.seen(id, undefined);
      }
    for (const id of this.named.keys()) if (!isLive(id)) this.named.delete(id);
  }

  /** What the scheduler plans with: the fresh, measured pairs (a pair whose probes were all refused has no figure). */
  measuredRtts(nowSeconds: number, live?: ReadonlySet<string>): MeasuredRtt[] {
    return this.view(nowSeconds, live).pairs.flatMap((p) =>
      p.maxMicroseconds === undefined || p.p99Microseconds === undefined
        ? []
        : [
            {
              fromInstanceId: p.fromInstanceId,
              toInstanceId: p.toInstanceId,
              maxMicroseconds: p.maxMicroseconds,
              p99Microseconds: p.p99Microseconds,
              atSeconds: p.atSeconds,
            },
          ],
    );
  }

  /**
   * The pairs fresh at the latest time the matrix heard of, for the state store (a restarted controller plans with
   * them until fresh reports arrive). Pairs of instances gone since the last view go at the next one.
   */
  toJson(): JsonValue {
    return {
      pairs: [...this.byFrom.values()]
        .flat()
        .filter((p) => this.fresh(p.atSeconds, this.latestSeconds))
        .map((p) => ({
          fromInstanceId: p.fromInstanceId,
          toInstanceId: p.toInstanceId,
          ...(p.maxMicroseconds === undefined ? {} : { maxMicroseconds: p.maxMicroseconds }),
          ...(p.p99Microseconds === undefined ? {} : { p99Microseconds: p.p99Microseconds }),
          samples: p.samples,
          failures: p.failures,
          windowSeconds: p.windowSeconds,
          atSeconds: p.atSeconds,
        })),
    };
  }

  /** At start, before any report: the pairs saved by toJson. Anything malformed is ignored (they are a head start). */
  load(value: unknown): void {
    if (this.byFrom.size > 0) return;
    const parsed = persistedSchema.safeParse(value);
    if (!parsed.success) return;
    for (const pair of parsed.data.pairs) {
      this.latestSeconds = Math.max(this.latestSeconds, pair.atSeconds);
      this.byFrom.set(pair.fromInstanceId, [...(this.byFrom.get(pair.fromInstanceId) ?? []), pair]);
    }
  }
}
