import { z } from 'zod';
import {
  heartbeatRequestSchema,
  heartbeatResponseSchema,
  registerRequestSchema,
  registerResponseSchema,
} from '../../worker/controller-client.js';
import { CHECKPOINT_SIGNALS } from '../job-spec/spec.js';
import { INSTANCE_STATES, JOB_STATES, TASK_STATES } from '../state-store.js';

/**
 * The API described as OpenAPI 3.0, written by hand next to the routes (test/controller/api.test.ts checks every
 * registered route is documented here). Served at GET /openapi.json.
 */

type Schema = Readonly<Record<string, unknown>>;

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Schema): Schema => ({ 'application/json': { schema } });
const ok = (description: string, schema: Schema): Schema => ({ description, content: json(schema) });
const error = (description: string): Schema => ({ description, content: json(ref('Error')) });

const COMMON_ERRORS = {
  '401': error('Missing, malformed or unknown bearer token'),
};
const JOB_ERRORS = {
  ...COMMON_ERRORS,
  '404': error('No such job, or a job of another team (indistinguishable)'),
};
const ADMIN_ERRORS = { ...COMMON_ERRORS, '403': error('A team token; this action needs the admin token') };

const idParam = (description: string): Schema => ({
  name: 'id',
  in: 'path',
  required: true,
  description,
  schema: { type: 'string' },
});

const num = { type: 'number' } as const;
const int = { type: 'integer' } as const;
const str = { type: 'string' } as const;
const vector = {
  type: 'array',
  items: num,
  minItems: 3,
  maxItems: 3,
  description: '[gpus, vcpus, memoryGiB]',
};

const schemas: Record<string, Schema> = {
  Error: {
    type: 'object',
    required: ['error'],
    properties: {
      error: { type: 'string', description: 'What went wrong, in one line' },
      details: { type: 'array', items: str, description: 'One line per problem, e.g. "tasks.0.demand: …"' },
    },
  },
  JobSpec: {
    type: 'object',
    description:
      "A job spec as in examples/jobs/*.yaml. With a team token, `team` may be omitted (it is the token's team).",
    required: ['name', 'tasks'],
    additionalProperties: false,
    properties: {
      name: str,
      team: str,
      description: str,
      tasks: {
        type: 'array',
        minItems: 1,
        items: {
          type: 'object',
          required: ['demand'],
          additionalProperties: false,
          properties: {
            name: str,
            image: str,
            build: {
              oneOf: [
                str,
                {
                  type: 'object',
                  required: ['context'],
                  properties: { context: str, dockerfile: str },
                },
              ],
            },
            command: { type: 'array', items: str },
            env: { type: 'object', additionalProperties: { oneOf: [str, num, { type: 'boolean' }] } },
            demand: {
              oneOf: [
                vector,
                { type: 'object', additionalProperties: vector, description: 'family (or any) → vector' },
              ],
            },
            replicas: { ...int, minimum: 1 },
            shmSizeGiB: num,
            workload: str,
          },
        },
      },
      checkpoint: {
        type: 'object',
        additionalProperties: false,
        properties: {
          signal: { type: 'string', enum: [...CHECKPOINT_SIGNALS] },
          timeoutSeconds: num,
          everySeconds: num,
          restoreDelaySeconds: num,
          initDelaySeconds: num,
        },
      },
      totalIterations: int,
      expectedDurationSeconds: num,
      noMoveSeconds: num,
      workload: str,
      queue: { type: 'object', additionalProperties: true },
      success: {
        description:
          'Success model for success-ranked ordering (Yao, Paolieri & Golubchik): stages with the probability of ' +
          'continuing after each (but the last), or a success probability and an expected size; seconds at full throughput',
        oneOf: [
          {
            type: 'object',
            required: ['kind', 'stageSeconds', 'continueProbabilities'],
            additionalProperties: false,
            properties: {
              kind: { type: 'string', enum: ['stages'] },
              stageSeconds: {
                type: 'array',
                minItems: 1,
                items: { ...num, exclusiveMinimum: true, minimum: 0 },
              },
              continueProbabilities: { type: 'array', items: { ...num, minimum: 0, maximum: 1 } },
            },
          },
          {
            type: 'object',
            required: ['kind', 'successProbability', 'expectedSizeSeconds'],
            additionalProperties: false,
            properties: {
              kind: { type: 'string', enum: ['success'] },
              successProbability: { ...num, exclusiveMinimum: true, minimum: 0, maximum: 1 },
              expectedSizeSeconds: { ...num, exclusiveMinimum: true, minimum: 0 },
            },
          },
        ],
      },
      unsuccessfulExitCodes: {
        type: 'array',
        maxItems: 32,
        items: { ...int, minimum: 1, maximum: 255 },
        description:
          'A task exiting with one of these ends the job as `unsuccessful` (stopped at a stage), not `failed`',
      },
    },
  },
  QueuePlace: {
    type: 'object',
    description: "The job's place in the queue layer (issue 6: weighted fair queueing under the caps)",
    required: ['classId', 'status', 'position', 'reason', 'detail', 'sinceSeconds'],
    properties: {
      classId: { ...str, description: 'Its WFQ class (by size or team, from the controller config)' },
      status: {
        type: 'string',
        enum: ['admitted', 'waiting'],
        description: "admitted: in this round's plan or holding capacity; waiting: queued",
      },
      position: {
        ...int,
        nullable: true,
        minimum: 1,
        description: '1 = head of its class queue; null when admitted, or waiting outside the class order',
      },
      reason: {
        type: 'string',
        nullable: true,
        enum: ['class-share', 'caps', 'never-fits', null],
        description:
          'class-share: its class uses its weighted share of the capped capacity; caps: admitting it would break ' +
          "a cap ($/hour, instances, a family-group quota); never-fits: alone it breaks a cap or its class's maxShare",
      },
      detail: { ...str, description: 'One line naming the share or the caps, and the jobs ahead' },
      sinceSeconds: { ...num, description: 'Since when this place and reason hold' },
    },
  },
  Eta: {
    type: 'object',
    description:
      'A completion-time prediction (PCS §4): the cluster run forward in virtual time with the same admission and ' +
      'scheduler, learned throughputs (interference included), launch and restore delays, and no future arrivals',
    required: ['startSeconds', 'completionSeconds', 'computedAtSeconds', 'basis'],
    properties: {
      startSeconds: { ...num, nullable: true, description: 'Predicted start (epoch seconds)' },
      completionSeconds: {
        ...num,
        nullable: true,
        description: 'Predicted completion (epoch seconds); null when it cannot be predicted (see basis)',
      },
      computedAtSeconds: num,
      basis: {
        ...str,
        description:
          'How it was obtained, e.g. "simulated 14 round(s) ahead with eva (learned co-location throughputs); no future arrivals; 3 job(s) ahead in class small"',
      },
    },
  },
  PredictionError: {
    type: 'object',
    description: 'How far the submission prediction was off, once the job succeeded',
    required: ['predictedCompletionSeconds', 'actualCompletionSeconds', 'errorSeconds', 'errorPercent'],
    properties: {
      predictedCompletionSeconds: num,
      actualCompletionSeconds: num,
      errorSeconds: { ...num, description: 'actual − predicted (positive: later than predicted)' },
      errorPercent: {
        ...num,
        nullable: true,
        description: 'PCS: 100 · |JCT − predicted JCT| / predicted JCT, JCTs from submission',
      },
    },
  },
  JobSummary: {
    type: 'object',
    required: [
      'id',
      'name',
      'team',
      'state',
      'submittedAtSeconds',
      'updatedAtSeconds',
      'migrations',
      'progress',
      'taskCount',
      'queue',
      'eta',
    ],
    properties: {
      id: str,
      name: str,
      team: str,
      state: { type: 'string', enum: [...JOB_STATES] },
      reason: str,
      submittedAtSeconds: num,
      startedAtSeconds: num,
      finishedAtSeconds: num,
      updatedAtSeconds: num,
      migrations: int,
      progress: {
        type: 'object',
        required: ['completed', 'total'],
        properties: { completed: num, total: { ...num, nullable: true } },
      },
      taskCount: int,
      queue: {
        allOf: [ref('QueuePlace')],
        nullable: true,
        description: 'Null once the job ended, or before its first round',
      },
      eta: {
        allOf: [ref('Eta')],
        nullable: true,
        description: 'The latest prediction; null before the first',
      },
    },
  },
  JobList: {
    type: 'object',
    required: ['jobs'],
    properties: { jobs: { type: 'array', items: ref('JobSummary') } },
  },
  Task: {
    type: 'object',
    required: ['id', 'jobId', 'index', 'name', 'workloadKey', 'state', 'updatedAtSeconds'],
    properties: {
      id: str,
      jobId: str,
      index: int,
      name: str,
      workloadKey: str,
      state: { type: 'string', enum: [...TASK_STATES] },
      instanceId: str,
      lastCheckpointKey: str,
      lastCheckpointAtSeconds: num,
      updatedAtSeconds: num,
    },
  },
  Instance: {
    type: 'object',
    required: ['id', 'typeName', 'state', 'launchToken', 'requestedAtSeconds', 'updatedAtSeconds'],
    properties: {
      id: str,
      cloudId: str,
      typeName: str,
      state: { type: 'string', enum: [...INSTANCE_STATES] },
      availabilityZone: str,
      launchToken: str,
      requestedAtSeconds: num,
      launchedAtSeconds: num,
      runningAtSeconds: num,
      terminatedAtSeconds: num,
      updatedAtSeconds: num,
      reason: str,
    },
  },
  JobDocument: {
    allOf: [
      ref('JobSummary'),
      {
        type: 'object',
        required: ['spec', 'instances', 'tasks', 'etaSeconds', 'submissionEta', 'predictionError'],
        properties: {
          spec: { type: 'object', description: 'The validated spec, with defaults filled in' },
          instances: {
            type: 'array',
            items: {
              type: 'object',
              required: ['id', 'typeName', 'state', 'taskIds'],
              properties: {
                id: str,
                cloudId: str,
                typeName: str,
                state: { type: 'string', enum: [...INSTANCE_STATES] },
                availabilityZone: str,
                taskIds: { type: 'array', items: str },
              },
            },
          },
          tasks: { type: 'array', items: ref('Task') },
          etaSeconds: {
            ...num,
            nullable: true,
            description:
              'Seconds from the latest prediction (eta.computedAtSeconds) to its predicted completion (null: none)',
          },
          submissionEta: {
            allOf: [ref('Eta')],
            nullable: true,
            description:
              'The prediction made at submission, never overwritten (its error is measured at the end)',
          },
          predictionError: { allOf: [ref('PredictionError')], nullable: true },
        },
      },
    ],
  },
  Cluster: {
    type: 'object',
    required: ['scope', 'instances', 'tasks', 'costPerHour'],
    properties: {
      scope: {
        type: 'string',
        enum: ['all', 'team'],
        description: "team: only the caller's tasks are listed",
      },
      costPerHour: { ...num, description: '$/hour of the instances held now' },
      instances: {
        type: 'array',
        items: {
          allOf: [
            ref('Instance'),
            {
              type: 'object',
              required: ['costPerHour', 'taskIds'],
              properties: { costPerHour: num, taskIds: { type: 'array', items: str } },
            },
          ],
        },
      },
      tasks: { type: 'array', items: ref('Task') },
    },
  },
  Why: {
    type: 'object',
    required: ['jobId', 'state', 'records'],
    properties: {
      jobId: str,
      state: { type: 'string', enum: [...JOB_STATES] },
      records: {
        type: 'array',
        items: {
          type: 'object',
          required: ['round', 'atSeconds', 'summary', 'decision'],
          properties: {
            round: int,
            atSeconds: num,
            summary: str,
            decision: {
              type: 'object',
              description: "The round's decision record (candidates, chosen plan, reason, waiting, pinned)",
            },
          },
        },
      },
    },
  },
  Costs: {
    type: 'object',
    required: ['scope', 'generatedAtSeconds', 'sinceSeconds', 'totalCost', 'byJob', 'byTeam', 'byInstance'],
    properties: {
      scope: {
        type: 'string',
        enum: ['all', 'team'],
        description: "team: only the caller's jobs; instance lines and cluster overheads withheld",
      },
      generatedAtSeconds: num,
      sinceSeconds: num,
      totalCost: num,
      byJob: {
        type: 'array',
        items: { type: 'object', properties: { id: str, cost: num, team: str, name: str } },
      },
      byTeam: { type: 'array', items: { type: 'object', properties: { id: str, cost: num } } },
      byInstance: {
        type: 'array',
        items: { type: 'object', properties: { id: str, cost: num, typeName: str, idleCost: num } },
      },
      idleCost: { ...num, nullable: true },
      migrationOverheadCost: { ...num, nullable: true },
    },
  },
};

/**
 * The worker protocol's bodies, generated from the zod schemas both sides validate with (controller-client.ts), so
 * the document cannot drift from what the routes accept and answer.
 */
const workerSchemas: Record<string, Schema> = {
  WorkerRegisterRequest: z.toJSONSchema(registerRequestSchema, { target: 'openapi-3.0' }),
  WorkerRegisterResponse: z.toJSONSchema(registerResponseSchema, { target: 'openapi-3.0' }),
  WorkerHeartbeatRequest: z.toJSONSchema(heartbeatRequestSchema, { target: 'openapi-3.0' }),
  WorkerHeartbeatResponse: z.toJSONSchema(heartbeatResponseSchema, { target: 'openapi-3.0' }),
};

const WORKER_ERRORS = {
  '400': error('The body does not match the worker protocol (the field and the reason are named)'),
  '415': error('Not application/json'),
};

const paths: Record<string, Record<string, Schema>> = {
  '/v1/workers/register': {
    post: {
      summary:
        "A worker registers its instance (bearer: the cluster's worker token); answers a per-instance token",
      operationId: 'workerRegister',
      requestBody: { required: true, content: json(ref('WorkerRegisterRequest')) },
      responses: {
        '200': ok(
          'Registered: the per-instance token, heartbeat period and object store',
          ref('WorkerRegisterResponse'),
        ),
        ...WORKER_ERRORS,
        '401': error('Missing or wrong worker token'),
        '409': error('The instance is not known to the controller yet (its launch is being recorded): retry'),
        '410': error('The instance is terminated or being retired'),
      },
    },
  },
  '/v1/workers/heartbeat': {
    post: {
      summary:
        'A worker reports its tasks (bearer: the per-instance token); answers the tasks wanted on the instance',
      operationId: 'workerHeartbeat',
      requestBody: { required: true, content: json(ref('WorkerHeartbeatRequest')) },
      responses: {
        '200': ok('What to run, checkpoint and stop on the instance', ref('WorkerHeartbeatResponse')),
        ...WORKER_ERRORS,
        '401': error('Missing or unknown per-instance token: register again'),
        '410': error('The instance is terminated or being retired'),
      },
    },
  },
  '/v1/jobs': {
    post: {
      summary: 'Submit a job',
      operationId: 'submitJob',
      requestBody: {
        required: true,
        content: {
          'application/json': { schema: ref('JobSpec') },
          'application/yaml': { schema: ref('JobSpec') },
        },
      },
      responses: {
        '201': ok('The queued job', ref('JobSummary')),
        '400': error('Malformed body or invalid spec; `details` names each field (and line, for YAML)'),
        ...COMMON_ERRORS,
        '403': error("The spec names a team other than the token's"),
        '413': error('Body larger than the limit (1 MiB)'),
        '415': error('Content type other than JSON or YAML'),
      },
    },
    get: {
      summary: "List jobs (a team token sees its own team's)",
      operationId: 'listJobs',
      parameters: [
        {
          name: 'state',
          in: 'query',
          description: 'Comma-separated states',
          schema: { type: 'string' },
          example: 'queued,running',
        },
        { name: 'team', in: 'query', schema: str },
      ],
      responses: {
        '200': ok('Jobs in submission order', ref('JobList')),
        '400': error('Bad filter'),
        ...COMMON_ERRORS,
      },
    },
  },
  '/v1/jobs/{id}': {
    get: {
      summary: 'One job: state, progress, migrations, instances, tasks',
      operationId: 'getJob',
      parameters: [idParam('Job id, e.g. job-7')],
      responses: { '200': ok('The job', ref('JobDocument')), ...JOB_ERRORS },
    },
  },
  '/v1/jobs/{id}/cancel': {
    post: {
      summary: 'Cancel a job; its tasks stop and its instances are freed at the next round',
      operationId: 'cancelJob',
      parameters: [idParam('Job id')],
      responses: {
        '200': ok('The job after cancelling', ref('JobSummary')),
        ...JOB_ERRORS,
        '409': error('The job already finished'),
      },
    },
  },
  '/v1/jobs/{id}/unsuccessful': {
    post: {
      summary:
        'End a job as unsuccessful at a stage (e.g. a diverged trial): its tasks stop, its capacity is freed, and ' +
        'its state becomes `unsuccessful` (not failed)',
      operationId: 'markJobUnsuccessful',
      parameters: [idParam('Job id')],
      requestBody: {
        required: false,
        content: json({
          type: 'object',
          additionalProperties: false,
          properties: {
            stage: { ...int, minimum: 1, description: 'The stage (1-based) it was stopped at' },
            reason: { ...str, maxLength: 500 },
          },
        }),
      },
      responses: {
        '200': ok('The job, unsuccessful', ref('JobSummary')),
        '400': error('Bad stage or reason (e.g. a stage beyond the stages the job declares)'),
        ...JOB_ERRORS,
        '409': error('The job already ended otherwise (succeeded, failed, cancelled)'),
        '501': error('This controller cannot end jobs as unsuccessful'),
      },
    },
  },
  '/v1/jobs/{id}/why': {
    get: {
      summary: 'Decision records that mention the job (waiting, moved, placed), newest first',
      operationId: 'whyJob',
      parameters: [
        idParam('Job id'),
        { name: 'limit', in: 'query', schema: { ...int, minimum: 1, maximum: 1000 } },
      ],
      responses: { '200': ok('Decision records', ref('Why')), ...JOB_ERRORS },
    },
  },
  '/v1/jobs/{id}/logs': {
    get: {
      summary: 'Task logs (uploaded by the worker agents to the object store), oldest run first',
      operationId: 'jobLogs',
      parameters: [idParam('Job id')],
      responses: {
        '200': {
          description: "The output of every run of the job's tasks",
          content: { 'text/plain': { schema: { type: 'string' } } },
        },
        '501': error('This controller has no object store for worker logs'),
        ...JOB_ERRORS,
      },
    },
  },
  '/v1/cluster': {
    get: {
      summary: 'Instances, the tasks on them and the current $/hour',
      operationId: 'cluster',
      responses: { '200': ok('The cluster', ref('Cluster')), ...COMMON_ERRORS },
    },
  },
  '/v1/instances/{id}/drain': {
    post: {
      summary: 'Move every task off an instance and retire it (admin)',
      operationId: 'drainInstance',
      parameters: [idParam('Instance id (inst-4) or cloud id (i-0abc…)')],
      responses: {
        '200': ok('The instance', ref('Instance')),
        ...ADMIN_ERRORS,
        '404': error('No such instance'),
        '409': error('The instance cannot be drained in its state'),
      },
    },
  },
  '/v1/costs': {
    get: {
      summary: 'Cost accounting per job, team and instance',
      operationId: 'costs',
      parameters: [
        {
          name: 'since',
          in: 'query',
          description: 'Epoch seconds, ISO 8601 time, or an age like 24h or 7d',
          schema: str,
        },
      ],
      responses: { '200': ok('Costs', ref('Costs')), '400': error('Bad since'), ...COMMON_ERRORS },
    },
  },
  '/v1/reports': {
    post: {
      summary: 'Write a cost report to the object store now (admin)',
      operationId: 'writeReport',
      responses: {
        '201': ok('Where the report was written', {
          type: 'object',
          required: ['location'],
          properties: { location: str },
        }),
        ...ADMIN_ERRORS,
        '501': error('No object store configured'),
      },
    },
  },
  '/v1/contexts': {
    post: {
      summary: 'Upload a Docker build context; returns the reference to use as build.context',
      operationId: 'uploadContext',
      requestBody: {
        required: true,
        content: {
          'application/x-tar': { schema: { type: 'string', format: 'binary' } },
          'application/gzip': { schema: { type: 'string', format: 'binary' } },
        },
      },
      responses: {
        '201': ok('Stored', {
          type: 'object',
          required: ['ref', 'sha256', 'sizeBytes'],
          properties: { ref: str, sha256: str, sizeBytes: int },
        }),
        '400': error('Not a tar archive or gzip stream'),
        ...COMMON_ERRORS,
        '413': error('Archive larger than the limit'),
        '415': error('Content type other than tar or gzip'),
        '501': error('No object store configured'),
      },
    },
  },
  '/healthz': {
    get: {
      summary: 'Liveness and readiness (no token needed)',
      operationId: 'health',
      security: [],
      responses: {
        '200': ok('Serving', {
          type: 'object',
          properties: { status: { type: 'string', enum: ['ok'] }, latestRound: { ...int, nullable: true } },
        }),
        '503': ok('The state store is unavailable', {
          type: 'object',
          properties: { status: str, error: str },
        }),
      },
    },
  },
  '/metrics': {
    get: {
      summary: 'Prometheus metrics (no token needed; aggregate counts only)',
      operationId: 'metrics',
      security: [],
      responses: {
        '200': { description: 'Prometheus text format', content: { 'text/plain': { schema: str } } },
      },
    },
  },
  '/openapi.json': {
    get: {
      summary: 'This document',
      operationId: 'openapi',
      security: [],
      responses: { '200': ok('OpenAPI 3.0 document', { type: 'object' }) },
    },
  },
};

export const OPENAPI_DOCUMENT = {
  openapi: '3.0.3',
  info: {
    title: 'fleetwise controller API',
    version: '0.1.0',
    description:
      'Submit, inspect and cancel batch jobs; see the cluster, decision records and costs. Authenticate with ' +
      "`Authorization: Bearer <token>`: a team token sees and cancels only its team's jobs, the admin token sees " +
      'everything and may drain instances and write reports. Errors are `{error, details?}`.',
  },
  components: {
    securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
    schemas: { ...schemas, ...workerSchemas },
  },
  security: [{ bearer: [] }],
  paths,
} as const;

/** `/v1/jobs/:id` → `/v1/jobs/{id}` (fastify's path syntax to OpenAPI's). */
export function openApiPath(fastifyPath: string): string {
  return fastifyPath.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}
