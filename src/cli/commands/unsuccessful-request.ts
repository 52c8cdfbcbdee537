import {
  ApiError,
  jobSummarySchema,
  normalizeServer,
  SERVER_ENV,
  TOKEN_ENV,
  type ConnectionOptions,
  type JobSummaryResponse,
} from '../client.js';

/**
 * `POST /v1/jobs/:id/unsuccessful` for `fleetwise job --mark-unsuccessful`. FleetwiseClient (src/cli/client.ts)
 * has no method for it yet, so this makes the one request the same way (same flags, environment and errors).
 */
export async function markUnsuccessful(
  options: ConnectionOptions,
  id: string,
  body: { readonly stage?: string; readonly reason?: string },
  env: NodeJS.ProcessEnv = process.env,
): Promise<JobSummaryResponse> {
  const server = options.server ?? env[SERVER_ENV];
  const token = options.token ?? env[TOKEN_ENV];
  if (server === undefined || server.trim() === '')
    throw new Error(
      `no controller address: pass --server URL or set ${SERVER_ENV} (e.g. http://10.0.0.5:8080)`,
    );
  if (token === undefined || token.trim() === '')
    throw new Error(`no API token: pass --token TOKEN or set ${TOKEN_ENV}`);
  let stage: number | undefined;
  if (body.stage !== undefined) {
    stage = Number(body.stage);
    if (!Number.isInteger(stage) || stage < 1)
      throw new Error(`--stage: expected a stage number ≥ 1, got ${body.stage}`);
  }
  const path = `/v1/jobs/${encodeURIComponent(id)}/unsuccessful`;
  const what = `POST ${path}`;
  let response: Response;
  try {
    response = await fetch(`${normalizeServer(server)}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token.trim()}`,
        accept: 'application/json',
        'content-type': 'application/json',
      },
      body: JSON.stringify({
        ...(stage === undefined ? {} : { stage }),
        ...(body.reason === undefined ? {} : { reason: body.reason }),
      }),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (e) {
    throw new Error(`cannot reach the controller at ${server} (${what}): ${(e as Error).message}`);
  }
  const text = await response.text();
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch {
    value = undefined;
  }
  if (!response.ok) {
    const error = value as { error?: unknown; details?: unknown } | undefined;
    const reason =
      typeof error?.error === 'string' ? error.error : text.trim().slice(0, 500) || response.statusText;
    const details = Array.isArray(error?.details)
      ? error.details.filter((d): d is string => typeof d === 'string')
      : [];
    throw new ApiError(response.status, reason, details, what);
  }
  const parsed = jobSummarySchema.safeParse(value);
  if (!parsed.success)
    throw new Error(`${what}: unexpected response from the controller (a different fleetwise version?)`);
  return parsed.data;
}
