import type { MeasuredRtt } from '../core/network.js';
import type { ThroughputObservation } from '../scheduler/types.js';
import type { LatencyMatrixView } from './latency-matrix.js';
import type { Reconciler } from './reconciler.js';
import type { ControllerLogger } from './seams.js';
import type { InstanceRecord, StateStore } from './state-store.js';

/** What the loop asks of the worker side beyond TaskControl (implemented by WorkerTaskControl). */
export interface WorkerFleet {
  takeObservations(): ThroughputObservation[];
  staleInstances(): InstanceRecord[];
  markLost(instanceId: string): void;
  /** Seconds since the instance's worker was last heard by this process (undefined: never). */
  secondsSinceHeartbeat?(instanceId: string): number | undefined;
  /** Measured round trips between instances for this round's snapshot (workers that probe their peers). */
  roundRtts?(): readonly MeasuredRtt[];
  /** The latency matrix as shown. */
  latencyView?(): LatencyMatrixView;
  /** Store the progress heartbeats reported since the last pass (WorkerTaskControl.flushProgress). */
  flushProgress?(): void;
  /** Call `handler` with every heartbeat that carries a spot interruption notice or rebalance recommendation. */
  onInterruption?(handler: InterruptionHandler): void;
  /** The controller stops: nothing of the fleet's runs on in the background. */
  close?(): void;
}

/** A worker's instance (record id) reported EC2's notice (worker-protocol.ts `interruption`). */
export type InterruptionHandler = (
  instanceId: string,
  notice: { readonly kind: 'spot-interruption' | 'rebalance-recommendation'; readonly time: string },
) => void;

/**
 * The event that gives a silent worker's instance up; its data has the seconds since it was last heard, when it was
 * (reconcile/cloud-sync.ts ends its jobs' work there).
 */
export const WORKER_LOST_EVENT = 'instance.worker-lost';

/**
 * A registered worker that stopped heartbeating: its tasks are rescheduled from their last checkpoints and its
 * instance replaced. The termination goes through an intent like every other side effect (reconciler.ts
 * `replaceLostWorker`), so a crash in between cannot leak the instance.
 */
export function replaceSilentWorkers(deps: {
  readonly workers: WorkerFleet;
  readonly store: StateStore;
  readonly log: ControllerLogger;
  readonly reconciler: Reconciler;
}): void {
  for (const inst of deps.workers.staleInstances()) {
    const silent = deps.workers.secondsSinceHeartbeat?.(inst.id);
    deps.workers.markLost(inst.id);
    const reason = `worker of ${inst.id} stopped heartbeating; terminating the instance and rescheduling its tasks`;
    deps.store.appendEvent({
      kind: WORKER_LOST_EVENT,
      instanceId: inst.id,
      message: reason,
      ...(silent === undefined ? {} : { data: { silentSeconds: silent } }),
    });
    deps.log.warn(`worker of ${inst.id} stopped heartbeating; replacing the instance`, {
      cloudId: inst.cloudId,
      // Measured on the controller's attention clock; never heard: not since this controller started serving.
      silentSeconds: silent === undefined ? 'never heard' : Math.round(silent * 10) / 10,
    });
    deps.reconciler.replaceLostWorker(inst.id, reason);
  }
}
