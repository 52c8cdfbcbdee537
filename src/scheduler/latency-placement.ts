import {
  crossZoneCostPerHour,
  crossZoneShare,
  jobPerformance,
  latencyDomain,
  type PlacedInstance,
} from '../core/latency-model.js';
import type { InstancePlacement } from '../core/network.js';
import { fits, type Resources } from '../core/resources.js';
import type { DraftInstance, PlacementRules } from './full-reconfiguration.js';
import type { Composition, PackTask, TaskClass, TaskLatency } from './packing.js';
import type { AwareJob, LatencyView } from './latency-view.js';

/**
 * Latency-aware placement inside Eva's packing (NoMora §5, research digest §10.3): the job's latency factor P_job
 * tags its tasks (their TNRP is multiplied by it), the root goes first and the other tasks follow it (its instance,
 * its placement group, its zone, as NoMora's thresholds allow), and new instances are launched where their tasks'
 * roots are: into the root's placement group and zone, or into a fresh cluster placement group.
 */

/** The P_job a job can expect where it is now, or undefined when not all of it is placed. */
export type StayingPerformance = (jobId: string) => number | undefined;

/**
 * The tag of a task of a job that stays where it is: the P_job it can expect there (`staying`, from the measured round
 * trips: see EvaScheduler's stayingPerformance), else its P_job now.
 */
function stayingTag(
  view: LatencyView,
  job: AwareJob,
  taskId: string,
  staying: StayingPerformance,
): TaskLatency | undefined {
  const p = staying(job.id) ?? view.current(job.id)?.performance;
  if (p === undefined) return undefined;
  return { jobId: job.id, isRoot: taskId === job.rootTaskId, together: p, spread: p };
}

/**
 * The tag of a task of a job being placed: all its tasks on one instance give the curve at the loopback round trip;
 * spread out, it gets the default of the domain its new instances can share with the root (the root's placement group
 * when it has one, else its zone; a fresh placement group when the root is placed too).
 */
function placingTag(
  view: LatencyView,
  job: AwareJob,
  taskId: string,
  anchor: PlacedInstance | undefined,
): TaskLatency {
  const domain =
    anchor === undefined || anchor.placement?.placementGroup !== undefined ? 'placement-group' : 'zone';
  return {
    jobId: job.id,
    isRoot: taskId === job.rootTaskId,
    together: view.domainPerformance(job, 'same-instance'),
    spread: view.domainPerformance(job, domain),
  };
}

function withTag(t: PackTask, latency: TaskLatency | undefined): PackTask {
  return latency === undefined ? t : { ...t, latency };
}

/** The round's tasks with the tags of where they are now (what committed values and pins are computed with). */
export function tagCurrent(
  view: LatencyView,
  tasks: ReadonlyMap<string, PackTask>,
  staying: StayingPerformance = () => undefined,
): Map<string, PackTask> {
  const out = new Map(tasks);
  for (const job of view.jobs.values())
    for (const id of job.taskIds) {
      const t = tasks.get(id);
      if (t !== undefined)
        out.set(id, withTag(t, stayingTag(view, job, id, staying) ?? placingTag(view, job, id, undefined)));
    }
  return out;
}

/**
 * Re-tag the tasks of one packing pass: jobs with a task to place get placing tags (anchored at the root when the
 * pass keeps it on its instance), jobs kept whole keep their current ones.
 */
export function tagForPlacement(
  view: LatencyView,
  kept: readonly { readonly instanceId: string; readonly tasks: readonly PackTask[] }[],
  candidates: readonly PackTask[],
): { kept: PackTask[][]; candidates: PackTask[] } {
  const placing = new Set<string>();
  for (const t of candidates) if (view.jobs.has(t.jobId)) placing.add(t.jobId);
  const anchors = new Map<string, PlacedInstance>();
  for (const k of kept)
    for (const t of k.tasks) {
      const job = view.jobs.get(t.jobId);
      if (job !== undefined && job.rootTaskId === t.id) anchors.set(job.id, view.instance(k.instanceId));
    }
  const tag = (t: PackTask): PackTask => {
    const job = view.jobs.get(t.jobId);
    if (job === undefined || !placing.has(job.id)) return t;
    return withTag(t, placingTag(view, job, t.id, anchors.get(job.id)));
  };
  return { kept: kept.map((k) => k.tasks.map(tag)), candidates: candidates.map(tag) };
}

/**
 * NoMora's placement rules for one packing pass (§5.1, digest §10.3): the root of a latency-sensitive job joins an
 * instance already in the plan only where the rest of its job can follow it closely (the instance is in a placement
 * group, or has room for the whole rest of the job), else it starts a new instance; every other task waits for its
 * root and then goes only where the thresholds admit it (the root's instance, its placement group, its zone) or onto a
 * new instance launched next to the root.
 */
export class LatencyRules implements PlacementRules {
  /** Job → the instance of the plan holding its root. */
  private readonly anchors = new Map<string, DraftInstance>();
  private readonly classesOf = new Map<string, TaskClass[]>();

  constructor(
    private readonly view: LatencyView,
    kept: readonly DraftInstance[],
    classes: readonly TaskClass[],
  ) {
    const roots = new Map<string, string>();
    for (const job of view.jobs.values()) roots.set(job.rootTaskId, job.id);
    for (const d of kept)
      for (const id of d.taskIds) {
        const job = roots.get(id);
        if (job !== undefined) this.anchors.set(job, d);
      }
    for (const cls of classes) {
      const jobId = cls.latency?.jobId;
      if (jobId === undefined) continue;
      const list = this.classesOf.get(jobId);
      if (list === undefined) this.classesOf.set(jobId, [cls]);
      else list.push(cls);
    }
  }

  mayFill(cls: TaskClass, draft: DraftInstance): boolean {
    const job = this.jobOf(cls);
    if (job === undefined) return true;
    if (cls.latency?.isRoot === true)
      return !job.sensitive || this.inGroup(draft.id, draft) || this.roomForRest(job, draft);
    const anchor = this.anchors.get(job.id);
    if (anchor === undefined) return false;
    if (anchor === draft) return true;
    if (anchor.isNew || draft.isNew) return false;
    return this.view.admits(job, this.view.instance(anchor.id), this.view.instance(draft.id));
  }

  mayReuse(comp: Composition, instanceId: string): boolean {
    for (const cls of comp.classes) {
      const job = this.jobOf(cls);
      if (job === undefined) continue;
      if (cls.latency?.isRoot === true) {
        if (job.sensitive && !this.inGroup(instanceId) && countOf(comp, job.id) < this.remaining(job.id))
          return false;
        continue;
      }
      if (comp.classes.some((c) => c.latency?.jobId === job.id && c.latency.isRoot)) continue;
      const anchor = this.anchors.get(job.id);
      if (anchor === undefined || anchor.isNew) return false;
      if (!this.view.admits(job, this.view.instance(anchor.id), this.view.instance(instanceId))) return false;
    }
    return true;
  }

  placed(cls: TaskClass, draft: DraftInstance): void {
    const l = cls.latency;
    if (l?.isRoot === true && !this.anchors.has(l.jobId)) this.anchors.set(l.jobId, draft);
  }

  private jobOf(cls: TaskClass): AwareJob | undefined {
    const id = cls.latency?.jobId;
    return id === undefined ? undefined : this.view.jobs.get(id);
  }

  private inGroup(instanceId: string, draft?: DraftInstance): boolean {
    if (draft?.isNew === true) return false;
    return this.view.instance(instanceId).placement?.placementGroup !== undefined;
  }

  /** Members of the job still to place. */
  private remaining(jobId: string): number {
    return (this.classesOf.get(jobId) ?? []).reduce((n, c) => n + c.count, 0);
  }

  /** Whether the draft has room for every member of the job still to place. */
  private roomForRest(job: AwareJob, draft: DraftInstance): boolean {
    let need: Resources = [draft.used[0], draft.used[1], draft.used[2]];
    for (const cls of this.classesOf.get(job.id) ?? []) {
      const d = cls.demandOn(draft.type.family);
      if (d === undefined) return false;
      need = [need[0] + d[0] * cls.count, need[1] + d[1] * cls.count, need[2] + d[2] * cls.count];
    }
    return fits(need, draft.type.capacity);
  }
}

function countOf(comp: Composition, jobId: string): number {
  let n = 0;
  comp.classes.forEach((c, i) => {
    if (c.latency?.jobId === jobId) n += comp.counts[i] as number;
  });
  return n;
}

/** Job ids by task id, for the aware jobs of the view. */
function jobOfTask(view: LatencyView): Map<string, AwareJob> {
  const out = new Map<string, AwareJob>();
  for (const job of view.jobs.values()) for (const id of job.taskIds) out.set(id, job);
  return out;
}

/** A name for a fresh cluster placement group: the job's root task id, kept to what EC2 names allow. */
export function placementGroupName(rootTaskId: string): string {
  return `fleetwise-${rootTaskId.replace(/[^A-Za-z0-9-]+/g, '-')}`.slice(0, 255);
}

/**
 * Where to launch the plan's new instances: next to the roots of the aware jobs (a job's tasks on them) they hold. A
 * root on an existing instance lends its zone and placement group (its zone alone when it is in none); new instances
 * tied together by jobs whose roots are new too go together into a fresh cluster placement group named after the first
 * root. A new instance holding jobs of several roots goes where most of its aware tasks' roots are. New instances
 * without tasks of aware jobs keep no preference (the plan is Eva's own).
 */
export function assignPlacements(view: LatencyView, drafts: readonly DraftInstance[]): void {
  if (view.jobs.size === 0) return;
  const byTask = jobOfTask(view);
  const draftOf = new Map<string, number>();
  drafts.forEach((d, i) => d.taskIds.forEach((id) => draftOf.set(id, i)));
  // New instances whose jobs' roots are new share a fresh group: union them with the instance holding the root.
  const parent = drafts.map((_, i) => i);
  const find = (i: number): number => {
    while (parent[i] !== i) i = parent[i] = parent[parent[i] as number] as number;
    return i;
  };
  /** Per new instance: votes for an existing anchor's placement (by the aware tasks it holds). */
  const votes = new Map<number, Map<string, { placement: InstancePlacement; count: number }>>();
  drafts.forEach((d, i) => {
    if (!d.isNew) return;
    for (const id of d.taskIds) {
      const job = byTask.get(id);
      if (job === undefined) continue;
      const r = draftOf.get(job.rootTaskId);
      if (r === undefined) continue;
      const root = drafts[r] as DraftInstance;
      if (root.isNew) {
        parent[find(i)] = find(r);
        continue;
      }
      const p = view.instance(root.id).placement;
      if (p?.zone === undefined && p?.placementGroup === undefined) continue;
      const key = `${p.zone ?? ''}\u0000${p.placementGroup ?? ''}`;
      const mine = votes.get(i) ?? new Map<string, { placement: InstancePlacement; count: number }>();
      votes.set(i, mine);
      const seen = mine.get(key);
      mine.set(key, { placement: placementOf(p), count: (seen?.count ?? 0) + 1 });
    }
  });
  const components = new Map<number, number[]>();
  drafts.forEach((d, i) => {
    if (!d.isNew || !d.taskIds.some((id) => byTask.has(id))) return;
    const c = find(i);
    const list = components.get(c);
    if (list === undefined) components.set(c, [i]);
    else list.push(i);
  });
  for (const members of components.values()) {
    const tally = new Map<string, { placement: InstancePlacement; count: number }>();
    for (const i of members)
      for (const [key, v] of votes.get(i) ?? []) {
        const seen = tally.get(key);
        tally.set(key, { placement: v.placement, count: (seen?.count ?? 0) + v.count });
      }
    const best = [...tally.entries()].sort(([ka, a], [kb, b]) => b.count - a.count || (ka < kb ? -1 : 1))[0];
    const target =
      best?.[1].placement ??
      ({
        placementGroup: placementGroupName(
          members
            .flatMap((i) => (drafts[i] as DraftInstance).taskIds)
            .filter((id) => byTask.get(id)?.rootTaskId === id)
            .sort()[0] ??
            [...members.flatMap((i) => (drafts[i] as DraftInstance).taskIds)].sort()[0] ??
            'jobs',
        ),
      } satisfies InstancePlacement);
    for (const i of members) (drafts[i] as DraftInstance).placement = target;
  }
}

function placementOf(p: InstancePlacement): InstancePlacement {
  return {
    ...(p.zone === undefined ? {} : { zone: p.zone }),
    ...(p.placementGroup === undefined ? {} : { placementGroup: p.placementGroup }),
  };
}

/** What a plan does for its aware jobs: each one's estimated P_job, and the $/hour of traffic crossing zones. */
export interface PlanNetwork {
  readonly performance: ReadonlyMap<string, number>;
  readonly crossZoneCostPerHour: number;
}

/**
 * Estimate P_job and the cross-zone traffic cost of every aware job the plan places whole. A job the plan leaves where
 * it is gets the P_job it can expect there (`staying`).
 */
export function planNetwork(
  view: LatencyView,
  drafts: readonly DraftInstance[],
  pricePerGiBEachWay: number,
  staying: StayingPerformance = () => undefined,
): PlanNetwork {
  const current = new Map<string, string | undefined>();
  for (const job of view.jobs.values()) for (const id of job.taskIds) current.set(id, view.instanceOf(id));
  const where = new Map<string, PlacedInstance>();
  for (const d of drafts) {
    const inst: PlacedInstance = d.isNew ? { id: d.id, placement: d.placement } : view.instance(d.id);
    for (const id of d.taskIds) where.set(id, inst);
  }
  const performance = new Map<string, number>();
  let cost = 0;
  for (const job of view.jobs.values()) {
    const placed = job.taskIds.map((id) => where.get(id));
    if (placed.some((p) => p === undefined)) continue;
    const instances = placed as PlacedInstance[];
    const unmoved = job.taskIds.every((id, i) => current.get(id) === instances[i]?.id);
    performance.set(
      job.id,
      (unmoved ? staying(job.id) : undefined) ??
        jobPerformance(job.network.sensitivity, job.network.pattern, job.rootIndex, instances, (a, b) =>
          view.estimator.between(a, b),
        ),
    );
    if (job.chatty) {
      const share = crossZoneShare(
        job.network.pattern,
        job.rootIndex,
        instances,
        (a, b) => latencyDomain(a, b) !== 'cross-zone',
      );
      cost += crossZoneCostPerHour(job.network.gibPerHour, share, pricePerGiBEachWay);
    }
  }
  return { performance, crossZoneCostPerHour: cost };
}

/** The tasks of a draft re-tagged with their jobs' P_job in the plan (the decision rule values the plan with it). */
export function tagWithPlan(
  tasks: readonly PackTask[],
  performance: ReadonlyMap<string, number>,
): { tasks: PackTask[]; changed: boolean } {
  let changed = false;
  const out = tasks.map((t) => {
    const p = t.latency === undefined ? undefined : performance.get(t.latency.jobId);
    if (p === undefined || t.latency === undefined) return t;
    changed = true;
    return { ...t, latency: { ...t.latency, together: p, spread: p } };
  });
  return { tasks: out, changed };
}
