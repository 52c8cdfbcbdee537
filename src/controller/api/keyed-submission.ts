import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import { parseWith, ValidationError } from '../../core/validation.js';
import type { SubmissionCommitHook } from '../service.js';
import { isFinalJobState } from '../state/lifecycle.js';
import type { JobRecord, StateStore } from '../state-store.js';
import {
  findSubmission,
  forgetSubmissionKey,
  IDEMPOTENCY_KEY_PATTERN,
  IDEMPOTENCY_KEY_RULE,
  recordSubmissionKey,
  SubmissionKeyReusedError,
  SubmissionKeyTakenError,
  wasWithdrawn,
  type SubmissionKey,
} from '../submission-keys.js';
import { HttpError } from './errors.js';

/** The request header carrying a submission's idempotency key (as Stripe's and the IETF draft's APIs name it). */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
/** Set on the answer to a submission sent again with its key: the jobs are those the first one made. */
export const IDEMPOTENT_REPLAYED_HEADER = 'idempotent-replayed';

const keyHeaders = z.object({
  [IDEMPOTENCY_KEY_HEADER]: z.string().regex(IDEMPOTENCY_KEY_PATTERN, IDEMPOTENCY_KEY_RULE).optional(),
});

/** The request's idempotency key, if it sent one (400 naming the header when it is not one, or came twice). */
export function idempotencyKeyOf(
  request: Pick<IncomingMessage, 'headers' | 'rawHeaders'>,
): string | undefined {
  // Node joins a repeated header's values with ', ', so two keys would otherwise be refused as one malformed key.
  const sent = request.rawHeaders.filter(
    (name, i) => i % 2 === 0 && name.toLowerCase() === IDEMPOTENCY_KEY_HEADER,
  ).length;
  if (sent > 1) throw new ValidationError('headers', [`${IDEMPOTENCY_KEY_HEADER}: give one Idempotency-Key`]);
  return parseWith(keyHeaders, request.headers, 'headers')[IDEMPOTENCY_KEY_HEADER];
}

/** What a submission needs to make its jobs: the hook recording its key, and what to call once it withdrew them. */
export interface SubmissionMaking {
  readonly inCommit: SubmissionCommitHook | undefined;
  /** The jobs were withdrawn (not made durable) and the client told to retry: the key must not answer for them. */
  readonly withdrawn: () => void;
}

export interface SubmissionOutcome {
  readonly jobs: readonly JobRecord[];
  /** The key had made these jobs before: nothing new was submitted. */
  readonly replayed: boolean;
}

/**
 * Submissions sent with an idempotency key (submission-keys.ts): the first makes its jobs and records the key in the
 * same transaction; the same key with the same spec is answered with those jobs; with another spec, 422. A retry that
 * arrives while the first is still being made durable (a client that timed out) waits for it, so it is never told
 * of jobs that are then withdrawn; one that finds jobs another run of the controller made (which may have stopped
 * between the commit and the archive) makes them durable first; one that finds them withdrawn submits anew.
 */
export class KeyedSubmissions {
  private readonly inFlight = new Map<string, Promise<SubmissionOutcome>>();
  /** This run of the API, written with each key it records (SubmissionKeyRecord.madeBy). */
  private readonly run = randomUUID();

  constructor(
    private readonly store: StateStore,
    /** Make jobs made earlier durable, withdrawing none: throws (a 503 to retry) when that fails. */
    private readonly keepAgain: (jobs: readonly JobRecord[], key: SubmissionKey) => Promise<void>,
    /** Withdraw the jobs of a submission found partly withdrawn (a stop in the middle of withdrawing it). */
    private readonly withdraw: (jobs: readonly JobRecord[]) => void,
  ) {}

  async submit(
    key: SubmissionKey | undefined,
    make: (making: SubmissionMaking) => Promise<readonly JobRecord[]>,
  ): Promise<SubmissionOutcome> {
    if (key === undefined)
      return { jobs: await make({ inCommit: undefined, withdrawn: () => {} }), replayed: false };
    const slot = `${key.team}\n${key.key}`;
    for (let earlier = this.inFlight.get(slot); earlier !== undefined; earlier = this.inFlight.get(slot))
      await earlier.catch(() => undefined);
    const outcome = this.replayOrFirst(key, make);
    this.inFlight.set(slot, outcome);
    try {
      return await outcome;
    } finally {
      this.inFlight.delete(slot);
    }
  }

  private async replayOrFirst(
    key: SubmissionKey,
    make: (making: SubmissionMaking) => Promise<readonly JobRecord[]>,
  ): Promise<SubmissionOutcome> {
    const replay = await this.replay(key);
    if (replay !== undefined) return replay;
    try {
      const jobs = await make({
        inCommit: (recorded) => recordSubmissionKey(this.store, key, recorded, { madeBy: this.run }),
        withdrawn: () => forgetSubmissionKey(this.store, key.team, key.key),
      });
      return { jobs, replayed: false };
    } catch (e) {
      if (e instanceof SubmissionKeyReusedError) throw reused(e);
      // Recorded between the look and the commit: answer that submission.
      if (e instanceof SubmissionKeyTakenError) return (await this.replay(key)) ?? Promise.reject(e);
      throw e;
    }
  }

  /** The jobs the key made before, made durable if they were not, if it made any (422 for another spec). */
  private async replay(key: SubmissionKey): Promise<SubmissionOutcome | undefined> {
    const earlier = findSubmission(this.store, key.team, key.key);
    if (earlier === undefined) return undefined;
    if (earlier.requestHash !== key.requestHash)
      throw reused(new SubmissionKeyReusedError(key.key, earlier.jobIds));
    const jobs = earlier.jobIds.flatMap((id) => this.store.getJob(id) ?? []);
    if (wasWithdrawn(this.store, earlier)) {
      const live = jobs.filter((j) => !isFinalJobState(j.state));
      if (live.length > 0) this.withdraw(live);
      forgetSubmissionKey(this.store, key.team, key.key);
      return undefined;
    }
    const made = jobs;
    // Recorded by an earlier run, which may have stopped before its archive writes.
    if (earlier.madeBy !== this.run) await this.keepAgain(made, key);
    return { jobs: made, replayed: true };
  }
}

/** A short reason; the details say what is wrong, naming the header as a refused field is named. */
function reused(e: SubmissionKeyReusedError): HttpError {
  return new HttpError(422, 'idempotency key reused', [`${IDEMPOTENCY_KEY_HEADER}: ${e.message}`]);
}
