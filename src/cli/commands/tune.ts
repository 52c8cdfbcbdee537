import type { Command } from 'commander';
import { join, resolve } from 'node:path';
import { stringify } from 'yaml';
import { z } from 'zod';
import { ValidationError } from '../../core/validation.js';
import { loadControllerConfig } from '../../controller/config-loading.js';
import {
  addPriceOverridesOption,
  addTraceOptions,
  flagProblems,
  inferFormat,
  loadTraceFlags,
  numberText,
  priceOverridesOptionField,
  readPriceOverridesFile,
  refuseSpotPricesWithoutSpot,
  traceOptionFields,
  type PriceOverridesFromFile,
  seedNumber,
  roundSecondsFlag,
  traceSettings,
} from './sim-flags.js';
import type { QueueCaps } from '../../queue/caps.js';
import { ADMIT_BY, type AdmitBy } from '../../queue/admission.js';
import {
  DEFAULT_TUNE_CLASS_COUNTS,
  generateCandidates,
  MAX_TUNE_CLASSES,
  PREFERENCES,
  TUNE_ORDERINGS,
  type TuneCandidate,
} from '../../queue/tune.js';
import type { ReportSettings } from '../../sim/report/json.js';
import { describeConfig, tuneHtml } from '../../sim/report/tune-html.js';
import {
  controllerYaml,
  tuneJson,
  type CandidateOutcome,
  type TuneReport,
  type TuneRow,
} from '../../sim/report/tune-json.js';
import { defaultParallelism, runInWorkers } from '../../sim/run-pool.js';
import type { RunRequest } from '../../sim/run-request.js';
import { SCHEDULER_NAMES, type SchedulerName } from '../../scheduler/registry.js';
import { formatTable } from '../table.js';
import { batchProgress, type BatchProgress } from '../batch-progress.js';
import type { OutputFileError } from '../atomic-file.js';
import { writeOutputFiles } from '../output-files.js';
import { checkOutputDirectory } from '../output-target.js';
import { checkEveryJobAdmissible } from '../../world/never-fits.js';
import { spotOnlySchedulers } from './simulate-flag-rules.js';

/** Raw commander values (strings); validated by `optionsSchema`. */
interface RawTuneOptions {
  readonly trace?: string;
  readonly format?: string;
  readonly jobs?: string;
  readonly seed?: string;
  readonly multiTask?: string;
  readonly catalog?: string;
  readonly priceOverrides?: string;
  readonly roundSeconds?: string;
  readonly scheduler: string;
  readonly capDollarsPerHour?: string;
  readonly capInstances?: string;
  readonly admitBy?: string;
  readonly samples: string;
  readonly classes: string;
  readonly orderings: string;
  readonly searchSeed?: string;
  readonly prefer: string;
  readonly parallel?: string;
  readonly json?: boolean;
  readonly out?: string;
  readonly coStart?: string;
  readonly placeBetweenRounds?: string;
  readonly bind?: string;
  readonly makeBeforeBreak?: string;
}

export const DEFAULT_TUNE_SAMPLES = 24;
/**
 * How the controller sizes waiting jobs against its $/hour cap when its config does not say (controller/settings.ts
 * `admitByOf`): tune simulates that by default, so what it recommends is what such a controller would do.
 */
const TUNE_DEFAULT_ADMIT_BY: AdmitBy = 'plan-cost';
/** The policy a controller config without `scheduler.name` runs (controller/config.ts), and so tune's default. */
const CONTROLLER_DEFAULT_SCHEDULER: SchedulerName = 'eva';
export const TUNE_FILES = { json: 'tune.json', html: 'tune.html' } as const;

/**
 * The controller's behaviours that change who runs when and where, by tune's flag field (named as simulate's flags)
 * and the controller config's field. tune runs each as a controller config does unless its flag says otherwise, and
 * its printed config writes each that differs, so a controller started from it runs what tune measured.
 */
const BEHAVIOUR_FIELDS = {
  coStart: 'coStart',
  placeBetweenRounds: 'placeBetweenRounds',
  bind: 'bindBetweenRounds',
  makeBeforeBreak: 'makeBeforeBreak',
} as const;
type Behaviour = keyof typeof BEHAVIOUR_FIELDS;
type Behaviours = Readonly<Record<Behaviour, boolean>>;
const BEHAVIOURS: readonly Behaviour[] = ['coStart', 'placeBetweenRounds', 'bind', 'makeBeforeBreak'];

/**
 * What a controller config that leaves them out runs, read as `simulate --config` reads a config: the defaults
 * live in the controller config's schema alone. The region is irrelevant to these fields.
 */
function controllerBehaviours(): Behaviours {
  const config = loadControllerConfig({
    flags: {},
    env: {},
    defaultRegion: 'us-east-1',
    forSimulation: true,
  });
  return {
    coStart: config[BEHAVIOUR_FIELDS.coStart],
    placeBetweenRounds: config[BEHAVIOUR_FIELDS.placeBetweenRounds],
    bind: config[BEHAVIOUR_FIELDS.bind],
    makeBeforeBreak: config[BEHAVIOUR_FIELDS.makeBeforeBreak],
  };
}

const onOff = z.enum(['on', 'off']);
const onOffText = (on: boolean): 'on' | 'off' => (on ? 'on' : 'off');

/** A comma-separated list, each item checked by `item`. */
const listText = <T extends z.ZodType<unknown, string>>(item: T) =>
  z
    .string()
    .transform((s) => s.split(',').map((x) => x.trim()))
    // An empty item is a typo (two commas in a row), not a value to drop: refused like any other bad value.
    .refine((items) => items.every((x) => x !== ''), 'an empty item: two commas in a row, or one at an end')
    .pipe(z.array(item).min(1, 'give at least one value'));

const optionsSchema = z.object({
  ...traceOptionFields,
  ...priceOverridesOptionField,
  roundSeconds: roundSecondsFlag.optional(),
  scheduler: z.enum(SCHEDULER_NAMES, { error: `must be one of ${SCHEDULER_NAMES.join(', ')}` }),
  capDollarsPerHour: numberText(z.number().positive('must be > 0')).optional(),
  capInstances: numberText(z.number().int('must be an integer').positive('must be ≥ 1')).optional(),
  admitBy: z.enum(ADMIT_BY, { error: `must be one of ${ADMIT_BY.join(', ')}` }).optional(),
  samples: numberText(
    z.number().int('must be an integer').min(1, 'must be ≥ 1').max(10_000, 'must be ≤ 10000'),
  ),
  classes: listText(
    numberText(
      z
        .number()
        .int('must be an integer')
        .min(1, 'must be ≥ 1')
        .max(MAX_TUNE_CLASSES, `must be ≤ ${MAX_TUNE_CLASSES}`),
    ),
  ),
  orderings: listText(z.enum(TUNE_ORDERINGS, { error: `must be one of ${TUNE_ORDERINGS.join(', ')}` })),
  searchSeed: numberText(seedNumber).optional(),
  prefer: z.enum(PREFERENCES, { error: `must be one of ${PREFERENCES.join(', ')}` }),
  parallel: numberText(z.number().int('must be an integer').positive('must be ≥ 1')).optional(),
  json: z.boolean().optional(),
  out: z.string().min(1).optional(),
  coStart: onOff.optional(),
  placeBetweenRounds: onOff.optional(),
  bind: onOff.optional(),
  makeBeforeBreak: onOff.optional(),
});

function parseOptions(raw: RawTuneOptions) {
  const parsed = optionsSchema.safeParse(raw);
  if (!parsed.success) throw new ValidationError('fleetwise tune options', flagProblems(parsed.error));
  const o = parsed.data;
  if (spotOnlySchedulers([o.scheduler]).length > 0)
    throw new ValidationError('--scheduler', [
      `${o.scheduler} buys spot capacity, and tune simulates on-demand capacity only (it has no --spot): its ` +
        'figures would be on-demand ones under a spot name',
    ]);
  if (o.capDollarsPerHour === undefined && o.capInstances === undefined)
    throw new ValidationError('fleetwise tune options', [
      '--cap-dollars-per-hour / --cap-instances: give at least one cap; without a cap no job ever waits, so every ' +
        'WFQ config schedules alike',
    ]);
  // As simulate refuses it: under an instance cap alone no job is sized against dollars, and the flag does nothing.
  if (o.admitBy !== undefined && o.capDollarsPerHour === undefined)
    throw new ValidationError('--admit-by', [
      'sizes waiting jobs against the $/hour cap: needs --cap-dollars-per-hour',
    ]);
  const caps: QueueCaps = {
    ...(o.capDollarsPerHour !== undefined ? { maxCostPerHour: o.capDollarsPerHour } : {}),
    ...(o.capInstances !== undefined ? { maxInstances: o.capInstances } : {}),
  };
  const defaults = controllerBehaviours();
  const flagOr = (flag: 'on' | 'off' | undefined, byDefault: boolean): boolean =>
    flag === undefined ? byDefault : flag === 'on';
  const behaviours: Behaviours = {
    coStart: flagOr(o.coStart, defaults.coStart),
    placeBetweenRounds: flagOr(o.placeBetweenRounds, defaults.placeBetweenRounds),
    bind: flagOr(o.bind, defaults.bind),
    makeBeforeBreak: flagOr(o.makeBeforeBreak, defaults.makeBeforeBreak),
  };
  // As simulate refuses it: without placement between rounds nothing is bound, so the flag would do nothing.
  if (o.bind === 'on' && !behaviours.placeBetweenRounds)
    throw new ValidationError('--bind', [
      'binds what is placed between rounds to instances still coming up: needs --place-between-rounds on',
    ]);
  return {
    ...o,
    format: o.format ?? inferFormat(o.trace),
    admitBy: o.admitBy ?? TUNE_DEFAULT_ADMIT_BY,
    caps,
    behaviours,
    defaults,
  };
}

/**
 * Simulate every candidate, at most `parallel` at once, each in its own worker thread. Unlike one `runInWorkers`
 * call over all requests, a candidate whose run fails (say a config that starves a job past the horizon) only
 * loses its own objectives (PCS: +∞) instead of stopping the search.
 */
async function evaluate(
  candidates: readonly TuneCandidate[],
  requests: readonly RunRequest[],
  parallel: number,
  progress: BatchProgress,
): Promise<CandidateOutcome[]> {
  const outcomes = new Array<CandidateOutcome>(requests.length);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < requests.length) {
      const index = next++;
      try {
        const [result] = await runInWorkers([requests[index] as RunRequest], 1, {
          onProgress: (_, fraction) => progress.advance(index, fraction),
        });
        if (result === undefined) throw new Error('no result');
        outcomes[index] = { ok: true, result };
      } catch (e) {
        outcomes[index] = { ok: false, error: e instanceof Error ? e.message : String(e) };
      }
      progress.done(index, (candidates[index] as TuneCandidate).id);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(parallel, requests.length)) }, lane));
  return outcomes;
}

function fmt(v: number | null, digits: number): string {
  return v === null ? '–' : v.toFixed(digits);
}

function frontTable(rows: readonly TuneRow[], recommendedId: string): string {
  return formatTable(
    ['', 'id', 'mean JCT h', 'pred err p99 %', 'unfairness %', 'config'],
    rows.map((r) => [
      r.id === recommendedId ? '→' : '',
      r.id,
      fmt(r.meanJctHours, 3),
      fmt(r.predErrP99, 1),
      fmt(r.unfairness, 1),
      describeConfig(r),
    ]),
  );
}

/**
 * The settings beside the queue and caps that the figures depend on and a controller config can carry, each written
 * when tune was given one (the scheduler when not the default both share): a controller started from the printed
 * config then runs what was simulated. The price overrides go inline (the controller reads them from its config, not from a
 * file); the catalog as an absolute path, since a relative one in a config file is read from the file's directory.
 */
function tunedSettingsYaml(
  o: { readonly scheduler: string; readonly roundSeconds?: number; readonly catalog?: string },
  prices: PriceOverridesFromFile | undefined,
): string {
  const scheduler =
    o.scheduler === CONTROLLER_DEFAULT_SCHEDULER ? '' : stringify({ scheduler: { name: o.scheduler } });
  const round = o.roundSeconds === undefined ? '' : stringify({ roundSeconds: o.roundSeconds });
  const catalog =
    o.catalog === undefined
      ? ''
      : `# the catalog simulated with, absolute: a relative path here would be read from this file's directory\n` +
        stringify({ catalog: resolve(o.catalog) }, { lineWidth: 0 });
  const overrides =
    prices === undefined
      ? ''
      : `# from ${prices.source.replace(/[\r\n]+/g, ' ')}\n` +
        stringify({ priceOverrides: prices.overrides }, { lineWidth: 0 });
  return scheduler + round + catalog + overrides;
}

/** Each behaviour tune ran other than a controller config's default, under the config's field for it. */
function behavioursYaml(ran: Behaviours, defaults: Behaviours): string {
  const differing = BEHAVIOURS.filter((b) => ran[b] !== defaults[b]);
  return differing.length === 0
    ? ''
    : stringify(Object.fromEntries(differing.map((b) => [BEHAVIOUR_FIELDS[b], ran[b]])));
}

function capsText(caps: QueueCaps): string {
  return [
    ...(caps.maxCostPerHour !== undefined ? [`$${caps.maxCostPerHour}/hour`] : []),
    ...(caps.maxInstances !== undefined ? [`${caps.maxInstances} instances`] : []),
  ].join(' and ');
}

async function tune(raw: RawTuneOptions): Promise<void> {
  const o = parseOptions(raw);
  if (o.out !== undefined) checkOutputDirectory(o.out, '--out');
  // The thresholds come from the trace's sizes.
  const prices = o.priceOverrides === undefined ? undefined : readPriceOverridesFile(o.priceOverrides);
  refuseSpotPricesWithoutSpot(prices, 'tune simulates on-demand capacity only');
  const { traceSpec, catalog, trace } = loadTraceFlags(o, false, prices);
  // As each candidate's run would, but once and before the search: a job no cap admits alone fails every candidate.
  checkEveryJobAdmissible(trace, catalog, o.caps, o.admitBy);
  // PCS size = resource-time at the minimum allocation: task-seconds, as the simulator's admission classifies.
  const sizes = trace.jobs.map((j) => j.durationSeconds * j.tasks.length);
  const searchSeed = o.searchSeed ?? o.seed ?? 0;
  const candidates = generateCandidates(sizes, {
    samples: o.samples,
    seed: searchSeed,
    classCounts: o.classes,
    orderings: o.orderings,
  });
  if (candidates.length < o.samples)
    process.stderr.write(
      `tune: only ${candidates.length} distinct configs on this trace's job sizes (asked for ${o.samples})\n`,
    );

  const requests: RunRequest[] = candidates.map((c) => ({
    scheduler: o.scheduler,
    trace: traceSpec,
    catalogPath: o.catalog,
    ...(prices === undefined ? {} : { priceOverrides: prices.overrides }),
    roundSeconds: o.roundSeconds,
    queue: { kind: 'wfq', caps: o.caps, admitBy: o.admitBy, config: c.config, predict: true },
    // As `simulate --config` runs a controller config's behaviours.
    starts: {
      coStart: o.behaviours.coStart,
      placeBetweenRounds: o.behaviours.placeBetweenRounds,
      bind: o.behaviours.bind,
    },
    makeBeforeBreak: o.behaviours.makeBeforeBreak,
  }));
  const progress = batchProgress(requests.length, 'tune', 'candidates');
  let outcomes: CandidateOutcome[];
  try {
    outcomes = await evaluate(
      candidates,
      requests,
      o.parallel ?? defaultParallelism(requests.length),
      progress,
    );
  } finally {
    progress.stop();
  }
  const result = tuneJson(candidates, outcomes, o.prefer);
  const failed = result.evaluated.filter((r) => r.error !== null);
  if (failed.length > 0)
    process.stderr.write(
      `tune: ${failed.length} candidate(s) failed to simulate (counted worst): ${failed
        .map((r) => `${r.id}: ${r.error ?? ''}`)
        .join('; ')}\n`,
    );
  const rec = result.recommended;
  // The caps it was tuned under, and how they sized jobs (the controller reads `admitBy` beside its caps), then the
  // scheduler, period and prices it ran with, and the behaviours it ran other than the controller's defaults.
  const yaml =
    controllerYaml(
      rec.config,
      `fleetwise tune: ${rec.id} (${rec.preference}) on ${trace.name}, ${o.scheduler} under ${capsText(o.caps)}\n` +
        `mean JCT ${fmt(rec.meanJctHours, 3)} h, p99 prediction error ${fmt(rec.predErrP99, 1)} %, ` +
        `unfairness ${fmt(rec.unfairness, 1)} %`,
    ) +
    stringify({ caps: { ...o.caps, admitBy: o.admitBy } }, { lineWidth: 0 }) +
    tunedSettingsYaml(o, prices) +
    behavioursYaml(o.behaviours, o.defaults);

  // Files first: a reader of stdout gone (`| head`) ends the process at its next write (main.ts), files unwritten.
  // A report that cannot be written (a full disk) loses nothing else: the result still goes to stdout, then the
  // failure ends the command.
  let unwritten: OutputFileError | undefined;
  if (o.out !== undefined) {
    const settings: ReportSettings = {
      ...traceSettings(o, trace, catalog, prices?.source),
      scheduler: o.scheduler,
      capDollarsPerHour: o.capDollarsPerHour ?? 'none (uncapped)',
      capInstances: o.capInstances ?? 'none (uncapped)',
      admitBy: o.admitBy,
      samples: o.samples,
      searchSeed,
      classes: o.classes.join(','),
      orderings: o.orderings.join(','),
      prefer: o.prefer,
      ...Object.fromEntries(
        BEHAVIOURS.map((b) => [b, o[b] ?? `${onOffText(o.behaviours[b])} (controller default)`]),
      ),
    };
    const report: TuneReport = { settings, ...result, controllerYaml: yaml };
    unwritten = writeTuneReport(o.out, report);
  }

  if (o.json === true) process.stdout.write(`${JSON.stringify(result)}\n`);
  else
    process.stdout.write(
      `${trace.name}: ${trace.jobs.length} jobs; ${o.scheduler} under ${capsText(o.caps)}; ` +
        `${result.evaluated.length} config${result.evaluated.length === 1 ? '' : 's'} simulated, ${result.front.length} on the Pareto front ` +
        `(mean JCT, p99 prediction error, unfairness; all minimised)\n\n` +
        `${frontTable(result.front, rec.id)}\n` +
        `recommended (${rec.preference}): ${rec.id}: ${describeConfig(rec)}\n\n` +
        `# controller config:\n${yaml}`,
    );
  if (unwritten !== undefined) throw unwritten;
}

/** tune.json and tune.html into `dir`, both or neither; the failure, naming `--out` and the file, if it failed. */
function writeTuneReport(dir: string, report: TuneReport): OutputFileError | undefined {
  const files = [
    { path: join(dir, TUNE_FILES.json), text: `${JSON.stringify(report)}\n`, flag: '--out' },
    { path: join(dir, TUNE_FILES.html), text: tuneHtml(report), flag: '--out' },
  ];
  const failed = writeOutputFiles(files, [{ path: dir, flag: '--out' }]);
  if (failed === undefined) process.stderr.write(`report written: ${files.map((f) => f.path).join(', ')}\n`);
  return failed;
}

/** `fleetwise tune`: search WFQ configs by simulation (PCS §6) and print the Pareto front and a controller config. */
export function registerTune(program: Command): Command {
  // Each behaviour's default as its help tells it: a controller config's.
  const defaults = controllerBehaviours();
  const shown = (b: Behaviour): string => `default: a controller config's, ${onOffText(defaults[b])}`;
  return addPriceOverridesOption(
    addTraceOptions(
      program
        .command('tune')
        .description(
          'search WFQ queue configs (classes, thresholds, weights) by simulation under caps; print the Pareto front ' +
            'of mean JCT, p99 prediction error and unfairness, and a controller config for the recommended one',
        ),
    ),
  )
    .option('--round-seconds <s>', 'scheduling period in seconds (default 300)')
    .option(
      '--scheduler <name>',
      `scheduler to simulate: one of ${SCHEDULER_NAMES.filter((n) => spotOnlySchedulers([n]).length === 0).join(', ')}`,
      CONTROLLER_DEFAULT_SCHEDULER,
    )
    .option('--cap-dollars-per-hour <x>', 'cap: keep the fleet under $x/hour (at least one cap is required)')
    .option('--cap-instances <n>', 'cap: keep the fleet under n instances')
    .option(
      '--admit-by <how>',
      `size jobs against the $ cap by ${ADMIT_BY.join('|')} (plan-cost: scaled by what the packed fleet really ` +
        `costs), as the printed config's caps.admitBy tells the controller; needs --cap-dollars-per-hour; default ` +
        `the controller's, ${TUNE_DEFAULT_ADMIT_BY}`,
    )
    .option('--samples <n>', 'number of candidate configs to simulate', String(DEFAULT_TUNE_SAMPLES))
    .option(
      '--classes <list>',
      `comma-separated class counts to search, each 1..${MAX_TUNE_CLASSES}`,
      DEFAULT_TUNE_CLASS_COUNTS.join(','),
    )
    .option('--orderings <list>', `orderings inside classes: ${TUNE_ORDERINGS.join(',')}`, 'fifo')
    .option('--search-seed <s>', 'seed of the candidate sampling (default: --seed)')
    .option(
      '--prefer <rule>',
      `which front point to recommend: ${PREFERENCES.join('|')} (balanced: closest to the ideal point)`,
      'balanced',
    )
    .option('--parallel <n>', 'simulations at once (default: min(#candidates, available cores))')
    .option(
      '--co-start <on|off>',
      `start a multi-task job's tasks so they are ready together (${shown('coStart')})`,
    )
    .option(
      '--place-between-rounds <on|off>',
      'place waiting jobs on paid capacity at arrivals and completions instead of at the next round ' +
        `(${shown('placeBetweenRounds')})`,
    )
    .option(
      '--bind <on|off>',
      `placement between rounds may bind to instances still coming up (${shown('bind')})`,
    )
    .option(
      '--make-before-break <on|off>',
      'a job moving to new instances keeps working until they are ready, then checkpoints ' +
        `(${shown('makeBeforeBreak')})`,
    )
    .option(
      '--json',
      'print exactly one JSON object {"front":[…],"recommended":{…},"evaluated":[…]} on stdout',
    )
    .option('--out <dir>', 'write tune.json and tune.html (charts of the front) into this directory')
    .action(async (raw: RawTuneOptions) => {
      await tune(raw);
    });
}
