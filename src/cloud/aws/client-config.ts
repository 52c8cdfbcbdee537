/** Static credentials (tests use dummy ones); production leaves them out and uses the SDK's credential chain. */
export interface StaticCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

/**
 * Settings shared by every AWS client fleetwise builds (S3, EC2, Pricing). Anything left out comes from the SDK's
 * standard configuration: the credential chain, AWS_REGION / AWS_PROFILE, AWS_MAX_ATTEMPTS.
 */
export interface AwsClientOptions {
  readonly region?: string;
  /** Overrides the endpoint from the environment (AWS_ENDPOINT_URL_<SERVICE>, then AWS_ENDPOINT_URL). */
  readonly endpoint?: string;
  readonly credentials?: StaticCredentials;
  /** SDK-level attempts per call (1 in tests, so an unimplemented moto call fails fast). */
  readonly maxAttempts?: number;
}

/**
 * The endpoint a client should use, following the SDK's "service-specific endpoints" convention: the service's own
 * variable (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL_PRICING, AWS_ENDPOINT_URL_SQS) wins over AWS_ENDPOINT_URL, and
 * AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true turns both off. We resolve it ourselves (the SDK would too) because S3 needs
 * to know whether a custom endpoint is in use: moto and other stand-ins only serve path-style bucket addressing.
 */
export function configuredEndpoint(
  serviceEnvId: 'S3' | 'EC2' | 'PRICING' | 'SQS',
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  if (env.AWS_IGNORE_CONFIGURED_ENDPOINT_URLS?.toLowerCase() === 'true') return undefined;
  const value = env[`AWS_ENDPOINT_URL_${serviceEnvId}`] ?? env.AWS_ENDPOINT_URL;
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

/** The constructor fields common to every client, with only the settings actually given (the SDK fills the rest). */
export function commonClientConfig(
  serviceEnvId: 'S3' | 'EC2' | 'PRICING' | 'SQS',
  options: AwsClientOptions,
  env: NodeJS.ProcessEnv = process.env,
): {
  region?: string;
  endpoint?: string;
  credentials?: StaticCredentials;
  maxAttempts?: number;
} {
  const endpoint = options.endpoint ?? configuredEndpoint(serviceEnvId, env);
  return {
    ...(options.region === undefined ? {} : { region: options.region }),
    ...(endpoint === undefined ? {} : { endpoint }),
    ...(options.credentials === undefined ? {} : { credentials: options.credentials }),
    ...(options.maxAttempts === undefined ? {} : { maxAttempts: options.maxAttempts }),
  };
}

/** The error code of an AWS SDK error (`name` for modeled and unmodeled service errors; `Code` on some older paths). */
export function awsErrorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const withCode = error as { Code?: unknown; name?: unknown };
  if (typeof withCode.Code === 'string') return withCode.Code;
  return typeof withCode.name === 'string' ? withCode.name : undefined;
}

export function awsHttpStatus(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const meta = (error as { $metadata?: { httpStatusCode?: unknown } }).$metadata;
  return typeof meta?.httpStatusCode === 'number' ? meta.httpStatusCode : undefined;
}

/**
 * Timeouts for an AWS client's HTTP handler. Without them the SDK waits forever on an endpoint that accepts a
 * connection and never answers, and so does whoever awaits the call (a controller's round, a worker's upload); with
 * them a stuck call fails and the SDK's retries (exponential backoff with jitter) take over.
 */
export interface ClientTimeouts {
  /** Establishing the TCP connection. */
  readonly connectTimeoutMs: number;
  /**
   * A whole request, from its first byte sent to its response headers: sending the request's body is part of it, so
   * a client that uploads large bodies (S3) needs far more than one that sends small requests.
   */
  readonly requestTimeoutMs: number;
  /** A connection without a byte in either direction for this long fails, mid-body too. */
  readonly idleTimeoutMs: number;
}

/** For the control-plane APIs (EC2, Pricing, SQS): their answers are small, 30 s is far beyond a healthy call. */
export const DEFAULT_API_TIMEOUTS: ClientTimeouts = {
  connectTimeoutMs: 5_000,
  requestTimeoutMs: 30_000,
  idleTimeoutMs: 30_000,
};

/** The `requestHandler` options of an SDK client that enforce these timeouts. */
export function timeoutHandlerOptions(timeouts: ClientTimeouts): {
  connectionTimeout: number;
  requestTimeout: number;
  throwOnRequestTimeout: true;
  socketTimeout: number;
} {
  return {
    connectionTimeout: timeouts.connectTimeoutMs,
    requestTimeout: timeouts.requestTimeoutMs,
    // Without it a request timeout is only a logged warning and the call goes on waiting.
    throwOnRequestTimeout: true,
    socketTimeout: timeouts.idleTimeoutMs,
  };
}
