import { errorSchema } from './api-responses.js';

/** The errors the API client (client.ts) throws, and how a failed answer or connection is told. */

/** An error response from the controller: status, its one-line reason and per-field details. */
export class ApiError extends Error {
  override name = 'ApiError';
  /** The message's first line: the request, the status and the reason (and the hint), without the details. */
  readonly headline: string;
  constructor(
    readonly status: number,
    readonly reason: string,
    readonly details: readonly string[],
    private readonly request: string,
    /** How long the controller asked to wait before asking again (its Retry-After), when it said. */
    readonly retryAfterMs?: number,
    /** What the client adds to the controller's reason (what may be wrong on this side). */
    private readonly hint = '',
  ) {
    const headline = `${request}: the controller answered ${status}: ${reason}${hint}`;
    super(`${headline}${details.map((d) => `\n  - ${d}`).join('')}`);
    this.headline = headline;
  }

  /**
   * This refusal with `lines` after its details (what the command had done before it): the same request, status,
   * reason, wait and hint (a 401's says which token was sent), so neither the text nor --json loses them.
   */
  withDetailsAdded(lines: readonly string[]): ApiError {
    return new ApiError(
      this.status,
      this.reason,
      [...this.details, ...lines],
      this.request,
      this.retryAfterMs,
      this.hint,
    );
  }
}

/**
 * The controller's refusal (its ApiError, kept as the cause) as a command tells it: naming what it was for (a file, a
 * job), with its details as the command words them (a spec file's with their lines), then lines the command adds
 * (what it had done already, how to send again). --json prints the first line as `error`, the details and the added
 * lines as `details`, next to the refusal's status and reason (src/cli/main.ts).
 */
export class NamedRefusal extends Error {
  override name = 'NamedRefusal';
  readonly headline: string;
  /** The refusal's details as worded here, then the added lines. */
  readonly details: readonly string[];
  constructor(
    what: string,
    refusal: ApiError,
    details: readonly string[] = refusal.details,
    added: readonly string[] = [],
  ) {
    const headline = `${what}: ${refusal.headline}`;
    super(
      `${headline}${details.map((d) => `\n  - ${d}`).join('')}${added.map((line) => `\n${line}`).join('')}`,
      { cause: refusal },
    );
    this.headline = headline;
    this.details = [...details, ...added];
  }
}

/**
 * A failure with no controller answer behind it (none came: the connection was lost), followed by what the command
 * adds on lines of their own (the jobs it had made, how to send again): --json keeps those apart as `details`, as it
 * does a refusal's.
 */
export class FailureWithLines extends Error {
  override name = 'FailureWithLines';
  constructor(
    readonly headline: string,
    readonly details: readonly string[],
    cause: unknown,
  ) {
    super([headline, ...details].join('\n'), { cause });
  }
}

/** `${what}: ` and the failure `e`, then `added` on lines of their own (kept apart for --json when there are any). */
export function failureWithLines(what: string, e: unknown, added: readonly string[]): Error {
  const headline = `${what}${e instanceof Error ? e.message : String(e)}`;
  return added.length === 0 ? new Error(headline, { cause: e }) : new FailureWithLines(headline, added, e);
}

/** The controller's error `error` is or wraps (commands name what an answer was for by wrapping it as the cause). */
export function apiErrorIn(error: unknown): ApiError | undefined {
  for (let cause = error; cause instanceof Error; cause = cause.cause)
    if (cause instanceof ApiError) return cause;
  return undefined;
}

/** No answer from the controller: not reached, the connection dropped, or no answer in time. */
export class ConnectionError extends Error {
  override name = 'ConnectionError';
}

/**
 * A failure a later try may not meet: the controller unreachable (restarting, a network blip) or a proxy in front of
 * it answering that it is (502–504). Commands that poll (`wait`, `logs --follow`, `jobs --watch`) go on through them.
 */
export function isTransientFailure(error: unknown): boolean {
  return (
    error instanceof ConnectionError ||
    (error instanceof ApiError && (error.status === 502 || error.status === 503 || error.status === 504))
  );
}

/** The controller's refusal as an ApiError: its JSON error and details, else the start of its text; then `hint`. */
export function apiErrorOf(response: Response, text: string, what: string, hint = ''): ApiError {
  const parsed = errorSchema.safeParse(safeJson(text));
  const reason = parsed.success ? parsed.data.error : text.trim().slice(0, 500) || response.statusText;
  return new ApiError(
    response.status,
    reason,
    parsed.success ? (parsed.data.details ?? []) : [],
    what,
    retryAfterMsOf(response.headers.get('retry-after')),
    hint,
  );
}

/** A Retry-After header's wait: whole seconds, or an HTTP date (RFC 9110 §10.2.3); undefined when absent or unreadable. */
function retryAfterMsOf(header: string | null): number | undefined {
  if (header === null) return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

export function safeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

export function networkReason(error: unknown): string {
  const e = error as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e.name === 'TimeoutError') return 'timed out';
  return e.cause?.code ?? e.cause?.message ?? e.message ?? String(error);
}
