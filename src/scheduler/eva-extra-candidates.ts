import type { ClusterSnapshot } from '../core/model.js';
import type { DraftInstance } from './full-reconfiguration.js';
import { solveWithSolver, type IlpSolver } from './ilp.js';
import type { PackTask } from './packing.js';
import { draftWithTasks, fullReconfiguration, type PlanningInput } from './reconfiguration.js';
import type { PriceBook } from './reservation-price.js';

/** Candidates Eva offers its decision rule beyond Full and Partial Reconfiguration, stay and consolidation. */

/** Rounds with at most this many tasks also get Eva's Full Reconfiguration at standalone prices as a candidate. */
const STANDALONE_FULL_MAX_TASKS = 32;

/** The exact ILP optimum as a candidate (EvaOptions.exact). */
export interface ExactCandidateOptions {
  readonly solver: IlpSolver;
  readonly maxTasks: number;
  readonly timeLimitSeconds?: number;
}

/**
 * With packed prices, also Eva's own Full Reconfiguration at standalone prices, re-valued at packed prices for the
 * decision rule: on small or lumpy problems a set can fill an instance yet miss the packing efficiency that packed
 * prices assume (Eva Table 3: $16.20/h packed against $12.80/h), and this candidate keeps Eva's plan in reach.
 * Only on small problems: on large ones it costs a second Full Reconfiguration a round for no measured gain
 * (full Alibaba trace: $447,382 with it up to 32 tasks, 25.8 s; $446,590 always, 42.6 s).
 */
export function standaloneFullCandidate(input: PlanningInput, book: PriceBook): DraftInstance[] | undefined {
  if (input.tasks.size > STANDALONE_FULL_MAX_TASKS) return undefined;
  const alone = new Map<string, PackTask>();
  for (const [id, t] of input.tasks) alone.set(id, { ...t, rp: book.reservationPrice(t.demand) });
  const drafts = fullReconfiguration({ ...input, tasks: alone });
  return drafts.map((d) =>
    draftWithTasks(
      { id: d.id, type: d.type, isNew: d.isNew },
      d.taskIds.map((id) => input.tasks.get(id) as PackTask),
    ),
  );
}

/** The ILP optimum as drafts, for small problems without pinned tasks (see EvaOptions.exact). */
export function exactCandidate(
  exact: ExactCandidateOptions | undefined,
  input: PlanningInput,
  snapshot: ClusterSnapshot,
  book: PriceBook,
): DraftInstance[] | undefined {
  if (
    exact === undefined ||
    input.pinnedTaskIds.size > 0 ||
    input.tasks.size === 0 ||
    input.tasks.size > exact.maxTasks
  )
    return undefined;
  const result = solveWithSolver(exact.solver, {
    catalog: book.catalog,
    tasks: [...input.tasks.values()].map((t) => ({ id: t.id, demand: t.demand })),
    timeLimitSeconds: exact.timeLimitSeconds ?? 2,
    existing: snapshot.instances,
  });
  if (result.configuration === undefined) return undefined;
  // Existing instances at the round's price for them (a flagged spot instance's risk premium included), as in the
  // other candidates.
  const existingTypes = new Map(input.instances.map((i) => [i.id, i.type]));
  return result.configuration.instances.map((inst) =>
    draftWithTasks(
      {
        id: inst.id,
        type: (inst.isNew ? undefined : existingTypes.get(inst.id)) ?? book.type(inst.typeName),
        isNew: inst.isNew,
      },
      inst.taskIds.map((id) => input.tasks.get(id) as PackTask),
    ),
  );
}
