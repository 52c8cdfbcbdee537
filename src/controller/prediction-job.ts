import type { Catalog } from '../core/catalog.js';
import { Admission, type AdmissionSettings, type AdmissionState } from '../queue/admission.js';
import type { JobQueueView } from '../queue/admission-views.js';
import { predictEtas, type PredictFn, type PredictionRun } from './eta-predictions.js';
import { buildScheduler, type SchedulerRecipe } from './scheduler-recipe.js';
import type { SnapshotInputs } from './snapshot.js';
import type { JobSpec, TaskTemplateSpec } from './job-spec/spec.js';
import type { JobRecord } from './state-store.js';

/**
 * One completion-time prediction as plain data (structured-clonable): the controller's state read at one moment, and
 * the admission and scheduler as they were then, as state rather than objects. It is what crosses to the prediction
 * worker thread (prediction-worker.ts), so a prediction runs off the API's and the loop's thread; the in-process
 * engine runs the same data, so both take one path.
 */
export interface PredictionJob {
  readonly inputs: SnapshotInputs;
  /** The round's queue views (the basis counts the jobs ahead); absent outside a round. */
  readonly views: ReadonlyMap<string, JobQueueView> | undefined;
  readonly fork: PortableFork;
  readonly catalog: Catalog;
  readonly roundSeconds: number;
  /** When the prediction's first round happens (≥ now): it replays the admission and plan of that round. */
  readonly firstRoundSeconds: number;
  /** Predict only these jobs; default every live job. */
  readonly targets: readonly string[] | undefined;
  readonly horizonSeconds: number;
  readonly budgetMs: number;
}

/**
 * A job's spec cut to what a prediction reads (eta-world.ts, eta-predictions.ts): its tasks' names, demands, shared
 * memory, workload keys and image (or build context), its duration, iterations, success model, checkpoint delays and
 * spot preference. What a task runs (command, env), the description, network, dependencies and the `queue:` section
 * are left out: each job of an array carries its own copy of them, and sent whole for 10,000 jobs of a 40 KiB spec
 * they ran the prediction thread out of heap. It is still a JobSpec by type, with an empty env and queue section.
 */
export function predictionSpec(spec: JobSpec): JobSpec {
  const tasks = spec.tasks.map((t): TaskTemplateSpec => ({
    name: t.name,
    ...(t.image === undefined ? {} : { image: t.image }),
    // The context names the image the world's tasks use; the Dockerfile is not read.
    ...(t.build === undefined ? {} : { build: { context: t.build.context } }),
    env: {},
    demand: t.demand,
    replicas: t.replicas,
    shmSizeGiB: t.shmSizeGiB,
    workload: t.workload,
  }));
  return {
    name: spec.name,
    team: spec.team,
    tasks,
    checkpoint: spec.checkpoint,
    queue: {},
    ...(spec.totalIterations === undefined ? {} : { totalIterations: spec.totalIterations }),
    ...(spec.expectedDurationSeconds === undefined
      ? {}
      : { expectedDurationSeconds: spec.expectedDurationSeconds }),
    ...(spec.success === undefined ? {} : { success: spec.success }),
    ...(spec.spot === undefined ? {} : { spot: spec.spot }),
    ...(spec.spotMaxDelaySeconds === undefined ? {} : { spotMaxDelaySeconds: spec.spotMaxDelaySeconds }),
  };
}

/** The snapshot a prediction is given: as read, each job with its spec cut to what a prediction reads. */
export function predictionInputs(inputs: SnapshotInputs): SnapshotInputs {
  const cut = (jobs: readonly JobRecord[]): JobRecord[] =>
    jobs.map((j) => ({ ...j, spec: predictionSpec(j.spec) }));
  return {
    ...inputs,
    jobs: cut(inputs.jobs),
    ...(inputs.heldJobs === undefined ? {} : { heldJobs: cut(inputs.heldJobs) }),
  };
}

/** The admission and the scheduler at the moment of the prediction (round/round.ts PredictionFork, as data). */
export interface PortableFork {
  readonly scheduler: { readonly recipe: SchedulerRecipe; readonly state: unknown };
  readonly admission: { readonly settings: AdmissionSettings; readonly state: AdmissionState };
}

/** Rebuild the fork and run the prediction (eta-world.ts predictEtas). */
export function runPredictionJob(predict: PredictFn, job: PredictionJob): PredictionRun {
  const scheduler = buildScheduler(job.fork.scheduler.recipe, job.catalog);
  const state = job.fork.scheduler.state;
  if (state !== undefined && scheduler.importState !== undefined)
    scheduler.importState.call(scheduler, state as never);
  const admission = Admission.restore(job.catalog, job.fork.admission.settings, job.fork.admission.state);
  return predictEtas(predict, {
    inputs: job.inputs,
    views: job.views,
    scheduler,
    admission,
    catalog: job.catalog,
    roundSeconds: job.roundSeconds,
    firstRoundSeconds: job.firstRoundSeconds,
    targets: job.targets,
    horizonSeconds: job.horizonSeconds,
    budgetMs: job.budgetMs,
  });
}
