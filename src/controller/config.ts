import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { isNode, LineCounter, parseDocument, type Document } from 'yaml';
import { z } from 'zod';
import { ValidationError } from '../core/validation.js';
import { wfqConfigSchema } from '../queue/wfq.js';
import { SCHEDULER_NAMES, unknownSchedulerProblem } from '../scheduler/registry.js';

/**
 * The controller's configuration: a YAML (or JSON) file, with command-line flags overriding it field by field
 * (`fleetwise controller [--config fleetwise.yaml]`, flags override the file).
 * Validated with zod; every problem names the file, the field and, for file values, the line.
 */

const CLUSTER_NAME = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}$/;
const REGION = /^[a-z]{2}(-[a-z]+)+-\d+$/;
const LISTEN = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;

const positive = z.number().finite().positive('must be > 0');
const nonNegative = z.number().finite().nonnegative('must be ≥ 0');

export const ORPHAN_POLICIES = ['adopt', 'terminate'] as const;
export type OrphanPolicy = (typeof ORPHAN_POLICIES)[number];

/** The AWS on-demand quota groups `awsQuotaGroup` maps families to (Service Quotas "Running On-Demand … instances"). */
export const AWS_QUOTA_GROUPS = ['standard', 'p', 'g-vt', 'inf', 'trn', 'dl', 'f', 'x', 'hpc'] as const;

const quotaSchema = z
  .strictObject({
    /** Quota group, e.g. `standard`, `p`, `g-vt` (or a group named in `familyGroups`). */
    group: z.string().min(1),
    maxVcpus: nonNegative.optional(),
    maxGpus: z.number().int('a whole number').nonnegative('must be ≥ 0').optional(),
  })
  .refine((q) => q.maxVcpus !== undefined || q.maxGpus !== undefined, 'give maxVcpus, maxGpus or both');

/**
 * Caps the queue layer admits jobs under (src/queue/caps.ts QueueCaps): $/hour and instance count, which
 * Eva also enforces on its plans, and AWS-style on-demand quotas per family group in vCPUs and GPUs, which
 * admission enforces (and the controller's safety rail checks on every plan).
 */
const capsSchema = z
  .strictObject({
    /** No plan may cost more than this per hour (the safety rail of ARCHITECTURE.md "Principles"). */
    maxCostPerHour: positive.optional(),
    maxInstances: z.number().int('a whole number').positive('must be ≥ 1').optional(),
    maxMigrationsPerRound: z.number().int('a whole number').nonnegative('must be ≥ 0').optional(),
    quotas: z.array(quotaSchema).optional(),
    /** Family → quota group, for families `awsQuotaGroup` does not know or accounts set up differently. */
    familyGroups: z
      .record(z.string().regex(/^[a-z][a-z0-9-]*$/, 'an instance family like p3'), z.string().min(1))
      .optional(),
  })
  .superRefine((caps, ctx) => {
    const known = new Set<string>([...AWS_QUOTA_GROUPS, ...Object.values(caps.familyGroups ?? {})]);
    const seen = new Set<string>();
    (caps.quotas ?? []).forEach((q, i) => {
      if (!known.has(q.group))
        ctx.addIssue({
          code: 'custom',
          path: ['quotas', i, 'group'],
          message: `unknown quota group ${q.group} (AWS groups: ${AWS_QUOTA_GROUPS.join(', ')}; or map families to it in familyGroups)`,
        });
      if (seen.has(q.group))
        ctx.addIssue({
          code: 'custom',
          path: ['quotas', i, 'group'],
          message: `duplicate quota for group ${q.group}`,
        });
      seen.add(q.group);
    });
  });

/**
 * The `scheduler:` section: which registered policy plans the rounds (src/scheduler/registry.ts; default Eva), and
 * Eva's tunables (src/scheduler/eva.ts EvaOptions), each defaulting to Eva's measured default. The tunables apply to
 * Eva and its ablations; the baselines have none. Unknown keys are errors.
 */
const unitRate = z.number().finite().gt(0, 'must be > 0').max(1, 'must be ≤ 1');
const schedulerSchema = z.strictObject({
  /**
   * Any registered policy: Eva, its ablations, or a baseline (to compare them on a real cluster). The controller has
   * no offline interference profile, so Owl, which plans from one, assumes co-location costs nothing (a profile of 1).
   */
  name: z
    .enum(SCHEDULER_NAMES, { error: (issue) => unknownSchedulerProblem([String(issue.input)]) })
    .default('eva'),
  /** `packed` (default) or `standalone` (Eva §4.2) task prices. */
  prices: z.enum(['packed', 'standalone']).optional(),
  /** Packed prices: expected share of an instance's bottleneck capacity in use (default 0.8). */
  packingEfficiency: unitRate.optional(),
  /** A move must save this many times its migration cost over the horizon (default 8; Eva's eq. 1: 1). */
  paybackMargin: z.number().finite().min(1, 'must be ≥ 1').optional(),
  /** Co-location throughput per co-located task assumed before anything is learned (default 0.95). */
  defaultRate: unitRate.optional(),
});

/**
 * The `queue:` section: WFQ classes, weights, orderings and preemption (PCS §3; src/queue/wfq.ts). Unknown keys are
 * refused here (the core schema strips them), then the core schema checks values, defaults and thresholds.
 */
const queueKeysSchema = z.strictObject({
  classifyBy: z.unknown().optional(),
  classes: z
    .array(
      z.strictObject({
        id: z.unknown().optional(),
        weight: z.unknown().optional(),
        maxSizeSeconds: z.unknown().optional(),
        teams: z.unknown().optional(),
        ordering: z.unknown().optional(),
      }),
    )
    .optional(),
  preemption: z
    .strictObject({
      enabled: z.unknown().optional(),
      marginShare: z.unknown().optional(),
      minShortRounds: z.unknown().optional(),
    })
    .optional(),
  ordering: z
    .strictObject({
      srptAgingPerSecond: z.unknown().optional(),
      defaultSuccessProbability: z.unknown().optional(),
    })
    .optional(),
});

const queueSchema = queueKeysSchema
  .transform((v): unknown => v)
  .pipe(wfqConfigSchema)
  .superRefine((q, ctx) => {
    const teamOwner = new Map<string, string>();
    q.classes.forEach((c, i) => {
      if (q.classifyBy === 'size' && c.teams !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['classes', i, 'teams'],
          message: 'teams only apply with classifyBy: team',
        });
      if (q.classifyBy === 'team' && c.maxSizeSeconds !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['classes', i, 'maxSizeSeconds'],
          message: 'size thresholds only apply with classifyBy: size',
        });
      // Unknown teams fall into the last class; every other class must name its teams.
      if (q.classifyBy === 'team' && i < q.classes.length - 1 && (c.teams ?? []).length === 0)
        ctx.addIssue({
          code: 'custom',
          path: ['classes', i, 'teams'],
          message:
            'required with classifyBy: team (only the last class may leave it out: it takes every other team)',
        });
      (c.teams ?? []).forEach((team, j) => {
        const owner = teamOwner.get(team);
        if (owner !== undefined)
          ctx.addIssue({
            code: 'custom',
            path: ['classes', i, 'teams', j],
            message: `team ${team} is already in class ${owner}`,
          });
        teamOwner.set(team, c.id);
      });
    });
  });

const placementSchema = z.strictObject({
  availabilityZone: z.string().min(1),
  subnetId: z
    .string()
    .regex(/^subnet-[0-9a-f]{8,17}$/, 'a subnet id like subnet-0123456789abcdef0')
    .optional(),
});

const ec2Schema = z.strictObject({
  /** Worker AMI; when left out, the newest Amazon Linux 2023 x86_64 AMI of the region is looked up at startup. */
  amiId: z
    .string()
    .regex(/^ami-[0-9a-f]{8,17}$/, 'an AMI id like ami-0123456789abcdef0')
    .optional(),
  /** Zones (with an optional subnet each) in preference order; default: the region's available zones. */
  placements: z.array(placementSchema).min(1).optional(),
  /** Subnets whose zones are looked up at startup (an alternative to `placements`). */
  subnetIds: z
    .array(z.string().regex(/^subnet-[0-9a-f]{8,17}$/, 'a subnet id like subnet-0123456789abcdef0'))
    .min(1)
    .optional(),
  securityGroupIds: z
    .array(z.string().regex(/^sg-[0-9a-f]{8,17}$/, 'a security group id like sg-0123…'))
    .default([]),
  instanceProfile: z.string().min(1).optional(),
  keyName: z.string().min(1).optional(),
  /** Extra tags on every instance (cost allocation); the `fleetwise:` prefix is reserved. */
  tags: z.record(z.string().min(1).max(128), z.string().max(256)).default({}),
  /** Seconds a capacity error for (type, zone) is remembered (Karpenter: 3 min; industry-anchors.md §(c) 6). */
  capacityErrorTtlSeconds: nonNegative.optional(),
  /** Start a worker on new instances through user data (infra/worker-user-data.sh); leave out for a baked AMI. */
  worker: z
    .strictObject({
      /** Where workers reach this controller's API. */
      controllerUrl: z.string().min(1),
      packageSpec: z.string().min(1).optional(),
      nodeVersion: z.string().min(1).optional(),
      templatePath: z.string().min(1).optional(),
    })
    .optional(),
});

const workerRegistrationSchema = z.strictObject({
  /**
   * An instance whose worker has not registered this long after EC2 reports it running is replaced. The catalog's
   * launch delays (instantiate + worker start + register) are about 3–4 minutes; 15 minutes leaves room for a
   * bootstrap that installs Docker and Node.js.
   */
  timeoutSeconds: positive.default(900),
  /** Backoff before the next launch after a registration failure doubles from this… */
  backoffBaseSeconds: positive.default(60),
  /** …up to this, so a broken AMI cannot launch instances in a loop. */
  backoffMaxSeconds: positive.default(3600),
});

export const controllerConfigSchema = z
  .strictObject({
    /** `local`: instances are worker processes on this machine (src/cloud/local/), with local-mode defaults. */
    provider: z.enum(['aws', 'local']).default('aws'),
    /** How workers run tasks; `auto`: Docker when an engine answers, else plain processes. */
    executor: z.enum(['auto', 'docker', 'process']).default('auto'),
    /** Seconds between worker heartbeats. */
    workerHeartbeatSeconds: positive.default(5),
    /** A registered worker silent this long is lost: its instance is replaced, its tasks resume elsewhere. */
    workerHeartbeatTimeoutSeconds: positive.default(60),
    cluster: z
      .string()
      .regex(
        CLUSTER_NAME,
        'letters, digits, "_", ".", ":" and "-", starting alphanumeric, at most 63 characters',
      ),
    /** Default: AWS_REGION, AWS_DEFAULT_REGION, then the catalog's region. */
    region: z.string().regex(REGION, 'an AWS region like us-east-1').optional(),
    stateDir: z.string().min(1),
    /** `s3://bucket/prefix` or a directory; `bucket` is a shorthand for `s3://<bucket>`. Default: <stateDir>/objects. */
    objectStore: z.string().min(1).optional(),
    bucket: z
      .string()
      .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'an S3 bucket name')
      .optional(),
    /** HOST:PORT of the HTTP API. */
    listen: z.string().regex(LISTEN, 'HOST:PORT, e.g. 127.0.0.1:8080').optional(),
    /** Seconds between scheduling rounds (Eva's reference: 300 s); arrivals, completions and drains bring one forward. */
    roundSeconds: positive.default(300),
    /** Seconds between reconciliation passes (EC2 state, task starts and stops, terminations) between rounds. */
    pollSeconds: positive.optional(),
    /** Instance catalog file; default: the bundled catalog. */
    catalog: z.string().min(1).optional(),
    caps: capsSchema.default({}),
    /**
     * Weighted fair queueing under the caps: classes by size or team, weights, ordering per class
     * (fifo, srpt, success-rank), preemption policy. Default: one FIFO class.
     */
    queue: queueSchema.optional(),
    /** The policy (default eva) and Eva's tunables: task prices, packing efficiency, payback margin, prior rate. */
    scheduler: schedulerSchema.default({ name: 'eva' }),
    /** Plan and record decisions, make no cloud call. */
    dryRun: z.boolean().default(false),
    /** What to do with instances tagged with this cluster that the state does not know. */
    orphans: z.enum(ORPHAN_POLICIES).default('adopt'),
    workerRegistration: workerRegistrationSchema.default(workerRegistrationSchema.parse({})),
    /**
     * An instance the state knows but EC2 no longer lists is declared lost only this long after its launch
     * (EC2's DescribeInstances is eventually consistent right after RunInstances).
     */
    vanishGraceSeconds: nonNegative.default(120),
    /** Cost reports are written every this many seconds (and whenever a job ends, and on demand). */
    reportEverySeconds: positive.default(3600),
    /**
     * Hours between on-demand price refreshes from the AWS Price List API (src/controller/price-refresh.ts); 0 turns
     * them off. On-demand prices change rarely, so a daily refresh is plenty; a failed one keeps the current catalog.
     */
    priceRefreshHours: nonNegative.default(24),
    /** A dry run makes no cloud call, so it refreshes prices only when this is set. */
    priceRefreshInDryRun: z.boolean().default(false),
    ec2: ec2Schema.default(ec2Schema.parse({})),
  })
  .refine((c) => c.objectStore === undefined || c.bucket === undefined, {
    message: 'give either objectStore or bucket, not both',
    path: ['bucket'],
  });

export type ControllerConfigInput = z.input<typeof controllerConfigSchema>;
export type ParsedControllerConfig = z.output<typeof controllerConfigSchema>;

/** The configuration with defaults resolved against the environment. */
export interface ControllerConfig extends ParsedControllerConfig {
  readonly region: string;
  readonly objectStore: string;
  readonly pollSeconds: number;
  /** Absolute. */
  readonly stateDir: string;
}

/** Raw commander values: strings, booleans and lists as commander gives them. */
export interface ControllerFlags {
  readonly config?: string;
  readonly provider?: string;
  readonly cluster?: string;
  readonly region?: string;
  readonly stateDir?: string;
  readonly bucket?: string;
  readonly objectStore?: string;
  readonly listen?: string;
  readonly roundSeconds?: string;
  readonly pollSeconds?: string;
  readonly catalog?: string;
  readonly maxCostPerHour?: string;
  readonly maxInstances?: string;
  readonly maxMigrationsPerRound?: string;
  readonly dryRun?: boolean;
  readonly orphans?: string;
  readonly registrationTimeoutSeconds?: string;
  readonly registrationBackoffSeconds?: string;
  readonly reportEverySeconds?: string;
  readonly priceRefreshHours?: string;
  readonly ami?: string;
  readonly availabilityZones?: string;
  readonly subnets?: string;
  readonly securityGroups?: string;
  readonly instanceProfile?: string;
  readonly keyName?: string;
  readonly workerControllerUrl?: string;
  readonly userDataTemplate?: string;
  readonly executor?: string;
  readonly heartbeatTimeoutSeconds?: string;
  readonly scheduler?: string;
}

/** Where each flag lands in the configuration (for merging and for error messages). */
const FLAG_PATHS: readonly (readonly [
  keyof ControllerFlags,
  readonly string[],
  'string' | 'number' | 'boolean' | 'list',
])[] = [
  ['provider', ['provider'], 'string'],
  ['cluster', ['cluster'], 'string'],
  ['region', ['region'], 'string'],
  ['stateDir', ['stateDir'], 'string'],
  ['bucket', ['bucket'], 'string'],
  ['objectStore', ['objectStore'], 'string'],
  ['listen', ['listen'], 'string'],
  ['roundSeconds', ['roundSeconds'], 'number'],
  ['pollSeconds', ['pollSeconds'], 'number'],
  ['catalog', ['catalog'], 'string'],
  ['maxCostPerHour', ['caps', 'maxCostPerHour'], 'number'],
  ['maxInstances', ['caps', 'maxInstances'], 'number'],
  ['maxMigrationsPerRound', ['caps', 'maxMigrationsPerRound'], 'number'],
  ['dryRun', ['dryRun'], 'boolean'],
  ['orphans', ['orphans'], 'string'],
  ['registrationTimeoutSeconds', ['workerRegistration', 'timeoutSeconds'], 'number'],
  ['registrationBackoffSeconds', ['workerRegistration', 'backoffBaseSeconds'], 'number'],
  ['reportEverySeconds', ['reportEverySeconds'], 'number'],
  ['priceRefreshHours', ['priceRefreshHours'], 'number'],
  ['ami', ['ec2', 'amiId'], 'string'],
  ['subnets', ['ec2', 'subnetIds'], 'list'],
  ['securityGroups', ['ec2', 'securityGroupIds'], 'list'],
  ['instanceProfile', ['ec2', 'instanceProfile'], 'string'],
  ['keyName', ['ec2', 'keyName'], 'string'],
  ['workerControllerUrl', ['ec2', 'worker', 'controllerUrl'], 'string'],
  ['userDataTemplate', ['ec2', 'worker', 'templatePath'], 'string'],
  ['executor', ['executor'], 'string'],
  ['heartbeatTimeoutSeconds', ['workerHeartbeatTimeoutSeconds'], 'number'],
  ['scheduler', ['scheduler', 'name'], 'string'],
];

/**
 * `--provider local` (the quick start): everything on this machine under `.fleetwise/`, the API on 127.0.0.1:7070,
 * short rounds and heartbeats so a laptop demo moves in seconds. Only fields left unset are filled.
 */
function applyLocalDefaults(merged: Json): void {
  merged.cluster ??= 'local';
  merged.stateDir ??= '.fleetwise';
  merged.listen ??= '127.0.0.1:7070';
  merged.roundSeconds ??= 10;
  merged.pollSeconds ??= 2;
  merged.vanishGraceSeconds ??= 0;
  merged.workerHeartbeatSeconds ??= 1;
  merged.workerHeartbeatTimeoutSeconds ??= 10;
  merged.priceRefreshHours ??= 0;
  const registration = (merged.workerRegistration ??= {}) as Json;
  registration.timeoutSeconds ??= 60;
  registration.backoffBaseSeconds ??= 5;
  registration.backoffMaxSeconds ??= 60;
}

export function flagNameOf(field: keyof ControllerFlags): string {
  return `--${field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

type Json = Record<string, unknown>;

function setPath(target: Json, path: readonly string[], value: unknown): void {
  let node = target;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) node[key] = {};
    node = node[key] as Json;
  }
  node[path[path.length - 1] as string] = value;
}

function flagValue(raw: string | boolean, kind: 'string' | 'number' | 'boolean' | 'list'): unknown {
  if (kind === 'boolean') return raw === true || raw === 'true';
  if (typeof raw !== 'string') return raw;
  if (kind === 'list')
    return raw
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
  if (kind === 'number') {
    const trimmed = raw.trim();
    // Leave a non-number as a string: the schema then says "expected number" for that flag.
    return /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(trimmed) ? Number(trimmed) : raw;
  }
  return raw;
}

interface FileSource {
  readonly path: string;
  readonly value: Json;
  readonly lineAt: (path: readonly (string | number)[]) => number | undefined;
}

function readConfigFile(path: string): FileSource {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ValidationError(path, [`cannot read the configuration file: ${(e as Error).message}`]);
  }
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true });
  if (doc.errors.length > 0)
    throw new ValidationError(
      path,
      doc.errors.map((e) => `not valid YAML: ${e.message.split('\n')[0] ?? ''}`),
    );
  const value: unknown = doc.toJS({ maxAliasCount: 100 }) ?? {};
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ValidationError(path, ['(root): expected a mapping of settings']);
  return { path, value: value as Json, lineAt: (p) => lineOf(doc, lineCounter, p) };
}

function lineOf(doc: Document, counter: LineCounter, path: readonly (string | number)[]): number | undefined {
  for (let n = path.length; n >= 1; n--) {
    const node = doc.getIn(path.slice(0, n), true);
    if (isNode(node) && node.range !== undefined && node.range !== null)
      return counter.linePos(node.range[0]).line;
  }
  return undefined;
}

export interface LoadConfigOptions {
  readonly flags: ControllerFlags;
  readonly env?: NodeJS.ProcessEnv;
  /** Resolves relative paths in flags (default: process.cwd()). */
  readonly cwd?: string;
  /** The catalog's region, the last fallback for `region`. */
  readonly defaultRegion?: string;
}

/**
 * Read `--config` (when given), lay the flags over it and validate. Problems name the flag (`--round-seconds`)
 * or the file field with its line (`fleetwise.yaml: caps.maxInstances (line 7): must be ≥ 1`).
 */
export function loadControllerConfig(options: LoadConfigOptions): ControllerConfig {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const file =
    options.flags.config === undefined ? undefined : readConfigFile(resolve(cwd, options.flags.config));
  const merged: Json = structuredClone(file?.value ?? {});
  const fromFlag = new Map<string, string>();
  for (const [flag, path, kind] of FLAG_PATHS) {
    const raw = options.flags[flag];
    if (raw === undefined) continue;
    setPath(merged, path, flagValue(raw, kind));
    fromFlag.set(path.join('.'), flagNameOf(flag));
  }
  if (merged.provider === 'local') applyLocalDefaults(merged);
  const result = controllerConfigSchema.safeParse(merged);
  const source = file === undefined ? 'controller options' : file.path;
  if (!result.success) {
    const problems = result.error.issues.map((issue) => {
      const dotted = issue.path.map(String).join('.');
      const flag = fromFlag.get(dotted);
      if (flag !== undefined) return `${flag}: ${issue.message}`;
      if (dotted === '' && issue.code === 'invalid_type') return `(root): ${issue.message}`;
      const line = file?.lineAt(issue.path as (string | number)[]);
      const missing = issue.code === 'invalid_type' && issue.input === undefined;
      const hint =
        missing && FLAG_PATHS.some(([, p]) => p.join('.') === dotted)
          ? ` (set it in the file or with ${flagNameOf((FLAG_PATHS.find(([, p]) => p.join('.') === dotted) as (typeof FLAG_PATHS)[number])[0])})`
          : '';
      return `${dotted === '' ? '(root)' : dotted}${line === undefined ? '' : ` (line ${line})`}: ${issue.message}${hint}`;
    });
    throw new ValidationError(source, problems);
  }
  const parsed = result.data;
  const stateDir = resolve(
    file === undefined || options.flags.stateDir !== undefined ? cwd : resolve(file.path, '..'),
    parsed.stateDir,
  );
  const region =
    parsed.region ?? nonEmpty(env.AWS_REGION) ?? nonEmpty(env.AWS_DEFAULT_REGION) ?? options.defaultRegion;
  if (region === undefined)
    throw new ValidationError(source, ['region: not set (use --region, the file, or AWS_REGION)']);
  const objectStore =
    parsed.objectStore ??
    (parsed.bucket === undefined ? resolve(stateDir, 'objects') : `s3://${parsed.bucket}`);
  return {
    ...parsed,
    region,
    stateDir,
    objectStore,
    // Reconcile at least as often as rounds run, and every 15 s between long rounds so tasks start soon after
    // their instance is up rather than a whole round later.
    pollSeconds: parsed.pollSeconds ?? Math.min(parsed.roundSeconds, 15),
  };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

/** Split `HOST:PORT` (IPv6 hosts in brackets). */
export function parseListen(listen: string): { readonly host: string; readonly port: number } {
  const match = LISTEN.exec(listen);
  if (match === null) throw new ValidationError('--listen', [`${listen}: expected HOST:PORT`]);
  const port = Number(match[2]);
  if (port > 65535) throw new ValidationError('--listen', [`${listen}: port must be ≤ 65535`]);
  return { host: (match[1] as string).replace(/^\[|\]$/g, ''), port };
}
