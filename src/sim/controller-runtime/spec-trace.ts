import type { Catalog } from '../../core/catalog.js';
import { ValidationError } from '../../core/validation.js';
import { parseJobSpec } from '../../controller/job-spec/parse.js';
import { arraySubmissionSize, expectedDurationOf, type JobSpec } from '../../controller/job-spec/spec.js';
import { expandTasks } from '../../controller/job-spec/tasks.js';
import { fleetwiseTrace, FLEETWISE_TRACE_FORMAT, type FleetwiseTraceJob } from '../traces/fleetwise-json.js';
import type { Trace } from '../../world/trace.js';
import type { SuccessSpec } from '../../queue/success.js';
import { networkDeclarationInput } from '../../core/network-schema.js';

/**
 * Job specs (the controller's own format) as trace jobs. The simulator may reach the controller's job-spec parser
 * only from here (sim/controller-runtime/, eslint's layering), so a directory of specs and a controller's job
 * history are both turned into fleetwise trace jobs (traces/fleetwise-json.ts) here, and the simulator reads only that.
 */

export interface SpecTiming {
  readonly id: string;
  readonly arrivalSeconds: number;
  readonly durationSeconds: number;
  readonly durationFrom?: 'measured' | 'declared' | undefined;
  /** False for a job that stopped as unsuccessful at a stage. */
  readonly successful?: boolean | undefined;
  /** Trace ids of the jobs it waited for (a controller's history: its `dependsOn`, all of them in the trace). */
  readonly dependsOn?: readonly string[] | undefined;
}

/**
 * A job spec as a fleetwise trace job: one task per replica with the controller's names and co-location keys
 * (expandTasks), so the simulated scheduler learns under the keys the controller would; the spec's restore and
 * init delay estimates become the trace's delays.
 */
export function specTraceJob(spec: JobSpec, timing: SpecTiming): FleetwiseTraceJob {
  return {
    id: timing.id,
    name: spec.name,
    team: spec.team,
    ...(spec.workload === undefined ? {} : { workload: spec.workload }),
    arrivalSeconds: timing.arrivalSeconds,
    durationSeconds: timing.durationSeconds,
    ...(timing.durationFrom === undefined ? {} : { durationFrom: timing.durationFrom }),
    ...(spec.totalIterations === undefined ? {} : { totalIterations: spec.totalIterations }),
    initDelaySeconds: spec.checkpoint.initDelaySeconds ?? 0,
    restoreDelaySeconds: spec.checkpoint.restoreDelaySeconds ?? 0,
    ...(timing.successful === undefined ? {} : { successful: timing.successful }),
    ...(spec.network === undefined ? {} : { network: networkDeclarationInput(spec.network) }),
    // What the scheduler and the simulated world read of a job beyond its tasks: dropped, a spot: never job would run
    // on spot, a job checkpointing every 10 minutes would lose 30 minutes' work to an interruption.
    ...(spec.spot === undefined ? {} : { spot: spec.spot }),
    ...(spec.spotMaxDelaySeconds === undefined ? {} : { spotMaxDelaySeconds: spec.spotMaxDelaySeconds }),
    ...(spec.checkpoint.everySeconds === undefined
      ? {}
      : { checkpointIntervalSeconds: spec.checkpoint.everySeconds }),
    ...(spec.noMoveSeconds === undefined ? {} : { noMoveSeconds: spec.noMoveSeconds }),
    ...(spec.valueOfTimePerJobHour === undefined
      ? {}
      : { valueOfTimePerJobHour: spec.valueOfTimePerJobHour }),
    ...(spec.success === undefined ? {} : { success: successInput(spec.success) }),
    ...(timing.dependsOn === undefined || timing.dependsOn.length === 0
      ? {}
      : { dependsOn: [...timing.dependsOn] }),
    tasks: expandTasks(spec).map((t) => {
      const image =
        t.template.image ??
        (t.template.build === undefined ? undefined : `build:${t.template.build.context}`);
      return {
        name: t.name,
        workload: t.workloadKey,
        ...(image === undefined ? {} : { image }),
        demand: Object.fromEntries(
          Object.entries(t.template.demand).map(([family, r]): [string, [number, number, number]] => [
            family,
            [r[0], r[1], r[2]],
          ]),
        ),
        shmSizeGiB: t.template.shmSizeGiB,
      };
    }),
  };
}

/** A parsed success model in the form the trace format takes (its own arrays). */
function successInput(success: SuccessSpec): NonNullable<FleetwiseTraceJob['success']> {
  return success.kind === 'stages'
    ? {
        kind: 'stages',
        stageSeconds: [...success.stageSeconds],
        continueProbabilities: [...success.continueProbabilities],
      }
    : { ...success };
}

/**
 * What a spec asks of the controller that a directory of specs cannot be simulated with: `dependsOn` names a
 * controller's job ids (a directory's jobs are its files), and a run limit shorter than the expected run would stop the
 * job where the simulation has it finish. Refused, not dropped, so no result is silently of another workload.
 */
function unsimulatedFields(spec: JobSpec): string[] {
  const problems: string[] = [];
  if (spec.arrayProperties?.sameIndexOf !== undefined)
    problems.push(
      "dependsOn: an N_TO_N dependency is not simulated (it names a controller's job ids; a directory's jobs are its " +
        'files): remove it',
    );
  if (spec.dependsOn !== undefined)
    problems.push(
      "dependsOn: not simulated (it names a controller's job ids; a directory's jobs are its files): remove it, " +
        'and give the dependent job a later arrival in the arrivals index instead (a trace exported from a ' +
        "controller's state, `fleetwise export-trace`, keeps its jobs' dependencies)",
    );
  const expected = expectedDurationOf(spec);
  if (spec.maxRunSeconds !== undefined && expected !== undefined && spec.maxRunSeconds < expected)
    problems.push(
      `maxRunSeconds: ${spec.maxRunSeconds} s is shorter than expectedDurationSeconds (${expected} s): the job would be ` +
        'stopped at its limit, which is not simulated',
    );
  return problems;
}

export interface SpecFile {
  /** The file's name in the directory; the job's id in the trace. */
  readonly name: string;
  /** Its path, for errors. */
  readonly path: string;
  readonly text: string;
}

/**
 * A directory of job specs as a trace: each file parsed and validated as `fleetwise submit` would (against the
 * catalog the run uses), arriving at `arrivals.get(file name)`, running for its `expectedDurationSeconds`; an array
 * (arrayProperties.size) is that many jobs, `file[0]`, `file[1]`, …. Every invalid file is reported, each under its
 * own path.
 */
export function specFilesTrace(
  files: readonly SpecFile[],
  arrivals: ReadonlyMap<string, number>,
  catalog: Catalog,
  traceName: string,
): Trace {
  const problems: ValidationError[] = [];
  const jobs: FleetwiseTraceJob[] = [];
  for (const file of files) {
    let spec: JobSpec;
    try {
      spec = parseJobSpec(file.text, file.path, catalog);
    } catch (e) {
      if (e instanceof ValidationError) {
        problems.push(e);
        continue;
      }
      throw e;
    }
    const durationSeconds = expectedDurationOf(spec);
    if (durationSeconds === undefined) {
      problems.push(
        new ValidationError(file.path, [
          'expectedDurationSeconds: required to simulate the job (or a success model, which gives it): how long it ' +
            'runs at full throughput (seconds, or 30m, 2h, …)',
        ]),
      );
      continue;
    }
    const unsimulated = unsimulatedFields(spec);
    if (unsimulated.length > 0) {
      problems.push(new ValidationError(file.path, unsimulated));
      continue;
    }
    const arrivalSeconds = arrivals.get(file.name);
    if (arrivalSeconds === undefined) throw new Error(`${file.path}: no arrival time for ${file.name}`);
    // An array arrives as its jobs, together, as the controller would take it: file[0], file[1], …
    const size = arraySubmissionSize(spec);
    const ids =
      size === undefined ? [file.name] : Array.from({ length: size }, (_, i) => `${file.name}[${i}]`);
    // SEQUENTIAL: each job of the array waits for the one before it, as the controller would hold it.
    const sequential = spec.arrayProperties?.sequential === true;
    ids.forEach((id, i) =>
      jobs.push(
        specTraceJob(spec, {
          id,
          arrivalSeconds,
          durationSeconds,
          durationFrom: 'declared',
          ...(sequential && i > 0 ? { dependsOn: [ids[i - 1] as string] } : {}),
        }),
      ),
    );
  }
  if (problems.length === 1) throw problems[0] as ValidationError;
  if (problems.length > 1)
    throw new ValidationError(
      traceName,
      problems.flatMap((p) => p.problems.map((problem) => `${p.source}: ${problem}`)),
    );
  return fleetwiseTrace({ format: FLEETWISE_TRACE_FORMAT, name: traceName, jobs }, traceName);
}
