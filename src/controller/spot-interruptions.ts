import type { CloudProvider } from '../cloud/provider.js';
import { SPOT_NOTICE_SECONDS, UNAVAILABLE_OFFERING_SECONDS, type SpotNoticeTimes } from '../core/spot.js';
import { noticeTimeMs } from '../protocol/notice-time.js';
import type { Clock } from './clock.js';
import type { ControllerLogger } from './seams.js';
import type { EventRecord, InstanceRecord, StateStore } from './state-store.js';
import type { RoundCause } from './service.js';

/**
 * What the controller does when EC2 warns that it reclaims a spot instance, whether a worker read the notice from its
 * metadata service (the heartbeat's `interruption`) or EventBridge put it on the interruption queue
 * (interruption-queue.ts). Karpenter's interruption controller is the model (research digest industry-anchors.md
 * §1.4): drain the node, provision the replacement in parallel, mark the offering unavailable.
 *
 *   spot-interruption         the instance is drained now: the next round (requested at once) plans its tasks
 *                             elsewhere through the one round every drain goes through, its worker has already
 *                             checkpointed and stopped them (or does when asked), and the reconciler terminates it
 *                             once it is empty. Its offering (type, zone, spot) is marked unavailable for launches,
 *                             also when the instance is already terminating or terminated (nothing else changes).
 *   rebalance-recommendation  recorded (an event, which the snapshot reads: snapshot.ts); a round is requested at
 *                             once, in which Eva prices the instance's risk and moves off the tasks whose risk pays
 *                             their move (a priced proactive move, src/scheduler/spot-cost.ts `rebalanceRiskPerHour`);
 *                             the others stay. The offering is not marked unavailable, as Karpenter does not mark it
 *                             on a recommendation: it is EC2's earlier, unguaranteed warning for one instance, often
 *                             with no reclaim behind it, and a launch moved off the pool pays a dearer pool's price
 *                             for the instance's whole life.
 *
 * Level-triggered: a worker repeats its notice in every heartbeat and the queue may deliver an event twice, so a
 * second notice for an instance (or one for an instance gone) changes nothing. The provider keeps a closed pool in
 * memory only, so a controller that starts again closes the pools of the notices it recorded within the provider's
 * window for what is left of their windows (`reclosePools`).
 */

export type InterruptionKind = 'spot-interruption' | 'rebalance-recommendation';

/** The event recording an instance's spot interruption notice (once per instance). */
export const SPOT_INTERRUPTION_EVENT = 'instance.spot-interruption';

/** Whether EC2 gave the instance its spot interruption notice. */
export function hasSpotNotice(store: StateStore, instanceId: string): boolean {
  return store.listEvents({ instanceId, kind: SPOT_INTERRUPTION_EVENT, limit: 1 }).length > 0;
}

/**
 * The instance's spot interruption notice as recorded (one read of the store): when it was recorded, and when EC2
 * acts as the notice gave it, if that is a time (notice-time.ts: a record from before times were checked may hold
 * none; noticeActionAtMs then counts from the record). Undefined without a notice.
 */
export function spotNotice(
  store: Pick<StateStore, 'listEvents'>,
  instanceId: string,
): SpotNoticeTimes | undefined {
  const event = store.listEvents({ instanceId, kind: SPOT_INTERRUPTION_EVENT, limit: 1 })[0];
  if (event === undefined) return undefined;
  const time = recordedNoticeTime(event);
  return {
    actionAtMs: noticeTimeMs(time),
    seenAtMs: event.atSeconds * 1000,
  };
}

export interface InterruptionReport {
  readonly kind: InterruptionKind;
  /** When EC2 acts (spot-interruption) or recommended (rebalance), as EC2 gave it (ISO 8601), if known. */
  readonly time?: string | undefined;
  /** Who told the controller. */
  readonly source: 'worker' | 'interruption-queue';
}

/** What the controller asks of its cloud here: closing a spot pool, and for how long the cloud keeps it closed. */
export type SpotPoolCloser = Pick<CloudProvider, 'markOfferingUnavailable' | 'unavailableOfferingSeconds'>;

export interface SpotInterruptionsDeps {
  readonly store: StateStore;
  readonly log: ControllerLogger;
  readonly provider: SpotPoolCloser | undefined;
  readonly requestRound: (reason: string, cause?: RoundCause) => void;
  /** The store's time (epoch seconds): how old a recorded notice is. */
  readonly clock: Pick<Clock, 'nowSeconds'>;
}

const DRAINABLE: readonly InstanceRecord['state'][] = ['requested', 'launching', 'running'];

/**
 * How many notices a controller started again reads first: a long-lived cluster keeps every notice it was ever
 * given and only those of the last window matter, so the read grows (doubling) only while it comes back full with
 * its oldest notice still inside the window.
 */
export const RECLOSE_PAGE_EVENTS = 64;

export class SpotInterruptions {
  /** Instances whose rebalance recommendation was recorded (once per instance and process). */
  private readonly rebalanced = new Set<string>();
  /** Instances past draining whose notice marked their offering (once per instance and process). */
  private readonly markedLate = new Set<string>();
  /** Whether this process closed the pools of the notices recorded before it started. */
  private reclosed = false;

  constructor(private readonly deps: SpotInterruptionsDeps) {}

  /**
   * Close the pools of the spot interruption notices recorded in the provider's window (`unavailableOfferingSeconds`,
   * default UNAVAILABLE_OFFERING_SECONDS) again, each for what is left of its window: without it a controller started
   * again inside a window launches straight back into the pool EC2 is reclaiming from, and the notice repeated to it
   * (the worker's heartbeat, the queue's redelivery) finds the notice recorded and closes nothing. Once per process:
   * at start, or at the first notice when that comes first. Returns how many pools it closed.
   */
  reclosePools(): number {
    if (this.reclosed) return 0;
    this.reclosed = true;
    const { store, provider } = this.deps;
    if (provider?.markOfferingUnavailable === undefined) return 0;
    const windowSeconds = provider.unavailableOfferingSeconds ?? UNAVAILABLE_OFFERING_SECONDS;
    const windowStart = this.deps.clock.nowSeconds() - windowSeconds;
    // A pool noticed twice keeps the later window. Each window counts from when EC2 gave the notice, as handle()
    // counted it (a notice is recorded when heard, which may be late), so one whose window has ended closes nothing.
    const pools = new Map<string, { typeName: string; zone: string; sinceSeconds: number }>();
    for (const event of recentNotices(store, windowStart)) {
      const inst = event.instanceId === undefined ? undefined : store.getInstance(event.instanceId);
      if (inst?.availabilityZone === undefined) continue;
      const sinceSeconds = Math.min(
        event.atSeconds,
        noticeGivenAtSeconds(recordedNoticeTime(event)) ?? event.atSeconds,
      );
      if (sinceSeconds <= windowStart) continue;
      const key = `${inst.typeName}@${inst.availabilityZone}`;
      if ((pools.get(key)?.sinceSeconds ?? -Infinity) < sinceSeconds)
        pools.set(key, { typeName: inst.typeName, zone: inst.availabilityZone, sinceSeconds });
    }
    for (const p of pools.values())
      provider.markOfferingUnavailable(p.typeName, p.zone, 'spot', p.sinceSeconds);
    if (pools.size > 0)
      this.deps.log.info('spot pools of recent interruption notices closed again', {
        pools: [...pools.keys()],
      });
    return pools.size;
  }

  /** Act on a notice for one of the cluster's instances (its record id). Returns whether anything changed. */
  handle(instanceId: string, report: InterruptionReport): boolean {
    const { store } = this.deps;
    this.reclosePools();
    const inst = store.getInstance(instanceId);
    if (inst === undefined) return false;
    if (report.kind === 'rebalance-recommendation') {
      if (this.rebalanced.has(inst.id) || !DRAINABLE.includes(inst.state)) return false;
      this.rebalanced.add(inst.id);
      store.appendEvent({
        kind: 'instance.rebalance-recommendation',
        instanceId: inst.id,
        message: `EC2 recommends rebalancing ${inst.id}: it is at elevated risk of a spot interruption (${report.source})`,
        data: { source: report.source, ...(report.time === undefined ? {} : { time: report.time }) },
      });
      this.deps.requestRound(`${inst.id} rebalance recommendation`, 'capacity');
      return true;
    }
    // Already draining (a plan dropped it after a rebalance recommendation, a drain by request) it still needs the
    // notice recorded: its tasks' checkpoint-stops then stop waiting for their new instances to boot (two minutes
    // are for the checkpoint), and its pool is marked so no launch goes back into it. Recorded once per instance.
    const draining = inst.state === 'draining';
    if (!DRAINABLE.includes(inst.state) && !draining) {
      // Already on its way out (terminating, terminated): nothing to drain or record, but EC2 reclaiming it still
      // says its spot pool is short, so no launch goes back into it for a while. Once per instance: its worker
      // repeats the notice in every heartbeat, and each mark would push the pool's window on.
      if (this.markedLate.has(inst.id) || hasSpotNotice(store, inst.id)) return false;
      this.markedLate.add(inst.id);
      return this.markOffering(inst, report);
    }
    if (hasSpotNotice(store, inst.id)) return false;
    const when = report.time === undefined ? '' : ` at ${report.time}`;
    const reason = `spot interruption: EC2 reclaims it${when}`;
    store.transaction(() => {
      if (!draining) store.setInstanceState(inst.id, 'draining', { reason });
      store.appendEvent({
        kind: SPOT_INTERRUPTION_EVENT,
        instanceId: inst.id,
        message: `${inst.id}${inst.cloudId === undefined ? '' : ` (${inst.cloudId})`} receives a spot interruption${when}; draining it and moving its tasks (${report.source})`,
        data: { source: report.source, ...(report.time === undefined ? {} : { time: report.time }) },
      });
    });
    this.markOffering(inst, report);
    this.deps.log.warn(`spot interruption of ${inst.id}${when}: draining it`, {
      cloudId: inst.cloudId,
      source: report.source,
    });
    this.deps.requestRound(`${inst.id} spot interruption`, 'capacity');
    return true;
  }

  /**
   * Whether the instance's offering could be marked (it has a zone, the provider keeps unavailable offerings). Its
   * window counts from when EC2 gave the notice: one heard late (a queue's message kept through an outage) closes the
   * pool for what is left of its window, if anything, not for a whole window from now.
   */
  private markOffering(inst: InstanceRecord, report: InterruptionReport): boolean {
    const provider = this.deps.provider;
    if (inst.availabilityZone === undefined || provider?.markOfferingUnavailable === undefined) return false;
    const givenAt = noticeGivenAtSeconds(report.time);
    if (givenAt !== undefined && givenAt < this.deps.clock.nowSeconds())
      provider.markOfferingUnavailable(inst.typeName, inst.availabilityZone, 'spot', givenAt);
    else provider.markOfferingUnavailable(inst.typeName, inst.availabilityZone, 'spot');
    return true;
  }
}

/** The time a recorded notice gave for EC2's action, as it was recorded (checked where it is read). */
function recordedNoticeTime(event: EventRecord): string | undefined {
  const data = event.data;
  const time =
    typeof data === 'object' && data !== null && !Array.isArray(data)
      ? (data as Record<string, unknown>).time
      : undefined;
  return typeof time === 'string' ? time : undefined;
}

/** When EC2 gave a spot interruption notice (epoch seconds): its lead before the time it acts, when that is known. */
function noticeGivenAtSeconds(actionTime: string | undefined): number | undefined {
  const actionAtMs = noticeTimeMs(actionTime);
  return actionAtMs === undefined ? undefined : actionAtMs / 1000 - SPOT_NOTICE_SECONDS;
}

/** The spot interruption notices recorded after `windowStart` (epoch seconds), newest first. */
function recentNotices(store: Pick<StateStore, 'listEvents'>, windowStart: number): EventRecord[] {
  for (let limit = RECLOSE_PAGE_EVENTS; ; limit *= 2) {
    const events = store.listEvents({ kind: SPOT_INTERRUPTION_EVENT, newestFirst: true, limit });
    const older = events.findIndex((e) => e.atSeconds <= windowStart);
    if (older >= 0) return events.slice(0, older);
    if (events.length < limit) return events;
  }
}
