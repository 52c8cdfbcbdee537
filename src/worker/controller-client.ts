import {
  heartbeatResponseSchema,
  registerResponseSchema,
  WORKER_ROUTES,
  type HeartbeatRequest,
  type HeartbeatResponse,
  type RegisterRequest,
  type RegisterResponse,
} from '../protocol/worker-protocol.js';

export class ControllerRequestError extends Error {
  constructor(
    message: string,
    readonly statusCode: number | undefined,
  ) {
    super(message);
    this.name = 'ControllerRequestError';
  }
}

export interface ControllerConnection {
  /** Register with `credential` as the bearer: what `request.identity` names (worker-protocol.ts). */
  register(credential: string, request: RegisterRequest): Promise<RegisterResponse>;
  heartbeat(request: HeartbeatRequest): Promise<HeartbeatResponse>;
}

/**
 * The agent's HTTP client for the worker protocol (src/protocol/worker-protocol.ts). Keeps the per-instance token
 * once registered.
 */
export class ControllerClient implements ControllerConnection {
  private instanceToken: string | undefined;
  private readonly baseUrl: string;

  constructor(
    baseUrl: string,
    private readonly timeoutMs = 10_000,
  ) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
  }

  async register(credential: string, request: RegisterRequest): Promise<RegisterResponse> {
    const answer = await this.post(WORKER_ROUTES.register, credential, request);
    const parsed = registerResponseSchema.parse(answer);
    this.instanceToken = parsed.workerToken;
    return parsed;
  }

  async heartbeat(request: HeartbeatRequest): Promise<HeartbeatResponse> {
    if (this.instanceToken === undefined) throw new ControllerRequestError('not registered', undefined);
    return heartbeatResponseSchema.parse(
      await this.post(WORKER_ROUTES.heartbeat, this.instanceToken, request),
    );
  }

  private async post(path: string, token: string, body: unknown): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(`${this.baseUrl}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (e) {
      throw new ControllerRequestError(
        `cannot reach the controller at ${this.baseUrl}: ${describeFetchError(e as Error)}`,
        undefined,
      );
    }
    const text = await response.text();
    if (!response.ok) {
      let message = text;
      try {
        const parsed = JSON.parse(text) as { error?: unknown };
        if (typeof parsed.error === 'string') message = parsed.error;
      } catch {
        // not JSON: keep the text
      }
      throw new ControllerRequestError(
        `${path}: HTTP ${response.status}: ${message.slice(0, 500)}`,
        response.status,
      );
    }
    return JSON.parse(text) as unknown;
  }
}

/** fetch's own message ("fetch failed") hides why; the cause says it (ECONNREFUSED, a reset, a timeout). */
function describeFetchError(e: Error): string {
  const cause = e.cause;
  if (!(cause instanceof Error)) return e.message;
  const code = (cause as NodeJS.ErrnoException).code;
  return `${e.message} (${code !== undefined && !cause.message.includes(code) ? `${code}: ` : ''}${cause.message})`;
}
