import {
  ADMIN_ERRORS,
  COMMON_ERRORS,
  error,
  idParam,
  int,
  json,
  ok,
  ref,
  str,
  type Schema,
} from './openapi-builders.js';
import { JOB_PATHS } from './openapi-job-paths.js';

/** The operations, by path; test/controller/api.test.ts checks they are exactly the registered routes. */

/** A token change the controller could not back up at once: in effect here, undone by a restore from the last backup. */
const BACKUP_WARNING = {
  type: 'string',
  description:
    'Present when the change is not yet in a backup: a restore from the last backup would undo it; the next scheduled backup retries',
} as const;
/** The control loop's progress, in `/healthz` answers of a running controller. */
const LOOP_HEALTH: Schema = {
  type: 'object',
  properties: {
    pass: { ...str, nullable: true, description: 'The pass under way (round, reconcile, recovery), if any' },
    passSeconds: { type: 'number', nullable: true, description: 'How long the pass under way has run' },
    lastPassEndedAt: { ...str, nullable: true, description: 'When the last pass ended (ISO 8601)' },
  },
};

const WORKER_ERRORS = {
  '400': error('The body does not match the worker protocol (the field and the reason are named)'),
  '415': error('Not application/json'),
};

const BY_HAND: Record<string, Record<string, Schema>> = {
  '/v1/workers/register': {
    post: {
      summary:
        'A worker proves which instance it runs on (identity: a launch credential once, then its per-instance ' +
        'token; the bearer is the credential that kind names); answers a per-instance token',
      operationId: 'workerRegister',
      requestBody: { required: true, content: json(ref('WorkerRegisterRequest')) },
      responses: {
        '200': ok(
          'Registered: the per-instance token, heartbeat period and object store',
          ref('WorkerRegisterResponse'),
        ),
        ...WORKER_ERRORS,
        '401': error('Missing or wrong credential, or a signature that does not verify'),
        '403': error('A valid credential for another instance, region, account, image or cluster'),
        '409': error(
          'The instance is not in the state yet (its launch is being recorded: retry), or already has a registered ' +
            'worker (only its per-instance token registers it again)',
        ),
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
  ...JOB_PATHS,
  '/v1/cluster': {
    get: {
      summary: 'Instances, the tasks on them and the current $/hour',
      operationId: 'cluster',
      responses: { '200': ok('The cluster', ref('Cluster')), ...COMMON_ERRORS },
    },
  },
  '/v1/cluster/latency': {
    get: {
      summary:
        "Round trips the workers measured between instances (max and p99 over each worker's window), and their probes",
      operationId: 'clusterLatency',
      responses: { '200': ok('The latency matrix', ref('ClusterLatency')), ...COMMON_ERRORS },
    },
  },
  '/v1/cluster/colocation': {
    get: {
      summary:
        "What the scheduler learned of co-location: each workload's throughput beside others, as a share of its throughput alone (Eva §4.3–4.4; admin)",
      operationId: 'clusterColocation',
      responses: {
        '200': ok(
          'The learned table (null when the scheduler learns none), in the form `fleetwise simulate --colocation-table` reads',
          ref('LearnedColocation'),
        ),
        ...ADMIN_ERRORS,
        '501': error('This controller does not say what its scheduler learned'),
      },
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
          description:
            'Epoch seconds, an ISO 8601 time (UTC unless it names an offset), or an age like 24h or 7d',
          schema: str,
        },
        {
          name: 'until',
          in: 'query',
          description:
            'The period’s end, in the same forms, after since. Before now: the period is billed as at its end ' +
            '(generatedAtSeconds is the end; nothing later is counted); otherwise up to now',
          schema: str,
        },
      ],
      responses: {
        '200': ok('Costs', ref('Costs')),
        '400': error('Bad since or until'),
        ...COMMON_ERRORS,
      },
    },
  },
  '/v1/tokens': {
    post: {
      summary: 'Create a team token (admin); the token is in this answer only, the controller keeps its hash',
      operationId: 'createToken',
      requestBody: {
        required: true,
        content: json({
          type: 'object',
          required: ['team'],
          additionalProperties: false,
          properties: { team: str, label: str },
        }),
      },
      responses: {
        '201': ok('The token and its record', {
          allOf: [
            ref('TeamToken'),
            { type: 'object', required: ['token'], properties: { token: str, warning: BACKUP_WARNING } },
          ],
        }),
        ...ADMIN_ERRORS,
        '400': error('An invalid team or label (the field is named)'),
      },
    },
    get: {
      summary: 'List team tokens by id (the first digits of their hash), never the tokens (admin)',
      operationId: 'listTokens',
      parameters: [{ name: 'team', in: 'query', schema: str }],
      responses: {
        '200': ok('The tokens, oldest first', {
          type: 'object',
          required: ['tokens'],
          properties: { tokens: { type: 'array', items: ref('TeamToken') } },
        }),
        '400': error('An invalid team name'),
        ...ADMIN_ERRORS,
      },
    },
  },
  '/v1/tokens/{id}/revoke': {
    post: {
      summary: 'Revoke a team token (admin): it authenticates no more',
      operationId: 'revokeToken',
      parameters: [idParam('Token id: the 12 hex digits a listing shows')],
      responses: {
        '200': ok('The revoked token', {
          allOf: [ref('TeamToken'), { type: 'object', properties: { warning: BACKUP_WARNING } }],
        }),
        '400': error('An id that is not 12 hex digits'),
        ...ADMIN_ERRORS,
        '404': error('No such token'),
        '409': error('The token is already revoked'),
      },
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
        '500': error('Writing the report failed (the reason is named, e.g. the object store refused it)'),
        '501': error('No object store configured'),
      },
    },
  },
  '/v1/contexts': {
    post: {
      summary:
        'Upload a Docker build context (streamed to the object store, checked against its sha256 and the ' +
        "team's limits); returns the reference to use as build.context",
      operationId: 'uploadContext',
      parameters: [
        {
          name: 'sha256',
          in: 'query',
          required: true,
          description: 'The sha256 of the body (64 lowercase hex digits): the stored archive is named by it',
          schema: { type: 'string', pattern: '^[0-9a-f]{64}$' },
        },
      ],
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
        '400': error('Not a gzip stream or tar archive, an empty archive, a sha256 other than declared'),
        ...COMMON_ERRORS,
        '413': error(
          "Over one of the team's limits, named in the message: maxArchiveBytes, maxExpandedBytes, maxExpansionRatio",
        ),
        '415': error('Content type other than tar or gzip'),
        '501': error('No object store configured'),
        '503': error('The object store is unavailable'),
      },
    },
  },
  '/healthz': {
    get: {
      summary: 'Liveness and readiness (no token needed)',
      operationId: 'health',
      security: [],
      responses: {
        '200': ok('Serving (as the active controller, or as a standby: see role)', {
          allOf: [
            ref('Leadership'),
            {
              type: 'object',
              properties: {
                status: { type: 'string', enum: ['ok'] },
                latestRound: { ...int, nullable: true },
                loop: LOOP_HEALTH,
                idempotencyKeys: {
                  type: 'boolean',
                  description:
                    'true: submissions honour their Idempotency-Key (a controller without the field ignores it: a client must not resend to it)',
                },
              },
            },
          ],
        }),
        '503': ok(
          'The state store is unavailable, or the control loop is stuck (one pass running too long) or failing (every pass failing for as long)',
          {
            type: 'object',
            properties: {
              status: { type: 'string', enum: ['unavailable', 'stuck', 'failing'] },
              error: str,
              loop: LOOP_HEALTH,
              idempotencyKeys: { type: 'boolean' },
            },
          },
        ),
      },
    },
  },
  '/readyz': {
    get: {
      summary:
        'Ready to serve the cluster: only the active controller is (for a load balancer; no token needed)',
      operationId: 'ready',
      security: [],
      responses: {
        '200': ok('The active controller', {
          allOf: [
            ref('Leadership'),
            { type: 'object', properties: { status: { type: 'string', enum: ['active'] } } },
          ],
        }),
        '503': ok('A standby: send the request to the active controller', {
          allOf: [ref('Leadership'), { type: 'object', properties: { status: str, error: str } }],
        }),
      },
    },
  },
  '/metrics': {
    get: {
      summary:
        "Prometheus metrics: the fleet, the jobs, and each team's spend this month (no token, unless the controller " +
        'runs with metricsAuth: token: then the metrics token or the admin token)',
      operationId: 'metrics',
      security: [{}, { bearer: [] }],
      responses: {
        '200': { description: 'Prometheus text format', content: { 'text/plain': { schema: str } } },
        '401': error('With metricsAuth: token, neither the metrics token nor the admin token'),
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

/** What a 401 answer carries: every credential the API takes is a bearer token (RFC 6750 §3). */
const CHALLENGE = {
  'WWW-Authenticate': {
    description: 'Bearer realm="fleetwise": send `Authorization: Bearer <token>`',
    schema: str,
  },
};

/** A 503's wait before trying again. */
const RETRY_AFTER = {
  'Retry-After': { description: 'Seconds to wait before trying again', schema: int },
};

/** Why any operation may answer 503: passing, so a client retries. */
const UNAVAILABLE =
  'Unavailable for now: the state database is unreachable or busy, another controller took the lease, or this is a ' +
  'standby (its body names the active controller); try again after Retry-After';

/** A path id the server cannot decode: the router refuses it before the route reads it. */
const BAD_PATH_ID = 'a path id that is not valid percent-encoding';
/** The route table checks every route's query (routing.ts RouteTable), those of routes that take none too. */
const BAD_QUERY = 'a query parameter the route does not take, or one given twice (named in the details)';

/**
 * Answers the server gives before (or besides) a route's own checks, wherever they can come: a query parameter the
 * route does not take (400, on every route), a path id that is not valid percent-encoding (400) or longer than any id
 * (414), and a POST body that does not parse (400), is over the limit (413) or of a content type the route does not
 * take (415: YAML where only JSON is read, an archive anywhere but /v1/contexts). An operation that documents one of
 * these statuses keeps its own words (the 400s of a path id and of the query added).
 * Any operation may answer 503 with a Retry-After: the state database unreachable or busy, this controller fenced
 * out by another that took the lease, or a standby answering for the active controller (ha/standby-server.ts).
 */
function withServerAnswers(path: string, method: string, operation: Schema): Schema {
  const own = operation['responses'] as Record<string, Schema>;
  const byId = path.includes('{');
  const added: Record<string, string> = {};
  if (byId) added['414'] = 'A path id longer than 128 characters: no id is that long';
  // The 400s any route of this path and method can answer, past its own.
  const badRequest = [...(byId ? [BAD_PATH_ID] : []), BAD_QUERY];
  if (method === 'post') {
    const reasons = ['a malformed body', ...badRequest].join('; or ');
    added['400'] = `${reasons.charAt(0).toUpperCase()}${reasons.slice(1)}`;
    added['413'] = 'A body larger than the limit';
    added['415'] = 'A body of a content type this route does not take';
  } else {
    const reasons = badRequest.join('; or ');
    added['400'] = `${reasons.charAt(0).toUpperCase()}${reasons.slice(1)}`;
  }
  added['503'] = UNAVAILABLE;
  const responses: Record<string, Schema> = {};
  for (const [status, response] of Object.entries(own))
    responses[status] = {
      ...response,
      ...(status === '400'
        ? { description: `${String(response['description'])}; or ${badRequest.join('; or ')}` }
        : {}),
      ...(status === '401' ? { headers: CHALLENGE } : {}),
    };
  for (const [status, description] of Object.entries(added))
    if (own[status] === undefined)
      responses[status] = { ...error(description), ...(status === '503' ? { headers: RETRY_AFTER } : {}) };
  return {
    ...operation,
    responses: Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b))),
  };
}

export const PATHS: Record<string, Record<string, Schema>> = Object.fromEntries(
  Object.entries(BY_HAND).map(([path, operations]) => [
    path,
    Object.fromEntries(
      Object.entries(operations).map(([method, operation]) => [
        method,
        withServerAnswers(path, method, operation),
      ]),
    ),
  ]),
);
