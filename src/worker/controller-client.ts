import { readFileSync } from 'node:fs';
import { parseControllerAddress } from '../protocol/controller-address.js';
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
  /** Where requests go now: the controller's address, after any move to the one its address file names. */
  address?(): string;
}

/**
 * The agent's HTTP client for the worker protocol (src/protocol/worker-protocol.ts). Keeps the per-instance token
 * once registered.
 *
 * Given a controller address file (protocol/controller-address.ts: a local controller names it to the workers it
 * spawns), a request that fails is sent again at once to the address the file names when that is not the one it
 * went to: the controller restarted on another port, and the request never reached it (the old address has no
 * controller; the state directory's lock lets only one run). Any failure counts, an answer included: the old port may
 * be another program's by now.
 */
export class ControllerClient implements ControllerConnection {
  private instanceToken: string | undefined;
  private baseUrl: string;

  /**
   * `addressFile`: the controller address file a local controller names to the workers it spawns
   * (protocol/controller-address.ts); without one, the client keeps `baseUrl`.
   */
  constructor(
    baseUrl: string,
    private readonly timeoutMs = 10_000,
    private readonly addressFile?: string,
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

  address(): string {
    return this.baseUrl;
  }

  private async post(path: string, token: string, body: unknown): Promise<unknown> {
    try {
      return await this.postTo(this.baseUrl, path, token, body);
    } catch (e) {
      const moved = this.movedTo();
      if (moved === undefined) throw e;
      this.baseUrl = moved;
      return this.postTo(moved, path, token, body);
    }
  }

  /** The address file's address when it differs from the current one; undefined without a file or a usable one. */
  private movedTo(): string | undefined {
    if (this.addressFile === undefined) return undefined;
    let text: string;
    try {
      text = readFileSync(this.addressFile, 'utf8');
    } catch {
      return undefined; // not written yet, or gone: keep trying the address known
    }
    const address = parseControllerAddress(text);
    return address === undefined || address === this.baseUrl ? undefined : address;
  }

  private async postTo(baseUrl: string, path: string, token: string, body: unknown): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(`${baseUrl}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (e) {
      throw new ControllerRequestError(
        `cannot reach the controller at ${baseUrl}: ${describeFetchError(e as Error)}`,
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
