import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { loadCatalogFile, PROJECT_ROOT } from '../../cloud/catalog-file.js';
import type { Catalog } from '../../core/catalog.js';
import { ValidationError } from '../../core/validation.js';
import { alibabaDemandFrequencies, convertAlibabaTrace, type DemandFrequency } from './alibaba.js';
import { checkTraceAgainstCatalog } from './catalog-check.js';
import { parseContentionMatrix, type ContentionMatrix } from './contention-matrix.js';
import { parseEvaTrace } from './eva-json.js';
import { parseFleetwiseTrace } from './fleetwise-json.js';
import { arrivalsIndexName, gapArrivals, isSpecFileName, parseArrivals } from './spec-arrivals.js';
import { specFilesTrace } from '../controller-runtime/spec-trace.js';
import { generateSuccessTrace } from './success-workload.js';
import { generateSyntheticTrace } from './synthetic.js';
import { checkScaledArrivals, firstJobs, scaleArrivalRate } from './transform.js';
import type { Trace } from '../../world/trace.js';
import { parseWorkloadCatalog, type WorkloadCatalog } from './workloads.js';

/** The only file of src/sim/traces that touches the file system; the parsers take text. */

export const DATA_DIR = join(PROJECT_ROOT, 'data');
export const BUNDLED_ALIBABA_TRACE_PATH = join(DATA_DIR, 'alibaba-gpu-v2023', 'openb_pod_list_default.csv');
export const BUNDLED_EVA_TRACE_PATH = join(DATA_DIR, 'eva-reference', 'pai_200.json');
export const BUNDLED_WORKLOAD_CATALOG_PATH = join(DATA_DIR, 'eva-reference', 'workload_catalog.json');
export const BUNDLED_CONTENTION_MATRIX_PATH = join(DATA_DIR, 'eva-reference', 'contention_matrix.csv');

export const TRACE_FORMATS = ['eva', 'alibaba', 'synthetic', 'success', 'fleetwise', 'specs'] as const;
export type TraceFormat = (typeof TRACE_FORMATS)[number];

export interface LoadTraceOptions {
  readonly format: TraceFormat;
  /** Keep the first N jobs (in arrival order for Eva JSON). */
  readonly jobs?: number | undefined;
  /** Seed of generated traces (alibaba, synthetic, success); Eva JSON files are fixed. */
  readonly seed?: number | undefined;
  /** Share of 2-/4-task jobs (alibaba, synthetic, success). */
  readonly multiTaskShare?: number | undefined;
  /** Multiplies the arrival rate (all formats). */
  readonly arrivalRateScale?: number | undefined;
  /**
   * Instance types that filter Alibaba pods (default: the bundled us-east-1 catalog) and that the tasks of every other
   * format are checked against (not checked without it; a specs directory is checked spec by spec).
   */
  readonly instanceCatalog?: Catalog | undefined;
  /** Default: data/eva-reference/workload_catalog.json. */
  readonly workloadCatalog?: WorkloadCatalog | undefined;
  /** Synthetic only: identical tasks per job. */
  readonly tasksPerJob?: number | undefined;
  /** Synthetic only: the workloads to draw from. */
  readonly workloads?: readonly string[] | undefined;
  /** Specs only, without an arrivals index: seconds between the arrivals of the files in name order (default 0). */
  readonly arrivalGapSeconds?: number | undefined;
}

function readText(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    throw new ValidationError(path, [`cannot read ${what}: ${(e as Error).message}`]);
  }
}

export function loadWorkloadCatalog(path: string = BUNDLED_WORKLOAD_CATALOG_PATH): WorkloadCatalog {
  const text = readText(path, 'workload catalog');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ValidationError(path, [`not valid JSON: ${(e as Error).message}`]);
  }
  return parseWorkloadCatalog(json, path);
}

export function loadContentionMatrix(
  path: string = BUNDLED_CONTENTION_MATRIX_PATH,
  unmeasuredRate?: number,
): ContentionMatrix {
  return parseContentionMatrix(readText(path, 'contention matrix'), path, unmeasuredRate);
}

/** Distinct converted demand vectors of an Alibaba pod list with their frequencies (see alibaba.ts). */
export function loadAlibabaDemandFrequencies(
  path: string = BUNDLED_ALIBABA_TRACE_PATH,
  instanceCatalog: Catalog = loadCatalogFile(),
): DemandFrequency[] {
  return alibabaDemandFrequencies(readText(path, 'Alibaba pod list'), instanceCatalog, path);
}

/**
 * A directory of job specs (spec-arrivals.ts says when each arrives; controller-runtime/spec-trace.ts converts them).
 * `catalog` validates the demands, as `fleetwise submit` does against the controller's.
 */
function loadSpecsDirectory(dir: string, catalog: Catalog, gapSeconds: number | undefined): Trace {
  let names: string[];
  try {
    if (!statSync(dir).isDirectory())
      throw new ValidationError(dir, ['--format specs reads a directory of job spec files, not a file']);
    names = readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => e.name)
      .sort();
  } catch (e) {
    if (e instanceof ValidationError) throw e;
    throw new ValidationError(dir, [`cannot read the job spec directory: ${(e as Error).message}`]);
  }
  const specFiles = names.filter(isSpecFileName);
  if (specFiles.length === 0)
    throw new ValidationError(dir, [
      `no job spec files (*.yaml, *.yml, *.json) in the directory${names.length === 0 ? ' (it is empty)' : `; it has ${names.join(', ')}`}`,
    ]);
  const index = arrivalsIndexName(names, dir);
  if (index !== undefined && gapSeconds !== undefined)
    throw new ValidationError('--arrival-gap-seconds', [
      `${join(dir, index)} already says when each job arrives; drop the flag or the file`,
    ]);
  const arrivals =
    index === undefined
      ? gapArrivals(specFiles, gapSeconds ?? 0)
      : parseArrivals(readText(join(dir, index), 'arrivals index'), join(dir, index), specFiles);
  const files = specFiles.map((name) => {
    const path = join(dir, name);
    return { name, path, text: readText(path, 'job spec') };
  });
  return specFilesTrace(files, arrivals, catalog, basename(dir.replace(/\/+$/, '')) || dir);
}

/**
 * A generated or converted trace, checked as a file's is: its arrivals within the span a trace may have (the generators
 * stretch them by 1/arrivalRateScale) and its tasks against the catalog, so that a job no instance type can host is
 * refused as bad input before the run rather than failing it once built.
 */
function checkedGeneratedTrace(
  trace: Trace,
  options: LoadTraceOptions,
  source: string,
  catalog: Catalog | undefined,
): Trace {
  checkScaledArrivals(trace, options.arrivalRateScale ?? 1);
  if (catalog !== undefined) checkTraceAgainstCatalog(trace, catalog, source);
  return trace;
}

/**
 * Load a trace: an Eva JSON file, an Alibaba pod list converted with Eva's recipe, a synthetic trace, the
 * success paper's staged workload (success-workload.ts), a fleetwise JSON trace (fleetwise-json.ts, what
 * `fleetwise export-trace` writes) or a directory of job specs. Without a path, eva and alibaba read the bundled
 * files under data/; synthetic and success take no path; fleetwise and specs need one.
 */
export function loadTrace(path: string | undefined, options: LoadTraceOptions): Trace {
  if (options.arrivalGapSeconds !== undefined && options.format !== 'specs')
    throw new ValidationError('--arrival-gap-seconds', [
      `applies to a directory of job specs (--format specs) only, not to ${options.format} traces`,
    ]);
  switch (options.format) {
    case 'eva': {
      if ((options.multiTaskShare ?? 0) > 0)
        throw new ValidationError('--multi-task', [
          'applies to generated traces (alibaba, synthetic, success), not to Eva JSON files',
        ]);
      const file = path ?? BUNDLED_EVA_TRACE_PATH;
      let trace = parseEvaTrace(readText(file, 'Eva JSON trace'), file, basename(file));
      if (options.jobs !== undefined) trace = firstJobs(trace, options.jobs, file);
      if (options.instanceCatalog !== undefined)
        checkTraceAgainstCatalog(trace, options.instanceCatalog, file);
      return scaleArrivalRate(trace, options.arrivalRateScale ?? 1);
    }
    case 'alibaba': {
      const file = path ?? BUNDLED_ALIBABA_TRACE_PATH;
      const instanceCatalog = options.instanceCatalog ?? loadCatalogFile();
      const trace = convertAlibabaTrace(
        readText(file, 'Alibaba pod list'),
        {
          instanceCatalog,
          workloadCatalog: options.workloadCatalog ?? loadWorkloadCatalog(),
          seed: options.seed,
          jobs: options.jobs,
          arrivalRateScale: options.arrivalRateScale,
          multiTaskShare: options.multiTaskShare,
          traceName: `${basename(file)} (seed ${options.seed ?? 0})`,
        },
        file,
      );
      return checkedGeneratedTrace(trace, options, file, instanceCatalog);
    }
    case 'synthetic': {
      if (path !== undefined)
        throw new ValidationError('--trace', [
          `a synthetic trace is generated, not read: drop the path ${path}`,
        ]);
      const trace = generateSyntheticTrace({
        workloadCatalog: options.workloadCatalog ?? loadWorkloadCatalog(),
        seed: options.seed,
        jobs: options.jobs,
        arrivalRateScale: options.arrivalRateScale,
        multiTaskShare: options.multiTaskShare,
        tasksPerJob: options.tasksPerJob,
        workloads: options.workloads,
      });
      return checkedGeneratedTrace(trace, options, trace.name, options.instanceCatalog);
    }
    case 'success': {
      if (path !== undefined)
        throw new ValidationError('--trace', [
          `a success trace is generated, not read: drop the path ${path}`,
        ]);
      const trace = generateSuccessTrace({
        workloadCatalog: options.workloadCatalog ?? loadWorkloadCatalog(),
        seed: options.seed,
        jobs: options.jobs,
        arrivalRateScale: options.arrivalRateScale,
        multiTaskShare: options.multiTaskShare,
      });
      return checkedGeneratedTrace(trace, options, trace.name, options.instanceCatalog);
    }
    case 'fleetwise':
    case 'specs': {
      if ((options.multiTaskShare ?? 0) > 0)
        throw new ValidationError('--multi-task', [
          `applies to generated traces (alibaba, synthetic, success), not to ${options.format} traces`,
        ]);
      if (path === undefined)
        throw new ValidationError('--trace', [
          options.format === 'specs'
            ? 'a specs trace needs --trace DIR: a directory of job spec files'
            : 'a fleetwise trace needs --trace FILE (written by fleetwise export-trace)',
        ]);
      let trace =
        options.format === 'specs'
          ? loadSpecsDirectory(path, options.instanceCatalog ?? loadCatalogFile(), options.arrivalGapSeconds)
          : parseFleetwiseTrace(readText(path, 'fleetwise trace'), path, basename(path));
      if (options.jobs !== undefined) trace = firstJobs(trace, options.jobs, path);
      // A spec directory was checked against the catalog spec by spec, as `fleetwise submit` checks one.
      if (options.format === 'fleetwise' && options.instanceCatalog !== undefined)
        checkTraceAgainstCatalog(trace, options.instanceCatalog, path);
      return scaleArrivalRate(trace, options.arrivalRateScale ?? 1);
    }
    default: {
      const unknown: never = options.format;
      throw new Error(`unknown trace format ${String(unknown)} (expected ${TRACE_FORMATS.join(', ')})`);
    }
  }
}
