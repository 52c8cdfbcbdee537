import { z } from 'zod';
import { DEFAULT_CO_START_TIMEOUT_SECONDS } from '../round/co-start.js';
import { ValidationError } from '../core/validation.js';
import { ADMIT_BY } from '../queue/admission.js';
import { wfqConfigSchema } from '../queue/wfq.js';
import { spotQuotaGroup } from '../core/quota-groups.js';
import { SCHEDULER_NAMES, unknownSchedulerProblem } from '../scheduler/registry.js';
import { MAX_VALUE_OF_TIME_PER_JOB_HOUR } from '../core/model.js';
import { priceOverridesSchema, regionSchema } from '../core/catalog.js';
import { DEFAULT_LOOP_STUCK_SECONDS } from './loop-health.js';
import { DEFAULT_CHECKPOINT_EVENT_DAYS } from './history-retention.js';
import { DEFAULT_FINISHED_CHECKPOINT_DAYS } from './finished-checkpoint-retention.js';
import { DEFAULT_REPORTS_KEPT } from './report-retention.js';
import { DEFAULT_LEASE_SETTINGS, leaseSettingsSchema } from './ha/lease.js';
import { isPostgresUrl } from './state/postgres/conninfo.js';
import { extraTagsSchema } from '../cloud/provider.js';
import { FETCH_BAD_PORTS, badPortOfUrl, badPortProblem } from '../protocol/fetch-bad-ports.js';

/**
 * The controller's configuration: a YAML (or JSON) file, with command-line flags overriding it field by field
 * (`fleetwise controller [--config fleetwise.yaml]`, flags override the file).
 * Validated with zod; every problem names the file, the field and, for file values, the line.
 * This module is the schema; config-flags.ts maps the flags onto it, config-loading.ts reads, merges and validates.
 */

const CLUSTER_NAME = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}$/;
const LISTEN = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;

const positive = z.number().finite().positive('must be > 0');
/** A round a day at the least: a longer period would leave jobs waiting that long, and a simulation never end. */
export const MAX_ROUND_SECONDS = 86_400;
export const ROUND_SECONDS_BOUND = `at most ${MAX_ROUND_SECONDS} s (a round a day)`;
/** `roundSeconds:`, the scheduling period (default 300 s). */
export const roundSecondsSchema = positive.max(MAX_ROUND_SECONDS, ROUND_SECONDS_BOUND);
/** `catalog:`, an instance catalog file (relative to the config file's directory). */
export const catalogPathSchema = z.string().min(1);
const nonNegative = z.number().finite().nonnegative('must be ≥ 0');

/**
 * What to do with an instance tagged with the cluster that the state does not know. Its tasks, if any, are not
 * accounted for (a lost state file, another controller), so the default keeps it running and reports it (logs at error
 * level, `fleetwise cluster`, the `fleetwise_orphan_instances` metric); `adopt` lets the plan use or drop it (an idle
 * instance is then terminated); `terminate` drains and terminates it.
 */
export const ORPHAN_POLICIES = ['keep', 'adopt', 'terminate'] as const;
export type OrphanPolicy = (typeof ORPHAN_POLICIES)[number];

/** Who may read `/metrics` (see `metricsAuth`). */
export const METRICS_AUTH_MODES = ['none', 'token'] as const;

/** The AWS on-demand quota groups `awsQuotaGroup` maps families to (Service Quotas "Running On-Demand … instances"). */
export const AWS_QUOTA_GROUPS = ['standard', 'p', 'g-vt', 'inf', 'trn', 'dl', 'f', 'x', 'hpc'] as const;

/**
 * The quota groups a quota may name: AWS's on-demand groups and any group `familyGroups` maps families to, each with
 * its spot twin `<group>-spot` (AWS's separate spot request quotas, src/queue/caps.ts `spotQuotaGroup`).
 */
export function knownQuotaGroups(familyGroups: Readonly<Record<string, string>> = {}): string[] {
  const onDemand = [...new Set<string>([...AWS_QUOTA_GROUPS, ...Object.values(familyGroups)])];
  return [...onDemand, ...onDemand.map(spotQuotaGroup)];
}

const quotaSchema = z
  .strictObject({
    /** Quota group, e.g. `standard`, `p`, `g-vt` (or a group named in `familyGroups`). */
    group: z.string().min(1),
    // Whole numbers, as AWS counts quotas and instances hold vCPUs and GPUs (simulate's `--quota` alike).
    maxVcpus: z.number().int('a whole number').nonnegative('must be ≥ 0').optional(),
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
    /** No plan may cost more than this per hour (the cap check of ARCHITECTURE.md "The round"). */
    maxCostPerHour: positive.optional(),
    maxInstances: z.number().int('a whole number').positive('must be ≥ 1').optional(),
    maxMigrationsPerRound: z.number().int('a whole number').nonnegative('must be ≥ 0').optional(),
    quotas: z.array(quotaSchema).optional(),
    /** Family → quota group, for families `awsQuotaGroup` does not know or accounts set up differently. */
    familyGroups: z
      .record(z.string().regex(/^[a-z][a-z0-9-]*$/, 'an instance family like p3'), z.string().min(1))
      .optional(),
    /**
     * How a waiting job is sized against maxCostPerHour (src/queue/admission.ts AdmitBy): `plan-cost` (default) by
     * what the packed fleet really costs per standalone dollar, so the budget is used while jobs wait; `standalone`
     * by one reservation-price instance per task (PCS's rule, which leaves most of a packed fleet's budget unused).
     */
    admitBy: z.enum(ADMIT_BY).optional(),
  })
  .superRefine((caps, ctx) => {
    const known = new Set<string>(knownQuotaGroups(caps.familyGroups));
    const seen = new Set<string>();
    (caps.quotas ?? []).forEach((q, i) => {
      if (!known.has(q.group))
        ctx.addIssue({
          code: 'custom',
          path: ['quotas', i, 'group'],
          message: `unknown quota group ${q.group} (AWS groups: ${AWS_QUOTA_GROUPS.join(', ')}, each with its spot twin, e.g. p-spot; or map families to it in familyGroups)`,
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
export const schedulerSchema = z
  .strictObject({
    /**
     * Any registered policy: Eva, its ablations, or a baseline (to compare them on a real cluster). The controller has
     * no offline interference profile, so Owl, which plans from one, assumes co-location costs nothing (a profile of 1).
     */
    name: z
      .enum(SCHEDULER_NAMES, { error: (issue) => unknownSchedulerProblem([String(issue.input)]) })
      .default('eva'),
    /** `packed` (default) or `standalone` (Eva §4.2) task prices. */
    prices: z.enum(['packed', 'standalone']).optional(),
    /** Packed prices: expected share of an instance's bottleneck capacity in use (default 0.7). */
    packingEfficiency: unitRate.optional(),
    /** A move must save this many times its migration cost over the horizon (default 8; Eva's eq. 1: 1). */
    paybackMargin: z.number().finite().min(1, 'must be ≥ 1').optional(),
    /** Co-location throughput per co-located task assumed before anything is learned (default 0.95). */
    defaultRate: unitRate.optional(),
    /**
     * What an hour of a job's completion time is worth, $, for jobs whose spec does not say; `auto` (the default) learns
     * it each round so that running jobs' mean slowdown from co-location stays near `targetSlowdown`; 0 is dollars
     * only, Eva's rule. Eva then declines a co-location or a move that saves less than the time it costs.
     */
    valueOfTimePerJobHour: z
      .union([
        z.literal('auto'),
        z
          .number()
          .finite()
          .min(0, 'must be ≥ 0 ($ per job-hour)')
          .max(
            MAX_VALUE_OF_TIME_PER_JOB_HOUR,
            `must be ≤ ${MAX_VALUE_OF_TIME_PER_JOB_HOUR} ($ per job-hour)`,
          ),
      ])
      .optional(),
    /** With `valueOfTimePerJobHour: auto`: the mean slowdown of running jobs to hold, in (0, 1) (default 0.09). */
    targetSlowdown: z.number().gt(0, 'must be > 0').lt(1, 'must be < 1').optional(),
  })
  .refine((s) => s.targetSlowdown === undefined || typeof s.valueOfTimePerJobHour !== 'number', {
    path: ['targetSlowdown'],
    message: 'applies to a learned value of time only: valueOfTimePerJobHour must be auto or unset',
  });

/**
 * The `queue:` section (a `--queue-config` file's too): WFQ classes, weights, orderings and preemption (PCS §3;
 * src/queue/wfq.ts). Unknown keys are refused here, then the core schema checks values, defaults and thresholds.
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
        maxShare: z.unknown().optional(),
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

export const queueSchema = queueKeysSchema
  .transform((v): unknown => v)
  .pipe(wfqConfigSchema)
  // The WFQ schema checks a class's keys against its classification and a team given twice; a controller config asks
  // more of team classes (one problem each, not the schema's and a second wording of it).
  .superRefine((q, ctx) => {
    q.classes.forEach((c, i) => {
      // Unknown teams fall into the last class; every other class must name its teams.
      if (q.classifyBy === 'team' && i < q.classes.length - 1 && (c.teams ?? []).length === 0)
        ctx.addIssue({
          code: 'custom',
          path: ['classes', i, 'teams'],
          message:
            'required with classifyBy: team (only the last class may leave it out: it takes every other team)',
        });
    });
  });

/**
 * A `priceOverrides:` section (a controller config's, a `--queue-config` file's): an empty one is taken as none, so no
 * report names prices overridden by it (a `--price-overrides` file of no prices is refused: it is the wrong file).
 */
export const configPriceOverridesSchema = priceOverridesSchema
  .optional()
  .transform((given) => (given !== undefined && Object.keys(given).length > 0 ? given : undefined));

const placementSchema = z.strictObject({
  availabilityZone: z.string().min(1),
  subnetId: z
    .string()
    .regex(/^subnet-[0-9a-f]{8,17}$/, 'a subnet id like subnet-0123456789abcdef0')
    .optional(),
});

const ec2Schema = z
  .strictObject({
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
    /**
     * Extra tags on every instance (cost allocation): checked by the launch request's own rule (the `fleetwise:` and
     * `aws:` prefixes are reserved; EC2's 50 tags per instance include fleetwise's own), so a tag every launch would be
     * refused for fails the start instead.
     */
    tags: extraTagsSchema.default({}),
    /** Seconds a capacity error for (type, zone) is remembered (Karpenter: 3 min; industry-anchors.md §(c) 6). */
    capacityErrorTtlSeconds: nonNegative.optional(),
    /** Start a worker on new instances through user data (infra/worker-user-data.sh); leave out for a baked AMI. */
    worker: z
      .strictObject({
        /** Where workers reach this controller's API. */
        controllerUrl: z.string().min(1).superRefine(refuseBadPortUrl),
        packageSpec: z.string().min(1).optional(),
        nodeVersion: z.string().min(1).optional(),
        templatePath: z.string().min(1).optional(),
        /**
         * PEM certificate(s) the workers' signed instance identity documents are verified against; default: AWS's
         * RSA-2048 certificate for the region, bundled in infra/aws-identity-certificates/.
         */
        identityCertificate: z.string().min(1).optional(),
      })
      .optional(),
  })
  // Two ways of saying where instances go: one of them would be silently dropped (`--subnets` replaces the file's
  // placements instead: config-flags.ts).
  .refine((e) => e.placements === undefined || e.subnetIds === undefined, {
    message: 'give either ec2.placements or ec2.subnetIds, not both',
    path: ['subnetIds'],
  });

/** Build context limits (src/protocol/context-limits.ts); each left out keeps its default. */
const contextLimitFields = {
  /** The archive as uploaded, in bytes (default 256 MiB). */
  maxArchiveBytes: z.number().int('a whole number of bytes').positive('must be > 0').optional(),
  /** What it decompresses to, in bytes (default 1 GiB). */
  maxExpandedBytes: z.number().int('a whole number of bytes').positive('must be > 0').optional(),
  /** Expanded bytes per archive byte, past the first 16 MiB (default 100): a decompression bomb is refused. */
  maxExpansionRatio: z.number().finite().min(1, 'must be ≥ 1').optional(),
};

/** The `buildContexts:` section: limits for every upload, and per team (a team's own replace the cluster's). */
const buildContextsSchema = z.strictObject({
  ...contextLimitFields,
  teams: z.record(z.string().min(1), z.strictObject(contextLimitFields)).default({}),
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

/**
 * Completion-time predictions (PCS §4). They run in a worker thread, off the API and the loop; these bound each one:
 * how far ahead it simulates (a later completion reads "beyond N days") and how long it may take.
 */
const predictionsSchema = z.strictObject({
  horizonDays: z.number().finite().positive('must be > 0').max(365, 'at most 365 days').default(30),
  budgetSeconds: z.number().finite().positive('must be > 0').max(600, 'at most 600 s').default(10),
});

/**
 * The heartbeat timeout is at least this many heartbeat intervals: a shorter one declares healthy workers lost after
 * one late or lost heartbeat (at or under one interval, every worker, every time), and replaces their instances in a
 * loop.
 */
export const MIN_HEARTBEATS_PER_TIMEOUT = 3;

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
    /**
     * Local mode: a worker whose controller has not answered this long checkpoints and stops its tasks and exits
     * (workers kept by `--keep-workers` do not run unsupervised forever); 0 keeps them waiting.
     */
    workerGiveUpSeconds: nonNegative.default(300),
    /**
     * Local mode: seconds an instance of a type boots before its worker starts, by type name (as EC2's boot times
     * differ by type); planned with too. Default: none, every local instance is up in about two seconds.
     */
    localBootSeconds: z
      .record(z.string().min(1), nonNegative.max(3600, 'at most an hour (3600)'))
      .default({}),
    cluster: z
      .string()
      .regex(
        CLUSTER_NAME,
        'letters, digits, "_", ".", ":" and "-", starting alphanumeric, at most 63 characters',
      ),
    /** Default: AWS_REGION, AWS_DEFAULT_REGION, then the catalog's region. */
    region: regionSchema.optional(),
    stateDir: z.string().min(1),
    /**
     * Where the state lives: left out, a SQLite file in the state directory (one controller); a `postgres://` URL,
     * PostgreSQL, where every controller started against the same database contends for one lease and the others
     * stand by (ARCHITECTURE.md "High availability"). Give the password through PGPASSWORD or ~/.pgpass, not here.
     */
    state: z
      .string()
      .refine(
        isPostgresUrl,
        'a postgres://user@host:port/database URL (left out: SQLite in the state directory)',
      )
      .optional(),
    /** The controllers' lease on a PostgreSQL state (client-go's leader-election timings by default). */
    lease: leaseSettingsSchema.default(DEFAULT_LEASE_SETTINGS),
    /** `s3://bucket/prefix` or a directory; `bucket` is a shorthand for `s3://<bucket>`. Default: <stateDir>/objects. */
    objectStore: z.string().min(1).optional(),
    bucket: z
      .string()
      .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'an S3 bucket name')
      .optional(),
    /** HOST:PORT of the HTTP API. */
    listen: z
      .string()
      .regex(LISTEN, 'HOST:PORT, e.g. 127.0.0.1:8080')
      .refine((l) => Number(LISTEN.exec(l)?.[2] ?? 0) <= 65535, 'the port must be at most 65535')
      // Served there, the API would be out of reach of every client, all of which speak through fetch.
      .superRefine((l, ctx) => {
        const port = Number(LISTEN.exec(l)?.[2] ?? 0);
        if (FETCH_BAD_PORTS.has(port)) ctx.addIssue({ code: 'custom', message: badPortProblem(port) });
      })
      .optional(),
    /**
     * The API address this controller publishes with the lease (PostgreSQL state), which standbys name in their 503
     * answers and /healthz `activeUrl`: where clients and workers reach it, when that is not `listen` (a wildcard bind
     * address, a NAT, a DNS name). Left out: `listen`, with a wildcard host (0.0.0.0, ::) replaced by the host's name.
     */
    advertiseUrl: z
      .string()
      .refine(
        isHttpUrl,
        'an http:// or https:// URL where clients reach this controller, e.g. http://box-a:7070',
      )
      .superRefine(refuseBadPortUrl)
      .optional(),
    /**
     * Who may read `/metrics`: anyone who reaches the API (`none`, Prometheus's usual way), or only a scraper with the
     * metrics token or the admin token (`token`): the metrics name the teams and what each has spent this month.
     */
    metricsAuth: z.enum(METRICS_AUTH_MODES).default('none'),
    /** Seconds between scheduling rounds (Eva's reference: 300 s); arrivals, completions and drains bring one forward. */
    roundSeconds: roundSecondsSchema.default(300),
    /** Seconds between reconciliation passes (EC2 state, task starts and stops, terminations) between rounds. */
    pollSeconds: positive.optional(),
    /** Instance catalog file; default: the bundled catalog. */
    catalog: catalogPathSchema.optional(),
    /**
     * Savings Plans or reserved prices laid over the catalog's (and over every price refresh): a discount in percent,
     * then on-demand and spot $/hour per type that win. Absent: the catalog's list prices.
     */
    priceOverrides: configPriceOverridesSchema,
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
    orphans: z.enum(ORPHAN_POLICIES).default('keep'),
    workerRegistration: workerRegistrationSchema.default(workerRegistrationSchema.parse({})),
    /**
     * An instance the state knows but EC2 no longer lists is declared lost only this long after its launch
     * (EC2's DescribeInstances is eventually consistent right after RunInstances).
     */
    vanishGraceSeconds: nonNegative.default(120),
    /** Cost reports are written every this many seconds (and whenever a job ends, and on demand). */
    reportEverySeconds: positive.default(3600),
    /**
     * Cost reports kept in the object store: the newest this many (each one covers the whole history, and one is
     * written per job end as well as hourly); older ones are deleted after each write.
     */
    reportsKept: z
      .number()
      .int('a whole number')
      .min(1, 'must be ≥ 1')
      .max(100_000)
      .default(DEFAULT_REPORTS_KEPT),
    /**
     * Days a checkpoint's `task.checkpoint` event is kept (history-retention.ts): most of a long-running controller's
     * events, and nothing reads an old one back (a task's newest checkpoint is on its record). 0 keeps them all.
     */
    checkpointEventDays: nonNegative
      .max(36_500, 'at most 100 years (36500)')
      .default(DEFAULT_CHECKPOINT_EVENT_DAYS),
    /**
     * Days a finished job's checkpoints (`checkpoints/<job>/…`) stay in the object store after it ended
     * (finished-checkpoint-retention.ts): a worker keeps only its task's newest three while it runs, and nothing else
     * deletes the last ones. 0 keeps them all.
     */
    finishedCheckpointDays: nonNegative
      .max(36_500, 'at most 100 years (36500)')
      .default(DEFAULT_FINISHED_CHECKPOINT_DAYS),
    /**
     * `/healthz` answers 503 once one pass of the control loop (a round, a reconciliation pass) has been running this
     * long: the loop is stuck (a cloud call that never answers), whatever the API says.
     */
    loopStuckSeconds: positive.default(DEFAULT_LOOP_STUCK_SECONDS),
    /**
     * The state is backed up to the object store every this many seconds, so losing the controller's machine loses at
     * most this much (src/controller/backup/); jobs accepted since are rebuilt from the job archive. 0 turns backups
     * and the job archive off.
     */
    backupSeconds: nonNegative.max(86_400, 'at most a day (86400)').default(60),
    /** Backups kept in the object store (the newest ones). */
    backupKeep: z.number().int('a whole number').min(1, 'must be ≥ 1').max(10_000).default(10),
    /**
     * Hours between on-demand price refreshes from the AWS Price List API (src/controller/price-refresh.ts); 0 turns
     * them off. On-demand prices change rarely, so a daily refresh is plenty; a failed one keeps the current catalog.
     * Each refresh makes GetProducts calls for every family: more often than every 6 minutes only spends the API's
     * rate limit, and a period past a month is a unit mix-up (days or minutes for hours).
     */
    priceRefreshHours: z
      .number()
      .refine(
        (hours) => hours === 0 || (hours >= 0.1 && hours <= 744),
        'must be 0 (no refresh) or from 0.1 (6 minutes) to 744 (31 days)',
      )
      .default(24),
    /** A dry run makes no cloud call, so it refreshes prices only when this is set. */
    priceRefreshInDryRun: z.boolean().default(false),
    /**
     * The SQS queue EventBridge sends EC2's spot interruption warnings and rebalance recommendations to (as
     * Karpenter's): an interrupted instance is drained and its tasks moved at once. Absent: only the workers' own
     * notices (from the metadata service) are acted on.
     */
    interruptionQueue: z
      .url({
        protocol: /^https?$/,
        error:
          'an SQS queue URL, e.g. https://sqs.us-east-1.amazonaws.com/123456789012/fleetwise-interruptions',
      })
      .optional()
      .describe('SQS queue URL of EC2 interruption events (EventBridge)'),
    ec2: ec2Schema.default(ec2Schema.parse({})),
    /** Limits on uploaded build contexts, for everyone and per team. */
    buildContexts: buildContextsSchema.default({ teams: {} }),
    predictions: predictionsSchema.default(predictionsSchema.parse({})),
    /**
     * Co-start multi-task jobs (round/co-start.ts, Murmuration digest §7.2): their tasks are prepared independently
     * (instance up, checkpoint restored, build context fetched), held, and released together when the last is ready,
     * so no task burns paid capacity waiting for its siblings. Off: each task runs as soon as it is prepared.
     */
    coStart: z.boolean().default(true),
    /** A co-started job some of whose tasks are still unready this long after the first was is planned again. */
    coStartTimeoutSeconds: positive.default(DEFAULT_CO_START_TIMEOUT_SECONDS),
    /**
     * While the caps hold jobs back, a submitted job that fits on capacity already paid for is placed at once, each task
     * on the slot with the earliest expected start, instead of at the next round (Murmuration digest §7.1). Paid
     * capacity adds nothing to the fleet's $/hour, so the caps hold.
     */
    placeBetweenRounds: z.boolean().default(true),
    /** That placement may wait for an instance still coming up when it is ready no later than a launch would be (§7.2 E2). */
    bindBetweenRounds: z.boolean().default(true),
    /**
     * Make before break: a job moving to instances still coming up keeps working where it is until they are ready,
     * and only then checkpoints, instead of idling through their boot (as Karpenter waits for a replacement node).
     * Not under caps (the plan gave the room of the instance it leaves to other launches), nor off an instance under a
     * spot interruption notice.
     */
    makeBeforeBreak: z.boolean().default(true),
  })
  .refine((c) => c.objectStore === undefined || c.bucket === undefined, {
    message: 'give either objectStore or bucket, not both',
    path: ['bucket'],
  })
  .superRefine((c, ctx) => {
    const least = MIN_HEARTBEATS_PER_TIMEOUT * c.workerHeartbeatSeconds;
    if (c.workerHeartbeatTimeoutSeconds < least)
      ctx.addIssue({
        code: 'custom',
        path: ['workerHeartbeatTimeoutSeconds'],
        message:
          `${c.workerHeartbeatTimeoutSeconds} s is under ${MIN_HEARTBEATS_PER_TIMEOUT} × workerHeartbeatSeconds ` +
          `(${c.workerHeartbeatSeconds} s): at least ${least} s, or healthy workers are declared lost`,
      });
  });

export type ControllerConfigInput = z.input<typeof controllerConfigSchema>;
export type ParsedControllerConfig = z.output<typeof controllerConfigSchema>;

/** The configuration with defaults resolved against the environment. */
export interface ControllerConfig extends ParsedControllerConfig {
  /**
   * The configuration file it was read from (absolute), when known: the quotas the controller runs under are named
   * with it (settings.ts `capsOf`). Absent for a configuration from flags alone.
   */
  readonly file?: string | undefined;
  /**
   * The settings the file or a flag gave, by dotted path (`roundSeconds`, `caps.admitBy`; a section of the file is
   * listed too, a list as one setting), each with where: the flag (`--round-seconds`) or the file's path. A setting
   * not listed holds its default, which a setting given elsewhere (simulate's `--queue-config`) may replace. Absent
   * for a configuration not read by `loadControllerConfig`.
   */
  readonly givenBy?: ReadonlyMap<string, string> | undefined;
  readonly region: string;
  readonly objectStore: string;
  readonly pollSeconds: number;
  /** Absolute. */
  readonly stateDir: string;
}

/** A URL clients would be sent to that names a port fetch refuses. */
function refuseBadPortUrl(url: string, ctx: z.RefinementCtx): void {
  const port = badPortOfUrl(url);
  if (port !== undefined) ctx.addIssue({ code: 'custom', message: badPortProblem(port) });
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}

/** Split `HOST:PORT` (IPv6 hosts in brackets). */
export function parseListen(listen: string): { readonly host: string; readonly port: number } {
  const match = LISTEN.exec(listen);
  if (match === null) throw new ValidationError('--listen', [`${listen}: expected HOST:PORT`]);
  const port = Number(match[2]);
  if (port > 65535) throw new ValidationError('--listen', [`${listen}: port must be ≤ 65535`]);
  return { host: (match[1] as string).replace(/^\[|\]$/g, ''), port };
}
