import { expectedDurationOf } from './job-spec/spec.js';
import type { Catalog } from '../core/catalog.js';
import { durationText } from '../core/duration.js';
import { formatIdList } from '../core/id-list.js';
import { UNKNOWN_DURATION_SECONDS, type Admission } from '../queue/admission.js';
import type { JobQueueView } from '../queue/admission-views.js';
import type { JobFootprint, QueueCaps } from '../queue/caps.js';
import type { Scheduler } from '../scheduler/types.js';
import { footprintOn, sharePercent, type NeverAdmittedJob } from '../world/never-fits.js';
import { frozenExpectedRates } from '../predict/predict.js';
import type { PredictionInput } from '../predict/predict.js';
import { controllerWorld, waitingFor, type WaitsFor } from './eta-world.js';
import { NEVER_UNDER_CAPS_BASIS, type EtaRecord } from './queue-records.js';
import type { SnapshotInputs } from './snapshot.js';
import type { JobRecord } from './state-store.js';

/**
 * Completion-time predictions (PCS §4) of the controller: the prediction world (eta-world.ts) run forward in virtual
 * time by the simulator's prediction entry point, bounded by a horizon and a wall-clock budget, each job's answer
 * with the basis it rests on.
 */
export interface PredictedTimes {
  readonly startSeconds: number | null;
  readonly endSeconds: number | null;
}

/** The simulator's prediction entry point (src/predict/predict.ts `predictCompletions`), injected for tests. */
export type PredictFn = (input: PredictionInput) => ReadonlyMap<string, PredictedTimes>;

export interface PredictionRun {
  readonly etas: ReadonlyMap<string, EtaRecord>;
  /** Every live job was predicted (not only `targets`). */
  readonly complete: boolean;
  /** Wall-clock milliseconds the run took. */
  readonly wallMs: number;
}

export interface PredictInput {
  readonly inputs: SnapshotInputs;
  /** This round's queue views (the basis counts the jobs ahead); absent at submission. */
  readonly views?: ReadonlyMap<string, JobQueueView> | undefined;
  /** A fork of the scheduler (same options and learned state); the prediction plans with it. */
  readonly scheduler: Scheduler;
  /** A fork of the admission in use: the prediction replays the queue layer from its state. */
  readonly admission: Admission;
  readonly catalog: Catalog;
  readonly roundSeconds: number;
  readonly firstRoundSeconds: number;
  /** Predict only these jobs (the run stops once they finished); default every live job. */
  readonly targets?: readonly string[] | undefined;
  /** How far ahead the prediction simulates: a job not completed by then is "beyond" it. */
  readonly horizonSeconds: number;
  /** Wall-clock milliseconds the run may take; where it runs out, the jobs not completed yet are "beyond" it. */
  readonly budgetMs: number;
}

/** Default prediction horizon: 30 days (the simulator's own safety stop is similar). */
export const DEFAULT_PREDICTION_HORIZON_SECONDS = 30 * 86_400;
/** Default time budget of one prediction run. */
export const DEFAULT_PREDICTION_BUDGET_SECONDS = 10;

/**
 * Run one prediction for every live job. Jobs without a declared duration get `completionSeconds: null` (their
 * basis says why) but still take part, with an assumed duration, since they hold capacity; so do the held jobs that
 * wait for one of them, whose start is as unknown. A job the caps can never admit (and one held for it) is answered
 * "never under the caps" and left out of the simulated world.
 *
 * Bounded twice, so no job spec can make it run long: the simulated time stops at the horizon, and the run stops at
 * its wall-clock budget. A job not completed by where the run stopped gets `completionSeconds: null` and
 * `completesAfterSeconds` (it completes later than that, if at all), its basis saying "beyond …". A job whose own
 * remaining work at full throughput already reaches past the horizon, or one held for such a job, is answered so
 * without simulating.
 */
export function predictEtas(predict: PredictFn, input: PredictInput): PredictionRun {
  const started = performance.now();
  const now = input.inputs.nowSeconds;
  const horizonEnd = now + input.horizonSeconds;
  const built = controllerWorld(input.inputs, {
    catalog: input.catalog,
    firstRoundSeconds: input.firstRoundSeconds,
    admission: input.admission,
  });
  const worldIds = built.world.jobs.map((j) => j.spec.id);
  const answered = [...worldIds, ...built.neverAdmitted.keys(), ...built.waitsForNeverAdmitted.keys()];
  const wantedSet = input.targets === undefined ? undefined : new Set(input.targets);
  const wanted = wantedSet === undefined ? answered : answered.filter((id) => wantedSet.has(id));
  const pastHorizon = new Set(
    built.world.jobs
      .filter(
        (j) => now + (j.spec.totalIterations - j.completedIterations) / j.spec.fullThroughput > horizonEnd,
      )
      .map((j) => j.spec.id),
  );
  const waitsPastHorizon = waitingFor(
    built.world.jobs.map((j) => j.spec),
    pastHorizon,
  );
  // Only jobs whose end the run can find get an ETA from it; it stops once they finished (the others still take part).
  const simulated = new Set(worldIds);
  const targets = wanted.filter(
    (id) =>
      simulated.has(id) &&
      !built.assumedDuration.has(id) &&
      !built.overran.has(id) &&
      !built.waitsForUnknownEnd.has(id) &&
      !pastHorizon.has(id) &&
      !waitsPastHorizon.has(id),
  );
  // The world's tasks carry the controller's workload keys, so the scheduler's learned rates apply as they are.
  const rate = targets.length === 0 ? undefined : frozenExpectedRates(input.scheduler);
  const deadline = started + input.budgetMs;
  let budgetStop: number | undefined;
  const times =
    targets.length === 0
      ? new Map<string, PredictedTimes>()
      : predict({
          world: built.world,
          scheduler: input.scheduler,
          catalog: input.catalog,
          rate,
          admission: input.admission,
          roundSeconds: input.roundSeconds,
          earlyRounds: true, // the controller plans early on completions too
          jobIds: targets,
          maxSimulatedSeconds: horizonEnd,
          shouldStop: (simulatedSeconds) => {
            if (performance.now() < deadline) return false;
            budgetStop = simulatedSeconds;
            return true;
          },
        });
  const assumed = built.assumedDuration.size;
  const how =
    `with ${input.scheduler.name}${rate === undefined ? '' : ' (learned co-location throughputs)'}` +
    `${assumed === 0 ? '' : `; ${assumed} job(s) without expectedDurationSeconds assumed to run ${UNKNOWN_DURATION_SECONDS / 3600} h`}` +
    '; no future arrivals';
  const horizon = `the ${durationText(input.horizonSeconds)} prediction horizon`;
  const etas = new Map<string, EtaRecord>();
  const jobs = new Map([...input.inputs.jobs, ...(input.inputs.heldJobs ?? [])].map((j) => [j.id, j]));
  for (const id of wanted) {
    const job = jobs.get(id) as JobRecord;
    const waitsFor = input.inputs.heldFor?.get(id);
    const place =
      waitsFor === undefined || waitsFor.length === 0
        ? placeOf(job, input)
        : // Summarised: an array that waits for all of another would name 1,000 ids in each of its 1,000 bases.
          `held until ${formatIdList(waitsFor)} succeed${waitsFor.length === 1 ? 's' : ''}; ${placeOf(job, input)}`;
    if (built.assumedDuration.has(id)) {
      etas.set(id, {
        startSeconds: null,
        completionSeconds: null,
        computedAtSeconds: now,
        basis: `no ETA: the job spec has no expectedDurationSeconds; ${place}`,
      });
      continue;
    }
    const never = built.neverAdmitted.get(id);
    const waitsForNever = built.waitsForNeverAdmitted.get(id);
    if (never !== undefined || waitsForNever !== undefined) {
      const root = never ?? (built.neverAdmitted.get(waitsForNever?.root ?? '') as NeverAdmittedJob);
      const needs = capNeeds(root, input.admission.caps);
      etas.set(id, {
        startSeconds: null,
        completionSeconds: null,
        computedAtSeconds: now,
        basis:
          waitsForNever === undefined
            ? `${NEVER_UNDER_CAPS_BASIS} alone it needs ${needs}; ${place}`
            : `${NEVER_UNDER_CAPS_BASIS} ${waitText(waitsForNever)}, which alone needs ${needs}; ${place}`,
      });
      continue;
    }
    if (built.overran.has(id)) {
      // An ETA of "now" would be wrong the next round, and the one after: each would ask for a new prediction.
      etas.set(id, {
        startSeconds: job.startedAtSeconds ?? null,
        completionSeconds: null,
        computedAtSeconds: now,
        basis: `no ETA: it has run past its declared expectedDurationSeconds (${expectedDurationOf(job.spec) ?? 0} s) and reports no progress; ${place}`,
      });
      continue;
    }
    const waitsForUnknown = built.waitsForUnknownEnd.get(id);
    if (waitsForUnknown !== undefined) {
      // Its start would be built on the dependency's assumed end, and so would the submission prediction kept of it.
      const unknown = built.overran.has(waitsForUnknown.root)
        ? 'it has run past its expectedDurationSeconds and reports no progress'
        : 'no expectedDurationSeconds';
      etas.set(id, {
        startSeconds: null,
        completionSeconds: null,
        computedAtSeconds: now,
        basis: `no ETA: ${waitText(waitsForUnknown)}, whose end is unknown (${unknown}); ${place}`,
      });
      continue;
    }
    const waitsBeyond = waitsPastHorizon.get(id);
    if (pastHorizon.has(id) || waitsBeyond !== undefined) {
      const why =
        waitsBeyond === undefined ? 'its remaining work' : `${waitText(waitsBeyond)}, whose remaining work`;
      etas.set(id, {
        startSeconds: null,
        completionSeconds: null,
        completesAfterSeconds: horizonEnd,
        computedAtSeconds: now,
        basis: `beyond ${durationText(input.horizonSeconds)}: ${why} at full throughput alone reaches past ${horizon}; ${place}`,
      });
      continue;
    }
    const t = times.get(id);
    const end = t?.endSeconds ?? null;
    const start = t?.startSeconds ?? null;
    if (end === null) {
      const stoppedAt = budgetStop ?? horizonEnd;
      const why =
        budgetStop === undefined
          ? `not completed within ${horizon}`
          : `the prediction's ${(input.budgetMs / 1000).toFixed(0)} s time budget ran out ${durationText(stoppedAt - now)} ahead`;
      etas.set(id, {
        startSeconds: start,
        completionSeconds: null,
        completesAfterSeconds: stoppedAt,
        computedAtSeconds: now,
        basis: `beyond ${durationText(stoppedAt - now)}: ${why} ${how}; ${place}`,
      });
      continue;
    }
    const rounds = Math.max(1, Math.ceil((end - input.firstRoundSeconds) / input.roundSeconds));
    etas.set(id, {
      startSeconds: start,
      completionSeconds: end,
      computedAtSeconds: now,
      basis: `simulated ${rounds} round(s) ahead ${how}; ${place}`,
    });
  }
  return { etas, wallMs: performance.now() - started, complete: input.targets === undefined };
}

/** "it waits for job-4", and through which held job when it waits for it in turn. */
function waitText(waits: WaitsFor): string {
  return waits.via === waits.root
    ? `it waits for ${waits.root}`
    : `it waits for ${waits.via}, which waits for ${waits.root}`;
}

/**
 * What a job the caps can never admit needs alone of each cap it breaks, e.g. "$4.23/h, over the $0.1/h cap". Sized as
 * admission sizes a job alone (src/world/never-fits.ts): its standalone footprint, at spot prices where it may go on
 * spot and the run buys spot.
 */
function capNeeds(never: NeverAdmittedJob, caps: QueueCaps): string {
  const over = never.overClass;
  // Under the caps alone, over its class's ceiling: the class may never hold that much of them.
  if (over !== undefined && never.caps.length === 0)
    return (
      `${sharePercent(over.share)} of the capped capacity, over class ${over.classId}'s ceiling ` +
      `(maxShare ${sharePercent(over.maxShare)})`
    );
  return never.caps.map((cap) => capNeed(cap, never.footprint, caps)).join(' and ');
}

function capNeed(cap: string, footprint: JobFootprint, caps: QueueCaps): string {
  const need = footprintOn(cap, footprint, caps);
  if (cap === 'maxCostPerHour') {
    const onSpot = footprint.instances.some((i) => i.market === 'spot');
    return `${need}${onSpot ? ' on spot' : ''}, over the $${caps.maxCostPerHour}/h cap`;
  }
  if (cap === 'maxInstances') return `${need}, over the cap of ${caps.maxInstances}`;
  const m = /^quota (.+) (maxVcpus|maxGpus)$/.exec(cap);
  if (m === null) return `more than the ${cap} cap`;
  const quota = (caps.quotas ?? []).find((q) => q.group === m[1]);
  // A config's quota names its entry: with several groups capped, the one to raise.
  const where = quota?.source === undefined ? '' : `, set by ${quota.source}`;
  return `${need}, over its quota of ${m[2] === 'maxGpus' ? quota?.maxGpus : quota?.maxVcpus}${where}`;
}

function placeOf(job: JobRecord, input: PredictInput): string {
  const size =
    (expectedDurationOf(job.spec) ?? UNKNOWN_DURATION_SECONDS) *
    job.spec.tasks.reduce((n, t) => n + t.replicas, 0);
  const classId = input.admission.classOf(size, job.team);
  const view = input.views?.get(job.id);
  if (view === undefined) return `class ${classId}`;
  if (view.status === 'admitted') return `admitted in class ${view.classId}`;
  if (view.position === null) return `waiting in class ${view.classId} (${view.reason ?? 'waiting'})`;
  return `${view.position - 1} job(s) ahead in class ${view.classId}`;
}
