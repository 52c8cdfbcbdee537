import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { parseControllerAddress } from '../protocol/controller-address.js';
import {
  desiredTaskSchema,
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

/** A desired task of a heartbeat's answer that this worker cannot use (a newer controller's action, a bad spec). */
export interface RefusedDesiredTask {
  /** Its place in the answer's `tasks`. */
  readonly index: number;
  /** The task it names, when its id is one; undefined: it names none this worker can tell. */
  readonly taskId: string | undefined;
  readonly error: z.ZodError;
}

/**
 * A heartbeat's answer: `tasks` holds only the desired tasks this worker can use, `refused` the others, each refused
 * alone so that one task it cannot use does not make it ignore the rest.
 */
export interface HeartbeatAnswer extends HeartbeatResponse {
  readonly refused?: readonly RefusedDesiredTask[];
}

/** The answer around its tasks, each of which is then validated alone (`desiredTaskSchema`). */
const heartbeatEnvelopeSchema = heartbeatResponseSchema.extend({ tasks: z.array(z.unknown()) });

export interface ControllerConnection {
  /** Register with `credential` as the bearer: what `request.identity` names (worker-protocol.ts). */
  register(credential: string, request: RegisterRequest): Promise<RegisterResponse>;
  /**
   * Report and take the answer. A ZodError: the answer as a whole is unusable (its envelope); a desired task that
   * is not goes to `refused`.
   */
  heartbeat(request: HeartbeatRequest): Promise<HeartbeatAnswer>;
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

  async heartbeat(request: HeartbeatRequest): Promise<HeartbeatAnswer> {
    if (this.instanceToken === undefined) throw new ControllerRequestError('not registered', undefined);
    const answer = heartbeatEnvelopeSchema.parse(
      await this.post(WORKER_ROUTES.heartbeat, this.instanceToken, request),
    );
    const tasks: HeartbeatResponse['tasks'] = [];
    const refused: RefusedDesiredTask[] = [];
    for (const [index, raw] of answer.tasks.entries()) {
      const parsed = desiredTaskSchema.safeParse(raw);
      if (parsed.success) tasks.push(parsed.data);
      else refused.push({ index, taskId: namedTask(raw), error: parsed.error });
    }
    return { ...answer, tasks, ...(refused.length === 0 ? {} : { refused }) };
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

/** The task id a desired task the worker refused names, when it is a valid one. */
function namedTask(raw: unknown): string | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const id = desiredTaskSchema.shape.taskId.safeParse((raw as { taskId?: unknown }).taskId);
  return id.success ? id.data : undefined;
}

/** fetch's own message ("fetch failed") hides why; the cause says it (ECONNREFUSED, a reset, a timeout). */
function describeFetchError(e: Error): string {
  const cause = e.cause;
  if (!(cause instanceof Error)) return e.message;
  const code = (cause as NodeJS.ErrnoException).code;
  return `${e.message} (${code !== undefined && !cause.message.includes(code) ? `${code}: ` : ''}${cause.message})`;
}
