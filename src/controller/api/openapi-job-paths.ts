import {
  COMMON_ERRORS,
  error,
  idParam,
  int,
  JOB_ERRORS,
  json,
  ok,
  ref,
  str,
  type Schema,
} from './openapi-builders.js';
import { MAX_WHY_DECISIONS } from '../../protocol/why-limit.js';
import { JOB_SPEC_LIMITS } from '../job-spec/spec.js';

/**
 * What the controller's latest round, planned or not, kept a queued job waiting for. A round with nothing to plan
 * records no decision, so on an otherwise idle cluster this alone says it (a job held for capacity, one over a cap).
 */
const LATEST_WAIT: Schema = {
  type: 'object',
  nullable: true,
  description:
    "The job's wait in the controller's latest round, planned or not; null when that round did not keep it waiting " +
    '(or it is not queued). A job held for capacity (EC2 refused every instance type that fits it) has capName ' +
    '`no capacity`, the refused types and the end of the capacity-error window in cap and summary, and its queue ' +
    'place says waiting (reason null) rather than the place of the round before the hold',
  required: ['summary', 'cap', 'recorded'],
  properties: {
    summary: {
      ...str,
      description:
        'The wait in words, e.g. "in the queue for capacity: the cloud refused every instance type …"',
    },
    cap: {
      ...str,
      description: "The round's waiting entry: the queue's line, or the name of the cap it breaks",
    },
    capName: { ...str, description: 'The cap alone, one of few (`no capacity`, `maxCostPerHour`, …)' },
    brokenAlone: {
      type: 'array',
      items: str,
      description: 'For a job that can never run under the caps: every cap it breaks on its own',
    },
    recorded: {
      type: 'boolean',
      description:
        'The latest recorded round lists the same wait, so the decision records say it; false when the latest ' +
        'round had nothing else to plan and recorded none',
    },
  },
};

/** A component with the job's latest wait beside it. */
const withLatestWait = (component: string): Schema => ({
  allOf: [
    ref(component),
    { type: 'object', required: ['latestWait'], properties: { latestWait: LATEST_WAIT } },
  ],
});

/** The job routes' operations, by path: submitting, reading, cancelling and explaining jobs, and their logs. */
export const JOB_PATHS: Record<string, Record<string, Schema>> = {
  '/v1/jobs': {
    post: {
      summary: 'Submit a job (or, with dryRun=true, validate it and show what it would get now)',
      operationId: 'submitJob',
      parameters: [
        {
          name: 'dryRun',
          in: 'query',
          description:
            'true: validate the spec and answer the instance type and $/hour of each task and the predicted ETA, without creating the job',
          schema: { type: 'string', enum: ['true', 'false'] },
        },
        {
          name: 'Idempotency-Key',
          in: 'header',
          description:
            "Makes the submission safe to send again: the same key with the same spec is answered with the job(s) the first made (201, `replayed: true`, header `Idempotent-Replayed: true`), never a second copy; the same key with another spec is refused (422). A team's keys are its own and are kept as long as its jobs. A dry run checks it (400 when malformed or given twice) and records nothing under it",
          schema: { type: 'string', pattern: '^[A-Za-z0-9._:/@+=-]{1,255}$' },
        },
      ],
      requestBody: {
        required: true,
        content: {
          'application/json': { schema: ref('JobSpec') },
          'application/yaml': { schema: ref('JobSpec') },
        },
      },
      responses: {
        '200': ok('dryRun=true: what the job would get; nothing is stored', ref('DryRun')),
        '201': ok('The queued job', ref('JobSummary')),
        '400': error('Malformed body or invalid spec; `details` names each field (and line, for YAML)'),
        ...COMMON_ERRORS,
        '403': error("The spec names a team other than the token's"),
        '413': error(
          `Body larger than the limit: ${JOB_SPEC_LIMITS.maxSpecBytes / 1024 / 1024} MiB as JSON; as YAML, ` +
            `${JOB_SPEC_LIMITS.maxYamlSpecBytes / 1024} KiB and ${JOB_SPEC_LIMITS.maxYamlNodes} nodes ` +
            '(lines, keys, items), past which the answer says to send JSON',
        ),
        '415': error('Content type other than JSON or YAML'),
        '422': error('The Idempotency-Key was used before for another spec'),
        '503': error(
          'The object store did not take the job spec, so the job could not be made durable; it was withdrawn: retry (with the same Idempotency-Key, if one was sent)',
        ),
      },
    },
    get: {
      summary: "List jobs a page at a time (a team token sees its own team's)",
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
        {
          name: 'endedSince',
          in: 'query',
          description:
            'Only jobs still to end and those that ended since then: epoch seconds, an ISO 8601 time (UTC unless it names an offset) or an age like 24h or 7d',
          schema: { type: 'string' },
          example: '24h',
        },
        {
          name: 'limit',
          in: 'query',
          description:
            'At most this many jobs (1–1000), the first in submission order; `next` names the last when more follow. ' +
            'Without it a page holds 500: a client that needs every job asks again with `after` until no `next` comes',
          schema: { type: 'integer', minimum: 1, maximum: 1000, default: 500 },
        },
        {
          name: 'after',
          in: 'query',
          description: 'Only jobs submitted after this one: the `next` of the page before',
          schema: { type: 'string' },
          example: 'job-500',
        },
        {
          name: 'withCost',
          in: 'query',
          description:
            "true: each job carries `cost`, what it has cost so far (the controller's cost accounting)",
          schema: { type: 'string', enum: ['true', 'false'] },
        },
      ],
      responses: {
        '200': ok('Jobs in submission order', ref('JobList')),
        '400': error('Bad filter'),
        ...COMMON_ERRORS,
        '403': error("A team token asking for another team's jobs"),
      },
    },
  },
  '/v1/jobs/{id}': {
    get: {
      summary: 'One job: state, progress, migrations, instances, tasks',
      operationId: 'getJob',
      parameters: [idParam('Job id, e.g. job-7')],
      responses: { '200': ok('The job', withLatestWait('JobDocument')), ...JOB_ERRORS },
    },
  },
  '/v1/jobs/{id}/cancel': {
    post: {
      summary: 'Cancel a job; its tasks stop and its instances are freed at the next round',
      operationId: 'cancelJob',
      parameters: [idParam('Job id')],
      responses: {
        '200': ok('The job after cancelling (one that had ended already, as it ended)', ref('JobSummary')),
        ...JOB_ERRORS,
      },
    },
  },
  '/v1/jobs/{id}/cancel-array': {
    post: {
      summary:
        'Cancel every job not yet ended of the array a job belongs to (those already ended stay as they ended), in ' +
        'one commit; their tasks stop and their instances are freed at the next round',
      operationId: 'cancelJobArray',
      parameters: [idParam('Any job of the array')],
      responses: {
        '200': ok('The jobs it cancelled, in index order', {
          type: 'object',
          required: ['cancelled'],
          properties: { cancelled: { type: 'array', items: ref('JobSummary') } },
        }),
        ...JOB_ERRORS,
        '409': error('The job is of no array, or was submitted alone with its index'),
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
        '400': error(
          'Bad stage or reason (a stage beyond the stages a job with `success: {kind: stages}` declares, a stage ' +
            'for a job that declares none, a stage for a job that has not run yet, or one past the stage its ' +
            'reported progress is in)',
        ),
        ...JOB_ERRORS,
        '409': error(
          'The job already ended otherwise (succeeded, failed, cancelled), or was marked unsuccessful before with ' +
            'another stage or reason (it keeps the first)',
        ),
        '501': error('This controller cannot end jobs as unsuccessful'),
      },
    },
  },
  '/v1/jobs/{id}/why': {
    get: {
      summary:
        'Decision records that mention the job (waiting, moved, placed), newest first, and its wait in the latest ' +
        'round when that round recorded none',
      operationId: 'whyJob',
      parameters: [
        idParam('Job id'),
        {
          name: 'limit',
          in: 'query',
          schema: { ...int, minimum: 1, maximum: MAX_WHY_DECISIONS, default: 20 },
        },
      ],
      responses: {
        '200': ok('Decision records', withLatestWait('Why')),
        '400': error(`A limit that is not a whole number from 1 to ${MAX_WHY_DECISIONS}`),
        ...JOB_ERRORS,
      },
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
  '/v1/jobs/{id}/logs/parts': {
    get: {
      summary:
        "Each run's part of the task logs and its size so far, oldest run first (to follow only what is new)",
      operationId: 'jobLogParts',
      parameters: [idParam('Job id')],
      responses: {
        '200': ok('The parts', {
          type: 'object',
          required: ['parts'],
          properties: {
            parts: {
              type: 'array',
              items: {
                type: 'object',
                required: ['name', 'sizeBytes'],
                properties: { name: str, sizeBytes: int },
              },
            },
          },
        }),
        '501': error('This controller has no object store for worker logs'),
        ...JOB_ERRORS,
      },
    },
  },
  '/v1/jobs/{id}/logs/bytes': {
    get: {
      summary: "A run's output from a byte offset on (at most 4 MiB; ask again from where it ends)",
      operationId: 'jobLogBytes',
      parameters: [
        idParam('Job id'),
        {
          name: 'part',
          in: 'query',
          required: true,
          schema: str,
          description: 'A part name from /logs/parts',
        },
        { name: 'from', in: 'query', schema: { ...int, minimum: 0 }, description: 'Bytes already read' },
      ],
      responses: {
        '200': {
          description: 'The bytes (empty past the end so far)',
          content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
        },
        '400': error('A parameter is malformed (named in the details)'),
        '501': error('This controller has no object store for worker logs'),
        ...JOB_ERRORS,
      },
    },
  },
};
