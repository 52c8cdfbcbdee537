import { z } from 'zod';

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

/**
 * The event's time bounds: EventBridge stamps its events now, so a time far outside these is a forged or broken
 * message. Checked here, not where it is used: a time a Date can hold but not one two minutes later (year 275760)
 * would otherwise throw while its batch is handled.
 */
const EARLIEST_EVENT_MS = Date.UTC(2000, 0, 1);
const LATEST_EVENT_MS = Date.UTC(2200, 0, 1);
// EventBridge's form: 2026-11-24T13:00:00Z (fractional seconds and an offset allowed).
const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/**
 * Whether the date and time as written exist on the calendar and clock: Date.parse rolls impossible ones over
 * (2026-02-30 is read as March 2), so the fields are built again and compared.
 */
function existsAsWritten(t: string): boolean {
  const m = ISO_DATE_TIME.exec(t);
  if (m === null) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const at = new Date(Date.UTC(year, month - 1, day, hour, minute, second));
  return (
    at.getUTCFullYear() === year &&
    at.getUTCMonth() === month - 1 &&
    at.getUTCDate() === day &&
    at.getUTCHours() === hour &&
    at.getUTCMinutes() === minute &&
    at.getUTCSeconds() === second
  );
}
const eventTime = z
  .string()
  .max(64)
  .superRefine((t, ctx) => {
    const ms = Date.parse(t);
    if (!ISO_DATE_TIME.test(t))
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        message: 'an ISO 8601 date-time like 2026-11-24T13:00:00Z',
      });
    else if (!(Number.isFinite(ms) && ms >= EARLIEST_EVENT_MS && ms < LATEST_EVENT_MS))
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'a real date between 2000 and 2200' });
    else if (!existsAsWritten(t))
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        message: `a date and time that exist (${t.slice(0, 19)} is not on the calendar)`,
      });
  });

const envelopeSchema = z.object({
  source: z.string(),
  'detail-type': z.string(),
  time: eventTime,
  detail: z.unknown(),
});
const spotDetailSchema = z.object({
  'instance-id': instanceId,
  'instance-action': z.enum(['terminate', 'stop', 'hibernate']),
});
const rebalanceDetailSchema = z.object({ 'instance-id': instanceId });

/** An EventBridge message body: the event, undefined when it is not an interruption, or a problem naming the field. */
export function parseInterruptionMessage(body: string): { event?: InterruptionEvent; problem?: string } {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return { problem: 'the body is not JSON' };
  }
  const envelope = envelopeSchema.safeParse(json);
  if (!envelope.success) return { problem: describe(envelope.error) };
  const { 'detail-type': detailType, time, detail, source } = envelope.data;
  if (source !== 'aws.ec2') return {};
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
  return {};
}

function describe(error: z.ZodError, prefix?: string): string {
  return error.issues
    .map(
      (i) =>
        `${[prefix, ...i.path.map(String)].filter((p) => p !== undefined).join('.') || '(body)'}: ${i.message}`,
    )
    .join('; ');
}
