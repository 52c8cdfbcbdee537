import { z } from 'zod';
import { TAG_LAUNCH_TOKEN, type CloudInstance } from '../../cloud/provider.js';
import { JOB_CAPACITY_LOST_EVENT } from '../snapshot.js';
import { launchedUnderPreviousStore, previousStoreIds } from '../state/lineage.js';
import type { InstanceRecord } from '../state-store.js';
import { LIVE_INSTANCE_STATES, type ReconcileContext } from './context.js';
import { releaseTasksOn } from './jobs.js';
import { terminateFailed } from './effects/terminations.js';
import { SPOT_RECLAIMED_EVENT } from '../cost-accounting.js';
import {
  launchAskedForSpot,
  launchedOnSpot,
  recordAdoptedMarket,
  recordMarketFallback,
} from '../instance-market.js';
import { forgetStoppedWithController, stoppedWithController } from '../stopped-with-controller.js';
import { WORKER_LOST_EVENT } from '../worker-liveness.js';
import { JOB_RAN_UNTIL_EVENT } from '../job-transitions.js';
import { clearLaunchError } from '../launch-error-records.js';

/**
 * The store against the cloud: a launch whose instance exists (found by its launch-token tag) is adopted rather than
 * relaunched; instances EC2 has that the store does not know are orphans, handled by the orphan policy (kept and
 * reported by default, or adopted, or terminated); instances that vanished are marked terminated and their tasks
 * replanned.
 */

export interface SyncSummary {
  readonly listed: number;
  readonly adopted: readonly string[];
  /** Records made for orphans (policies adopt and terminate, and twins of this controller's own launches). */
  readonly orphans: readonly string[];
  /** Orphans left alone (policy keep): running, unrecorded, reported. */
  readonly kept: readonly CloudInstance[];
  readonly vanished: readonly string[];
}

/** The launch token an adopted orphan's record gets: not the tag's, which another record may hold. */
export function adoptedLaunchToken(cloudId: string): string {
  return `adopted-${cloudId}`;
}

/**
 * Compare the store with the cloud's view of the cluster (one List call). Level-triggered: safe to run at any time,
 * and the whole of crash recovery for launches and terminations.
 */
export async function syncWithCloud(ctx: ReconcileContext): Promise<SyncSummary> {
  const cloud = await ctx.provider.list(ctx.settings.clusterName);
  const now = ctx.now();
  const byCloudId = new Map(cloud.map((c) => [c.instanceId, c]));
  const byToken = new Map<string, CloudInstance[]>();
  for (const c of cloud) {
    const token = c.tags[TAG_LAUNCH_TOKEN];
    if (token === undefined) continue;
    const list = byToken.get(token);
    if (list === undefined) byToken.set(token, [c]);
    else list.push(c);
  }
  const claimed = new Set<string>();
  const adopted: string[] = [];
  const vanished: string[] = [];
  const lossOf = (inst: InstanceRecord): string | undefined =>
    inst.cloudId === undefined ? undefined : lossReason(ctx, inst, byCloudId.get(inst.cloudId), now);
  let records = ctx.store.listInstances({ states: [...LIVE_INSTANCE_STATES] });
  const lost = records.filter((inst) => lossOf(inst) !== undefined);
  let ends = new Map<string, CloudEnd>();
  if (lost.length > 0) {
    ends = await endTimes(ctx, lost, byCloudId);
    // Read again after that look: the API may have changed a record meanwhile.
    records = ctx.store.listInstances({ states: [...LIVE_INSTANCE_STATES] });
  }
  const stopped = stoppedWithController(ctx.store);
  // One commit for the whole comparison (a launch wave turns hundreds of instances running in one pass): each
  // commit syncs SQLite's WAL on the event loop.
  ctx.store.transaction(() => {
    for (const inst of records) {
      if (inst.cloudId !== undefined) {
        claimed.add(inst.cloudId);
        const seen = byCloudId.get(inst.cloudId);
        const loss = lossOf(inst);
        if (loss !== undefined) {
          const stoppedAt = stopped[inst.cloudId];
          const end = ends.get(inst.cloudId);
          loseInstance(ctx, inst, loss, end?.atSeconds ?? stoppedAt, stoppedAt !== undefined, end?.bySpot);
          vanished.push(inst.id);
        } else if (seen?.state === 'running' && inst.state === 'launching') {
          ctx.store.setInstanceState(inst.id, 'running', { availabilityZone: seen.availabilityZone });
        }
        continue;
      }
      // No cloud id yet: a launch that may have happened before a crash. Its token finds it.
      const found = (byToken.get(inst.launchToken) ?? []).filter((c) => !claimed.has(c.instanceId));
      const first = found[0];
      if (first === undefined) continue;
      claimed.add(first.instanceId);
      adoptLaunch(ctx, inst, first);
      adopted.push(inst.id);
    }
    // What the stop wrote down is done with once its instance is closed, whoever closed it.
    if (Object.keys(stopped).length > 0) {
      const open = new Set(
        ctx.store.listInstances({ states: [...LIVE_INSTANCE_STATES] }).map((i) => i.cloudId),
      );
      forgetStoppedWithController(
        ctx.store,
        Object.keys(stopped).filter((id) => !open.has(id)),
      );
    }
  });
  const orphans: string[] = [];
  const kept: CloudInstance[] = [];
  let launchTokens: ReadonlySet<string> | undefined;
  let previousIds: readonly string[] | undefined;
  for (const c of cloud) {
    if (claimed.has(c.instanceId) || c.state === 'shutting-down') continue;
    // Known to the store but closed (declared lost, or replaced): its tasks are elsewhere, so it only costs money.
    const known = ctx.store.findInstanceByCloudId(c.instanceId);
    if (known !== undefined) {
      await terminateStray(ctx, known, c);
      continue;
    }
    // A second instance of one of this controller's own launches (a token that matched several): it never had a
    // worker of ours (registration needs the record's cloud id), so no task of ours is on it.
    launchTokens ??= new Set(ctx.store.listInstances().map((i) => i.launchToken));
    const token = c.tags[TAG_LAUNCH_TOKEN];
    if (token !== undefined && launchTokens.has(token))
      orphans.push(handleOrphan(ctx, c, 'a second instance of a launch of ours').id);
    // Launched by this cluster after the backup this state was restored from: its tasks are this state's jobs'.
    else if (
      ctx.settings.orphanPolicy === 'keep' &&
      !launchedUnderPreviousStore((previousIds ??= previousStoreIds(ctx.store)), token)
    )
      kept.push(c);
    else orphans.push(handleOrphan(ctx, c).id);
  }
  ctx.deps.onOrphansKept?.(kept);
  return { listed: cloud.length, adopted, orphans, kept, vanished };
}

/**
 * Why a record with a cloud id is lost, or undefined while it is not: the cloud no longer lists it, or lists it
 * stopping or gone. One being terminated is left to the terminate step, and one just launched to EC2's eventual
 * consistency (DescribeInstances may not list it yet right after RunInstances).
 */
function lossReason(
  ctx: ReconcileContext,
  inst: InstanceRecord,
  seen: CloudInstance | undefined,
  now: number,
): string | undefined {
  if (inst.state === 'terminating') return undefined;
  if (seen === undefined) {
    const since = inst.launchedAtSeconds ?? inst.requestedAtSeconds;
    return now - since < ctx.settings.vanishGraceSeconds
      ? undefined
      : (ctx.provider.vanishedReason ?? 'vanished from EC2');
  }
  return seen.state === 'shutting-down' || seen.state === 'stopping' || seen.state === 'stopped'
    ? `EC2 reports it ${seen.state}`
    : undefined;
}

/**
 * When the cloud says each lost instance ended (seconds), where it can: a vanished one is looked for among the
 * terminated (EC2 lists them for about an hour), asked only when one vanished. A failed look leaves the times
 * unknown (the instances then end now, as before), never the sync undone.
 */
async function endTimes(
  ctx: ReconcileContext,
  lost: readonly InstanceRecord[],
  listed: ReadonlyMap<string, CloudInstance>,
): Promise<Map<string, CloudEnd>> {
  const ends = new Map<string, CloudEnd>();
  const note = (c: CloudInstance | undefined): void => {
    if (c === undefined) return;
    ends.set(c.instanceId, {
      atSeconds: c.endedAt === undefined ? undefined : c.endedAt.getTime() / 1000,
      bySpot: c.endedBySpotInterruption,
    });
  };
  const vanished = lost.filter((i) => !listed.has(i.cloudId as string));
  for (const inst of lost) note(listed.get(inst.cloudId as string));
  if (vanished.length === 0) return ends;
  try {
    const all = await ctx.provider.list(ctx.settings.clusterName, { includeTerminated: true });
    const wanted = new Set(vanished.map((i) => i.cloudId));
    for (const c of all) if (wanted.has(c.instanceId)) note(c);
  } catch (e) {
    ctx.log.warn('could not list terminated instances to learn when the lost ones ended; closing them now', {
      error: (e as Error).message,
    });
  }
  return ends;
}

/** What the cloud says of how a lost instance ended, each part where it can say. */
interface CloudEnd {
  readonly atSeconds: number | undefined;
  /** EC2 ended it as a spot interruption (true), or someone else did (false). */
  readonly bySpot: boolean | undefined;
}

/** A launch recorded without its result (crash between RunInstances and the store): attach the instance found. */
function adoptLaunch(ctx: ReconcileContext, inst: InstanceRecord, cloud: CloudInstance): void {
  ctx.store.transaction(() => {
    const change = {
      cloudId: cloud.instanceId,
      availabilityZone: cloud.availabilityZone,
      placementGroup: cloud.placementGroup ?? null,
      reason: 'found by launch token',
      // Billed from EC2's launch time, not from this sync: the controller may have been down for hours since.
      launchedAtSeconds: cloud.launchTime === undefined ? undefined : cloud.launchTime.getTime() / 1000,
    };
    if (inst.state === 'requested') ctx.store.setInstanceState(inst.id, 'launching', change);
    else ctx.store.setInstanceState(inst.id, inst.state, change);
    if (cloud.state === 'running' && ctx.store.getInstance(inst.id)?.state === 'launching')
      ctx.store.setInstanceState(inst.id, 'running');
    // A spot launch that fell back to on demand before the crash: only the cloud's listing says so now.
    if (cloud.market === 'on-demand' && launchAskedForSpot(ctx.store, inst.id))
      recordMarketFallback(ctx.store, inst.id, 'found by its launch token running on demand');
    for (const intent of ctx.pendingIntentsFor('launch', inst.id)) ctx.store.completeIntent(intent.id);
    clearLaunchError(ctx.store, inst.id);
  });
  ctx.log.info('adopted a launched instance found by its launch token', {
    instanceId: inst.id,
    cloudId: cloud.instanceId,
  });
}

/**
 * An instance tagged with this cluster that the store does not know (a lost database, a launch whose record was
 * rolled back, or someone else's launch with our tags), under an explicit policy (`keep`, the default, never gets
 * here: such an instance may run tasks nobody accounts for). It gets a record, so its cost is accounted for: adopted,
 * the plan uses it or drops it; under the terminate policy (or a type the catalog lacks, or a twin of our own launch)
 * it is drained at once and terminated by the next terminate pass.
 */
function handleOrphan(ctx: ReconcileContext, cloud: CloudInstance, twin?: string): InstanceRecord {
  const knownType = ctx.catalog.types.some((t) => t.name === cloud.typeName);
  const terminate = ctx.settings.orphanPolicy === 'terminate' || !knownType || twin !== undefined;
  const record = ctx.store.transaction(() => {
    const inst = ctx.store.createInstance({
      typeName: cloud.typeName,
      availabilityZone: cloud.availabilityZone,
      placementGroup: cloud.placementGroup,
      launchToken: adoptedLaunchToken(cloud.instanceId),
    });
    ctx.store.setInstanceState(inst.id, 'launching', {
      cloudId: cloud.instanceId,
      availabilityZone: cloud.availabilityZone,
      reason: 'orphan found in EC2',
    });
    recordAdoptedMarket(ctx.store, inst.id, cloud.market);
    if (terminate)
      return ctx.store.setInstanceState(inst.id, 'draining', {
        reason:
          twin !== undefined
            ? `orphan: ${twin}`
            : knownType
              ? 'orphan (policy: terminate)'
              : `orphan of type ${cloud.typeName}, not in the catalog`,
      });
    return cloud.state === 'running'
      ? ctx.store.setInstanceState(inst.id, 'running', { reason: 'orphan adopted' })
      : inst;
  });
  ctx.log.warn(`orphan instance ${cloud.instanceId} ${terminate ? 'will be terminated' : 'adopted'}`, {
    instanceId: record.id,
    typeName: cloud.typeName,
  });
  ctx.fault('orphan:recorded', record.id);
  ctx.requestRound('orphan found');
  return record;
}

/** An instance whose record is closed still runs: terminate it (intent first, like every effect). */
async function terminateStray(
  ctx: ReconcileContext,
  known: InstanceRecord,
  cloud: CloudInstance,
): Promise<void> {
  // One intent per stray, however many passes it takes: a pass after a crash, or after a refused call, reuses it.
  const intent =
    ctx
      .pendingIntentsFor('terminate', known.id)
      .find((i) => i.kind === 'terminate' && i.payload.cloudId === cloud.instanceId) ??
    ctx.store.recordIntent({
      kind: 'terminate',
      payload: { instanceId: known.id, cloudId: cloud.instanceId },
    });
  ctx.fault('terminate:before-call', known.id);
  try {
    await ctx.provider.terminate([cloud.instanceId]);
  } catch (e) {
    // As a terminate pass does. Thrown, it failed the whole sync, and with it every pass and round (no launch, start
    // or stop) for as long as EC2 refused.
    terminateFailed(ctx, known.id, e, `terminating stray instance ${cloud.instanceId}`, {
      cloudId: cloud.instanceId,
    });
    return;
  }
  ctx.fault('terminate:after-call', known.id);
  ctx.store.transaction(() => {
    ctx.store.completeIntent(intent.id);
    ctx.store.appendEvent({
      kind: 'instance.stray-terminated',
      instanceId: known.id,
      message: `${cloud.instanceId} still ran after ${known.id} was closed (${known.reason ?? known.state}); terminated`,
    });
  });
  ctx.log.warn(`terminated stray instance ${cloud.instanceId} of closed record ${known.id}`);
}

/** The instance is gone (vanished, stopped, never registered): release its tasks so the next plan places them. */
export function loseInstance(
  ctx: ReconcileContext,
  inst: InstanceRecord,
  cloudReason: string,
  endedAtSeconds: number | undefined,
  stoppedWithController: boolean,
  endedBySpotInterruption: boolean | undefined,
): void {
  // Terminated by the controller's own clean stop (its workers checkpointed first): nothing was lost.
  const reason = stoppedWithController ? 'terminated when the controller stopped' : cloudReason;
  let ended: number | undefined;
  const affected = ctx.store.transaction(() => {
    for (const intent of ctx.pendingIntentsFor('launch', inst.id)) ctx.store.failIntent(intent.id, reason);
    clearLaunchError(ctx.store, inst.id);
    // Billed until it ended, not until this sync noticed: the controller may have been stopped for days.
    const closed = ctx.store.setInstanceState(inst.id, 'terminated', { reason, endedAtSeconds });
    // A spot instance EC2 ended, not this controller: EC2 charges nothing for one it interrupts within its first hour
    // (cost-accounting.ts), so the cost reports need to know who ended it, after restarts too. Ended by a person or
    // other automation (EC2's reason says so), it is charged as any. Gone from the cloud's listing, why is unknown:
    // taken as EC2's doing, the likeliest for a spot instance the controller did not end.
    if (!stoppedWithController && endedBySpotInterruption !== false && launchedOnSpot(ctx.store, inst.id))
      ctx.store.appendEvent({
        kind: SPOT_RECLAIMED_EVENT,
        instanceId: inst.id,
        message: `${inst.id}${inst.cloudId === undefined ? '' : ` (${inst.cloudId})`} on spot ended by EC2: ${reason}`,
        data: { reason },
      });
    // Known only when the cloud (or the stop) said when it ended: otherwise it ended now, as its record says.
    if (endedAtSeconds !== undefined) recordWorkEnd(ctx, inst.id, closed.terminatedAtSeconds, reason);
    const jobs = releaseTasksOn(
      ctx,
      inst.id,
      stoppedWithController ? `instance ${inst.id} ${reason}` : `instance ${inst.id} lost: ${reason}`,
    );
    ended = closed.terminatedAtSeconds;
    // Where each job lost capacity: a recovery may avoid that zone (SkyPilot's EAGER_NEXT_REGION; snapshot.ts).
    if (inst.availabilityZone !== undefined && !stoppedWithController)
      for (const jobId of jobs)
        ctx.store.appendEvent({
          kind: JOB_CAPACITY_LOST_EVENT,
          jobId,
          instanceId: inst.id,
          message: `job ${jobId} lost ${inst.id} in ${inst.availabilityZone}: ${reason}`,
          data: { zone: inst.availabilityZone },
        });
    return jobs;
  });
  const fields = {
    cloudId: inst.cloudId,
    jobs: [...affected],
    ...(ended === undefined ? {} : { endedAt: new Date(ended * 1000).toISOString() }),
  };
  if (stoppedWithController)
    ctx.log.info(`instance ${inst.id} ${reason}; its jobs resume from their checkpoints`, fields);
  else ctx.log.warn(`instance ${inst.id} lost: ${reason}`, fields);
  if (affected.size > 0)
    ctx.requestRound(
      stoppedWithController ? `instance ${inst.id} stopped with the controller` : `instance ${inst.id} lost`,
      'capacity',
    );
}

/**
 * A worker that stopped heartbeating: its tasks go back to the queue (rescheduled from their last checkpoints) and
 * its instance is terminated through the intent discipline like any other: a `terminate` intent is recorded in
 * the same transaction, and `performTerminations` carries it out (and again after a crash).
 */
export function replaceLostWorker(ctx: ReconcileContext, instanceId: string, reason: string): void {
  const affected = ctx.store.transaction(() => {
    const inst = ctx.store.getInstance(instanceId);
    if (inst === undefined || inst.state === 'terminating' || inst.state === 'terminated')
      return new Set<string>();
    recordWorkEnd(ctx, inst.id, lastHeardAt(ctx, inst.id), reason);
    const jobs = releaseTasksOn(ctx, inst.id, reason);
    if (ctx.pendingIntentsFor('terminate', inst.id).length === 0)
      ctx.store.recordIntent({
        kind: 'terminate',
        payload: { instanceId: inst.id, ...(inst.cloudId === undefined ? {} : { cloudId: inst.cloudId }) },
      });
    ctx.store.setInstanceState(inst.id, 'terminating', { reason });
    return jobs;
  });
  if (affected.size > 0) ctx.requestRound(`worker of ${instanceId} lost`, 'capacity');
}

/**
 * The jobs working on the instance (a task of theirs running there) stopped at `ranUntilSeconds`: one event each,
 * before their tasks are released, in the same transaction.
 */
function recordWorkEnd(
  ctx: ReconcileContext,
  instanceId: string,
  ranUntilSeconds: number | undefined,
  why: string,
): void {
  if (ranUntilSeconds === undefined || !Number.isFinite(ranUntilSeconds)) return;
  const jobIds = new Set(
    ctx.store
      .listTasks({ instanceId })
      .filter((t) => t.state === 'running')
      .map((t) => t.jobId),
  );
  for (const jobId of jobIds) {
    const state = ctx.store.getJob(jobId)?.state;
    if (state !== 'running' && state !== 'migrating') continue;
    ctx.store.appendEvent({
      kind: JOB_RAN_UNTIL_EVENT,
      jobId,
      instanceId,
      message: `job ${jobId} worked on ${instanceId} until ${new Date(ranUntilSeconds * 1000).toISOString()}: ${why}`,
      data: { ranUntilSeconds },
    });
  }
}

/** What the event giving a silent worker up says of its silence (worker-liveness.ts). */
const workerLostData = z.object({ silentSeconds: z.number().nonnegative() });

/**
 * When the instance's worker was last heard, as the event that gave it up says (worker-liveness.ts: the silence on
 * the controller's attention clock, never longer than the wall clock's, so this is never before the real last
 * heartbeat); undefined when this controller never heard it.
 */
function lastHeardAt(ctx: ReconcileContext, instanceId: string): number | undefined {
  const [lost] = ctx.store.listEvents({ instanceId, kind: WORKER_LOST_EVENT, newestFirst: true, limit: 1 });
  const data = workerLostData.safeParse(lost?.data);
  return lost === undefined || !data.success ? undefined : lost.atSeconds - data.data.silentSeconds;
}
