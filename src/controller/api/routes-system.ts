import type { Registry } from 'prom-client';
import { OPENAPI_DOCUMENT } from './openapi.js';
import type { ApiContext, RouteTable } from './routing.js';

export function registerSystemRoutes(routes: RouteTable, context: ApiContext, registry: Registry): void {
  routes.add({
    method: 'GET',
    url: '/healthz',
    access: 'none',
    handler: async (request, reply) => {
      try {
        return { status: 'ok', latestRound: context.service.store.latestRound()?.round ?? null };
      } catch (e) {
        request.log.error(e, 'health check: state store unavailable');
        return reply.code(503).send({ status: 'unavailable', error: 'the state store is unavailable' });
      }
    },
  });

  routes.add({
    method: 'GET',
    url: '/metrics',
    access: 'none',
    handler: async (_request, reply) => reply.type(registry.contentType).send(await registry.metrics()),
  });

  routes.add({
    method: 'GET',
    url: '/openapi.json',
    access: 'none',
    handler: async () => OPENAPI_DOCUMENT,
  });
}
