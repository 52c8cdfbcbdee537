import type { Registry } from 'prom-client';
import { HEALTH_FEATURES } from './health-features.js';
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
        return reply
          .code(503)
          .send({ status: 'unavailable', error: 'the state store is unavailable', ...HEALTH_FEATURES });
      }
      const leadership = context.leadership();
      const health = context.service.loopHealth?.();
      if (health === undefined) return { status: 'ok', latestRound, ...leadership, ...HEALTH_FEATURES };
      const loop = {
        pass: health.pass ?? null,
        passSeconds: health.passSeconds ?? null,
        lastPassEndedAt: secondsToIso(health.lastPassEndedAtSeconds),
      };
      // A stuck loop, or one whose every pass fails, decides and carries out nothing: not healthy, however well the
      // API answers.
      if (health.status !== 'ok')
        return reply.code(503).send({
          status: health.status,
          error: health.reason ?? `the control loop is ${health.status}`,
          loop,
          ...leadership,
          ...HEALTH_FEATURES,
        });
      return { status: 'ok', latestRound, loop, ...leadership, ...HEALTH_FEATURES };
    },
  });

  // Ready to serve the cluster: only the active controller is (a load balancer in front of an active and a standby
  // sends traffic where this answers 200; a standby answers 503 from its own server, ha/standby-server.ts).
  routes.add({
    method: 'GET',
    url: '/readyz',
    access: 'none',
    handler: async (_request, reply) => {
      const leadership = context.leadership();
      return reply
        .code(leadership.role === 'active' ? 200 : 503)
        .send({ status: leadership.role, ...leadership });
    },
  });

  routes.add({
    method: 'GET',
    url: '/metrics',
    access: 'metrics',
    handler: async (_request, reply) => reply.type(registry.contentType).send(await registry.metrics()),
  });

  routes.add({
    method: 'GET',
    url: '/openapi.json',
    access: 'none',
    handler: async () => OPENAPI_DOCUMENT,
  });
}
