import { z } from 'zod';
import { noticeTimeSchema } from '../protocol/notice-time.js';
import type { InterruptionNotice } from '../protocol/worker-protocol.js';
import { DEFAULT_IMDS_URL, MetadataServiceError } from './launch-credential.js';

/**
 * EC2's warnings that a spot instance is about to go, read from the instance metadata service (IMDSv2), as AWS
 * documents them and as Karpenter's node termination handler polls them:
 *
 *   /latest/meta-data/spot/instance-action                  404 until EC2 decides to reclaim the instance, then
 *                                                           {"action": "terminate"|"stop"|"hibernate", "time": ISO}
 *                                                           about two minutes before `time`
 *   /latest/meta-data/events/recommendations/rebalance      404 until EC2 sees the instance at elevated risk, then
 *                                                           {"noticeTime": ISO}; often well before any interruption
 *
 * AWS advises polling every 5 s; an on-demand instance answers 404 to both forever. The service's address is
 * configurable so tests serve the notices from a local HTTP server.
 */

export const SPOT_INSTANCE_ACTION_PATH = '/latest/meta-data/spot/instance-action';
export const REBALANCE_RECOMMENDATION_PATH = '/latest/meta-data/events/recommendations/rebalance';
export const DEFAULT_NOTICE_POLL_SECONDS = 5;

// The times are checked as the heartbeat and the interruption queue check them: a time the worker cannot read would
// leave its checkpoints no reclaim to finish by, and the controller would refuse the heartbeat carrying it.
const instanceActionSchema = z.object({
  action: z.enum(['terminate', 'stop', 'hibernate']),
  time: noticeTimeSchema,
});
const rebalanceSchema = z.object({ noticeTime: noticeTimeSchema });

/** Reads the notices once per call; undefined while there is none. */
export interface InterruptionNoticeSource {
  poll(): Promise<InterruptionNotice | undefined>;
}

export interface ImdsNoticeOptions {
  readonly imdsUrl?: string;
  readonly timeoutMs?: number;
}

/**
 * Polls the metadata service. A spot interruption wins over a rebalance recommendation (it is the later, stronger
 * notice); a malformed answer is a MetadataServiceError naming the path and the field, never a notice.
 */
export function imdsNoticeSource(options: ImdsNoticeOptions = {}): InterruptionNoticeSource {
  const base = (options.imdsUrl ?? DEFAULT_IMDS_URL).replace(/\/+$/, '');
  const timeoutMs = options.timeoutMs ?? 2000;
  let session: { token: string; expiresAtMs: number } | undefined;
  const request = async (
    method: 'PUT' | 'GET',
    path: string,
    headers: Record<string, string>,
  ): Promise<{ status: number; text: string }> => {
    try {
      const response = await fetch(`${base}${path}`, {
        method,
        headers,
        signal: AbortSignal.timeout(timeoutMs),
      });
      return { status: response.status, text: await response.text() };
    } catch (e) {
      throw new MetadataServiceError(
        `cannot reach the instance metadata service at ${base}: ${(e as Error).message}`,
      );
    }
  };
  const token = async (): Promise<string> => {
    // One IMDSv2 session for six hours at most; renewed a minute early.
    if (session !== undefined && Date.now() < session.expiresAtMs) return session.token;
    const answer = await request('PUT', '/latest/api/token', {
      'X-aws-ec2-metadata-token-ttl-seconds': '21600',
    });
    if (answer.status !== 200)
      throw new MetadataServiceError(
        `PUT ${base}/latest/api/token: HTTP ${answer.status}: ${answer.text.slice(0, 200)}`,
      );
    session = { token: answer.text, expiresAtMs: Date.now() + (21600 - 60) * 1000 };
    return session.token;
  };
  const read = async <T>(path: string, schema: z.ZodType<T>): Promise<T | undefined> => {
    const answer = await request('GET', path, { 'X-aws-ec2-metadata-token': await token() });
    if (answer.status === 404) return undefined;
    if (answer.status === 401) session = undefined; // expired or revoked: a new session at the next poll
    if (answer.status !== 200)
      throw new MetadataServiceError(
        `GET ${base}${path}: HTTP ${answer.status}: ${answer.text.slice(0, 200)}`,
      );
    let json: unknown;
    try {
      json = JSON.parse(answer.text);
    } catch {
      throw new MetadataServiceError(`GET ${base}${path}: not JSON: ${answer.text.slice(0, 200)}`);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success)
      throw new MetadataServiceError(
        `GET ${base}${path}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ')}`,
      );
    return parsed.data;
  };
  return {
    async poll() {
      const action = await read(SPOT_INSTANCE_ACTION_PATH, instanceActionSchema);
      if (action !== undefined)
        return { kind: 'spot-interruption', action: action.action, time: action.time };
      const rebalance = await read(REBALANCE_RECOMMENDATION_PATH, rebalanceSchema);
      if (rebalance !== undefined) return { kind: 'rebalance-recommendation', time: rebalance.noticeTime };
      return undefined;
    },
  };
}
