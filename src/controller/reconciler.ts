import type { ConfigurationDiff } from '../scheduler/actions.js';
import type { Plan } from '../scheduler/types.js';
import { syncWithCloud, replaceLostWorker, type SyncSummary } from './reconcile/cloud-sync.js';
import { ReconcileContext, type ReconcilerDeps } from './reconcile/context.js';
import { Launches } from './reconcile/effects/launches.js';
import { PlacementGroupCleanup } from './reconcile/effects/placement-groups.js';
import { checkRegistrations } from './reconcile/effects/registrations.js';
import { performStarts, performStops, stopTasksOfEndedJobs } from './reconcile/effects/tasks.js';
import { pollTaskStatuses } from './reconcile/effects/task-endings.js';
import { performTerminations } from './reconcile/effects/terminations.js';
import {
  applyBetweenRoundsStarts,
  applyPlan,
  type AppliedPlan,
  type BetweenRoundsStart,
} from './reconcile/plan-intents.js';

/**
 * Turning plans into effects, crash-safely (ARCHITECTURE.md "The two runtimes": level-triggered reconciliation).
 *
 * A round's plan is diffed (scheduler/actions.ts) and written to the store in ONE transaction: new instance records
 * with their launch intents, stop and start intents for the tasks that move, task and job states, and instances the
 * plan drops marked `draining`. Effects run afterwards, each re-reading the store first and completing its intent in
 * the same transaction that records its outcome:
 *
 *   launch      pending `launch` intent → CloudProvider.launch with the instance's stored idempotency token
 *   stop        pending `stop-task` intent → TaskControl.stop; the task is released (and re-committed to its
 *               destination when a `start-task` intent waits for it)
 *   start       pending `start-task` intent → TaskControl.start once the instance is running (and its worker
 *               registered) and no other job is still checkpointing off it
 *   terminate   a `draining` instance that nothing occupies → `terminate` intent → CloudProvider.terminate
 *   clean up    placement groups no live instance uses → CloudProvider.deletePlacementGroups (best effort)
 *
 * `syncWithCloud` compares the store with what EC2 lists under the cluster tag: a launch whose instance exists (found by
 * its launch-token tag) is adopted rather than relaunched; instances EC2 has that the store does not know are
 * adopted or terminated (orphan policy); instances that vanished are marked terminated and their tasks replanned.
 * Restarting is therefore just running these steps again: every pending intent is either found done in the cloud or
 * performed (again, idempotently).
 */

export interface ProgressSummary {
  readonly launched: readonly string[];
  readonly started: readonly string[];
  readonly stopped: readonly string[];
  readonly terminated: readonly string[];
  readonly replaced: readonly string[];
  /** Placement groups deleted because no live instance uses them. */
  readonly deletedPlacementGroups?: readonly string[];
  readonly deferredLaunches: number;
}

/** The reconciler's steps (src/controller/reconcile/) over one shared context. */
export class Reconciler {
  private readonly ctx: ReconcileContext;
  private readonly launches: Launches;
  private readonly placementGroups: PlacementGroupCleanup;

  constructor(deps: ReconcilerDeps) {
    this.ctx = new ReconcileContext(deps);
    this.launches = new Launches(this.ctx);
    this.placementGroups = new PlacementGroupCleanup(this.ctx);
  }

  /** Record the round, its diff's intents and `recordAlso`'s writes in one transaction (reconcile/plan-intents.ts). */
  applyPlan(plan: Plan, diff: ConfigurationDiff, recordAlso?: () => void): AppliedPlan {
    return applyPlan(this.ctx, plan, diff, recordAlso);
  }

  /** Starts of jobs placed between rounds, in one transaction (reconcile/plan-intents.ts). */
  applyBetweenRoundsStarts(jobs: readonly BetweenRoundsStart[]): void {
    applyBetweenRoundsStarts(this.ctx, jobs);
  }

  /** Compare the store with the cloud's view of the cluster (reconcile/cloud-sync.ts). */
  syncWithCloud(): Promise<SyncSummary> {
    return syncWithCloud(this.ctx);
  }

  /** A worker that stopped heartbeating: its tasks are released and its instance terminated through an intent. */
  replaceLostWorker(instanceId: string, reason: string): void {
    replaceLostWorker(this.ctx, instanceId, reason);
  }

  /** Carry out every pending effect whose gate is open. Safe to call at any time, any number of times. */
  async progress(): Promise<ProgressSummary> {
    const ctx = this.ctx;
    stopTasksOfEndedJobs(ctx);
    const replaced = ctx.dryRun ? [] : checkRegistrations(ctx);
    const { launched, deferred } = ctx.dryRun ? { launched: [], deferred: 0 } : await this.launches.perform();
    // Launched instances may already run (stand-ins like moto start them at once): look before gating starts on it.
    if (launched.length > 0) await syncWithCloud(ctx);
    // After the launches: a move waits for its new instances only once they are on their way (moveStopGate).
    const stopped = await performStops(ctx);
    const started = await performStarts(ctx);
    // A task that ended frees its room: a start waiting for that room goes now, not at the next pass, which nothing
    // may bring before the next round (the engine starts it at the end, as the start gate allows).
    if ((await pollTaskStatuses(ctx)) > 0) started.push(...(await performStarts(ctx)));
    const terminated = ctx.dryRun ? [] : await performTerminations(ctx);
    const deletedPlacementGroups = await this.placementGroups.perform();
    return {
      launched,
      started,
      stopped,
      terminated,
      replaced,
      deferredLaunches: deferred,
      ...(deletedPlacementGroups.length === 0 ? {} : { deletedPlacementGroups }),
    };
  }
}
