import { z } from 'zod';
import { noticeTimeSchema } from '../protocol/notice-time.js';

/**
 * EC2's interruption events as EventBridge delivers them (to an SQS queue, as Karpenter's `--interruption-queue`
 * reads them: research digest industry-anchors.md §1.4). Two kinds matter to fleetwise:
 *
 *   "EC2 Spot Instance Interruption Warning"   detail { instance-id, instance-action }, two minutes ahead
 *   "EC2 Instance Rebalance Recommendation"    detail { instance-id }
 *
 * Every other event on the queue (state-change notifications, AWS Health events a rule may also route there) is
 * recognised as not ours and acknowledged without effect: the reconciler's sync with the cloud sees those changes.
 */

export interface InterruptionEvent {
  readonly kind: 'spot-interruption' | 'rebalance-recommendation';
  /** The EC2 instance id (i-…). */
  readonly cloudInstanceId: string;
  /** When EventBridge says the event happened (ISO 8601, a real date between 2000 and 2200). */
  readonly time: string;
}

/** One message taken from the queue: what it says (or why it says nothing usable), and how to acknowledge it. */
export interface ReceivedInterruption {
  readonly messageId: string;
  /** The event; undefined for a message that is not an interruption (ignored) or is malformed (`problem`). */
  readonly event?: InterruptionEvent | undefined;
  /** Why the message could not be read, naming the field. */
  readonly problem?: string | undefined;
  /** What a well-formed event that is not an interruption is (its source and detail-type), to say what was dropped. */
  readonly ignored?: string | undefined;
  /** The queue's handle to delete the message once acted on. */
  readonly receipt: string;
}

/** Where the controller reads interruption events (an SQS queue on AWS). */
export interface InterruptionEventSource {
  /** Wait up to the source's long-poll time for messages (`signal` ends the wait early). */
  receive(signal?: AbortSignal): Promise<ReceivedInterruption[]>;
  /**
   * Delete acted-on (or unusable) messages so they are not delivered again. Returns the ones the queue did not
   * delete (they come back after their visibility timeout); throws when the request itself failed.
   */
  acknowledge(receipts: readonly string[]): Promise<readonly AcknowledgeFailure[]>;
}

/** A message the queue refused to delete, and why (its code and message). */
export interface AcknowledgeFailure {
  readonly receipt: string;
  readonly reason: string;
}

export const SPOT_INTERRUPTION_DETAIL_TYPE = 'EC2 Spot Instance Interruption Warning';
export const REBALANCE_DETAIL_TYPE = 'EC2 Instance Rebalance Recommendation';

const instanceId = z.string().regex(/^i-[0-9a-f]{8,32}$/, 'an EC2 instance id like i-0abc…');

const envelopeSchema = z.object({
  source: z.string(),
  'detail-type': z.string(),
  // EventBridge stamps its events now: checked as every notice time is (a real date between 2000 and 2200).
  time: noticeTimeSchema,
  detail: z.unknown(),
});
const spotDetailSchema = z.object({
  'instance-id': instanceId,
  'instance-action': z.enum(['terminate', 'stop', 'hibernate']),
});
const rebalanceDetailSchema = z.object({ 'instance-id': instanceId });

/**
 * An EventBridge message body: the event; what it is (`ignored`) when it is an event but not an interruption; or a
 * problem naming the field.
 */
export function parseInterruptionMessage(body: string): {
  event?: InterruptionEvent;
  problem?: string;
  ignored?: string;
} {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return { problem: 'the body is not JSON' };
  }
  const envelope = envelopeSchema.safeParse(json);
  if (!envelope.success) return { problem: describe(envelope.error) };
  const { 'detail-type': detailType, time, detail, source } = envelope.data;
  const ignored = { ignored: `${JSON.stringify(detailType)} from ${source}` };
  if (source !== 'aws.ec2') return ignored;
  if (detailType === SPOT_INTERRUPTION_DETAIL_TYPE) {
    const parsed = spotDetailSchema.safeParse(detail);
    if (!parsed.success) return { problem: describe(parsed.error, 'detail') };
    return { event: { kind: 'spot-interruption', cloudInstanceId: parsed.data['instance-id'], time } };
  }
  if (detailType === REBALANCE_DETAIL_TYPE) {
    const parsed = rebalanceDetailSchema.safeParse(detail);
    if (!parsed.success) return { problem: describe(parsed.error, 'detail') };
    return { event: { kind: 'rebalance-recommendation', cloudInstanceId: parsed.data['instance-id'], time } };
  }
  return ignored;
}

function describe(error: z.ZodError, prefix?: string): string {
  return error.issues
    .map(
      (i) =>
        `${[prefix, ...i.path.map(String)].filter((p) => p !== undefined).join('.') || '(body)'}: ${i.message}`,
    )
    .join('; ');
}
