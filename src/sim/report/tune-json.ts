import { stringify } from 'yaml';
import {
  paretoFront,
  recommend,
  type CandidateSource,
  type Objectives,
  type Preference,
  type TuneCandidate,
  type TuneOrdering,
} from '../../queue/tune.js';
import type { WfqConfig } from '../../queue/wfq.js';
import type { RunResult } from '../../world/run-result.js';
import type { ReportSettings } from './json.js';

/**
 * What `fleetwise tune` reports per evaluated candidate: its parameters, the objectives (PCS §5: mean JCT, p99
 * prediction error, mean unfairness; all minimised) and a few context metrics, flat so a row is one JSON object.
 */
export interface TuneRow {
  readonly id: string;
  readonly source: CandidateSource;
  readonly classes: number;
  readonly thresholdPercentiles: readonly number[];
  /** Size thresholds in task-seconds, one per class but the last (unbounded). */
  readonly thresholdsSeconds: readonly number[];
  /** PCS weight decay 𝒲. */
  readonly decay: number;
  readonly weights: readonly number[];
  readonly ordering: TuneOrdering;
  /** The largest class's `maxShare` ceiling, null without one. */
  readonly largestClassMaxShare: number | null;
  readonly meanJctHours: number | null;
  /** Percent; null when predictions were off or the run failed. */
  readonly predErrP99: number | null;
  /** Mean PCS unfairness in percent. */
  readonly unfairness: number | null;
  readonly predErrAvg: number | null;
  readonly p99JctHours: number | null;
  readonly totalCost: number | null;
  /** Why the simulation failed; the objectives are then null, the worst (PCS gives such configs +∞). */
  readonly error: string | null;
  readonly onFront: boolean;
  /** Ready for the controller config's `queue:` section (wfqConfigSchema). */
  readonly config: WfqConfig;
}

/** The evaluation of one candidate: its run, or the message of the run's failure. */
export type CandidateOutcome =
  { readonly ok: true; readonly result: RunResult } | { readonly ok: false; readonly error: string };

export function objectivesOf(outcome: CandidateOutcome): Objectives {
  if (!outcome.ok) return { meanJctHours: null, predErrP99: null, unfairness: null };
  const q = outcome.result.queue;
  const finished = outcome.result.jobs.some((j) => j.jctSeconds !== null);
  return {
    meanJctHours: finished ? outcome.result.summary.meanJctHours : null,
    predErrP99: q?.predErrP99 ?? null,
    unfairness: q?.unfairness ?? null,
  };
}

function row(candidate: TuneCandidate, outcome: CandidateOutcome, onFront: boolean): TuneRow {
  const objectives = objectivesOf(outcome);
  const q = outcome.ok ? outcome.result.queue : undefined;
  return {
    id: candidate.id,
    source: candidate.source,
    classes: candidate.config.classes.length,
    thresholdPercentiles: candidate.thresholdPercentiles,
    thresholdsSeconds: candidate.config.classes.flatMap((c) =>
      c.maxSizeSeconds === undefined ? [] : [c.maxSizeSeconds],
    ),
    decay: candidate.decay,
    weights: candidate.config.classes.map((c) => c.weight),
    ordering: candidate.ordering,
    largestClassMaxShare: candidate.config.classes[candidate.config.classes.length - 1]?.maxShare ?? null,
    ...objectives,
    predErrAvg: q?.predErrAvg ?? null,
    p99JctHours: q?.p99JctHours ?? null,
    totalCost: outcome.ok ? outcome.result.summary.totalCost : null,
    error: outcome.ok ? null : outcome.error,
    onFront,
    config: candidate.config,
  };
}

/** What `fleetwise tune --json` prints: exactly this object. */
export interface TuneJson {
  /** The non-dominated rows, in candidate order. */
  readonly front: TuneRow[];
  readonly recommended: TuneRow & { readonly preference: Preference };
  /** Every candidate, in candidate order. */
  readonly evaluated: TuneRow[];
}

/** tune.json: the same plus the settings and the controller snippet. */
export interface TuneReport extends TuneJson {
  readonly settings: ReportSettings;
  readonly controllerYaml: string;
}

/**
 * Rows, front and recommendation from the candidates and their outcomes (same order). Throws when no candidate
 * could be evaluated: there is then nothing to recommend.
 */
export function tuneJson(
  candidates: readonly TuneCandidate[],
  outcomes: readonly CandidateOutcome[],
  preference: Preference,
): TuneJson {
  const points = candidates.map((candidate, i) => {
    const outcome = outcomes[i];
    if (outcome === undefined) throw new Error(`no outcome for candidate ${candidate.id}`);
    return { candidate, outcome, objectives: objectivesOf(outcome) };
  });
  const evaluable = points.filter((p) => p.outcome.ok);
  if (evaluable.length === 0) {
    const first = points.find((p) => !p.outcome.ok)?.outcome;
    throw new Error(
      `every candidate failed to simulate${first !== undefined && !first.ok ? `: ${first.error}` : ''}`,
    );
  }
  // Failed runs are worst on every objective; left out, they cannot tie onto the front when all else is null too.
  const front = new Set(paretoFront(evaluable));
  const best = recommend([...front], preference) as (typeof points)[number];
  const rows = points.map((p) => row(p.candidate, p.outcome, front.has(p)));
  const bestRow = rows[points.indexOf(best)] as TuneRow;
  return {
    front: rows.filter((r) => r.onFront),
    recommended: { ...bestRow, preference },
    evaluated: rows,
  };
}

/**
 * The controller config snippet for a config: its `queue:` section is exactly wfqConfigSchema, so this pastes into
 * the controller's YAML as is (and `parseWfqConfig(parse(yaml).queue)` gives the config back).
 */
export function controllerYaml(config: WfqConfig, comment?: string): string {
  const body = stringify({ queue: config }, { lineWidth: 0 });
  return comment === undefined ? body : `${comment.replace(/^/gm, '# ')}\n${body}`;
}
