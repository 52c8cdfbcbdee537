import { createHash } from 'node:crypto';
import { z } from 'zod';
import { parseWith } from '../../core/validation.js';
import { teamScope } from './auth.js';
import { bodyOf } from './body.js';
import { HttpError, notFound } from './errors.js';
import type { ApiContext, RouteTable } from './routing.js';
import { parseSince, SINCE_RULE } from './since.js';
import { clusterForScope, costsForScope, publicInstance, visibleJobIds } from './views.js';

/** Uploaded build contexts may be far larger than a spec; the whole archive is held in memory while stored. */
export const DEFAULT_MAX_CONTEXT_BYTES = 256 * 1024 * 1024;

const costsQuery = z.object({ since: z.string().min(1).optional() });
const instanceParams = z.object({ id: z.string().min(1).max(128) });

function isTar(bytes: Buffer): boolean {
  // POSIX ustar magic at offset 257 of the first header; archives are whole 512-byte blocks.
  return (
    bytes.length >= 1024 &&
    bytes.length % 512 === 0 &&
    bytes.subarray(257, 262).toString('latin1') === 'ustar'
  );
}

function isGzip(bytes: Buffer): boolean {
  return bytes.length >= 18 && bytes[0] === 0x1f && bytes[1] === 0x8b;
}

export function registerClusterRoutes(
  routes: RouteTable,
  context: ApiContext,
  maxContextBytes: number,
): void {
  const { service } = context;
  const store = service.store;

  routes.add({
    method: 'GET',
    url: '/v1/cluster',
    access: 'any',
    handler: async (request) => ({
      ...clusterForScope(service.cluster(), visibleJobIds(store, teamScope(context.principal(request)))),
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
    handler: async (request) => {
      const query = parseWith(costsQuery, request.query, 'query');
      let since: number | undefined;
      if (query.since !== undefined) {
        since = parseSince(query.since, Date.now() / 1000);
        if (since === undefined)
          throw new HttpError(400, 'invalid query', [
            `since: expected ${SINCE_RULE}, got ${JSON.stringify(query.since)}`,
          ]);
      }
      return costsForScope(service.costs(since), teamScope(context.principal(request)));
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
    url: '/v1/contexts',
    access: 'any',
    bodyLimit: maxContextBytes,
    handler: async (request, reply) => {
      const body = bodyOf(request.body);
      if (body === undefined || body.kind !== 'archive')
        throw new HttpError(
          415,
          'send the build context as a tar archive (application/x-tar or application/gzip)',
        );
      const valid = body.encoding === 'tar' ? isTar(body.bytes) : isGzip(body.bytes);
      if (!valid)
        throw new HttpError(
          400,
          `the body is not a ${body.encoding === 'tar' ? 'tar archive' : 'gzip stream'}`,
        );
      if (service.storeContext === undefined)
        throw new HttpError(
          501,
          'this controller does not accept build contexts; build and push the image, then use `image:` in the spec',
        );
      const sha256 = createHash('sha256').update(body.bytes).digest('hex');
      const ref = await service.storeContext(body.bytes, {
        sha256,
        sizeBytes: body.bytes.length,
        encoding: body.encoding,
        team: teamScope(context.principal(request)),
      });
      return reply.code(201).send({ ref, sha256, sizeBytes: body.bytes.length });
    },
  });
}
