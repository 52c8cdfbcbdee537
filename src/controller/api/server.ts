import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyRequest,
  type HTTPMethods,
} from 'fastify';
import type { Logger } from 'pino';
import type { Catalog } from '../../core/catalog.js';
import { loadCatalogFile } from '../../cloud/catalog-file.js';
import { JOB_SPEC_LIMITS } from '../job-spec/spec.js';
import { DEFAULT_CONTEXT_LIMITS, type ContextLimits } from '../../protocol/context-limits.js';
import { PriceBook } from '../../scheduler/reservation-price.js';
import { authenticate, authorize, authorizeScrape, type Principal } from './auth.js';
import { bodyRefusal, registerBodyParsers } from './body.js';
import { HttpError, isRequestAborted, MAX_PATH_PARAM_LENGTH, sendError, toHttpError } from './errors.js';
import { ControllerMetrics, metricsRegistry } from './metrics.js';
import { registerClusterRoutes } from './routes-cluster.js';
import { registerTokenRoutes } from './routes-tokens.js';
import { registerJobRoutes } from './routes-jobs.js';
import { registerSystemRoutes } from './routes-system.js';
import { registerWorkerRoutes, type WorkerEndpoint } from './routes-workers.js';
import { RouteTable, type ApiContext, type ApiControllerService } from './routing.js';
import type { LeadershipView } from '../ha/leader-elector.js';

export { ControllerMetrics } from './metrics.js';
export type { ApiControllerService } from './routing.js';

/**
 * Requests other than context uploads (which stream, within their own limits): a job spec is at most this large
 * (job-spec/spec.ts), and nothing else is bigger.
 */
export const DEFAULT_BODY_LIMIT_BYTES = JOB_SPEC_LIMITS.maxSpecBytes;

export interface ApiServerOptions {
  /** `host:port` (`[::1]:port` for IPv6); port 0 picks a free port. */
  readonly listen: string;
  /** The operator's token (FLEETWISE_ADMIN_TOKEN or the generated one); team tokens come from the state store. */
  readonly adminToken: string;
  /** The token `/metrics` asks for (the admin token is taken too); undefined: `/metrics` asks for none. */
  readonly metricsToken?: string | undefined;
  /**
   * Where the API logs (fastify's logger): the controller's pino logger, of which it takes a child at warn or above,
   * so failures (every 5xx, with its error) are in the controller's log and ordinary requests are not; `true`:
   * fastify's own pino, every request; default off.
   */
  readonly logger?: boolean | Logger;
  /**
   * The catalog submitted specs are validated against (families, hostable demands) and a dry run is priced at.
   * Default: the bundled one. A function is read at each request: the controller's current catalog (`() =>
   * controller.catalog`), so a dry run after a price refresh shows the refreshed type and price.
   */
  readonly catalog?: Catalog | PriceBook | (() => Catalog);
  /** Counters the controller increments; created here when absent (and returned either way). */
  readonly metrics?: ControllerMetrics;
  readonly bodyLimitBytes?: number;
  /** The build context limits of an upload by a team (undefined: the admin); default DEFAULT_CONTEXT_LIMITS. */
  readonly contextLimits?: (team: string | undefined) => ContextLimits;
  /** The worker protocol's endpoint (WorkerTaskControl); without it, no worker routes are served. */
  readonly workers?: WorkerEndpoint;
  /** The controller's lease (ha/): without one (a SQLite state), the controller is active on its own. */
  readonly leadership?: () => LeadershipView;
  /** Back up the state as it is now (ApiContext.backupNow); absent where the controller keeps no backups. */
  readonly backupNow?: () => Promise<unknown>;
}

/** A controller with a state of its own: active, with no lease. */
const SOLE_CONTROLLER: LeadershipView = { role: 'active', epoch: null, holder: null, activeUrl: null };

export interface ApiServer {
  /** `http://host:port` with the port actually bound. */
  readonly url: string;
  readonly port: number;
  readonly metrics: ControllerMetrics;
  /** The routes served (method and fastify path), e.g. to check the OpenAPI document covers them. */
  readonly routes: readonly { readonly method: string; readonly url: string }[];
  close(): Promise<void>;
}

/** Split `host:port`; throws naming the expected form. */
export function parseListenAddress(listen: string): { host: string; port: number } {
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(listen.trim());
  const host = match?.[1] ?? match?.[2];
  const port = Number(match?.[3]);
  if (host === undefined || !Number.isInteger(port) || port > 65535)
    throw new Error(
      `invalid listen address ${JSON.stringify(listen)}: expected host:port, e.g. 127.0.0.1:7070 or [::1]:7070`,
    );
  return { host, port };
}

/**
 * The API's log: `log` at warn, or above where `log` is set above it. Fastify logs each request at info, which on a
 * busy controller would drown the lines that matter.
 */
function failuresOnly(log: Logger): FastifyBaseLogger {
  const warn = log.levels.values['warn'] ?? 40;
  return log.child({}, { level: log.levelVal > warn ? log.level : 'warn' });
}

/**
 * The price book of the catalog as it is now: a fixed one, or, for a catalog function, one per catalog it returns
 * (rebuilt only when a price refresh replaces the catalog; the book caches its cheapest-type look-ups).
 */
function priceBookOf(catalog: Catalog | PriceBook | (() => Catalog)): () => PriceBook {
  if (typeof catalog !== 'function') {
    const book = catalog instanceof PriceBook ? catalog : new PriceBook(catalog);
    return () => book;
  }
  let book: PriceBook | undefined;
  return () => {
    const current = catalog();
    if (book?.catalog !== current) book = new PriceBook(current);
    return book;
  };
}

/**
 * The methods some route answers `path` (a request's path, without its query) with, HEAD with each GET, found by
 * fastify's router; none when no route matches it. A path that is not valid percent-encoding, or has a segment longer
 * than a path parameter may be, matches none: for it the router finds its bad-URL or long-parameter error handler,
 * which is no route.
 */
function allowedMethods(app: FastifyInstance, routes: RouteTable, path: string): string[] {
  try {
    decodeURI(path);
  } catch {
    return [];
  }
  if (path.split('/').some((segment) => segment.length > MAX_PATH_PARAM_LENGTH)) return [];
  const methods = new Set<HTTPMethods>(routes.routes.map((r) => r.method));
  if (methods.has('GET')) methods.add('HEAD');
  // Typed as never null, but null where no route of the method matches.
  const found = (method: HTTPMethods): boolean =>
    (app.findRoute({ method, url: path }) as ReturnType<FastifyInstance['findRoute']> | null) !== null;
  return [...methods].filter(found).sort();
}

/** Build the fastify app with every route; not yet listening (tests may inject into it). */
export function buildApiApp(
  service: ApiControllerService,
  options: Omit<ApiServerOptions, 'listen'> & { readonly metrics: ControllerMetrics },
): { app: FastifyInstance; routes: RouteTable } {
  const bodyLimit = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  const app = Fastify({
    ...(typeof options.logger === 'object'
      ? { loggerInstance: failuresOnly(options.logger) }
      : { logger: options.logger ?? false }),
    bodyLimit,
    // Every GET route answers HEAD too (its headers, no body): load balancers and uptime checks probe /healthz so.
    exposeHeadRoutes: true,
    routerOptions: { maxParamLength: MAX_PATH_PARAM_LENGTH },
    // Errors fastify raises before routing (a path that is not valid percent-encoding, an overlong path parameter)
    // get the API's error body too, not fastify's own shape.
    frameworkErrors: (error, request, reply) =>
      sendError(
        reply,
        toHttpError(error, () => bodyLimit, request),
      ),
  });
  const priceBook = priceBookOf(options.catalog ?? loadCatalogFile());
  const principals = new WeakMap<FastifyRequest, Principal>();
  const routes = new RouteTable(app);
  const context: ApiContext = {
    service,
    get priceBook() {
      return priceBook();
    },
    leadership: options.leadership ?? (() => SOLE_CONTROLLER),
    principal(request) {
      const principal = principals.get(request);
      if (principal === undefined) throw new Error('internal: route has no authenticated caller');
      return principal;
    },
    ...(options.backupNow === undefined ? {} : { backupNow: options.backupNow }),
  };

  registerBodyParsers(app);
  app.addHook('onRequest', async (request) => {
    const url = request.routeOptions.url;
    if (url === undefined) return; // no such route: the not-found handler answers
    // A route without an access rule is an oversight; fail closed. A HEAD is its GET without the body: the same rule.
    const access = routes.accessOf(request.method === 'HEAD' ? 'GET' : request.method, url) ?? 'admin';
    if (access === 'none') return;
    if (access === 'metrics') {
      authorizeScrape(request.headers.authorization, options.metricsToken, options.adminToken);
      return;
    }
    const principal = authenticate(request.headers.authorization, options.adminToken, service.store);
    authorize(principal, access);
    principals.set(request, principal);
  });
  app.setErrorHandler((error, request, reply) => {
    if (isRequestAborted(error, request)) {
      // The client went away mid-body: nothing failed here, and the connection that would carry an answer is gone.
      request.log.debug({ err: error }, 'request aborted by the client before its body was read whole');
      reply.hijack();
      reply.raw.destroy();
      return;
    }
    const http =
      bodyRefusal(error, request, routes.bodyTypesOf(request.method, request.routeOptions.url)) ??
      toHttpError(error, (r) => r.routeOptions.bodyLimit ?? bodyLimit, request);
    if (http.statusCode >= 500) request.log.error(error);
    return sendError(reply, http);
  });
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '';
    const allow = allowedMethods(app, routes, path);
    if (allow.length === 0) return sendError(reply, new HttpError(404, `no route ${request.method} ${path}`));
    // A path the API serves, asked with another method (RFC 9110 §15.5.6): 405, and which methods it takes.
    void reply.header('allow', allow.join(', '));
    return sendError(
      reply,
      new HttpError(405, `no route ${request.method} ${path}: ${path} answers ${allow.join(', ')}`),
    );
  });

  registerJobRoutes(routes, context);
  registerClusterRoutes(routes, context, options.contextLimits ?? (() => DEFAULT_CONTEXT_LIMITS));
  registerTokenRoutes(routes, context);
  registerSystemRoutes(routes, context, metricsRegistry(service, options.metrics));
  if (options.workers !== undefined) registerWorkerRoutes(routes, options.workers);
  return { app, routes };
}

/**
 * Serve the controller's HTTP API (OpenAPI at /openapi.json). The controller passes itself as `service`;
 * `writeReport` and `storeContext` are optional capabilities (their routes answer 501 without them).
 */
export async function startApiServer(
  service: ApiControllerService,
  options: ApiServerOptions,
): Promise<ApiServer> {
  const { host, port } = parseListenAddress(options.listen);
  const metrics = options.metrics ?? new ControllerMetrics();
  const { app, routes } = buildApiApp(service, { ...options, metrics });
  await app.listen({ host, port });
  const address = app.server.address();
  const boundPort = typeof address === 'object' && address !== null ? address.port : port;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${urlHost}:${boundPort}`,
    port: boundPort,
    metrics,
    routes: routes.routes,
    close: () => app.close(),
  };
}
