import { setTimeout as sleep } from 'node:timers/promises';

/** Sends of a keyed submission before giving up (its answer lost each time): 15 s of waits between them. */
const SUBMISSION_ATTEMPTS = 5;

export interface ResendPolicy {
  /** The wait before the first resend, doubling each time. */
  readonly firstDelayMs: number;
  /** Whether an error means the answer was lost (the submission may or may not have been made). */
  readonly isLost: (error: unknown) => error is Error;
  /** Whether the controller takes idempotency keys; undefined: it did not say (yet). */
  readonly honoursKeys: () => Promise<boolean | undefined>;
  /** Told before each resend: why the answer was lost and how long until the next send. */
  readonly onResend?: ((reason: string, delayMs: number) => void) | undefined;
  /** The wait the answer itself asked for (Retry-After), when it did: taken instead of the doubling one. */
  readonly askedDelayMs?: ((error: Error) => number | undefined) | undefined;
}

/**
 * Send a keyed submission until it is answered: one whose answer was lost is sent again, a few times, and only to a
 * controller that says it takes idempotency keys (one that predates them would make a second job of a resend; one
 * that does not answer yet is asked again before the next attempt). `resent`: the answer came to a resend.
 */
export async function sendUntilAnswered<T>(
  send: () => Promise<T>,
  policy: ResendPolicy,
): Promise<{ readonly answer: T; readonly resent: boolean }> {
  let lastLoss: Error | undefined;
  let unasked = false;
  for (let attempt = 1; attempt <= SUBMISSION_ATTEMPTS; attempt++) {
    if (lastLoss !== undefined) {
      const delayMs = policy.askedDelayMs?.(lastLoss) ?? policy.firstDelayMs * 2 ** (attempt - 2);
      policy.onResend?.(lastLoss.message, delayMs);
      await sleep(delayMs);
      const honoured = await policy.honoursKeys();
      if (honoured === false)
        throw new Error(
          `${lastLoss.message}\nnot sent again: this controller does not take idempotency keys, so the job may ` +
            'exist already (see fleetwise jobs) and a resend could run it twice',
          { cause: lastLoss },
        );
      unasked = honoured === undefined;
      if (unasked) continue;
    }
    try {
      return { answer: await send(), resent: lastLoss !== undefined };
    } catch (e) {
      if (!policy.isLost(e)) throw e;
      lastLoss = e;
    }
  }
  const loss = lastLoss as Error;
  if (!unasked) throw loss;
  throw new Error(`${loss.message}\nnot sent again: the controller's /healthz did not answer`, {
    cause: loss,
  });
}
