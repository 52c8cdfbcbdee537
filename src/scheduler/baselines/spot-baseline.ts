import type { Catalog } from '../../core/catalog.js';
import type { ClusterSnapshot } from '../../core/model.js';
import { assignMarkets, spotPlanningCatalog } from '../market-choice.js';
import { PriceBook } from '../reservation-price.js';
import type { Plan, Scheduler, ThroughputObservation } from '../types.js';
import { KarpenterScheduler } from './karpenter.js';
import { NoPackingScheduler } from './no-packing.js';

/**
 * The spot baselines (research digest industry-anchors §1.4, §3): a baseline planning at spot prices whose every new
 * instance is bought on spot without pricing the interruption risk. What an interruption does to their jobs is the
 * simulator's (run-request.ts `noticeHandlingOf`): evicted, they restart from their last periodic checkpoint.
 * - `karpenter-spot`: Karpenter's provisioning and consolidation with `capacity-type: spot` (EC2 Fleet
 *   price-capacity-optimized over the fitting types), with its default feature gates: spot nodes are consolidated by
 *   deletion only (no spot-to-spot replacement);
 * - `skypilot-spot`: SkyPilot managed jobs, one instance per task of a job (No-Packing), spot first, in the type's
 *   cheapest zone (its optimizer minimizes nodes × $/h × runtime), and on a preemption the job relaunches in the
 *   cheapest zone but the one it lost (EAGER_NEXT_REGION, with zones for regions).
 */
export class SpotBaseline implements Scheduler {
  readonly name: string;
  private readonly inner: Scheduler;
  private readonly onDemand: PriceBook;

  constructor(
    private readonly catalog: Catalog,
    private readonly kind: 'karpenter-spot' | 'skypilot-spot',
  ) {
    this.name = kind;
    const spotPriced = spotPlanningCatalog(catalog);
    this.inner =
      kind === 'karpenter-spot'
        ? new KarpenterScheduler(spotPriced, { policy: 'WhenEmptyOrUnderutilized', spotNodes: true })
        : new NoPackingScheduler(spotPriced);
    this.onDemand = new PriceBook(catalog);
  }

  observe(snapshot: ClusterSnapshot, observations: readonly ThroughputObservation[]): void {
    this.inner.observe(snapshot, observations);
  }

  plan(snapshot: ClusterSnapshot): Plan {
    const plan = this.inner.plan(snapshot);
    const jobs = new Map(snapshot.jobs.map((j) => [j.id, j]));
    const tasks = new Map(snapshot.tasks.map((t) => [t.id, t]));
    const instances = assignMarkets(plan.configuration.instances, {
      catalog: this.catalog,
      snapshot,
      riskBlind: true,
      rpPerHourOfJob: (id) =>
        (jobs.get(id)?.taskIds ?? []).reduce((s, t) => {
          const task = tasks.get(t);
          return s + (task === undefined ? 0 : this.onDemand.reservationPrice(task.demand));
        }, 0),
      ...(this.kind === 'skypilot-spot'
        ? {
            zoneOrder: 'cheapest' as const,
            // EAGER_NEXT_REGION: the zone of the job's last preemption is blocked for its relaunch.
            avoidZones: (ids: readonly string[]) =>
              ids.flatMap((id) => jobs.get(id)?.interruptedZones?.slice(-1) ?? []),
          }
        : {}),
    });
    return { ...plan, configuration: { instances } };
  }

  fork(): Scheduler {
    return new SpotBaseline(this.catalog, this.kind);
  }
}
