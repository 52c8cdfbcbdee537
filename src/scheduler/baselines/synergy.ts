/**
 * Synergy (Mohan et al., OSDI '22) as Eva's authors adapted it to the cloud (reference `synergy_scheduler.py`;
 * paper §6.1; research digest eva-reference-implementation §2 "Baselines", industry-anchors §5.2).
 *
 * Only tasks without an instance are placed; committed tasks never move. Each new task, in snapshot order, goes to
 * the instance of the plan (an existing one that hosts tasks, or one launched earlier in this round) with the best
 * score (TNRP(its tasks + the task) / $/h, alignment), compared lexicographically, among those where the task fits
 * and the ratio is ≥ 1, i.e. where the instance stays worth its price. If there is none, the task gets a new
 * instance of its cheapest type. TNRP (Eva §4.3) uses a co-location table learned online exactly as Eva learns
 * it (default rate 0.95 per co-located task), without the multi-task correction (the reference comments it out).
 * Existing instances left without tasks are terminated.
 */
import type { Catalog } from '../../core/catalog.js';
import type { ClusterSnapshot, SchedTask } from '../../core/model.js';
import { alignment } from '../../core/resources.js';
import { ColocationTable } from '../colocation-table.js';
import { PriceBook } from '../reservation-price.js';
import type { Plan, Scheduler, ThroughputObservation } from '../types.js';
import {
  baselineDecision,
  learnColocation,
  SnapshotView,
  Tally,
  WorkingPlan,
  type RateFn,
  type WorkingInstance,
} from './common.js';

export interface SynergyOptions {
  /** Co-location rate assumed per co-located task before anything is learned (Eva reference: 0.95). */
  readonly defaultRate?: number;
}

export class SynergyScheduler implements Scheduler {
  readonly name = 'synergy';
  table: ColocationTable;
  private readonly book: PriceBook;

  constructor(
    private readonly catalog: Catalog,
    private readonly options: SynergyOptions = {},
  ) {
    this.book = new PriceBook(catalog);
    this.table = new ColocationTable(options.defaultRate);
  }

  fork(): SynergyScheduler {
    const copy = new SynergyScheduler(this.catalog, this.options);
    copy.table = ColocationTable.fromJSON(structuredClone(this.table.toJSON()));
    return copy;
  }

  expectedRate(taskKey: string, otherKeys: readonly string[]): number {
    return this.table.rate(taskKey, otherKeys);
  }

  /** Learn the co-location table from observed throughputs, as Eva does. */
  observe(snapshot: ClusterSnapshot, observations: readonly ThroughputObservation[]): void {
    learnColocation(this.table, snapshot, observations);
  }

  readonly rate: RateFn = (task: SchedTask, others: readonly SchedTask[]) =>
    this.table.rate(
      task.key,
      others.map((o) => o.key),
    );

  plan(snapshot: ClusterSnapshot): Plan {
    const view = new SnapshotView(snapshot, this.book);
    const work = new WorkingPlan(view);
    const tally = new Tally();
    // The reference considers only instances already in the plan: existing ones with committed tasks, then new ones.
    const eligible = new Set(work.instances.filter((w) => w.taskIds.length > 0).map((w) => w.id));

    for (const task of view.pending) {
      let best: { inst: WorkingInstance; ratio: number; align: number } | undefined;
      for (const inst of work.instances) {
        if (!eligible.has(inst.id)) continue;
        const d = work.demandOn(task.id, inst);
        if (d === undefined || !work.canFit(inst, [task.id])) continue;
        const ratio = view.tnrp([...inst.taskIds, task.id], this.rate) / inst.type.costPerHour;
        if (ratio < 1) continue;
        const align = alignment(d, work.remaining(inst), inst.type.capacity);
        if (best === undefined || ratio > best.ratio || (ratio === best.ratio && align > best.align))
          best = { inst, ratio, align };
      }
      if (best !== undefined) {
        work.place(task.id, best.inst.id);
        tally.add(best.inst.isNew ? 'joined a new instance' : 'packed onto existing instances');
      } else {
        const type = this.book.minType(task.demand);
        if (type === undefined) throw new Error(`no instance type can host task ${task.id}`); // excluded by SnapshotView
        eligible.add(work.launch(type, [task.id]).id);
        tally.add('on a new cheapest-type instance');
      }
    }

    const configuration = work.toConfiguration();
    const reason = `Synergy: ${view.pending.length} new task(s): ${tally.toString()} (packing only where TNRP/price ≥ 1)`;
    return {
      configuration,
      decision: baselineDecision(this.name, view, configuration, this.rate, reason, { reportNoMove: false }),
    };
  }
}
