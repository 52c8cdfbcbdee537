import { formatIdList } from '../core/id-list.js';
import type { Market } from '../core/market.js';
import { DEFAULT_SPOT_PREFERENCE, type SpotPreference } from '../core/spot.js';
import { NO_INSTANCE_TYPE } from '../queue/admission-views.js';
import { isQueueWait } from '../round/round.js';
import type { DecisionRecord } from '../scheduler/types.js';
import { instanceMarket, MARKET_FALLBACK_EVENT } from './instance-market.js';
import type { OrphanView } from './kept-orphans.js';
import type { ClusterView, WhyRecord } from './service.js';
import { PLACED_TASK_STATES } from './state/lifecycle.js';
import { readRuns, restartCause } from './job-runs.js';
import {
  UnknownRecordError,
  type InstanceRecord,
  type JobRecord,
  type RoundRecord,
  type StateStore,
} from './state-store.js';

/** Read-only views the API shows: the cluster now, and why a job is where it is (from the recorded rounds). */

/** Instances not terminated, the tasks placed on them, and what the launched ones cost per hour. */
export function clusterView(
  store: StateStore,
  priceOf: (instance: InstanceRecord) => number,
  orphans: readonly OrphanView[] = [],
): ClusterView {
  const instances = store.listInstances({
    states: ['requested', 'launching', 'running', 'draining', 'terminating'],
  });
  const tasks = store.listTasks({ states: [...PLACED_TASK_STATES] });
  const onInstance = new Map<string, string[]>();
  for (const t of tasks) {
    if (t.instanceId === undefined) continue;
    onInstance.set(t.instanceId, [...(onInstance.get(t.instanceId) ?? []), t.id]);
  }
  let costPerHour = 0;
  const views = instances.map((i) => {
    const price = priceOf(i);
    if (i.launchedAtSeconds !== undefined) costPerHour += price;
    return { ...i, costPerHour: price, taskIds: onInstance.get(i.id) ?? [] };
  });
  return { instances: views, tasks, costPerHour, orphans };
}

/**
 * The latest rounds that mention a job (waiting, moved, placed), newest first, each led by what happened and why in
 * words. A move says what forced it when an instance the job was on was drained, lost or replaced before the round; a
 * placement of a job whose run had ended back in the queue (its instance or worker lost, an attempt failed, a plan
 * returned it) says it restarted, and why; a round that checkpoint-stopped it so another class reclaims its share
 * says it was preempted.
 */
export function whyJob(store: StateStore, jobId: string, limit = 10): WhyRecord[] {
  const job = store.getJob(jobId);
  if (job === undefined) throw new UnknownRecordError('job', jobId);
  const taskIds = new Set(store.listTasks({ jobId }).map((t) => t.id));
  // The rounds of the job's lifetime only (the newest of them, bounded): a job that ended hours ago has its rounds
  // behind thousands of later ones, which mention it no more.
  const rounds = store.listRounds(Math.max(limit * 20, 200), {
    sinceSeconds: job.submittedAtSeconds,
    untilSeconds: job.finishedAtSeconds,
  });
  // The rounds that moved the job, as the controller carried them out (the diff, not only the scheduler's view),
  // with the event's position: what happened to an instance before it is what the round reacted to. A round is
  // applied once at most and in order, so the newest events as many as the rounds recorded since the oldest one read
  // cover them all, however long the history.
  const oldestRead = rounds.at(-1)?.round;
  const newest = store.latestRound()?.round;
  const since = oldestRead === undefined || newest === undefined ? 0 : newest - oldestRead + 1;
  const movedIn = new Map<number, number>();
  const startedIn = new Map<number, number>();
  const applied: { readonly seq: number; readonly round: number }[] = []; // newest first
  for (const e of store.listEvents({ kind: 'round.applied', newestFirst: true, limit: since })) {
    const data = e.data as { round?: unknown; moved?: unknown; started?: unknown } | undefined;
    if (typeof data?.round !== 'number') continue;
    applied.push({ seq: e.seq, round: data.round });
    if (Array.isArray(data.moved) && data.moved.includes(jobId)) movedIn.set(data.round, e.seq);
    if (Array.isArray(data.started) && data.started.includes(jobId)) startedIn.set(data.round, e.seq);
  }
  const preemptedIn = preemptions(store, jobId, applied, since);
  // A start after the job's first may be a restart: its runs are read (once) only then.
  const runs =
    job.startedAtSeconds === undefined || startedIn.size === 0 ? undefined : readRuns(store, jobId);
  // Until its dependencies had all succeeded the job was out of every round: say so, not "not placed". A round at the
  // moment the last one ended was planned before it ended (a round records its start).
  const dependencies = (job.spec.dependsOn ?? []).map((id) => ({ id, record: store.getJob(id) }));
  const dependenciesMetAt =
    dependencies.length === 0
      ? Number.NEGATIVE_INFINITY
      : dependencies.every((d) => d.record?.state === 'succeeded')
        ? Math.max(0, ...dependencies.map((d) => d.record?.finishedAtSeconds ?? 0))
        : Number.POSITIVE_INFINITY;
  // What it was held for at a round: the dependencies that had not succeeded by then (as `jobs` and `job` name those
  // not succeeded now), summarised, since an array may wait for all of another.
  const heldAt = (atSeconds: number): string => {
    const waiting = dependencies
      .filter((d) => d.record?.state !== 'succeeded' || (d.record.finishedAtSeconds ?? 0) >= atSeconds)
      .map((d) => d.id);
    return waiting.length === 1
      ? `held for its dependency ${waiting[0] ?? ''}: out of the round until it succeeds`
      : `held for its dependencies (${formatIdList(waiting)}): out of the round until they succeed`;
  };
  // Placed between rounds (on capacity already paid for): the next round found it placed and kept it there, which its
  // record alone would tell as the round's own placement.
  const betweenRounds = store.listEvents({ kind: 'job.placed-between-rounds', jobId });
  const out: WhyRecord[] = [];
  for (const [i, round] of rounds.entries()) {
    if (out.length >= limit) break;
    const appliedSeq = movedIn.get(round.round);
    const before = rounds[i + 1]; // newest first: the round before this one
    const placedBefore = betweenRounds.findLast(
      (e) => e.atSeconds <= round.atSeconds && (before === undefined || e.atSeconds > before.atSeconds),
    );
    const cause =
      appliedSeq === undefined || before === undefined
        ? undefined
        : moveCause(store, round, before, taskIds, appliedSeq);
    const startedSeq = startedIn.get(round.round);
    const restart =
      runs === undefined || startedSeq === undefined ? undefined : restartCause(runs, startedSeq);
    const summary =
      round.atSeconds <= dependenciesMetAt
        ? heldAt(round.atSeconds)
        : summarizeForJob(
            round,
            jobId,
            taskIds,
            appliedSeq !== undefined,
            cause,
            restart,
            preemptedIn.get(round.round),
          );
    if (summary === undefined) continue;
    const kept =
      placedBefore !== undefined && summary.startsWith('placed on ')
        ? `${placedBefore.message}; kept there by this round (${summary})`
        : summary;
    out.push({ round: round.round, atSeconds: round.atSeconds, summary: kept, decision: round.decision });
  }
  return out;
}

/**
 * The rounds that checkpoint-stopped the job to give its capacity back to another class, with why in words. The round
 * recorder appends a victim's `queue.preempted` event right after the round's `round.applied` one, so an event belongs
 * to the newest round applied before it; one read of the job's own events of that kind, no more of them than rounds
 * in the window, and none older than the oldest round read.
 */
function preemptions(
  store: StateStore,
  jobId: string,
  applied: readonly { readonly seq: number; readonly round: number }[],
  limit: number,
): Map<number, string> {
  const out = new Map<number, string>();
  const oldest = applied.at(-1);
  if (oldest === undefined) return out;
  const prefix = `job ${jobId} checkpointed back to the queue: `;
  for (const e of store.listEvents({ jobId, kind: 'queue.preempted', newestFirst: true, limit })) {
    if (e.seq < oldest.seq) break;
    const round = applied.find((a) => a.seq < e.seq)?.round;
    if (round === undefined || out.has(round)) continue;
    const forClassId = (e.data as { forClassId?: unknown } | undefined)?.forClassId;
    const reason = e.message?.startsWith(prefix) === true ? e.message.slice(prefix.length) : undefined;
    const forClass = typeof forClassId === 'string' ? `class ${forClassId}` : 'another class';
    out.set(
      round,
      `preempted: checkpointed back to the queue so ${forClass} reclaims its share${reason === undefined || reason === '' ? '' : ` (${reason})`}`,
    );
  }
  return out;
}

/**
 * What forced a move: an instance the job was on in the previous round that was drained, lost or replaced before
 * the move was applied ("inst-2 was drained"). Undefined when the plan moved the job by choice.
 */
function moveCause(
  store: StateStore,
  round: RoundRecord,
  before: RoundRecord,
  taskIds: ReadonlySet<string>,
  appliedSeq: number,
): string | undefined {
  const now = new Set(onInstances(round, taskIds));
  // Draining an instance the plan left out is this round's doing, not a cause of it.
  const ownDoing = `not in the plan of round ${round.round}`;
  for (const id of onInstances(before, taskIds)) {
    if (now.has(id)) continue;
    const left = store
      .listEvents({ kind: 'instance.state', instanceId: id })
      .filter((e) => e.seq < appliedSeq)
      .map((e) => e.data as { to?: unknown; reason?: unknown } | undefined)
      .filter((d) => d?.to === 'draining' || d?.to === 'terminating' || d?.to === 'terminated')
      .find((d) => d?.reason !== ownDoing);
    if (left === undefined) continue;
    if (left.reason === 'drained by request') return `${id} was drained`;
    return `${id} was ${String(left.to)}${typeof left.reason === 'string' ? ` (${left.reason})` : ''}`;
  }
  return undefined;
}

function onInstances(round: RoundRecord, taskIds: ReadonlySet<string>): string[] {
  return round.configuration.instances.filter((i) => i.taskIds.some((t) => taskIds.has(t))).map((i) => i.id);
}

/**
 * A round for one job, reason first: "moved to inst-4 (c7i.xlarge, new) because inst-2 was drained", "kept
 * waiting: class small is at its share of the capped capacity (2nd in its queue)", "placed on inst-1 (…)", "placed
 * on inst-5 (…), restarted because inst-4 was lost: worker stopped heartbeating" (`restart`: why its last run ended),
 * "preempted: checkpointed back to the queue so class beta reclaims its share (…)" (`preempted`, in words).
 * The plan's numbers are in the decision record; `fleetwise why` prints them after this line.
 */
export function summarizeForJob(
  round: RoundRecord,
  jobId: string,
  taskIds: ReadonlySet<string>,
  moved = false,
  cause?: string,
  restart?: string,
  preempted?: string,
): string | undefined {
  const { decision, configuration } = round;
  const parts: string[] = [];
  const waiting = decision.waiting.find((w) => w.jobId === jobId);
  if (waiting !== undefined)
    parts.push(
      `kept waiting: ${waitInWords(waiting.cap, waiting.brokenAlone?.join(', ') ?? waiting.capName)}`,
    );
  const pinned = decision.pinned.find((p) => p.jobId === jobId);
  if (pinned !== undefined) parts.push(`kept in place: ${pinned.why}`);
  const placed = configuration.instances.filter((i) => i.taskIds.some((t) => taskIds.has(t)));
  const chosen = decision.candidates.find((c) => c.name === decision.chosen);
  if (placed.length > 0) {
    const where = placed.map((i) => `${i.id} (${i.typeName}${i.isNew ? ', new' : ''})`).join(', ');
    if (moved || chosen?.movedJobs.includes(jobId) === true)
      parts.push(`moved to ${where} ${cause === undefined ? byChoice(decision) : `because ${cause}`}`);
    else parts.push(`placed on ${where}${restart === undefined ? '' : `, restarted because ${restart}`}`);
  } else if (preempted !== undefined) parts.push(preempted);
  else if (waiting === undefined) parts.push('not placed by this plan');
  if (parts.length === 0) return undefined;
  return parts.join('; ');
}

function byChoice(decision: DecisionRecord): string {
  return decision.chosen === 'baseline'
    ? `by ${decision.scheduler}'s plan`
    : `because plan ${decision.chosen} saves more than the move costs`;
}

const WAIT_REASONS: Readonly<Record<string, (classId: string, capName: string | undefined) => string>> = {
  'class-share': (c) => `class ${c} is at its share of the capped capacity`,
  caps: (_c, name) =>
    name === undefined || name === 'caps'
      ? 'admitting it now would break a cap'
      : `admitting it now would break ${name}`,
  'never-fits': (c, name) => `it can never run: ${neverFitsCause(c, name)}`,
};

/** What a never-fits job breaks alone, by the cap its round recorded (none before rounds recorded it). */
function neverFitsCause(classId: string, capName: string | undefined): string {
  if (capName === undefined) return `it breaks a cap alone, or needs more than class ${classId}'s maxShare`;
  if (capName === NO_INSTANCE_TYPE) return 'no instance type of the catalog can host one of its tasks';
  if (capName === `class ${classId} maxShare`) return `it needs more than class ${classId}'s maxShare`;
  if (capName === 'caps') return 'it breaks a cap alone';
  return `alone it breaks ${capName}`;
}

/**
 * A decision's `waiting` entry in words: the queue's (`queue small: class-share, position 2`, with the cap's name
 * when recorded, or every cap a never-fits job breaks alone) or a cap's name.
 */
export function waitInWords(cap: string, capName?: string): string {
  if (!isQueueWait(cap)) return `placing it would break the cap ${cap}`;
  const match = /^queue (.+): ([a-z-]+)(?:, position (\d+))?$/.exec(cap);
  const words = match === null ? undefined : WAIT_REASONS[match[2] as string];
  if (match === null || words === undefined) return `in the ${cap}`;
  const position = match[3] === undefined ? '' : ` (position ${match[3]} in its queue)`;
  return `${words(match[1] as string, capName)}${position}`;
}

/** An instance a job's tasks are on, and the market it was bought in. */
export interface JobInstanceMarket {
  readonly id: string;
  readonly typeName: string;
  readonly availabilityZone?: string | undefined;
  readonly market: Market;
  /** For a job that may use spot on an on-demand instance: why it is on demand, as far as the records say. */
  readonly onDemandBecause?: string | undefined;
}

/** How a job's capacity is bought: its spot setting and the market of each instance its tasks are on now. */
export interface JobMarketView {
  readonly spot: SpotPreference;
  readonly spotMaxDelayMinutes?: number | undefined;
  readonly instances: readonly JobInstanceMarket[];
}

/**
 * The market of each instance a job's tasks are on, and for a job that may use spot, why an on-demand one is on demand
 * where the records say: the launch asked for spot and got on demand (the market-fallback event's reason), the
 * instance carries a job that never runs on spot, or it was bought before the job came.
 */
export function jobMarket(store: StateStore, job: JobRecord): JobMarketView {
  const spot = job.spec.spot ?? DEFAULT_SPOT_PREFERENCE;
  const maxDelay = job.spec.spotMaxDelaySeconds;
  const ids = [
    ...new Set(
      store.listTasks({ jobId: job.id }).flatMap((t) => (t.instanceId === undefined ? [] : [t.instanceId])),
    ),
  ].sort();
  const instances = ids.flatMap((id): JobInstanceMarket[] => {
    const instance = store.getInstance(id);
    if (instance === undefined) return [];
    const market = instanceMarket(store, id);
    const because = market === 'spot' || spot === 'never' ? undefined : onDemandReason(store, job, instance);
    return [
      {
        id,
        typeName: instance.typeName,
        ...(instance.availabilityZone === undefined ? {} : { availabilityZone: instance.availabilityZone }),
        market,
        ...(because === undefined ? {} : { onDemandBecause: because }),
      },
    ];
  });
  return {
    spot,
    ...(maxDelay === undefined ? {} : { spotMaxDelayMinutes: maxDelay / 60 }),
    instances,
  };
}

function onDemandReason(store: StateStore, job: JobRecord, instance: InstanceRecord): string | undefined {
  const fallback = store.listEvents({ instanceId: instance.id, kind: MARKET_FALLBACK_EVENT, limit: 1 })[0];
  if (fallback !== undefined) {
    const why = (fallback.data as { why?: unknown } | undefined)?.why;
    return `its launch asked for spot and got on demand${typeof why === 'string' ? `: ${why}` : ''}`;
  }
  // Another job on it that never runs on spot kept it on demand (which job is not said: it may be another team's).
  const others = new Set(
    store
      .listTasks({ instanceId: instance.id, states: [...PLACED_TASK_STATES] })
      .map((t) => t.jobId)
      .filter((id) => id !== job.id),
  );
  if ([...others].some((id) => store.getJob(id)?.spec.spot === 'never'))
    return 'it shares the instance with a job that never runs on spot';
  if (instance.requestedAtSeconds < job.submittedAtSeconds)
    return 'the job was placed on an on-demand instance bought before it was submitted';
  // Otherwise the round chose on demand (no spot offering, the interruption risk, the job's spotMaxDelayMinutes, no
  // spot market): its decision record keeps no reason per instance, and a guess would read as a record.
  return undefined;
}
