import type { Catalog } from '../../core/catalog.js';
import { spotOffering, type SpotOffering } from '../../core/spot.js';
import {
  billedSpotEvents,
  burstEvents,
  reclaimEvents,
  SPOT_NOTICE_SECONDS,
  warnedOfBurst,
  type SpotInstanceEvent,
  type SpotSimulation,
} from '../../world/spot-world.js';
import type { SimulatedCloud, SimulatedInstance } from './simulated-cloud.js';
import type { Timeline } from './timeline.js';

/**
 * EC2's spot market for the controller runtime: it takes the simulated cloud's spot instances back as the engine's
 * spot world does (world/spot-world.ts: a life drawn per instance at its pool's rate, optional pool-wide bursts,
 * rebalance recommendations and false alarms, a notice two minutes before the reclaim), through the same draws.
 *
 * The runtime hears them as its `noticeHandling` says (world/spot-world.ts `NoticeHandling`), each as the interruption
 * queue delivers it (`tell`). fleetwise: on a notice the host's worker checkpoints and stops its tasks (`evacuate`) and
 * the controller drains the instance and plans them elsewhere; on a recommendation the controller plans at once and
 * Eva moves off what its risk pays to move, as in production. Karpenter: on a notice the drain evicts the host's tasks
 * with no checkpoint (`evict`: each job goes back to its last periodic checkpoint) and the controller is told, so it
 * drains the instance, closes its pool and plans the replacement at once; recommendations are not acted on. SkyPilot
 * hears nothing. A reclaim takes the instance at once (`reclaimed`: what still ran there goes back to its job's last
 * checkpoint), whoever was told.
 */

export type SpotReport =
  | { readonly kind: 'spot-interruption'; readonly time: string }
  | { readonly kind: 'rebalance-recommendation' };

export interface SimulatedSpotMarketDeps {
  readonly options: SpotSimulation;
  readonly catalog: Catalog;
  readonly clock: { nowSeconds(): number };
  readonly timeline: Timeline;
  readonly cloud: SimulatedCloud;
  /** The host's worker read the notice: it checkpoints and stops every task there. */
  readonly evacuate: (cloudId: string) => void;
  /** The host is drained under a notice with no checkpoint: its tasks' jobs go back to their last checkpoints. */
  readonly evict: (cloudId: string, zone: string) => void;
  /** The host is gone: its tasks' jobs go back to their last checkpoints. */
  readonly reclaimed: (cloudId: string, zone: string) => void;
  /** The controller hears it, as the interruption queue delivers it. */
  readonly tell: (cloudId: string, report: SpotReport) => void;
}

export class SimulatedSpotMarket {
  /** Spot instances reclaimed (each once, however many jobs it held). */
  interruptions = 0;
  /** Rebalance recommendations given (each instance at most once). */
  rebalanceRecommendations = 0;
  private readonly recommended = new Set<SimulatedInstance>();
  private readonly noticed = new Set<SimulatedInstance>();

  constructor(private readonly deps: SimulatedSpotMarketDeps) {}

  /** Schedule the first burst of every pool (none without bursts). */
  start(): void {
    if ((this.deps.options.burstsPerPoolPerMonth ?? 0) <= 0) return;
    for (const pool of this.deps.catalog.spot?.offerings ?? []) this.scheduleBurst(pool, 0, 0);
  }

  /** A spot instance came up and is billed: draw when it is reclaimed, and any false alarm before. */
  onBilled(inst: SimulatedInstance): void {
    const pool = spotOffering(this.deps.catalog.spot, inst.type.name, inst.availabilityZone);
    if (inst.market !== 'spot' || pool === undefined) return;
    this.schedule(
      inst,
      billedSpotEvents(this.deps.options, inst.drawKey, pool, this.deps.clock.nowSeconds()),
    );
  }

  /** A reclaim due at `at` (a burst's), with what leads up to it. */
  private scheduleReclaim(inst: SimulatedInstance, at: number): void {
    const now = this.deps.clock.nowSeconds();
    this.schedule(inst, reclaimEvents(this.deps.options, inst.drawKey, now, at, this.recommended.has(inst)));
  }

  private schedule(inst: SimulatedInstance, events: readonly SpotInstanceEvent[]): void {
    const reclaimAt = events.find((e) => e.kind === 'spot-reclaim')?.timeSeconds;
    for (const event of events)
      this.deps.timeline.at(event.timeSeconds, () => {
        if (event.kind === 'spot-rebalance') this.recommend(inst);
        else if (event.kind === 'spot-notice')
          this.notice(inst, reclaimAt ?? event.timeSeconds + SPOT_NOTICE_SECONDS);
        else this.reclaim(inst);
      });
  }

  /** A pool running out of capacity: every spot instance in it gets its notice now and goes two minutes later. */
  private scheduleBurst(pool: SpotOffering, n: number, from: number): void {
    const { burstAt, warningAt } = burstEvents(this.deps.options, pool, n, from);
    if (warningAt !== undefined)
      this.deps.timeline.at(warningAt, () => {
        for (const inst of this.deps.cloud.liveInPool(pool))
          if (warnedOfBurst(this.deps.options, inst.drawKey, n, warningAt)) this.recommend(inst);
      });
    this.deps.timeline.at(burstAt, () => {
      const now = this.deps.clock.nowSeconds();
      for (const inst of this.deps.cloud.liveInPool(pool))
        this.scheduleReclaim(inst, now + SPOT_NOTICE_SECONDS);
      this.scheduleBurst(pool, n + 1, now);
    });
  }

  private recommend(inst: SimulatedInstance): void {
    if (!reclaimable(inst) || this.recommended.has(inst)) return;
    this.recommended.add(inst);
    this.rebalanceRecommendations += 1;
    if (this.deps.options.noticeHandling === 'checkpoint-and-drain')
      this.deps.tell(inst.instanceId, { kind: 'rebalance-recommendation' });
  }

  private notice(inst: SimulatedInstance, at: number): void {
    const handling = this.deps.options.noticeHandling;
    if (handling === 'none' || !reclaimable(inst) || this.noticed.has(inst)) return;
    this.noticed.add(inst);
    if (handling === 'checkpoint-and-drain') this.deps.evacuate(inst.instanceId);
    else this.deps.evict(inst.instanceId, inst.availabilityZone);
    this.deps.tell(inst.instanceId, { kind: 'spot-interruption', time: new Date(at * 1000).toISOString() });
  }

  private reclaim(inst: SimulatedInstance): void {
    if (!reclaimable(inst)) return;
    this.interruptions += 1;
    this.deps.reclaimed(inst.instanceId, inst.availabilityZone);
    this.deps.cloud.reclaim(inst.instanceId);
  }
}

/**
 * An instance the market can still warn of or take back: not terminated, nor shutting down at the controller's request
 * (the engine's spot world likewise passes over instances terminating), so its reclaims are counted alike.
 */
function reclaimable(inst: SimulatedInstance): boolean {
  return inst.state !== 'terminated' && inst.state !== 'shutting-down';
}
