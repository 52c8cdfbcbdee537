import type { ClusterSnapshot, SchedJob } from '../core/model.js';
import type { ConsolidationCandidate } from './consolidation-candidate.js';
import { summarizeCandidate, type Candidate } from './eva-choice.js';
import {
  exactCandidate,
  standaloneFullCandidate,
  type ExactCandidateOptions,
} from './eva-extra-candidates.js';
import { jobMoveCost } from './eva-pins.js';
import type { DraftInstance } from './full-reconfiguration.js';
import { assignPlacements, type StayingPerformance } from './latency-placement.js';
import type { SlowJobTracker } from './latency-migration.js';
import type { LatencyView, ResolvedLatencyOptions } from './latency-view.js';
import type { PackInput } from './eva-pack-input.js';
import type { PackTask } from './packing.js';
import {
  fullReconfiguration,
  inefficientInstances,
  partialReconfiguration,
  type PlanningInput,
} from './reconfiguration.js';
import type { PriceBook } from './reservation-price.js';
import { putsOnDemandTaskOnSpot } from './spot-host-rules.js';
import type { CandidateSummary } from './types.js';

/** The candidate plans Eva's decision rule chooses among each round, by variant. */

/** Eva's variants (EvaOptions.variant): eva and its ablations. */
export type EvaVariant = 'eva' | 'eva-full-only' | 'eva-partial-only' | 'eva-rp' | 'eva-single';

/** Prices a candidate's drafts for the decision rule. */
export type EvaluateCandidate = (
  name: CandidateSummary['name'],
  drafts: readonly DraftInstance[],
) => Candidate;

/** What pricing a round's candidates needs besides their drafts. */
export interface CandidatePricing {
  readonly input: PlanningInput;
  readonly jobs: ReadonlyMap<string, SchedJob>;
  readonly jobRp: ReadonlyMap<string, number>;
  readonly now: number;
  /** $ per GiB sent across zones. */
  readonly trafficPrice: number;
  readonly staying: StayingPerformance;
  /** $ per hour of the job's completion time. */
  readonly valueOfTimeOf: (job: SchedJob) => number;
}

/** The function that prices a round's candidates, placing their new instances next to their jobs' roots first. */
export function candidateEvaluator(p: CandidatePricing): EvaluateCandidate {
  const view = p.input.latency;
  return (name, drafts) => {
    // Every candidate's new instances go where their jobs' roots are (the packing passes did it for theirs already).
    if (view !== undefined) assignPlacements(view, drafts);
    const summary = summarizeCandidate(
      name,
      drafts,
      p.input,
      p.jobs,
      p.jobRp,
      p.now,
      p.trafficPrice,
      p.staying,
      p.valueOfTimeOf,
    );
    // The packing loops keep jobs kept off spot (spot: never, past their delay bound) off spot instances;
    // candidates built outside them are held to it here.
    const offSpot = putsOnDemandTaskOnSpot(drafts, p.input.tasks, p.input.spotInstanceIds);
    return {
      summary: offSpot
        ? { ...summary, rejectedBecause: 'puts a job kept off spot on a spot instance' }
        : summary,
      drafts,
    };
  };
}

/** Latency-sensitive jobs slow for long enough to be placed again by the latency candidate (none when pinned). */
export function slowJobsDue(
  view: LatencyView | undefined,
  latency: ResolvedLatencyOptions | undefined,
  slowJobs: SlowJobTracker,
  pinnedTaskIds: ReadonlySet<string>,
  tasks: ReadonlyMap<string, PackTask>,
): Set<string> {
  if (view === undefined || latency === undefined || !latency.migrate) return new Set();
  const pinnedJobs = new Set<string>();
  for (const id of pinnedTaskIds) {
    const job = tasks.get(id)?.jobId;
    if (job !== undefined) pinnedJobs.add(job);
  }
  return new Set(slowJobs.due(view, latency.persistRounds, pinnedJobs, latency.maxMoveShare));
}

/** What the rebalance candidate weighs: the instances' risk premiums against their jobs' moves. */
export interface RebalanceInput extends Pick<
  PackInput,
  'input' | 'packTasks' | 'jobs' | 'jobRp' | 'riskPremium'
> {
  readonly now: number;
  readonly horizon: number;
  readonly paybackMargin: number;
}

/** The instances to retire: recommended for rebalancing, repackable, and whose risk pays their jobs' moves. */
export function instancesToRetire(r: RebalanceInput, repack: ReadonlySet<string>): Set<string> {
  // Rebalance: only the instances EC2 recommended rebalancing whose risk over the horizon pays their jobs'
  // moves k times (Partial Reconfiguration would move every task off a risky instance at once, whether or not
  // its own move pays).
  return new Set(
    r.input.instances
      .filter((i) => i.retiring === true && repack.has(i.id))
      .filter((i) => {
        const moveCost = [...new Set(i.taskIds.map((t) => (r.packTasks.get(t) as PackTask).jobId))].reduce(
          (sum, id) => {
            const job = r.jobs.get(id);
            return job === undefined ? sum : sum + jobMoveCost(job, r.jobRp.get(id) ?? 0, r.now);
          },
          0,
        );
        return (r.riskPremium.get(i.id) ?? 0) * (r.horizon / 3600) >= r.paybackMargin * moveCost;
      })
      .map((i) => i.id),
  );
}

/** What generating a round's candidates needs. */
export interface CandidateRound extends RebalanceInput {
  readonly variant: EvaVariant;
  readonly snapshot: ClusterSnapshot;
  /** The round's prices. */
  readonly book: PriceBook;
  /** Whether tasks are priced at packed prices (then Full Reconfiguration at standalone prices is offered too). */
  readonly packedPrices: boolean;
  readonly consolidation: ConsolidationCandidate | undefined;
  readonly exact: ExactCandidateOptions | undefined;
  /** The latency candidate's jobs (slowJobsDue). */
  readonly slowJobsDue: () => ReadonlySet<string>;
  readonly evaluate: EvaluateCandidate;
}

/** The round's priced candidates, in the order they are generated: the ablations offer only their own plan. */
export function generateCandidates(c: CandidateRound): Candidate[] {
  const { input, evaluate } = c;
  const candidates: Candidate[] = [];
  const repack = inefficientInstances(input);
  if (c.variant === 'eva-full-only') candidates.push(evaluate('full', fullReconfiguration(input)));
  else if (c.variant === 'eva-partial-only')
    candidates.push(evaluate('partial', partialReconfiguration(input, repack)));
  else {
    const stay = partialReconfiguration(input, new Set());
    candidates.push(evaluate('stay', stay));
    // With nothing to repack, Partial Reconfiguration is the stay plan itself.
    candidates.push(evaluate('partial', repack.size === 0 ? stay : partialReconfiguration(input, repack)));
    candidates.push(evaluate('full', fullReconfiguration(input)));
    const standalone = c.packedPrices ? standaloneFullCandidate(input, c.book) : undefined;
    if (standalone !== undefined) candidates.push(evaluate('full-standalone', standalone));
    const consolidated = c.consolidation?.plan(c.snapshot, input, stay);
    if (consolidated !== undefined) candidates.push(evaluate('consolidate', consolidated));
    const retire = instancesToRetire(c, repack);
    if (retire.size > 0) candidates.push(evaluate('rebalance', partialReconfiguration(input, retire)));
    const slow = c.slowJobsDue();
    if (slow.size > 0) candidates.push(evaluate('latency', partialReconfiguration(input, new Set(), slow)));
  }
  const exact = exactCandidate(c.exact, input, c.snapshot, c.book);
  if (exact !== undefined && c.variant !== 'eva-partial-only') candidates.push(evaluate('exact', exact));
  return candidates;
}
