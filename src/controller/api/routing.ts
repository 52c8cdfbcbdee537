import type { Readable } from 'node:stream';
import { formatFieldPath, ValidationError } from '../../core/validation.js';
import type { ContextInfo } from '../artifacts.js';
import type { JobLogReader } from '../job-logs.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { PriceBook } from '../../scheduler/reservation-price.js';
import type { ControllerService, KeepOptions, SubmissionCommitHook } from '../service.js';
import type { JobSpec } from '../job-spec/spec.js';
import type { EtaRecord } from '../queue-records.js';
import type { LatencyMatrixView } from '../latency-matrix.js';
import type { SerializedColocationTable } from '../../scheduler/colocation-table.js';
import type { LeadershipView } from '../ha/leader-elector.js';
import type { JobRecord } from '../state-store.js';
import type { ArchivedSubmissionKey } from '../backup/job-archive.js';
import type { LoopHealth } from '../loop-health.js';
import type { WaitingEntry } from '../../scheduler/types.js';
import type { Principal, RouteAccess } from './auth.js';
import { NO_QUERY_PARAMETERS, type QueryParameters } from './query.js';
import { bodyOf, JSON_CONTENT_TYPE } from './body.js';
import { HttpError } from './errors.js';

/**
 * The controller as the API uses it: the ControllerService contract plus optional capabilities. A route whose
 * capability is absent answers 501 and says what is missing.
 */
export interface ApiControllerService extends ControllerService {
  /** The cloud sells spot and the scheduler buys it (ControllerDeps.spotMarket): a dry run quotes spot too. */
  readonly spotMarket?: boolean;
  /** Write a cost report to the object store now; returns where it was written (e.g. `s3://bucket/reports/…`). */
  writeReport?(): Promise<string>;
  /**
   * Keep an uploaded build context (content-addressed by `info.sha256`) in the object store, streaming `archive` (it
   * fails, and nothing may be kept, when the stream fails: a limit or a check on the way); returns the reference the
   * job spec's `build.context` should carry so workers can fetch it.
   */
  storeContext?(archive: Readable, info: ContextInfo): Promise<string>;
  /**
   * Why a submission by `team` (undefined: the admin) may not name `ref` as a task's `build.context`, or undefined
   * when it may (an upload's reference, of a context still stored that this team uploaded). Without it, no reference
   * is accepted.
   */
  buildContextProblem?(ref: string, team: string | undefined): Promise<string | undefined>;
  /** A job's task output as uploaded by its workers (oldest run first). */
  jobLogs?(jobId: string): Promise<string>;
  /** A job's task output part by part, and streamed whole (preferred over `jobLogs` where the service has it). */
  jobLogReader?(jobId: string): JobLogReader;
  /**
   * `submit`, committed together with the submissions of the same moment (one store sync for them all); answered
   * once durable. Without it the API submits one by one.
   */
  submitBatched?(spec: JobSpec, team: string, inCommit?: SubmissionCommitHook): Promise<JobRecord>;
  /** The ETA a job with this spec would get if submitted now, stored nowhere; null when none can be predicted. */
  /**
   * Make a just-submitted job durable beyond this machine (the job archive) before it is answered; throws, having
   * withdrawn the job, when that fails.
   */
  keepSubmission?(job: JobRecord, key?: ArchivedSubmissionKey, options?: KeepOptions): Promise<void>;
  /** Round trips the workers measured between instances, and where their probes listen. */
  latency?(): LatencyMatrixView;
  /** What the scheduler learned of co-location; undefined when it learns none. */
  colocation?(): SerializedColocationTable | undefined;
  estimate?(spec: JobSpec): Promise<EtaRecord | null>;
  /** What a submission of `spec` would be told, or refused for (a ValidationError); a dry run asks the same. */
  submissionWarnings?(spec: JobSpec): string[];
  /** Whether completion-time predictions are on: a live job without an ETA yet is then waiting for one. */
  readonly predictionsEnabled?: boolean;
  /** End a job as unsuccessful at a stage (success-ranked ordering), freeing its capacity. */
  markUnsuccessful?(jobId: string, options: { readonly stage?: number; readonly reason?: string }): JobRecord;
  /** Whether the control loop makes progress (`/healthz` answers 503 when it is stuck). */
  loopHealth?(): LoopHealth;
  /** The jobs the latest round kept waiting, planned or not; without it, the latest recorded round's. */
  latestWaiting?(): readonly WaitingEntry[];
}

export interface ApiContext {
  readonly service: ApiControllerService;
  readonly priceBook: PriceBook;
  /** This controller's place among those sharing its database (active, or standby), with the lease's epoch. */
  leadership(): LeadershipView;
  /** The caller of an authenticated route (set by the auth hook). */
  principal(request: FastifyRequest): Principal;
  /**
   * Resolves once a backup holds the state as it is now; rejects saying why not. A change that only the state keeps
   * (a team token) waits for it, as a restore would otherwise undo it. Absent: this controller keeps no backups.
   */
  readonly backupNow?: () => Promise<unknown>;
}

export type HttpMethod = 'GET' | 'POST';

interface RouteBase {
  readonly method: HttpMethod;
  /** Fastify path, e.g. `/v1/jobs/:id`. */
  readonly url: string;
  readonly access: RouteAccess;
  /** Overrides the server's body limit for this route (uploads). */
  readonly bodyLimit?: number;
  /**
   * The route reads a body. A POST that does not refuses one (an empty JSON object aside): a caller sending fields it
   * takes for options (`{"array": true}` to cancel) would otherwise get a 200 for an action it did not mean.
   */
  readonly takesBody?: true;
  /** The content types a route that takes a body reads, as a 415 names them; default JSON alone. */
  readonly bodyTypes?: readonly string[];
}

/** A route that takes no query parameter: a request naming one is refused. */
interface RouteWithoutQuery extends RouteBase {
  readonly query?: undefined;
  readonly handler: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
}

/** A route that takes the query parameters `query` declares, and gets them parsed. */
interface RouteWithQuery<Query> extends RouteBase {
  readonly query: QueryParameters<Query>;
  readonly handler: (request: FastifyRequest, reply: FastifyReply, query: Query) => Promise<unknown>;
}

export type RouteDefinition<Query> = RouteWithoutQuery | RouteWithQuery<Query>;

/** A route as served: its method, path and the query parameters it takes. */
export interface ServedRoute {
  readonly method: HttpMethod;
  readonly url: string;
  readonly query: readonly string[];
}

/**
 * Registers routes and remembers each one's access rule (read by the auth hook), path and query parameters (checked
 * against OpenAPI). Every route's query is checked here, once the caller is authenticated and before the body is read:
 * an unknown or repeated parameter is refused whatever the body holds.
 */
export class RouteTable {
  private readonly access = new Map<string, RouteAccess>();
  private readonly bodyTypes = new Map<string, readonly string[]>();
  readonly routes: ServedRoute[] = [];

  constructor(private readonly app: FastifyInstance) {}

  add<Query>(route: RouteDefinition<Query>): void {
    this.access.set(`${route.method} ${route.url}`, route.access);
    if (route.takesBody === true)
      this.bodyTypes.set(`${route.method} ${route.url}`, route.bodyTypes ?? [JSON_CONTENT_TYPE]);
    const options = {
      method: route.method,
      url: route.url,
      ...(route.bodyLimit === undefined ? {} : { bodyLimit: route.bodyLimit }),
    };
    // A route that declares no parameters takes none: its query is checked as an empty declaration.
    const parameters: QueryParameters<unknown> = route.query ?? NO_QUERY_PARAMETERS;
    this.routes.push({ method: route.method, url: route.url, query: parameters.names });
    const parsed = new WeakMap<FastifyRequest, unknown>();
    this.app.route({
      ...options,
      onRequest: async (request, reply) => {
        parsed.set(request, checkedQuery(parameters, request, reply));
      },
      handler: async (request, reply) => {
        if (!parsed.has(request)) throw new Error(`internal: ${route.url} ran without its query checked`);
        if (route.method === 'POST' && route.takesBody !== true) checkNoBody(request);
        return route.query === undefined
          ? route.handler(request, reply)
          : route.handler(request, reply, parsed.get(request) as Query);
      },
    });
  }

  accessOf(method: string, url: string | undefined): RouteAccess | undefined {
    return url === undefined ? undefined : this.access.get(`${method} ${url}`);
  }

  /** The content types the route's body may have; none for a route that takes no body. */
  bodyTypesOf(method: string, url: string | undefined): readonly string[] {
    return (url === undefined ? undefined : this.bodyTypes.get(`${method} ${url}`)) ?? [];
  }
}

/** A request to a route that reads no body: none, or an empty JSON object; its fields are named otherwise. */
function checkNoBody(request: FastifyRequest): void {
  const body = bodyOf(request.body);
  // An empty body with a type is none: many clients name JSON on every POST.
  if (body === undefined || (body.kind !== 'archive' && body.text.trim() === '')) return;
  if (body.kind !== 'json')
    throw new HttpError(415, 'this request takes no body: send none (or {} as application/json)');
  const { value } = body;
  const fields =
    typeof value === 'object' && value !== null && !Array.isArray(value) ? Object.keys(value) : undefined;
  if (fields?.length === 0) return;
  throw new ValidationError(
    'body',
    fields === undefined
      ? ['(root): this request takes no body']
      : fields.map((field) => `${formatFieldPath([field])}: unknown field: this request takes no body`),
  );
}

/**
 * The request's query as `parameters` read it. Refused, a request with a body has its connection ended rather than
 * its body read to the end for nothing (an upload's may be large), as fastify does for a body it cannot parse.
 */
function checkedQuery<Query>(
  parameters: QueryParameters<Query>,
  request: FastifyRequest,
  reply: FastifyReply,
): Query {
  try {
    return parameters.parse(request.query);
  } catch (e) {
    const length = request.headers['content-length'];
    if (request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0'))
      void reply.header('connection', 'close');
    throw e;
  }
}
