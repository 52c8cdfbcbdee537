import type { Registry } from 'prom-client';
import { OPENAPI_DOCUMENT } from './openapi.js';
import type { ApiContext, RouteTable } from './routing.js';

function secondsToIso(seconds: number | undefined): string | null {
  return seconds === undefined ? null : new Date(seconds * 1000).toISOString();
}

export function registerSystemRoutes(routes: RouteTable, context: ApiContext, registry: Registry): void {
  routes.add({
    method: 'GET',
    url: '/healthz',
    access: 'none',
    handler: async (request, reply) => {
      let latestRound: number | null;
      try {
        latestRound = context.service.store.latestRound()?.round ?? null;
      } catch (e) {
        request.log.error(e, 'health check: state store unavailable');
        return reply.code(503).send({ status: 'unavailable', error: 'the state store is unavailable' });
      }
      const health = context.service.loopHealth?.();
      if (health === undefined) return { status: 'ok', latestRound };
      const loop = {
        pass: health.pass ?? null,
        passSeconds: health.passSeconds ?? null,
        lastPassEndedAt: secondsToIso(health.lastPassEndedAtSeconds),
      };
      // A stuck loop decides and carries out nothing: not healthy, however well the API answers.
      if (health.status === 'stuck')
        return reply
          .code(503)
          .send({ status: 'stuck', error: health.reason ?? 'the control loop is stuck', loop });
      return { status: 'ok', latestRound, loop };
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
