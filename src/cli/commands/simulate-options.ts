import { z } from 'zod';
import type { FamilyGroupQuota } from '../../core/quota-groups.js';
import { ValidationError } from '../../core/validation.js';
import type { Catalog } from '../../core/catalog.js';
import { knownQuotaGroups } from '../../controller/config.js';
import { emptyQuotaGroupProblem } from '../../controller/config-checks.js';
import { ADMIT_BY } from '../../queue/admission.js';
import { parseSchedulerList } from '../../scheduler/registry.js';
import { QUEUE_KINDS } from '../../sim/queue-options.js';
import {
  flagProblems,
  inferFormat,
  numberText,
  positiveInteger,
  priceOverridesOptionField,
  roundSecondsFlag,
  simulatedPeriodSeconds,
  traceOptionFields,
  valueOfTimeItem,
} from './sim-flags.js';

/** Raw commander values (strings); validated by `optionsSchema`. */
export interface RawSimulateOptions {
  readonly trace?: string;
  readonly format?: string;
  readonly jobs?: string;
  readonly seed?: string;
  readonly multiTask?: string;
  readonly scheduler: string;
  readonly catalog?: string;
  readonly priceOverrides?: string;
  readonly out?: string;
  readonly json?: boolean;
  readonly roundSeconds?: string;
  readonly earlyRounds?: boolean;
  readonly evaDefaultRate?: string;
  readonly colocationTable?: string;
  readonly saveColocationTable?: string;
  readonly evaPrices?: string;
  readonly evaPackingEfficiency?: string;
  readonly evaPaybackMargin?: string;
  readonly valueOfTime?: string;
  readonly targetSlowdown?: string;
  readonly pairwiseInterference?: string;
  readonly parallel?: string;
  readonly capDollarsPerHour?: string;
  readonly capInstances?: string;
  readonly queue?: string;
  readonly predict?: boolean;
  readonly quota?: string[];
  readonly queueConfig?: string;
  readonly runtime?: string;
  readonly config?: string;
  readonly pollSeconds?: string;
  readonly latencyConfig?: string;
  readonly coStart?: string;
  readonly placeBetweenRounds?: string;
  readonly makeBeforeBreak?: string;
  readonly bind?: string;
  readonly admitBy?: string;
  readonly spot?: string;
  readonly checkpointMinutes?: string;
  readonly spotBursts?: string;
  readonly spotRebalance?: string;
  readonly spotFalseRebalances?: string;
}

const onOff = z.enum(['on', 'off']);

const rate = z.number().gt(0, 'must be > 0').max(1, 'must be ≤ 1');

/**
 * `--spot-bursts` at most: a pool emptied once an hour on average, 24 times the harshest rate the README measures (30).
 * Denser bursts stop measuring the market: an instance boots for minutes and jobs checkpoint every 30 min by default, so
 * at a burst every few minutes jobs go back to the same checkpoint until the run's 30-day limit; and AWS bills nothing
 * for a spot instance reclaimed in its first hour, so ever harsher bursts would read as ever cheaper spot.
 */
export const MAX_SPOT_BURSTS = 720;

/** `--runtime`: the simulator's event engine, or the real controller on a virtual clock (src/sim/controller-runtime/). */
export const RUNTIMES = ['engine', 'controller'] as const;

const optionsSchema = z.object({
  ...traceOptionFields,
  ...priceOverridesOptionField,
  out: z.string().min(1).optional(),
  json: z.boolean().optional(),
  roundSeconds: roundSecondsFlag.optional(),
  earlyRounds: z.boolean().optional(),
  evaDefaultRate: numberText(rate).optional(),
  colocationTable: z.string().min(1).optional(),
  saveColocationTable: z.string().min(1).optional(),
  evaPrices: z.enum(['standalone', 'packed']).optional(),
  evaPackingEfficiency: numberText(rate).optional(),
  evaPaybackMargin: numberText(z.number().min(1, 'must be ≥ 1').max(1000, 'must be ≤ 1000')).optional(),
  valueOfTime: z
    .string()
    .transform((text) => text.split(','))
    .pipe(
      z
        .array(valueOfTimeItem)
        .min(1)
        .max(16, 'at most 16 values in one sweep')
        .refine((values) => new Set(values).size === values.length, 'values must differ'),
    )
    .optional(),
  targetSlowdown: numberText(z.number().gt(0, 'must be > 0').lt(1, 'must be < 1')).optional(),
  pairwiseInterference: numberText(rate).optional(),
  parallel: numberText(positiveInteger).optional(),
  capDollarsPerHour: numberText(z.number().positive('must be > 0')).optional(),
  capInstances: numberText(positiveInteger).optional(),
  queue: z.enum(QUEUE_KINDS).optional(),
  predict: z.boolean().optional(),
  quota: z.array(z.string()).optional(),
  queueConfig: z.string().min(1).optional(),
  runtime: z.enum(RUNTIMES).optional(),
  config: z.string().min(1).optional(),
  pollSeconds: numberText(simulatedPeriodSeconds).optional(),
  latencyConfig: z.string().min(1).optional(),
  coStart: onOff.optional(),
  placeBetweenRounds: onOff.optional(),
  makeBeforeBreak: onOff.optional(),
  bind: onOff.optional(),
  admitBy: z.enum(ADMIT_BY).optional(),
  spot: z.enum(['off', 'on'], { message: 'must be off or on' }).optional(),
  checkpointMinutes: numberText(z.number().min(0, 'must be ≥ 0 (0: jobs never checkpoint)')).optional(),
  spotBursts: numberText(
    z
      .number()
      .min(0, 'must be ≥ 0')
      .max(
        MAX_SPOT_BURSTS,
        `must be ≤ ${MAX_SPOT_BURSTS} (a burst per pool per hour on average; denser bursts take spot instances back before they can work)`,
      ),
  ).optional(),
  spotRebalance: numberText(z.number().min(0, 'must be in [0, 1]').max(1, 'must be in [0, 1]')).optional(),
  spotFalseRebalances: numberText(z.number().min(0, 'must be ≥ 0')).optional(),
});

/**
 * `--quota group:vcpus=N,gpus=M` (repeatable): an AWS-style on-demand quota per family group (src/queue/caps.ts
 * awsQuotaGroup: `p` for P3, `standard` for C7i/R7i), named in messages as typed. `familyGroups`: a controller config's
 * family → group map, whose groups count instances too. With the catalog the runs take, a group none of its families is
 * in is refused as a controller config's quota is (config-checks.ts).
 */
export function parseQuotaFlag(
  text: string,
  familyGroups?: Readonly<Record<string, string>>,
  catalog?: Catalog,
): FamilyGroupQuota {
  const problem = (why: string) =>
    new ValidationError('--quota', [`"${text}": ${why}; expected group:vcpus=N[,gpus=M], e.g. p:gpus=16`]);
  const m = /^\s*([a-z0-9-]+)\s*:\s*(.+)$/i.exec(text);
  if (m === null) throw problem('missing the group name or its limits');
  const limits: { maxVcpus?: number; maxGpus?: number } = {};
  for (const part of (m[2] as string).split(',')) {
    // Whole numbers, as AWS counts quotas and instances hold vCPUs and GPUs (a controller config's maxGpus alike).
    const kv = /^\s*(vcpus|gpus)\s*=\s*(\d+)\s*$/i.exec(part);
    if (kv === null) throw problem(`"${part.trim()}" is not vcpus=N or gpus=N with N a whole number`);
    const key = (kv[1] as string).toLowerCase() === 'vcpus' ? 'maxVcpus' : 'maxGpus';
    // Given twice, one of the two would be dropped without a word.
    if (limits[key] !== undefined) throw problem(`${(kv[1] as string).toLowerCase()} given twice`);
    limits[key] = Number(kv[2]);
  }
  const group = (m[1] as string).toLowerCase();
  const known = knownQuotaGroups(familyGroups);
  // A group no instance counts against would be a cap that never binds, silently.
  if (!known.includes(group))
    throw problem(`no instance counts against group ${group} (groups: ${known.join(', ')})`);
  const empty =
    catalog === undefined
      ? undefined
      : emptyQuotaGroupProblem(group, catalog, familyGroups ?? {}, "the --config file's caps.familyGroups");
  if (empty !== undefined) throw new ValidationError('--quota', [`"${text}": ${empty}`]);
  return { group, ...limits, source: `--quota ${text.trim()}` };
}

/**
 * Every `--quota` given, at most one per group: two for the same group would leave the stricter binding without a word
 * (a controller config refuses a group given twice too).
 */
export function parseQuotaFlags(
  texts: readonly string[],
  familyGroups?: Readonly<Record<string, string>>,
  catalog?: Catalog,
): FamilyGroupQuota[] {
  const quotas = texts.map((text) => parseQuotaFlag(text, familyGroups, catalog));
  quotas.forEach((q, i) => {
    const first = quotas.findIndex((other) => other.group === q.group);
    if (first < i)
      throw new ValidationError('--quota', [
        `group ${q.group} given twice ("${texts[first]}", "${texts[i]}"): give one --quota per group`,
      ]);
  });
  return quotas;
}

/** What a flag value simulate refuses is named by, when no file or flag of its own names it. */
export const SIMULATE_OPTIONS_SOURCE = 'fleetwise simulate options';

/** The command's options validated: the schedulers named, the trace's format, every flag as its value. */
export function parseSimulateOptions(raw: RawSimulateOptions) {
  const { scheduler, ...rest } = raw;
  const schedulers = parseSchedulerList(scheduler);
  const parsed = optionsSchema.safeParse(rest);
  if (!parsed.success) throw new ValidationError(SIMULATE_OPTIONS_SOURCE, flagProblems(parsed.error));
  const o = parsed.data;
  const format = o.format ?? inferFormat(o.trace);
  return { ...o, format, schedulers };
}
