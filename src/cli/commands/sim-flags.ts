import type { Command } from 'commander';
import { readFileSync, statSync } from 'node:fs';
import { dirname, extname, resolve } from 'node:path';
import { ADMIT_BY } from '../../queue/admission.js';
import type { WfqConfig } from '../../queue/wfq.js';
import { readFlagFileWithLines } from '../flag-file.js';
import { z } from 'zod';
import { describeIssues, ValidationError } from '../../core/validation.js';
import { networkConfigSchema, type NetworkConfigInput } from '../../world/network-config.js';
import {
  applyPriceOverrides,
  priceOverrideProblems,
  priceOverridesSchema,
  type Catalog,
  type PriceOverrides,
} from '../../core/catalog.js';
import { loadRequestCatalog, loadRequestTrace, type RunRequest } from '../../sim/run-request.js';
import { TRACE_FORMATS, type TraceFormat } from '../../sim/traces/load.js';
import { isFleetwiseTraceText } from '../../sim/traces/fleetwise-json.js';
import { TRACE_JOB_IDS, type TraceJobIds } from '../../sim/traces/controller-job-ids.js';
import { MAX_ARRIVAL_RATE_SCALE, MIN_ARRIVAL_RATE_SCALE } from '../../sim/traces/transform.js';
import type { Trace } from '../../world/trace.js';
import { DEFAULT_ROUND_SECONDS } from '../../world/simulation.js';
import type { ReportSettings } from '../../sim/report/json.js';
import {
  catalogPathSchema,
  configPriceOverridesSchema,
  controllerConfigSchema,
  MAX_ROUND_SECONDS,
  queueSchema,
  ROUND_SECONDS_BOUND,
  roundSecondsSchema,
  schedulerSchema,
} from '../../controller/config.js';
import type { FieldPath } from '../../controller/config-checks.js';
import { fieldAt, fieldsAt, parseFileWith } from '../../controller/settings-file-fields.js';
import { MAX_VALUE_OF_TIME_PER_JOB_HOUR } from '../../core/model.js';
import { nearestKey } from '../../core/strict-object.js';
import { errnoCode } from '../../core/errno.js';

/** Flag parsing shared by `simulate` and `tune` (commander hands over strings; zod checks them). */

/** A number given as text, checked by `inner`. */
export const numberText = (inner: z.ZodNumber) =>
  z
    .string()
    .trim()
    .regex(/^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i, 'must be a number')
    .transform(Number)
    .pipe(inner);

/**
 * The shortest simulated period (rounds, the controller runtime's polls): a simulation covers weeks of simulated time,
 * and a millisecond period would run for ever, a round per millisecond. A real controller may poll faster.
 */
export const MIN_SIMULATED_PERIOD_SECONDS = 1;
const SIMULATED_PERIOD_BOUND = `at least ${MIN_SIMULATED_PERIOD_SECONDS} s (a simulation spans weeks)`;

/** A simulated period in seconds (`--round-seconds`, `--poll-seconds`). */
export const simulatedPeriodSeconds = z
  .number()
  .min(MIN_SIMULATED_PERIOD_SECONDS, SIMULATED_PERIOD_BOUND)
  .max(MAX_ROUND_SECONDS, ROUND_SECONDS_BOUND);

/** `--round-seconds`: the scheduling period, bounded above as a controller config's `roundSeconds`. */
export const roundSecondsFlag = numberText(simulatedPeriodSeconds);

/** The most jobs a generated trace may have (`--jobs`): the whole Alibaba trace has 6,274. */
export const MAX_GENERATED_JOBS = 1_000_000;

export const seedNumber = z
  .number()
  .int('must be an integer')
  .min(0, 'must be ≥ 0')
  .max(2 ** 32 - 1);

export const positiveInteger = z.number().int('must be an integer').positive('must be ≥ 1');

/** zod fields of the trace and catalog flags (`addTraceOptions`), spread into each command's option schema. */
export const traceOptionFields = {
  trace: z.string().min(1).optional(),
  format: z.enum(TRACE_FORMATS).optional(),
  jobs: numberText(positiveInteger.max(MAX_GENERATED_JOBS, `must be ≤ ${MAX_GENERATED_JOBS}`)).optional(),
  seed: numberText(seedNumber).optional(),
  multiTask: numberText(z.number().min(0, 'must be ≥ 0').max(1, 'must be ≤ 1')).optional(),
  arrivalRateScale: numberText(
    z
      .number()
      .min(MIN_ARRIVAL_RATE_SCALE, `must be ≥ ${MIN_ARRIVAL_RATE_SCALE}`)
      .max(MAX_ARRIVAL_RATE_SCALE, `must be ≤ ${MAX_ARRIVAL_RATE_SCALE}`),
  ).optional(),
  arrivalGapSeconds: numberText(z.number().min(0, 'must be ≥ 0')).optional(),
  latencySensitive: numberText(z.number().min(0, 'must be ≥ 0').max(1, 'must be ≤ 1')).optional(),
  jobIds: z.enum(TRACE_JOB_IDS, { message: `must be ${TRACE_JOB_IDS.join(' or ')}` }).optional(),
  catalog: z.string().min(1).optional(),
};

/** zod field of `--price-overrides` (`addPriceOverridesOption`), for the commands that take it. */
export const priceOverridesOptionField = { priceOverrides: z.string().min(1).optional() };

/** Price overrides read from a file, with the file's name for problems against the catalog. */
export interface PriceOverridesFromFile {
  readonly overrides: PriceOverrides;
  readonly source: string;
  /**
   * The file they were read from and how its problems name one of their fields (its path in the file, with its line),
   * so a problem against the catalog points at the line; absent where the prices carry no lines.
   */
  readonly file?: { readonly path: string; readonly fieldAt: (field: FieldPath) => string } | undefined;
}

/** A controller config given as `--price-overrides`: its `priceOverrides:` section is read, its other settings not. */
const configWithPriceOverridesSchema = z.looseObject({ priceOverrides: priceOverridesSchema.nullable() });

/**
 * A top-level key of a bare `--price-overrides` file that is no price field: a misspelled `priceOverrides:` (which
 * would otherwise be offered the nearest price field), or a controller config's setting in a file without prices.
 */
function pricesFileKeyNote(path: FieldPath, key: string): string | undefined {
  if (path.length > 0) return undefined;
  const priceFields = fieldsAt(priceOverridesSchema, []);
  // Last among the candidates: a key only sharing a prefix (`price…`) is offered the price field first.
  if (nearestKey(key, [...priceFields, 'priceOverrides']) === 'priceOverrides')
    return 'unknown field, did you mean priceOverrides?';
  if (fieldsAt(controllerConfigSchema, []).includes(key))
    return "a controller config's setting: a --price-overrides file holds prices, bare or in a priceOverrides: section";
  return undefined;
}

/**
 * `--price-overrides FILE`: Savings Plans or reserved prices in YAML or JSON, bare or as a controller config's
 * `priceOverrides:` section (so the controller's own config file will do), validated as a controller config is: each
 * problem names the file, the field with its line in the file, an unknown key the field it likely meant. Their types
 * are checked against the catalog when it is loaded (`loadTraceFlags`), with the same lines.
 */
export function readPriceOverridesFile(path: string): PriceOverridesFromFile {
  const file = readFlagFileWithLines(path, '--price-overrides');
  const { value } = file;
  const inConfig = typeof value === 'object' && value !== null && 'priceOverrides' in value;
  const source = inConfig ? `${path}: priceOverrides` : path;
  const section: PriceOverrides | null = inConfig
    ? parseFileWith(configWithPriceOverridesSchema, file).priceOverrides
    : value === null || value === undefined
      ? null
      : parseFileWith(priceOverridesSchema, file, pricesFileKeyNote);
  // A file that overrides nothing (empty, only comments, `{}`, or only empty price tables such as `pricePerType: {}`)
  // would run at list prices as if priced: the wrong file.
  if (section === null || !overridesAnyPrice(section))
    throw new ValidationError(source, [
      `${section === null ? 'is empty' : 'overrides no price'}: give discountPercent, ` +
        'spotDiscountPercent, pricePerType or spotPricePerType (as in examples/prices/savings-plan.yaml)',
    ]);
  const inFile: FieldPath = inConfig ? ['priceOverrides'] : [];
  return { overrides: section, source, file: { path, fieldAt: (f) => fieldAt(file, [...inFile, ...f]) } };
}

/** Whether `overrides` sets a discount or at least one per-type price (an empty price table sets none). */
function overridesAnyPrice(overrides: PriceOverrides): boolean {
  return Object.values(overrides).some(
    (v) => v !== undefined && (typeof v !== 'object' || Object.keys(v).length > 0),
  );
}

/**
 * The catalog at the prices of `prices`; a price the catalog cannot take is refused naming the file and the field with
 * its line when the prices were read from a file, else naming their source.
 */
function pricedCatalog(catalog: Catalog, prices: PriceOverridesFromFile): Catalog {
  const { file } = prices;
  if (file !== undefined) {
    const problems = priceOverrideProblems(catalog, prices.overrides);
    if (problems.length > 0)
      throw new ValidationError(
        file.path,
        problems.map((p) => `${file.fieldAt(p.path)}: ${p.message}`),
      );
  }
  return applyPriceOverrides(catalog, prices.overrides, prices.source);
}

/**
 * A `--price-overrides` file's spot prices or spot discount (or a `--queue-config` file's `priceOverrides:`) where no
 * spot instance is bought (spot off, or a command that buys on demand only) would price nothing: refused naming where
 * they were given (the file and the field with its line, as its other problems are), before the catalog's own check
 * blames the catalog.
 */
export function refuseSpotPricesWithoutSpot(
  prices: PriceOverridesFromFile | undefined,
  why: string,
  /** Where the prices were given, for prices read without lines: the flag, or the file and section. */
  where = '--price-overrides',
): void {
  if (prices === undefined) return;
  const refuse = (field: 'spotPricePerType' | 'spotDiscountPercent', what: string): never => {
    const { file } = prices;
    throw file === undefined
      ? new ValidationError(where, [`${field} ${what}: ${why}`])
      : new ValidationError(file.path, [`${file.fieldAt([field])}: ${what}: ${why}`]);
  };
  if (prices.overrides.spotPricePerType !== undefined) refuse('spotPricePerType', 'prices spot instances');
  if (prices.overrides.spotDiscountPercent !== undefined)
    refuse('spotDiscountPercent', 'discounts spot instances');
}

/** Whether `catalog` sells any spot instance: a spot section with at least one pool. */
export function offersSpot(catalog: Catalog): boolean {
  return (catalog.spot?.offerings.length ?? 0) > 0;
}

export function addPriceOverridesOption(command: Command): Command {
  return command.option(
    '--price-overrides <file>',
    "Savings Plans or reserved prices over the catalog's (YAML or JSON: discountPercent, pricePerType, spotPricePerType, spotDiscountPercent; see README)",
  );
}

/** The command-line flag of an option field: `capDollarsPerHour` → `--cap-dollars-per-hour`. */
export function flagName(field: string): string {
  return `--${field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

/**
 * zod's issues with flag names instead of field names; a list item (`classes.1: …`) reads `--classes item 2: …`.
 */
export function flagProblems(error: z.ZodError): string[] {
  return describeIssues(error).map((p) =>
    p.replace(/^(\w+)(?:\.(\d+))?:/, (_, f: string, item?: string) =>
      item === undefined ? `${flagName(f)}:` : `${flagName(f)} item ${Number(item) + 1}:`,
    ),
  );
}

/**
 * Without --format: a directory holds job specs, a .json file is a fleetwise trace when its `format` field says so
 * (what export-trace writes) and an Eva trace otherwise, a .csv file an Alibaba pod list, no file a synthetic trace.
 * A path that is not there is refused as such first: its extension, or its lack of one, says nothing then.
 */
export function inferFormat(tracePath: string | undefined): TraceFormat {
  if (tracePath === undefined) return 'synthetic';
  let isDirectory: boolean;
  try {
    isDirectory = statSync(tracePath).isDirectory();
  } catch (e) {
    const code = errnoCode(e);
    throw new ValidationError('--trace', [
      code === 'ENOENT' || code === 'ENOTDIR'
        ? `no such file or directory: ${tracePath}`
        : `cannot read ${tracePath}: ${(e as Error).message}`,
    ]);
  }
  if (isDirectory) return 'specs';
  const ext = extname(tracePath).toLowerCase();
  if (ext === '.json') return jsonTraceFormat(tracePath);
  if (ext === '.csv') return 'alibaba';
  throw new ValidationError('--format', [
    `cannot tell the format of ${tracePath} from its extension; give --format ${TRACE_FORMATS.join('|')}`,
  ]);
}

function jsonTraceFormat(path: string): TraceFormat {
  try {
    return isFleetwiseTraceText(readFileSync(path, 'utf8')) ? 'fleetwise' : 'eva';
  } catch {
    return 'eva'; // unreadable: the Eva parser says why
  }
}

/** The trace flags of `simulate` and `tune`, validated. */
export interface TraceFlags {
  readonly trace?: string | undefined;
  readonly format: TraceFormat;
  readonly jobs?: number | undefined;
  readonly seed?: number | undefined;
  readonly multiTask?: number | undefined;
  readonly arrivalRateScale?: number | undefined;
  readonly arrivalGapSeconds?: number | undefined;
  readonly latencySensitive?: number | undefined;
  readonly jobIds?: TraceJobIds | undefined;
  readonly catalog?: string | undefined;
}

/**
 * Load the catalog and the trace once in the main thread, so a bad file is reported once before any worker
 * starts; returns the trace request the workers load again. The catalog keeps its spot market only when the run
 * opens it (`spotOpen`), as the workers' does.
 */
export function loadTraceFlags(
  o: TraceFlags,
  spotOpen = false,
  priceOverrides?: PriceOverridesFromFile,
): {
  traceSpec: RunRequest['trace'];
  catalog: Catalog;
  trace: Trace;
} {
  const traceSpec: RunRequest['trace'] = {
    path: o.trace,
    format: o.format,
    jobs: o.jobs,
    seed: o.seed,
    multiTaskShare: o.multiTask,
    arrivalRateScale: o.arrivalRateScale,
    arrivalGapSeconds: o.arrivalGapSeconds,
    latencySensitiveShare: o.latencySensitive,
    jobIds: o.jobIds,
  };
  const loaded = loadRequestCatalog({ catalogPath: o.catalog, ...(spotOpen ? { spot: {} } : {}) });
  // Applied here with the file's name, so an override of a type the catalog lacks names the file; the workers apply
  // the same overrides to the catalog they load (RunRequest.priceOverrides).
  const catalog = priceOverrides === undefined ? loaded : pricedCatalog(loaded, priceOverrides);
  const trace = loadRequestTrace({ trace: traceSpec }, catalog);
  if (trace.jobs.length === 0) throw new ValidationError(o.trace ?? o.format, ['the trace has no jobs']);
  return { traceSpec, catalog, trace };
}

/** The report settings that name the trace, catalog and round length (first in `simulate`'s and `tune`'s reports). */
export function traceSettings(
  o: TraceFlags & { readonly roundSeconds?: number | undefined },
  trace: Trace,
  catalog: Catalog,
  /** Where the price overrides the runs took came from, if any. */
  priceOverridesSource?: string,
): ReportSettings {
  return {
    trace: trace.name,
    format: o.format,
    jobs: trace.jobs.length,
    seed: o.seed ?? 0,
    multiTaskShare: o.multiTask ?? 0,
    arrivalRateScale: o.arrivalRateScale ?? 1,
    latencySensitiveShare: o.latencySensitive ?? 0,
    jobIds: o.jobIds ?? 'trace',
    catalog:
      (o.catalog ?? `bundled (${catalog.provider} ${catalog.region})`) +
      (priceOverridesSource === undefined ? '' : `, prices overridden by ${priceOverridesSource}`),
    roundSeconds: o.roundSeconds ?? DEFAULT_ROUND_SECONDS,
  };
}

/** The caps a `--queue-config` file may carry beside its `queue:` section: those `fleetwise tune` prints. */
const queueFileCapsSchema = z.strictObject({
  maxCostPerHour: z.number().positive().finite().optional(),
  maxInstances: z.number().int().positive().optional(),
  admitBy: z.enum(ADMIT_BY).optional(),
});
export type QueueFileCaps = z.output<typeof queueFileCapsSchema>;

/**
 * A `--queue-config` file with sections: its `queue:`, and the sections `fleetwise tune` prints beside it (the settings
 * it ran with), each checked by the controller config's own schema for it, so what a controller takes from the printed
 * config is what a simulation takes.
 */
const queueFileSchema = z.strictObject({
  queue: queueSchema,
  caps: queueFileCapsSchema.optional(),
  scheduler: schedulerSchema.optional(),
  // The controller's bound, and the simulated period's (a simulation spans weeks).
  roundSeconds: roundSecondsSchema.pipe(simulatedPeriodSeconds).optional(),
  catalog: catalogPathSchema.optional(),
  priceOverrides: configPriceOverridesSchema,
  // The controller's behaviours tune ran other than a controller config's defaults (tune writes each it turned off).
  coStart: z.boolean().optional(),
  placeBetweenRounds: z.boolean().optional(),
  bindBetweenRounds: z.boolean().optional(),
  makeBeforeBreak: z.boolean().optional(),
});
const TUNED_SECTIONS: readonly string[] = Object.keys(queueFileSchema.shape).filter((k) => k !== 'queue');

/** A `--queue-config` file: its WFQ config, and the settings it was tuned under when it says them. */
export interface QueueConfigFile {
  readonly queue: WfqConfig;
  readonly caps?: QueueFileCaps | undefined;
  /** The policy the queue was tuned for (and any Eva tunables it ran with). */
  readonly scheduler?: SchedulerSection | undefined;
  readonly roundSeconds?: number | undefined;
  /** Absolute: a relative path is read from the file's directory, as a controller config's is. */
  readonly catalog?: string | undefined;
  /** Its `priceOverrides:`, named by the file and section. */
  readonly priceOverrides?: PriceOverridesFromFile | undefined;
  /** The controller's behaviours it was tuned with, where the file writes them (named as a controller config's). */
  readonly coStart?: boolean | undefined;
  readonly placeBetweenRounds?: boolean | undefined;
  readonly bindBetweenRounds?: boolean | undefined;
  readonly makeBeforeBreak?: boolean | undefined;
}

/** A controller config's `scheduler:` section: the policy's name, and Eva's tunables. */
export type SchedulerSection = z.output<typeof schedulerSchema>;

/** A setting of a whole controller config at the top of a queue config: it belongs in `--config`. */
function controllerSettingNote(path: readonly (string | number)[], key: string): string | undefined {
  if (path.length > 0 || !fieldsAt(controllerConfigSchema, []).includes(key)) return undefined;
  return (
    `a controller config's setting: a queue config has a queue: section and what fleetwise tune prints beside it ` +
    `(${TUNED_SECTIONS.map((k) => `${k}:`).join(', ')}); give a whole controller config with --config`
  );
}

/**
 * `--queue-config FILE`: a WFQ config in YAML or JSON, either bare or as the controller config's `queue:` section,
 * with the sections beside it that `fleetwise tune` prints: `caps:` (the caps and `admitBy` it was tuned under), and
 * the `scheduler:`, `roundSeconds:`, `catalog:`, `priceOverrides:` and behaviours (`coStart`, `placeBetweenRounds`,
 * `bindBetweenRounds`, `makeBeforeBreak`) it ran with when not the defaults (a run of its config under other settings
 * would not be the run it measured). Validated as a controller config is: each problem names the file, the field and
 * its line, an unknown key the field it likely meant; any other section is refused, not ignored (a whole controller
 * config goes in `--config`).
 */
/** The keys of a bare WFQ config (`queue:`'s fields). */
const BARE_QUEUE_KEYS: readonly string[] = ['classifyBy', 'classes', 'preemption', 'ordering'];

/**
 * A top-level key that makes the file the `queue:` form: `queue` itself, or a misspelling of it (`queu:`), read in
 * that form so its problem is named as such rather than as a bare config missing its classes.
 */
function meansQueueSection(key: string): boolean {
  return (
    key === 'queue' ||
    (!BARE_QUEUE_KEYS.includes(key) && nearestKey(key, ['queue', ...BARE_QUEUE_KEYS]) === 'queue')
  );
}

export function readQueueConfigFile(path: string): QueueConfigFile {
  const file = readFlagFileWithLines(path, '--queue-config');
  const { value } = file;
  if (typeof value !== 'object' || value === null || !Object.keys(value).some(meansQueueSection))
    return { queue: parseFileWith(queueSchema, file) };
  const { queue, caps, scheduler, roundSeconds, catalog, priceOverrides, ...behaviours } = parseFileWith(
    queueFileSchema,
    file,
    controllerSettingNote,
  );
  return {
    queue,
    ...behaviours,
    ...(caps === undefined ? {} : { caps }),
    ...(scheduler === undefined ? {} : { scheduler }),
    ...(roundSeconds === undefined ? {} : { roundSeconds }),
    ...(catalog === undefined ? {} : { catalog: resolve(dirname(path), catalog) }),
    ...(priceOverrides === undefined
      ? {}
      : { priceOverrides: { overrides: priceOverrides, source: `${path}: priceOverrides` } }),
  };
}

/** The trace and catalog options `simulate` and `tune` share. */
export function addTraceOptions(command: Command): Command {
  return command
    .option(
      '--trace <path>',
      'trace file (Eva JSON, Alibaba pod list CSV, fleetwise JSON from export-trace) or a directory of job specs; default: bundled data / synthetic',
    )
    .option(
      '--format <format>',
      `trace format: ${TRACE_FORMATS.join('|')} (default: from the file extension)`,
    )
    .option(
      '--jobs <n>',
      'use the first N jobs (eva, fleetwise, specs) or generate N jobs (alibaba, synthetic, success)',
    )
    .option('--seed <s>', 'seed of generated traces (default 0)')
    .option('--multi-task <share>', 'share of multi-task jobs in generated traces, 0..1')
    .option(
      '--arrival-rate-scale <x>',
      `multiply the arrival rate, ${MIN_ARRIVAL_RATE_SCALE}..${MAX_ARRIVAL_RATE_SCALE} (2 = jobs arrive twice as often; all formats; default 1)`,
    )
    .option(
      '--arrival-gap-seconds <s>',
      'specs without an arrivals.yaml: the files arrive in name order this many seconds apart (default 0)',
    )
    .option(
      '--latency-sensitive <share>',
      'share of multi-task jobs given a NoMora latency curve (50% memcached, 25% strads, 25% tensorflow), 0..1 (default 0; jobs declaring a network keep theirs)',
    )
    .option(
      '--job-ids <names>',
      `${TRACE_JOB_IDS.join('|')}: the trace's own job ids (default), or job-1, job-2, … in arrival order as the controller names jobs (Eva breaks ties by id, so the runtimes compare plan by plan only with the same names)`,
    )
    .option('--catalog <file>', 'instance catalog JSON (default: bundled aws-us-east-1)');
}

/**
 * `--latency-config FILE`: the simulated network (zones, round trip per domain, noise, congestion episodes) in YAML or
 * JSON, validated as a controller config is: each problem names the file, the field with its line, an unknown key the
 * field it likely meant. Returned as written (a file of comments only restates the defaults); the run resolves it.
 */
export function readLatencyConfigFile(path: string): NetworkConfigInput {
  const file = readFlagFileWithLines(path, '--latency-config');
  const value = file.value ?? {};
  parseFileWith(networkConfigSchema, { ...file, value });
  return value as NetworkConfigInput;
}

/** One value of `--value-of-time`: `auto`, or $ per job-hour (a number a person can act on when it is wrong). */
export const valueOfTimeItem = z
  .string()
  .trim()
  .transform((text, ctx): number | 'auto' => {
    if (text === 'auto') return 'auto';
    const value = /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(text) ? Number(text) : Number.NaN;
    const problem = Number.isNaN(value)
      ? `"${text}" is neither a number ($ per job-hour) nor auto`
      : value < 0
        ? 'must be ≥ 0 ($ per job-hour), or auto'
        : value > MAX_VALUE_OF_TIME_PER_JOB_HOUR
          ? `must be ≤ ${MAX_VALUE_OF_TIME_PER_JOB_HOUR} ($ per job-hour)`
          : undefined;
    if (problem === undefined) return value;
    ctx.addIssue({ code: 'custom', message: problem });
    return z.NEVER;
  });
