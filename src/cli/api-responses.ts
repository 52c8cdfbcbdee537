import { z } from 'zod';
import { serializedColocationTableSchema } from '../scheduler/colocation-table-schema.js';
import { INSTANCE_STATES, JOB_STATES, TASK_STATES } from '../controller/state-store.js';

/**
 * What the controller's API answers, as the `fleetwise` commands read it (src/cli/client.ts checks every response
 * against these): only the fields the commands rely on, unknown fields passing through, so that a mismatched server
 * version fails with a clear message instead of printing `undefined`. A field a controller of an older release
 * does not send is optional or caught to its default.
 */

const progressSchema = z.object({ completed: z.number(), total: z.number().nullable() });

export const jobSummarySchema = z.looseObject({
  id: z.string(),
  name: z.string(),
  team: z.string(),
  state: z.enum(JOB_STATES),
  reason: z.string().optional(),
  submittedAtSeconds: z.number(),
  startedAtSeconds: z.number().optional(),
  finishedAtSeconds: z.number().optional(),
  updatedAtSeconds: z.number(),
  migrations: z.number(),
  // Optional: a controller that predates retryStrategy does not send them (one attempt).
  attempts: z.number().optional(),
  maxAttempts: z.number().optional(),
  progress: progressSchema,
  taskCount: z.number(),
  // One job of an array, and (answering an array's submission) every job it made; absent otherwise.
  array: z.object({ index: z.number(), size: z.number() }).optional().catch(undefined),
  arrayJobIds: z.array(z.string()).optional().catch(undefined),
  arrayWaitingFor: z.array(z.array(z.string())).optional().catch(undefined),
  // Answering a submission sent again with its idempotency key: the job(s) are those the first made.
  replayed: z.boolean().optional().catch(undefined),
});
export type JobSummaryResponse = z.output<typeof jobSummarySchema>;
export const healthFeaturesSchema = z.object({
  status: z.string().optional().catch(undefined),
  idempotencyKeys: z.boolean().optional().catch(undefined),
});

export const jobListSchema = z.object({
  jobs: z.array(jobSummarySchema.extend({ cost: z.number().nullable().optional() })),
  endedEarlier: z.number().optional(),
  next: z.string().optional(),
});
export type JobListResponse = z.output<typeof jobListSchema>;

const taskSchema = z.looseObject({
  id: z.string(),
  jobId: z.string(),
  name: z.string(),
  state: z.enum(TASK_STATES),
  instanceId: z.string().optional(),
});

export const instanceSchema = z.looseObject({
  id: z.string(),
  cloudId: z.string().optional(),
  typeName: z.string(),
  state: z.enum(INSTANCE_STATES),
  availabilityZone: z.string().optional(),
  placementGroup: z.string().optional(),
});
export type InstanceResponse = z.output<typeof instanceSchema>;

/**
 * A queued job's wait in the controller's latest round, planned or not (absent from a controller of an older release,
 * null when that round did not keep it waiting): a round with nothing else to plan records no decision to say it.
 */
export const latestWaitSchema = z
  .object({
    summary: z.string(),
    cap: z.string(),
    capName: z.string().optional(),
    brokenAlone: z.array(z.string()).optional(),
    recorded: z.boolean(),
  })
  .nullable()
  .optional()
  .catch(undefined);
export type LatestWait = NonNullable<z.output<typeof latestWaitSchema>>;

export const jobDocumentSchema = jobSummarySchema.extend({
  spec: z.looseObject({}),
  instances: z.array(instanceSchema.extend({ taskIds: z.array(z.string()) })),
  tasks: z.array(taskSchema),
  etaSeconds: z.number().nullable(),
  attemptFailures: z
    .array(
      z.looseObject({
        attempt: z.number(),
        taskId: z.string(),
        exitCode: z.number().optional(),
        reason: z.string(),
        atSeconds: z.number(),
      }),
    )
    .catch([]),
  // Absent from a controller of an older release, null for a job of one task.
  coStart: z
    .object({
      readyTaskIds: z.array(z.string()),
      releasedAtSeconds: z.number().optional(),
      startSkewSeconds: z.number().optional(),
      barrierIdleCost: z.number().optional(),
      // Absent from a controller of an older release: its figures are then of the latest start, unnumbered.
      start: z.number().optional(),
      starts: z.number().optional(),
      totalBarrierIdleCost: z.number().optional(),
    })
    .nullable()
    .catch(null),
  // Absent from a controller of an older release: none.
  dependencies: z
    .array(
      z.object({
        id: z.string(),
        state: z.string().nullable(),
        predictedCompletionSeconds: z.number().optional(),
      }),
    )
    .catch([]),
  // Absent from a controller of an older release: unknown.
  startsNoEarlierThanSeconds: z.number().nullable().catch(null),
  latestWait: latestWaitSchema,
});
export type JobDocumentResponse = z.output<typeof jobDocumentSchema>;

export const clusterSchema = z.looseObject({
  scope: z.enum(['all', 'team']),
  costPerHour: z.number(),
  instances: z.array(instanceSchema.extend({ costPerHour: z.number(), taskIds: z.array(z.string()) })),
  tasks: z.array(taskSchema),
  /** Absent from a controller of an older release: none. */
  orphans: z
    .array(
      z.looseObject({
        cloudId: z.string(),
        typeName: z.string(),
        state: z.string(),
        availabilityZone: z.string().optional(),
        firstSeenAtSeconds: z.number(),
        policy: z.string(),
      }),
    )
    .catch([]),
  /** Which controller answered and the lease's epoch (absent from controllers that predate the lease). */
  controller: z
    .looseObject({
      role: z.enum(['active', 'standby']),
      epoch: z.number().int().nullable(),
      holder: z.string().nullable(),
      activeUrl: z.string().nullable(),
    })
    .optional(),
});
export type ClusterResponse = z.output<typeof clusterSchema>;

export const clusterLatencySchema = z.looseObject({
  pairs: z.array(
    z.looseObject({
      fromInstanceId: z.string(),
      toInstanceId: z.string(),
      maxMicroseconds: z.number().optional(),
      p99Microseconds: z.number().optional(),
      samples: z.number(),
      failures: z.number(),
      windowSeconds: z.number(),
      atSeconds: z.number(),
    }),
  ),
});
export type ClusterLatencyResponse = z.output<typeof clusterLatencySchema>;

/** The scheduler's learned co-location table, checked as `simulate --colocation-table` checks a file. */
export const clusterColocationSchema = z.looseObject({ table: serializedColocationTableSchema.nullable() });
export type ClusterColocationResponse = z.output<typeof clusterColocationSchema>;

export const whySchema = z.looseObject({
  jobId: z.string(),
  state: z.enum(JOB_STATES),
  records: z.array(
    z.looseObject({
      round: z.number(),
      atSeconds: z.number(),
      summary: z.string(),
      decision: z.looseObject({ chosen: z.string().optional(), reason: z.string().optional() }),
    }),
  ),
  latestWait: latestWaitSchema,
});
export type WhyResponse = z.output<typeof whySchema>;

const costLine = z.looseObject({ id: z.string(), cost: z.number() });
export const costsSchema = z.looseObject({
  scope: z.enum(['all', 'team']).optional(),
  generatedAtSeconds: z.number(),
  sinceSeconds: z.number(),
  totalCost: z.number(),
  byJob: z.array(costLine.extend({ team: z.string().optional(), name: z.string().optional() })),
  byTeam: z.array(costLine),
  byInstance: z.array(costLine.extend({ typeName: z.string().optional(), idleCost: z.number().optional() })),
  idleCost: z.number().nullable().optional(),
  migrationOverheadCost: z.number().nullable().optional(),
  monthReport: z.object({ from: z.enum(['stored', 'recomputed']), detail: z.string() }).optional(),
});
export type CostsResponse = z.output<typeof costsSchema>;

const etaSchema = z.looseObject({
  startSeconds: z.number().nullable(),
  completionSeconds: z.number().nullable(),
  completesAfterSeconds: z.number().optional(),
  computedAtSeconds: z.number(),
  basis: z.string(),
});

export const dryRunSchema = z.looseObject({
  dryRun: z.literal(true),
  name: z.string(),
  team: z.string(),
  tasks: z.array(
    z.looseObject({
      name: z.string(),
      replicas: z.number(),
      instanceType: z.string(),
      costPerHour: z.number(),
    }),
  ),
  costPerHour: z.number(),
  eta: etaSchema.nullable(),
  // Absent from a controller of an older release.
  warnings: z.array(z.string()).catch([]),
  // Held for its dependencies (absent otherwise, and from a controller of an older release).
  waitingFor: z.array(z.string()).optional().catch(undefined),
  startsNoEarlierThanSeconds: z.number().nullable().optional().catch(undefined),
  arraySize: z.number().optional().catch(undefined),
});
export type DryRunResponse = z.output<typeof dryRunSchema>;

export const teamTokenSchema = z.looseObject({
  id: z.string(),
  team: z.string(),
  label: z.string().optional(),
  createdAtSeconds: z.number(),
  revokedAtSeconds: z.number().optional(),
});
export type TeamTokenResponse = z.output<typeof teamTokenSchema>;
export const createdTokenSchema = teamTokenSchema.extend({ token: z.string().min(1) });
export const tokenListSchema = z.looseObject({ tokens: z.array(teamTokenSchema) });

export const contextSchema = z.object({ ref: z.string().min(1), sha256: z.string(), sizeBytes: z.number() });
export const reportSchema = z.object({ location: z.string() });
export const errorSchema = z.object({ error: z.string(), details: z.array(z.string()).optional() });
