import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ValidationError } from '../../core/validation.js';
import { FencedWriteError } from '../ha/lease.js';
import {
  IllegalTransitionError,
  StateStoreError,
  StateStoreFaultError,
  UnknownRecordError,
} from '../state-store.js';
import { CommitOutcomeUnknownError, PostgresError } from '../state/postgres/connection.js';
import { isObjectStoreError } from '../../storage/object-store-error.js';
import { InvalidObjectKeyError } from '../../storage/object-key.js';
import { AuthError } from './auth.js';

/** The bound on one path parameter (the server's `maxParamLength`): the longest id a route accepts. */
export const MAX_PATH_PARAM_LENGTH = 128;

/** Every error response has this shape: a one-line reason and, for validation failures, one line per problem. */
export interface ErrorBody {
  readonly error: string;
  readonly details?: readonly string[];
}

/** An error a route raises on purpose, with the status and body the client sees. */
export class HttpError extends Error {
  override name = 'HttpError';
  constructor(
    readonly statusCode: number,
    message: string,
    readonly details?: readonly string[],
    /** Sent as Retry-After: the condition passes, and the client should try again after this long. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/** The challenge every 401 carries. */
export const WWW_AUTHENTICATE = 'Bearer realm="fleetwise"';

/** What a client is told to wait before retrying a request that met a passing database condition. */
export const STATE_RETRY_AFTER_SECONDS = 2;

export function notFound(kind: string, id: string): HttpError {
  return new HttpError(404, `${kind} ${id} not found`);
}

export function formatBytes(bytes: number): string {
  return bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0
    ? `${bytes / (1024 * 1024)} MiB`
    : bytes >= 1024 && bytes % 1024 === 0
      ? `${bytes / 1024} KiB`
      : `${bytes} bytes`;
}

/** Map what a handler (or fastify itself) threw to a status and an ErrorBody. */
export function toHttpError(
  error: unknown,
  bodyLimitBytes: (request: FastifyRequest) => number,
  request: FastifyRequest,
): HttpError {
  if (error instanceof HttpError) return error;
  if (error instanceof AuthError) return new HttpError(error.statusCode, error.message);
  if (error instanceof ValidationError) return new HttpError(400, `invalid ${error.source}`, error.problems);
  if (error instanceof UnknownRecordError) return new HttpError(404, `${error.kind} ${error.id} not found`);
  if (error instanceof IllegalTransitionError) return new HttpError(409, error.message);
  // Another controller took the lease: this one can no longer write; the active one can.
  if (error instanceof FencedWriteError)
    return new HttpError(503, error.message, undefined, STATE_RETRY_AFTER_SECONDS);
  // The connection lost during the commit: the write may have been made, so a blind retry may make it twice. Not a
  // 503 (clients retry those): the client is told to look first, or to send it again under the same key.
  if (error instanceof CommitOutcomeUnknownError)
    return new HttpError(
      500,
      'the state database connection was lost while committing this request: it may or may not have been ' +
        'applied; check before sending it again (a submission sent with an Idempotency-Key is safe to send again ' +
        'with the same key)',
    );
  // The database unreachable, a timeout, a lock or serialization conflict: passing, so a client should retry (as it
  // does on 503), not give up as on a conflict with the state.
  if (error instanceof PostgresError && error.transient)
    return new HttpError(
      503,
      `the state database is unavailable or busy (${error.message}); try again later`,
      undefined,
      STATE_RETRY_AFTER_SECONDS,
    );
  // The store failed, not the request (a read-only or damaged database, a missing grant, a statement of the store's
  // own the database refused): the server's fault, logged with its cause for the operator, not told to the client.
  if (error instanceof StateStoreFaultError) return new HttpError(500, 'internal error');
  // What is left is a conflict with the state the request caused (a move out of a final state, a token already
  // registered): the same request would meet it again.
  if (error instanceof StateStoreError) return new HttpError(409, error.message);
  // A key built from what the client sent that no store may hold: the request is at fault, not the store.
  if (error instanceof InvalidObjectKeyError) return new HttpError(400, error.message);
  // The object store failing (after its own timeouts and retries) is a passing outage, not a bug: say so.
  if (isObjectStoreError(error))
    return new HttpError(503, `the object store is unavailable (${error.operation} failed); try again later`);
  const fastifyError = error as Partial<FastifyError>;
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new HttpError(
        413,
        `request body too large: this route accepts at most ${formatBytes(bodyLimitBytes(request))}`,
      );
    case 'FST_ERR_BAD_URL':
      return new HttpError(400, 'malformed URL', [
        'path: not valid percent-encoding (each % starts two hex digits of UTF-8)',
      ]);
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new HttpError(
        414,
        `a path parameter is longer than ${MAX_PATH_PARAM_LENGTH} characters: no id is that long`,
      );
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new HttpError(400, 'the Content-Length header does not match the body');
    default:
      break;
  }
  const status = fastifyError.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500)
    return new HttpError(status, fastifyError.message ?? 'bad request');
  return new HttpError(500, 'internal error');
}

/**
 * The client closed the connection before its request was read whole (an upload cut off): the request's own stream
 * failed with Node's `aborted`, which a route reading it (a build context upload) throws on. No failure of the
 * server's, and nobody is left to answer.
 */
export function isRequestAborted(error: unknown, request: Pick<FastifyRequest, 'raw'>): boolean {
  return request.raw.readableAborted && (error as { code?: unknown } | null)?.code === 'ECONNRESET';
}

export function sendError(reply: FastifyReply, error: HttpError): FastifyReply {
  const body: ErrorBody =
    error.details === undefined ? { error: error.message } : { error: error.message, details: error.details };
  if (error.retryAfterSeconds !== undefined)
    void reply.header('retry-after', String(error.retryAfterSeconds));
  // Every credential the API takes is a bearer token: a 401 says so (RFC 6750 §3, RFC 9110 §15.5.2).
  if (error.statusCode === 401) void reply.header('www-authenticate', WWW_AUTHENTICATE);
  return reply.code(error.statusCode).type('application/json; charset=utf-8').send(body);
}
