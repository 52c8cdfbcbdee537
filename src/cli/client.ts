import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { describeIssues } from '../core/validation.js';
import { writtenArraySize } from '../controller/job-spec/array.js';
import { JOB_SPEC_LIMITS } from '../controller/job-spec/spec.js';
import {
  clusterColocationSchema,
  clusterLatencySchema,
  clusterSchema,
  contextSchema,
  costsSchema,
  createdTokenSchema,
  dryRunSchema,
  healthFeaturesSchema,
  instanceSchema,
  jobDocumentSchema,
  jobListSchema,
  jobSummarySchema,
  reportSchema,
  teamTokenSchema,
  tokenListSchema,
  whySchema,
  type ClusterColocationResponse,
  type ClusterLatencyResponse,
  type ClusterResponse,
  type CostsResponse,
  type DryRunResponse,
  type InstanceResponse,
  type JobDocumentResponse,
  type JobListResponse,
  type JobSummaryResponse,
  type TeamTokenResponse,
  type WhyResponse,
} from './api-responses.js';
import { sendUntilAnswered } from './keyed-resend.js';
import { normalizeServer, resolveConnection, type ConnectionOptions } from './client-connection.js';
import { ApiError, apiErrorOf, ConnectionError, networkReason, safeJson } from './client-errors.js';
import { FETCH_BAD_PORT_REASON } from '../protocol/fetch-bad-ports.js';

/**
 * The HTTP client the `fleetwise` commands use to talk to a controller's API (src/controller/api). Every response is
 * checked against its shape in api-responses.ts.
 */

const DEFAULT_TIMEOUT_MS = 30_000;
/** A whole log streams for as long as it takes to read, up to this. */
const LOG_STREAM_TIMEOUT_MS = 30 * 60_000;
const UPLOAD_TIMEOUT_MS = 10 * 60_000;
/**
 * An array is answered once every job's spec is in the job archive, one object-store put each, so its answer may
 * take longer than a request's: the default time, plus this much per job (10,000 jobs: 30 s + 250 s).
 */
const ARRAY_SUBMISSION_MS_PER_JOB = 25;

/** How long /healthz may take to say whether the controller takes idempotency keys. */
const HEALTH_TIMEOUT_MS = 5000;
/** Answers after which a keyed submission is sent again: the controller restarting, or briefly unable to keep it. */
const RESENT_STATUSES = new Set([502, 503, 504]);
/** Sends of a dry run before giving up while the controller answers 502–504 (15 s of doubling waits by default). */
const DRY_RUN_ATTEMPTS = 5;
/** The longest wait a Retry-After asks for that is honoured: a longer one waits this long. */
const MAX_RETRY_AFTER_MS = 60_000;

/** How long to wait for a submission's answer: longer for an array. */
export function submissionTimeoutMs(spec: unknown): number {
  const size = writtenArraySize(spec);
  return size === undefined || !(size > 1)
    ? DEFAULT_TIMEOUT_MS
    : DEFAULT_TIMEOUT_MS + Math.min(size, JOB_SPEC_LIMITS.maxArraySize) * ARRAY_SUBMISSION_MS_PER_JOB;
}

/**
 * A submission's answer, and whether it took more than one send (an answer lost on the way): a `replayed` answer to a
 * resend is then most likely this command's own lost first send, not a submission from before.
 */
export type SubmittedJob = JobSummaryResponse & { readonly resent: boolean };

/** GET /v1/jobs/{id}/logs/parts: each run's part of a job's logs, oldest first. */
const logPartsSchema = z.looseObject({
  parts: z.array(z.looseObject({ name: z.string(), sizeBytes: z.number().int().nonnegative() })),
});
export type LogPartsResponse = z.output<typeof logPartsSchema>;

/** A token change's answer: the token, and a warning when the controller could not back the change up. */
const createdTokenAnswer = createdTokenSchema.extend({ warning: z.string().optional() });
const revokedTokenAnswer = teamTokenSchema.extend({ warning: z.string().optional() });

/** Jobs asked for in one request when listing them all. */
const JOBS_PAGE = 500;

export interface JobListFilter {
  readonly states?: readonly string[];
  readonly team?: string;
  /** Jobs still to end and those that ended since then: epoch seconds, an ISO 8601 time or an age like 24h. */
  readonly endedSince?: string;
  readonly withCost?: boolean;
  /** One page: at most this many, after the job `after`. */
  readonly limit?: number;
  readonly after?: string;
}

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

export class FleetwiseClient {
  readonly server: string;

  /** The wait before a lost keyed submission is sent again, doubling each time. */
  resendDelayMs = 1000;
  /** Whether the controller honours idempotency keys, once /healthz said. */
  private keysHonoured: boolean | undefined;
  /** Ends every request of this client when it aborts (a command's deadline), besides each request's own timeout. */
  private until: AbortSignal | undefined;

  constructor(
    server: string,
    private readonly token: string,
    private readonly fetchImpl: FetchLike = (input, init) => fetch(input, init),
    /** Where the address came from when it was not given, for the hint when the controller does not answer. */
    private readonly origin?: string,
    /**
     * The local state's admin-token file the token was read from, for the hint when the controller refuses it: that
     * controller may keep its state elsewhere (another --state-dir, a config's stateDir).
     */
    private readonly tokenFile?: string,
  ) {
    this.server = normalizeServer(server);
  }

  /** From command options, then the environment, then the local controller's state directory (resolveConnection). */
  static fromOptions(
    options: ConnectionOptions,
    env: NodeJS.ProcessEnv = process.env,
    cwd: string = process.cwd(),
  ): FleetwiseClient {
    const found = resolveConnection(options, env, cwd);
    return new FleetwiseClient(found.server, found.token, undefined, found.origin, found.tokenFile);
  }

  /**
   * What to add to a 401 when the token came from a local state's admin-token file: the controller answering at that
   * address keeps its state elsewhere (started with another --state-dir, or a config's stateDir), so its token is
   * another one.
   */
  private refusedTokenHint(status: number): string {
    if (status !== 401 || this.tokenFile === undefined) return '';
    return (
      ` (the token sent is the admin token in ${this.tokenFile}; the controller at ${this.server} may keep its ` +
      "state in another directory, its --state-dir or its config file's stateDir: run the command in or under " +
      'that directory, or pass --server and --token)'
    );
  }

  /**
   * This client with every request also ended once `signal` aborts: a command bound by a deadline (`wait --timeout`)
   * keeps it even when the controller stops answering, instead of waiting out each request's own timeout.
   */
  boundedBy(signal: AbortSignal): FleetwiseClient {
    const bounded = new FleetwiseClient(this.server, this.token, this.fetchImpl, this.origin, this.tokenFile);
    bounded.resendDelayMs = this.resendDelayMs;
    bounded.keysHonoured = this.keysHonoured;
    bounded.until = signal;
    return bounded;
  }

  /** A request's signal: its own timeout, and the client's bound when it has one. */
  private signalFor(timeoutMs: number): AbortSignal {
    const own = AbortSignal.timeout(timeoutMs);
    return this.until === undefined ? own : AbortSignal.any([own, this.until]);
  }

  /**
   * Submit a spec. With an idempotency key the submission is safe to send again (the controller answers a repeat
   * with the job(s) the first made), so one whose answer was lost (no answer in time, a dropped connection, the
   * controller restarting or briefly unable to make it durable: 502–504) is sent again, a few times, before giving up.
   */
  async submitJob(
    spec: unknown,
    options: {
      readonly idempotencyKey?: string | undefined;
      /** Told before each resend: why the answer was lost and how long until the next send. */
      readonly onResend?: (reason: string, delayMs: number) => void;
    } = {},
  ): Promise<SubmittedJob> {
    const key = options.idempotencyKey;
    const send = (): Promise<JobSummaryResponse> =>
      this.request('POST', '/v1/jobs', jobSummarySchema, {
        json: spec,
        timeoutMs: submissionTimeoutMs(spec),
        ...(key === undefined ? {} : { headers: { 'idempotency-key': key } }),
      });
    if (key === undefined) return { ...(await send()), resent: false };
    const { answer, resent } = await sendUntilAnswered(send, {
      firstDelayMs: this.resendDelayMs,
      isLost: (e): e is Error =>
        e instanceof ConnectionError || (e instanceof ApiError && RESENT_STATUSES.has(e.status)),
      honoursKeys: () => this.honoursKeys(),
      onResend: options.onResend,
      askedDelayMs: (e) =>
        e instanceof ApiError && e.retryAfterMs !== undefined
          ? Math.min(e.retryAfterMs, MAX_RETRY_AFTER_MS)
          : undefined,
    });
    return { ...answer, resent };
  }

  /**
   * Whether the controller honours submissions' idempotency keys: /healthz says so (every fleetwise that does says it
   * in every answer); a serving one that does not say it predates them. Undefined: no answer to go by yet.
   */
  private async honoursKeys(): Promise<boolean | undefined> {
    if (this.keysHonoured !== undefined) return this.keysHonoured;
    try {
      const health = await this.request('GET', '/healthz', healthFeaturesSchema, {
        acceptStatuses: [503],
        timeoutMs: HEALTH_TIMEOUT_MS,
      });
      if (health.idempotencyKeys === true) this.keysHonoured = true;
      else if (health.status === 'ok') this.keysHonoured = false;
      return this.keysHonoured;
    } catch {
      return undefined; // not answering now: asked again before the next send
    }
  }

  /**
   * Validate a spec on the controller and see what it would get now; nothing is created. A dry run changes nothing,
   * so one answered 502–504 (the controller restarting, its database briefly unavailable) is sent again, a few times,
   * after the wait its Retry-After asks for (else `resendDelayMs`, doubling), before giving up.
   */
  async dryRunJob(
    spec: unknown,
    options: {
      /** Told before each resend: why and how long until the next send. */
      readonly onResend?: (reason: string, delayMs: number) => void;
    } = {},
  ): Promise<DryRunResponse> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.request('POST', '/v1/jobs?dryRun=true', dryRunSchema, { json: spec });
      } catch (e) {
        if (!(e instanceof ApiError) || !RESENT_STATUSES.has(e.status) || attempt >= DRY_RUN_ATTEMPTS)
          throw e;
        const delayMs = Math.min(
          e.retryAfterMs ?? this.resendDelayMs * 2 ** (attempt - 1),
          MAX_RETRY_AFTER_MS,
        );
        options.onResend?.(e.message, delayMs);
        await sleep(delayMs);
      }
    }
  }

  async listJobs(filter: JobListFilter = {}): Promise<JobListResponse['jobs']> {
    return (await this.listAllJobs(filter)).jobs;
  }

  /**
   * Every job the filter selects, read a page at a time (the controller answers each page apart, so a long listing
   * never holds its loop for long), and with `endedSince` how many ended before it.
   */
  async listAllJobs(filter: JobListFilter = {}): Promise<JobListResponse> {
    const jobs: JobListResponse['jobs'] = [];
    let endedEarlier: number | undefined;
    let after: string | undefined;
    do {
      const page = await this.listJobsPage({
        ...filter,
        limit: JOBS_PAGE,
        ...(after === undefined ? {} : { after }),
      });
      jobs.push(...page.jobs);
      endedEarlier ??= page.endedEarlier;
      after = page.next;
    } while (after !== undefined);
    return { jobs, ...(endedEarlier === undefined ? {} : { endedEarlier }) };
  }

  /**
   * The jobs, and with `endedSince` how many of those the filter selects ended before it (not listed). With `withCost`
   * each job carries its cost so far (null when the controller cannot account costs).
   */
  async listJobsPage(filter: JobListFilter = {}): Promise<JobListResponse> {
    const query = new URLSearchParams();
    if (filter.states !== undefined && filter.states.length > 0) query.set('state', filter.states.join(','));
    if (filter.team !== undefined) query.set('team', filter.team);
    if (filter.endedSince !== undefined) query.set('endedSince', filter.endedSince);
    if (filter.withCost === true) query.set('withCost', 'true');
    if (filter.limit !== undefined) query.set('limit', String(filter.limit));
    if (filter.after !== undefined) query.set('after', filter.after);
    return this.request('GET', withQuery('/v1/jobs', query), jobListSchema);
  }

  async getJob(id: string): Promise<JobDocumentResponse> {
    return this.request('GET', `/v1/jobs/${encodeURIComponent(id)}`, jobDocumentSchema);
  }

  async cancelJob(id: string): Promise<JobSummaryResponse> {
    return this.request('POST', `/v1/jobs/${encodeURIComponent(id)}/cancel`, jobSummarySchema);
  }

  /** Cancel every job not yet ended of the array the job belongs to; the jobs it cancelled. */
  async cancelArray(id: string): Promise<JobSummaryResponse[]> {
    return (
      await this.request(
        'POST',
        `/v1/jobs/${encodeURIComponent(id)}/cancel-array`,
        z.object({ cancelled: z.array(jobSummarySchema) }),
      )
    ).cancelled;
  }

  /** End a job as unsuccessful (stopped at a stage); its capacity is freed. */
  async markUnsuccessful(
    id: string,
    body: { readonly stage?: number; readonly reason?: string } = {},
  ): Promise<JobSummaryResponse> {
    return this.request('POST', `/v1/jobs/${encodeURIComponent(id)}/unsuccessful`, jobSummarySchema, {
      json: body,
    });
  }

  async why(id: string, limit?: number): Promise<WhyResponse> {
    const query = new URLSearchParams();
    if (limit !== undefined) query.set('limit', String(limit));
    return this.request('GET', withQuery(`/v1/jobs/${encodeURIComponent(id)}/why`, query), whySchema);
  }

  async logs(id: string): Promise<string> {
    return this.request('GET', `/v1/jobs/${encodeURIComponent(id)}/logs`, z.string(), { text: true });
  }

  /**
   * A job's whole log (each run headed `==> run <==`), handed to `write` as it arrives, never held whole: a multi-day
   * log streams through in one listing of the store. Returns how many bytes came.
   */
  async writeLogs(id: string, write: (chunk: Buffer) => void): Promise<number> {
    const path = `/v1/jobs/${encodeURIComponent(id)}/logs`;
    const what = `GET ${path}`;
    let response: Response;
    try {
      response = await this.fetchImpl(`${this.server}${path}`, {
        method: 'GET',
        headers: { authorization: `Bearer ${this.token}`, accept: 'text/plain' },
        signal: this.signalFor(LOG_STREAM_TIMEOUT_MS),
      });
    } catch (e) {
      throw this.unreached(what, e);
    }
    if (!response.ok)
      throw apiErrorOf(
        response,
        await response.text().catch(() => ''),
        what,
        this.refusedTokenHint(response.status),
      );
    let bytes = 0;
    try {
      for await (const chunk of response.body ?? []) {
        const buffer = Buffer.from(chunk);
        bytes += buffer.length;
        write(buffer);
      }
    } catch (e) {
      throw new ConnectionError(
        `the controller at ${this.server} (${what}) answered but its answer was cut off: ${networkReason(e)}`,
        { cause: e },
      );
    }
    return bytes;
  }

  /** Each run's part of a job's logs and its size so far (a controller before parts answers 404 or 501). */
  async logParts(id: string): Promise<LogPartsResponse> {
    return this.request('GET', `/v1/jobs/${encodeURIComponent(id)}/logs/parts`, logPartsSchema);
  }

  /** A part's bytes from `from` on, as many as the controller gives in one answer (empty: none past `from`). */
  async logBytes(id: string, part: string, from: number): Promise<Buffer> {
    const query = new URLSearchParams({ part, from: String(from) });
    return this.request(
      'GET',
      withQuery(`/v1/jobs/${encodeURIComponent(id)}/logs/bytes`, query),
      z.instanceof(Buffer),
      { binary: true },
    );
  }

  async cluster(): Promise<ClusterResponse> {
    return this.request('GET', '/v1/cluster', clusterSchema);
  }

  /** What the controller's scheduler learned of co-location (`table` null: it learns none). */
  async clusterColocation(): Promise<ClusterColocationResponse> {
    return this.request('GET', '/v1/cluster/colocation', clusterColocationSchema);
  }

  /** The measured round trips between instances; none from a controller that predates them (404). */
  async clusterLatency(): Promise<ClusterLatencyResponse> {
    try {
      return await this.request('GET', '/v1/cluster/latency', clusterLatencySchema);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return { pairs: [] };
      throw e;
    }
  }

  async drain(instanceId: string): Promise<InstanceResponse> {
    return this.request('POST', `/v1/instances/${encodeURIComponent(instanceId)}/drain`, instanceSchema);
  }

  async costs(since?: string, until?: string): Promise<CostsResponse> {
    const query = new URLSearchParams();
    if (since !== undefined) query.set('since', since);
    if (until !== undefined) query.set('until', until);
    return this.request('GET', withQuery('/v1/costs', query), costsSchema);
  }

  async writeReport(): Promise<string> {
    return (await this.request('POST', '/v1/reports', reportSchema)).location;
  }

  /**
   * A new team token (admin): the answer is the only place the token appears. `warning`: the controller could not
   * back the change up, and says what a restore would do.
   */
  async createToken(team: string, label?: string): Promise<z.output<typeof createdTokenAnswer>> {
    return this.request('POST', '/v1/tokens', createdTokenAnswer, {
      json: label === undefined ? { team } : { team, label },
    });
  }

  async listTokens(team?: string): Promise<TeamTokenResponse[]> {
    const query = new URLSearchParams();
    if (team !== undefined) query.set('team', team);
    return (await this.request('GET', withQuery('/v1/tokens', query), tokenListSchema)).tokens;
  }

  /** Revoke a team token (admin); `warning` as for createToken. */
  async revokeToken(id: string): Promise<z.output<typeof revokedTokenAnswer>> {
    return this.request('POST', `/v1/tokens/${encodeURIComponent(id)}/revoke`, revokedTokenAnswer);
  }

  /**
   * Upload a gzip-compressed tar build context; returns the reference to put in the spec's `build.context`. The
   * archive's sha256 goes with it: the controller stores the archive under it and checks the body against it.
   */
  async uploadContext(archive: Buffer): Promise<z.output<typeof contextSchema>> {
    const sha256 = createHash('sha256').update(archive).digest('hex');
    return this.request('POST', `/v1/contexts?sha256=${sha256}`, contextSchema, {
      bytes: archive,
      contentType: 'application/gzip',
      timeoutMs: UPLOAD_TIMEOUT_MS,
    });
  }

  /**
   * A request that got no answer. fetch refuses some ports outright (its bad ports): that is said as such, and not as
   * a ConnectionError, which commands that poll would wait through, as no later try can get through.
   */
  private unreached(what: string, e: unknown): Error {
    const reason = networkReason(e);
    const where = `cannot reach the controller at ${this.server} (${what})`;
    const found = this.origin === undefined ? '' : `; found as ${this.origin}`;
    if (reason === FETCH_BAD_PORT_REASON)
      return new Error(
        `${where}: port ${new URL(this.server).port} is one HTTP clients refuse (fetch's bad ports)${found}; ` +
          'start the controller on another port (--listen HOST:PORT) and reach it there',
        { cause: e },
      );
    const hint =
      found === '' ? '' : `${found}: is it running (npm start, or fleetwise controller --provider local)?`;
    return new ConnectionError(`${where}: ${reason}${hint}`, { cause: e });
  }

  private async request<S extends z.ZodType>(
    method: 'GET' | 'POST',
    path: string,
    schema: S,
    options: {
      readonly json?: unknown;
      readonly bytes?: Buffer;
      readonly contentType?: string;
      readonly text?: boolean;
      /** The answer's bytes as they are (a log's bytes may split a UTF-8 character). */
      readonly binary?: boolean;
      readonly timeoutMs?: number;
      readonly headers?: Readonly<Record<string, string>>;
      /** Error statuses whose body is read as an answer (/healthz's 503 still says what it serves). */
      readonly acceptStatuses?: readonly number[];
    } = {},
  ): Promise<z.output<S>> {
    // Errors name the route, not its query: a 400 names the parameter at fault in its details.
    const what = `${method} ${path.split('?')[0] ?? path}`;
    const headers: Record<string, string> = {
      ...options.headers,
      authorization: `Bearer ${this.token}`,
      accept: 'application/json',
    };
    let body: string | Uint8Array | undefined;
    if (options.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(options.json);
    } else if (options.bytes !== undefined) {
      headers['content-type'] = options.contentType ?? 'application/octet-stream';
      body = new Uint8Array(options.bytes);
    }
    let response: Response;
    try {
      response = await this.fetchImpl(`${this.server}${path}`, {
        method,
        headers,
        ...(body === undefined ? {} : { body }),
        signal: this.signalFor(options.timeoutMs ?? DEFAULT_TIMEOUT_MS),
      });
    } catch (e) {
      throw this.unreached(what, e);
    }
    let answer: Buffer;
    try {
      answer = Buffer.from(await response.arrayBuffer());
    } catch (e) {
      throw new ConnectionError(
        `the controller at ${this.server} (${what}) answered ${response.status} but its answer was cut off: ${networkReason(e)}`,
        { cause: e },
      );
    }
    // Decoded as response.text() would (a leading BOM dropped).
    const text = new TextDecoder().decode(answer);
    if (!response.ok && options.acceptStatuses?.includes(response.status) !== true)
      throw apiErrorOf(response, text, what, this.refusedTokenHint(response.status));
    const value = options.binary === true ? answer : options.text === true ? text : safeJson(text);
    const result = schema.safeParse(value);
    if (!result.success)
      throw new Error(
        `${what}: unexpected response from the controller (a different fleetwise version?):\n` +
          describeIssues(result.error)
            .slice(0, 10)
            .map((p) => `  - ${p}`)
            .join('\n'),
      );
    return result.data;
  }
}

function withQuery(path: string, query: URLSearchParams): string {
  const text = query.toString();
  return text === '' ? path : `${path}?${text}`;
}
