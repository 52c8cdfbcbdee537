import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { parseWith } from '../../core/validation.js';
import { ContextLimitError, type ContextLimits } from '../../protocol/context-limits.js';
import { teamScope } from './auth.js';
import { bodyOf, CONTEXT_UPLOAD_URL, GZIP_CONTENT_TYPES, TAR_CONTENT_TYPE } from './body.js';
import { ContextArchiveError, ContextInspector } from './context-inspector.js';
import { HttpError, notFound } from './errors.js';
import type { ApiContext, RouteTable } from './routing.js';
import { queryParameters } from './query.js';
import { sinceQueryParam } from './since.js';
import { instanceMarket } from '../instance-market.js';
import { readLaunchError } from '../launch-error-records.js';
import { clusterForScope, costsForScope, publicInstance, visibleJobIds } from './views.js';

const timeParam = z.string().min(1).max(64, 'at most 64 characters').optional();
const costsQuery = queryParameters({ since: timeParam, until: timeParam });
const instanceParams = z.object({ id: z.string().min(1).max(128) });
const contextQuery = queryParameters({
  sha256: z
    .string({ error: 'required: the sha256 of the body (64 hex digits), which names the stored context' })
    .regex(/^[0-9a-f]{64}$/, 'the sha256 of the body: 64 lowercase hex digits'),
});

export function registerClusterRoutes(
  routes: RouteTable,
  context: ApiContext,
  /** The limits of an upload by this team (undefined: the admin). */
  contextLimits: (team: string | undefined) => ContextLimits,
): void {
  const { service } = context;
  const store = service.store;

  routes.add({
    method: 'GET',
    url: '/v1/cluster',
    access: 'any',
    handler: async (request) => ({
      ...clusterForScope(
        service.cluster(),
        visibleJobIds(store, teamScope(context.principal(request))),
        (id) => instanceMarket(store, id),
        (id) => readLaunchError(store, id),
      ),
      controller: context.leadership(),
    }),
  });

  routes.add({
    method: 'GET',
    url: '/v1/cluster/latency',
    access: 'any',
    handler: async (request) => {
      const view = service.latency?.() ?? { pairs: [], probes: [] };
      // Where the probes listen (instances' addresses) is the operator's business; the round trips are everyone's.
      const team = teamScope(context.principal(request));
      return {
        scope: team === undefined ? 'all' : 'team',
        pairs: view.pairs,
        probes: team === undefined ? view.probes : [],
      };
    },
  });

  routes.add({
    method: 'GET',
    url: '/v1/cluster/colocation',
    // The operator's: it names every team's workloads (a team token sees only its own jobs elsewhere).
    access: 'admin',
    handler: async () => {
      if (service.colocation === undefined)
        throw new HttpError(501, 'this controller does not say what its scheduler learned');
      return { table: service.colocation() ?? null };
    },
  });

  routes.add({
    method: 'POST',
    url: '/v1/instances/:id/drain',
    access: 'admin',
    handler: async (request) => {
      const { id } = parseWith(instanceParams, request.params, 'path');
      // Accept our id (inst-4) or the cloud's (i-0abc…): operators see the latter in the EC2 console.
      const instance = store.getInstance(id) ?? store.findInstanceByCloudId(id);
      if (instance === undefined) throw notFound('instance', id);
      // Nothing runs on an instance that is gone or going: answering as if its tasks would move misleads.
      if (instance.state === 'terminating' || instance.state === 'terminated')
        throw new HttpError(
          409,
          `instance ${instance.id}${instance.cloudId === undefined ? '' : ` (${instance.cloudId})`} is ${instance.state}: it is gone, there is nothing to drain`,
        );
      return publicInstance(service.drain(instance.id));
    },
  });

  routes.add({
    method: 'GET',
    url: '/v1/costs',
    access: 'any',
    query: costsQuery,
    handler: async (request, _reply, query) => {
      const since = query.since === undefined ? undefined : sinceQueryParam('since', query.since);
      const until = query.until === undefined ? undefined : sinceQueryParam('until', query.until);
      if (until !== undefined && until <= (since ?? 0))
        throw new HttpError(400, 'invalid query', [
          `until: must come after since (${since ?? 0} s), got ${until} s`,
        ]);
      const report =
        service.periodCosts === undefined
          ? service.costs(since, until)
          : await service.periodCosts(since, until);
      // The controller's own clock says what is still to come (the report is generated at its now).
      if (since !== undefined && since > report.generatedAtSeconds)
        throw new HttpError(400, 'invalid query', [
          `since: ${query.since ?? ''} is after now (${report.generatedAtSeconds} s): no cost has been billed then`,
        ]);
      return costsForScope(report, teamScope(context.principal(request)));
    },
  });

  routes.add({
    method: 'POST',
    url: '/v1/reports',
    access: 'admin',
    handler: async (_request, reply) => {
      if (service.writeReport === undefined)
        throw new HttpError(501, 'this controller does not write cost reports');
      let location: string;
      try {
        location = await service.writeReport();
      } catch (e) {
        // Admin-only route: the reason (no object store, S3 access denied, …) is for the operator to act on.
        throw new HttpError(500, `writing the report failed: ${(e as Error).message}`);
      }
      return reply.code(201).send({ location });
    },
  });

  routes.add({
    method: 'POST',
    url: CONTEXT_UPLOAD_URL,
    access: 'any',
    takesBody: true,
    bodyTypes: [TAR_CONTENT_TYPE, GZIP_CONTENT_TYPES[0]],
    query: contextQuery,
    handler: async (request, reply, { sha256 }) => {
      const body = bodyOf(request.body);
      if (body === undefined || body.kind !== 'archive')
        throw new HttpError(
          415,
          'send the build context as a tar archive (application/x-tar or application/gzip)',
        );
      // Whatever ends this request before its body was read whole also ends the connection: the rest is never read.
      try {
        return await storeUpload(body.encoding, body.stream, sha256, request, reply);
      } catch (e) {
        if (!body.stream.readableEnded) {
          body.stream.unpipe();
          body.stream.pause();
          void reply.header('connection', 'close');
        }
        if (e instanceof ContextLimitError) throw new HttpError(413, e.message);
        if (e instanceof ContextArchiveError) throw new HttpError(400, e.message);
        throw e;
      }
    },
  });

  async function storeUpload(
    encoding: 'tar' | 'gzip',
    stream: Readable,
    sha256: string,
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<FastifyReply> {
    if (service.storeContext === undefined)
      throw new HttpError(
        501,
        'this controller does not accept build contexts; build and push the image, then use `image:` in the spec',
      );
    const team = teamScope(context.principal(request));
    const limits = contextLimits(team);
    // Node has checked the Content-Length and reads no further: a body declared over the limit is refused before a
    // byte of it is read, and the expansion ratio is checked against the whole. A chunked upload has none.
    const length = request.headers['content-length'];
    const inspector = new ContextInspector(
      encoding,
      limits,
      sha256,
      length === undefined ? undefined : Number(length),
    );
    stream.on('error', (e) => inspector.destroy(e));
    // A failure reaches storeContext through the stream it reads; this keeps one that comes before it reads (while
    // it checks whether the archive is stored already) from going unhandled.
    inspector.on('error', () => undefined);
    stream.pipe(inspector);
    const ref = await service.storeContext(inspector, { sha256, encoding, team });
    return reply.code(201).send({ ref, sha256, sizeBytes: inspector.sizeBytes });
  }
}
