import type { FastifyRequest } from 'fastify';
import { parseWith } from '../../core/validation.js';
import {
  heartbeatRequestSchema,
  registerRequestSchema,
  WORKER_ROUTES,
} from '../../protocol/worker-protocol.js';
import type { WorkerTaskControl } from '../worker-task-control.js';
import { WorkerProtocolError } from '../worker-identity/worker-protocol-error.js';
import { bodyOf } from './body.js';
import { HttpError } from './errors.js';
import type { RouteTable } from './routing.js';

/**
 * The worker protocol's routes (src/protocol/worker-protocol.ts). They are outside the team/admin token scheme
 * (access `none` for the API's auth hook) and check the workers' credentials themselves: to register, the credential
 * the request's `identity` names (worker-identity/worker-registrar.ts); to heartbeat, the per-instance token the
 * registration issued.
 */
export type WorkerEndpoint = Pick<WorkerTaskControl, 'register' | 'heartbeat'>;

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

function bearerOf(request: FastifyRequest): string {
  const token = BEARER.exec(request.headers.authorization ?? '')?.[1];
  if (token === undefined)
    throw new HttpError(401, 'missing bearer token: send "Authorization: Bearer <worker credential>"');
  return token;
}

function jsonOf(request: FastifyRequest): unknown {
  const body = bodyOf(request.body);
  if (body?.kind !== 'json') throw new HttpError(415, 'worker requests are application/json');
  return body.value;
}

function asHttp(error: unknown): never {
  if (error instanceof WorkerProtocolError) throw new HttpError(error.statusCode, error.message);
  throw error;
}

export function registerWorkerRoutes(routes: RouteTable, workers: WorkerEndpoint): void {
  routes.add({
    method: 'POST',
    url: WORKER_ROUTES.register,
    access: 'none',
    takesBody: true,
    handler: async (request) => {
      const token = bearerOf(request);
      const body = parseWith(registerRequestSchema, jsonOf(request), 'worker registration');
      try {
        return await workers.register(token, body);
      } catch (e) {
        return asHttp(e);
      }
    },
  });
  routes.add({
    method: 'POST',
    url: WORKER_ROUTES.heartbeat,
    access: 'none',
    takesBody: true,
    handler: async (request) => {
      const token = bearerOf(request);
      const body = parseWith(heartbeatRequestSchema, jsonOf(request), 'worker heartbeat');
      try {
        return workers.heartbeat(token, body, { remoteAddress: request.socket.remoteAddress });
      } catch (e) {
        return asHttp(e);
      }
    },
  });
}
