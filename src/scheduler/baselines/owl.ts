/**
 * Owl (Tian et al., SoCC '22) as Eva's authors adapted it to the cloud (reference `owl_scheduler.py`; paper §6.1;
 * research digest eva-reference-implementation §2 "Baselines", industry-anchors §5.3). Owl co-locates at most two
 * tasks per instance and only by a co-location profile measured in advance: here a static oracle of pairwise
 * normalized throughputs (the only baseline given the ground truth, as in the paper).
 *
 *  - Candidates: tasks without an instance, plus tasks alone on an instance (that may move). Everything else stays.
 *  - Combinations: every singleton and every pair (a class with itself included) of candidate classes; a class is
 *    a co-location key with one demand (the reference groups by key alone, since its keys imply the demand).
 *  - Each combination gets its cheapest hosting type; combinations are sorted by TNRP_oracle / $/h of that type,
 *    descending (ties keep the generation order: singletons, then pairs).
 *  - Walking that list, each combination is instantiated as many times as unplaced candidates allow: a singleton
 *    whose task already sits alone on an instance of that type stays there; anything else gets a new instance.
 */
import type { Catalog, InstanceType } from '../../core/catalog.js';
import type { ClusterSnapshot, SchedTask } from '../../core/model.js';
import { demandSignature, PriceBook } from '../reservation-price.js';
import type { Plan, Scheduler, ThroughputObservation } from '../types.js';
import { baselineDecision, SnapshotView, Tally, WorkingPlan, type RateFn } from './common.js';

/** Normalized throughput of a task with key `targetKey` when co-located with tasks of keys `othersKeys`. */
export type InterferenceOracle = (targetKey: string, othersKeys: readonly string[]) => number;

/** Owl's co-location limit (digest §8). */
export const OWL_MAX_TASKS_PER_INSTANCE = 2;

interface Combination {
  readonly classes: readonly string[];
  readonly type: InstanceType;
  readonly ratio: number;
}

export class OwlScheduler implements Scheduler {
  readonly name = 'owl';
  private readonly book: PriceBook;
  readonly rate: RateFn;

  constructor(
    catalog: Catalog,
    private readonly oracle: InterferenceOracle,
  ) {
    this.book = new PriceBook(catalog);
    this.rate = (task: SchedTask, others: readonly SchedTask[]) =>
      this.oracle(
        task.key,
        others.map((o) => o.key),
      );
  }

  /** Its offline profile is what it expects (and it does not learn, so it needs no fork). */
  expectedRate(taskKey: string, otherKeys: readonly string[]): number {
    return this.oracle(taskKey, otherKeys);
  }

  /** Owl does not learn: its profile is given up front. */
  observe(_snapshot: ClusterSnapshot, _observations: readonly ThroughputObservation[]): void {}

  plan(snapshot: ClusterSnapshot): Plan {
    const view = new SnapshotView(snapshot, this.book);
    const work = new WorkingPlan(view);
    const tally = new Tally();

    // Candidates: unplaced tasks, then lone tasks that may move (taken off their instance for now).
    const candidates: string[] = view.pending.map((t) => t.id);
    const loneHome = new Map<string, string>();
    for (const inst of [...work.instances]) {
      if (inst.taskIds.length !== 1) continue;
      const id = inst.taskIds[0] as string;
      if (view.immovable.has(id)) continue;
      candidates.push(id);
      loneHome.set(id, inst.id);
      work.unplace(id);
    }

    // Classes of candidates: same key and same demand.
    const classOf = new Map<string, string>();
    const members = new Map<string, string[]>();
    for (const id of candidates) {
      const t = view.task(id);
      const cls = `${t.key}\u0000${demandSignature(t.demand)}`;
      classOf.set(id, cls);
      const list = members.get(cls);
      if (list === undefined) members.set(cls, [id]);
      else list.push(id);
    }
    const classes = [...members.keys()];
    const representative = (cls: string) => view.task((members.get(cls) as string[])[0] as string);

    const combos: Combination[] = [];
    const consider = (group: readonly string[]) => {
      const tasks = group.map(representative);
      const type = this.book.cheapestHosting(tasks.map((t) => t.demand));
      if (type === undefined) return;
      let tnrp = 0;
      tasks.forEach((t, i) => {
        const others = tasks.filter((_, j) => j !== i);
        tnrp += view.reservationPrice(t) * (others.length === 0 ? 1 : this.rate(t, others));
      });
      combos.push({ classes: group, type, ratio: tnrp / type.costPerHour });
    };
    for (const c of classes) consider([c]);
    for (let i = 0; i < classes.length; i++)
      for (let j = i; j < classes.length; j++) consider([classes[i] as string, classes[j] as string]);
    const ordered = combos
      .map((c, i) => ({ c, i }))
      .sort((a, b) => b.c.ratio - a.c.ratio || a.i - b.i)
      .map((x) => x.c);

    const unplaced = new Map<string, string[]>([...members].map(([cls, ids]) => [cls, [...ids]]));
    let left = candidates.length;
    for (const combo of ordered) {
      if (left === 0) break;
      for (;;) {
        const need = new Map<string, number>();
        for (const cls of combo.classes) need.set(cls, (need.get(cls) ?? 0) + 1);
        if ([...need].some(([cls, n]) => (unplaced.get(cls)?.length ?? 0) < n)) break;
        const chosen = combo.classes.map((cls) => (unplaced.get(cls) as string[]).shift() as string);
        left -= chosen.length;
        const home = chosen.length === 1 ? loneHome.get(chosen[0] as string) : undefined;
        if (home !== undefined && work.instance(home).type.name === combo.type.name) {
          work.place(chosen[0] as string, home);
          tally.add('kept alone on their cheapest type');
        } else {
          work.launch(combo.type, chosen);
          tally.add(
            chosen.length === 2 ? 'paired on a new instance' : 'alone on a new instance',
            chosen.length,
          );
        }
        if (left === 0) break;
      }
    }
    if (left !== 0) throw new Error(`Owl left ${left} candidate task(s) unplaced`); // every hostable class has a singleton

    const configuration = work.toConfiguration();
    const reason = `Owl: ${candidates.length} candidate task(s) (${view.pending.length} new, ${loneHome.size} alone on an instance): ${tally.toString()}`;
    return { configuration, decision: baselineDecision(this.name, view, configuration, this.rate, reason) };
  }
}
