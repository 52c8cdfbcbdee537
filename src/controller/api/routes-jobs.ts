import { z } from 'zod';
import { parseWith, ValidationError } from '../../core/validation.js';
import { submissionWarnings } from '../execution-check.js';
import { MAX_SUCCESS_STAGES } from '../../queue/success.js';
import { JOB_STATES, type JobRecord, type JobState } from '../state-store.js';
import { arrayJobSpec, pairedArrays, wholeArrayOf } from '../array-jobs.js';
import { isFinalJobState } from '../state/lifecycle.js';
import type { JobLogReader } from '../job-logs.js';
import { dependencyProblems, earliestStartSeconds, unmetOf } from '../job-dependencies.js';
import { predictedCompletionIn, readQueueRecord } from '../queue-records.js';
import { teamScope, type Principal } from './auth.js';
import { bodyOf, JSON_CONTENT_TYPE, YAML_CONTENT_TYPES } from './body.js';
import { freeText } from './free-text.js';
import { HttpError, notFound } from './errors.js';
import { keepAcceptedArray, keepAcceptedJob, keepAgain } from './kept-submission.js';
import { IDEMPOTENT_REPLAYED_HEADER, idempotencyKeyOf, KeyedSubmissions } from './keyed-submission.js';
import { requestHashOf, WITHDRAWN_AT_SUBMISSION } from '../submission-keys.js';
import { queryParameters } from './query.js';
import { sinceQueryParam } from './since.js';
import type { ApiContext, RouteTable } from './routing.js';
import { dryRunView, requireUploadedContexts, specFromBody } from './submission.js';
import { arraySubmissionSize, JOB_ID_PATTERN, type JobSpec } from '../job-spec/spec.js';
import { jobDocument, jobSummary, visibleJobIds, whyForScope, type JobDocument } from './views.js';
import { jobMarket, waitInWords } from '../explain.js';
import type { JobQueueView } from '../../queue/admission-views.js';
import { NO_CAPACITY } from '../../round/capacity-holds.js';
import type { WaitingEntry } from '../../scheduler/types.js';
import type { StateStore } from '../state-store.js';
import { MAX_WHY_DECISIONS } from '../../protocol/why-limit.js';

const idParams = z.object({ id: z.string().min(1).max(128) });

/** The most jobs one page of `GET /v1/jobs` holds. */
export const MAX_JOBS_PAGE = 1000;
/**
 * The page a listing without `limit` gets: a controller keeps every job it ran, and answering them all at once (11 MB
 * for 20,000 jobs) held its loop for about a second. Clients that need every job follow `next`.
 */
export const DEFAULT_JOBS_PAGE = 500;

/** `state=queued,running` or `state=queued&state=running`. */
const statesParam = z
  .union([z.string(), z.array(z.string())])
  .optional()
  .transform((v) => (v === undefined ? undefined : (Array.isArray(v) ? v : [v]).flatMap((s) => s.split(','))))
  .pipe(z.array(z.enum(JOB_STATES, { error: `expected one of ${JOB_STATES.join(', ')}` })).optional());

const listQuery = queryParameters(
  {
    state: statesParam,
    team: z.string().min(1).optional(),
    endedSince: z.string().min(1).max(64, 'at most 64 characters').optional(),
    limit: z.coerce
      .number()
      .int('a whole number')
      .min(1, 'at least 1')
      .max(MAX_JOBS_PAGE, `at most ${MAX_JOBS_PAGE}`)
      .default(DEFAULT_JOBS_PAGE),
    after: z
      .string()
      .regex(JOB_ID_PATTERN, 'expected a job id like job-12 (the last of the page before)')
      .optional(),
    withCost: z
      .enum(['true', 'false'], { error: 'expected true or false' })
      .optional()
      .transform((v) => v === 'true'),
  },
  { repeatable: ['state'] },
);
const submitQuery = queryParameters({
  dryRun: z
    .enum(['true', 'false'], { error: 'expected true or false' })
    .optional()
    .transform((v) => v === 'true'),
});
const unsuccessfulBody = z.strictObject({
  stage: z
    .number()
    .int('a whole number')
    .min(1, 'stages count from 1')
    .max(MAX_SUCCESS_STAGES, `at most ${MAX_SUCCESS_STAGES} (a job declares no more stages)`)
    .optional(),
  reason: freeText(500).optional(),
});
const whyQuery = queryParameters({
  limit: z.coerce.number().int().min(1).max(MAX_WHY_DECISIONS).default(20),
});

/**
 * What some job of a submission waits for, each once: the plain `dependsOn` every job of an array shares, and the job
 * of each index in the arrays it pairs with (N_TO_N). SEQUENTIAL adds only jobs of the array itself, which a dry run
 * does not make. Checking each array job's own list instead repeats the shared part once per job: for an array of 100
 * waiting for 10,000 jobs, a million store lookups that held the event loop for seconds.
 */
export function dependenciesOfEvery(spec: JobSpec, paired: readonly (readonly JobRecord[])[]): string[] {
  const ids = new Set(spec.dependsOn ?? []);
  const size = arraySubmissionSize(spec) ?? 0;
  for (let index = 0; index < size; index++)
    for (const jobs of paired) ids.add((jobs[index] as JobRecord).id);
  return [...ids];
}

/** The job if the caller may see it; a job of another team is "not found", exactly like a missing one. */
export function visibleJob(context: ApiContext, principal: Principal, id: string): JobRecord {
  const job = context.service.store.getJob(id);
  const team = teamScope(principal);
  if (job === undefined || (team !== undefined && job.team !== team)) throw notFound('job', id);
  return job;
}

/** A queued job's wait in the controller's latest round, as its views answer it (`latestWait`). */
export interface LatestWaitView {
  /** The wait in words, as `fleetwise why` words a round's (`kept waiting: <summary>`). */
  readonly summary: string;
  /** The round's `waiting` entry: the queue's line, or the cap's name. */
  readonly cap: string;
  readonly capName?: string;
  readonly brokenAlone?: readonly string[];
  /** The latest recorded round lists the same wait: the job's decision records already say it. */
  readonly recorded: boolean;
}

/** `GET /v1/jobs/{id}`: the job's document, with its wait in the latest round. */
export type JobDocumentAnswer = JobDocument & { readonly latestWait: LatestWaitView | null };

/**
 * The job's wait in the latest round, planned or not, or null when that round did not keep it waiting. Only a queued
 * job waits: one placed since (between rounds, on capacity already paid for) is still listed until the next round.
 */
function latestWaitView(
  store: StateStore,
  job: JobRecord,
  waits: ReadonlyMap<string, WaitingEntry>,
): LatestWaitView | null {
  const wait = job.state === 'queued' ? waits.get(job.id) : undefined;
  if (wait === undefined) return null;
  const recorded =
    store.latestRound()?.decision.waiting.some((w) => w.jobId === job.id && w.cap === wait.cap) === true;
  return {
    summary: waitInWords(wait.cap, wait.brokenAlone?.join(', ') ?? wait.capName),
    cap: wait.cap,
    ...(wait.capName === undefined ? {} : { capName: wait.capName }),
    ...(wait.brokenAlone === undefined ? {} : { brokenAlone: wait.brokenAlone }),
    recorded,
  };
}

/**
 * The job's place in the queue as its views show it. A job the latest round held for capacity was out of admission,
 * so its recorded place is an earlier round's (`admitted`, for one that then walked every type to a refusal): it is
 * shown waiting for capacity instead, since the later of that place and the job's last change (its return to the
 * queue), the hold's own start being kept nowhere.
 */
function shownQueue(
  view: JobQueueView | null,
  job: JobRecord,
  wait: WaitingEntry | undefined,
): JobQueueView | null {
  if (view === null || job.state !== 'queued' || wait?.capName !== NO_CAPACITY) return view;
  return {
    ...view,
    status: 'waiting',
    position: null,
    reason: null,
    detail: waitInWords(wait.cap, wait.capName),
    sinceSeconds: Math.max(view.sinceSeconds, job.updatedAtSeconds),
  };
}

export function registerJobRoutes(routes: RouteTable, context: ApiContext): void {
  const { service } = context;
  const store = service.store;
  const taskCount = (jobId: string): number => store.listTasks({ jobId }).length;
  const predicting = (): boolean => service.predictionsEnabled === true;
  // The latest round's waits by job, planned or not: a round with nothing to plan records none, so a job held for
  // capacity on an otherwise idle cluster is in these alone.
  const latestWaits = (): ReadonlyMap<string, WaitingEntry> =>
    new Map(
      (service.latestWaiting?.() ?? store.latestRound()?.decision.waiting ?? []).map((w) => [w.jobId, w]),
    );
  const keyed = new KeyedSubmissions(
    store,
    (jobs, key) => keepAgain(service, jobs, key),
    (jobs) =>
      service.cancelMany(
        jobs.map((j) => j.id),
        `${WITHDRAWN_AT_SUBMISSION}: the rest of its submission was withdrawn`,
      ),
  );

  routes.add({
    method: 'POST',
    url: '/v1/jobs',
    access: 'any',
    takesBody: true,
    bodyTypes: [JSON_CONTENT_TYPE, YAML_CONTENT_TYPES[0]],
    query: submitQuery,
    handler: async (request, reply, { dryRun }) => {
      const principal = context.principal(request);
      const spec = specFromBody(bodyOf(request.body), principal, context.priceBook);
      // A dry run checks what a submission would: its build contexts (`fleetwise submit` uploads them before it
      // dry-runs any file, so a context refused here refuses the command before it submits anything), its
      // dependencies, and its Idempotency-Key (which it records nothing under).
      await requireUploadedContexts(spec, principal, service);
      const key = idempotencyKeyOf(request.raw);
      if (dryRun) {
        // An array's jobs are checked as a submission checks them; it is predicted as its first job, with what that
        // one would wait for.
        const paired = pairedArrays(spec, spec.team, store);
        if (paired.problems.length > 0) throw new ValidationError('job spec', paired.problems);
        const one =
          arraySubmissionSize(spec) === undefined ? spec : arrayJobSpec(spec, 0, paired.arrays, undefined);
        const problems = dependencyProblems(
          { ...spec, dependsOn: dependenciesOfEvery(spec, paired.arrays) },
          spec.team,
          store,
        );
        if (problems.length > 0) throw new ValidationError('job spec', problems);
        // Refused or warned about as its submission would be (an array's jobs differ only in their index).
        const warnings = service.submissionWarnings?.(one) ?? submissionWarnings(one, undefined);
        // Held for its dependencies, the job is predicted held (it starts once they are predicted to succeed), and
        // the view says what it waits for and the earliest their predictions let it start.
        const waitingFor = unmetOf(one.dependsOn, store);
        const eta = (await service.estimate?.(one)) ?? null;
        if (waitingFor.length > 0)
          return dryRunView(
            spec,
            context.priceBook,
            eta,
            warnings,
            {
              waitingFor,
              startsNoEarlierThanSeconds:
                earliestStartSeconds(one.dependsOn, store, predictedCompletionIn(store)) ?? null,
            },
            service.spotMarket === true,
          );
        return dryRunView(spec, context.priceBook, eta, warnings, undefined, service.spotMarket === true);
      }
      const array = arraySubmissionSize(spec) !== undefined;
      const submissionKey =
        key === undefined ? undefined : { team: spec.team, key, requestHash: requestHashOf(spec) };
      const { jobs, replayed } = await keyed.submit(submissionKey, async ({ inCommit, withdrawn }) => {
        const made = array
          ? service.submitArray(spec, spec.team, inCommit)
          : [
              service.submitBatched === undefined
                ? service.submit(spec, spec.team, inCommit)
                : await service.submitBatched(spec, spec.team, inCommit),
            ];
        const kept = array
          ? keepAcceptedArray(service, made, submissionKey)
          : keepAcceptedJob(service, made[0] as JobRecord, submissionKey);
        await kept.catch((e: unknown) => {
          withdrawn();
          throw e;
        });
        return made;
      });
      const first = jobs[0] as JobRecord;
      reply.code(201).header('location', `/v1/jobs/${first.id}`);
      if (replayed) reply.header(IDEMPOTENT_REPLAYED_HEADER, 'true');
      const summary = {
        ...jobSummary(first, taskCount(first.id), store, predicting()),
        ...(replayed ? { replayed: true } : {}),
      };
      if (!array) return reply.send(summary);
      const waiting = jobs.map((j) => unmetOf(j.spec.dependsOn, store));
      return reply.send({
        ...summary,
        arrayJobIds: jobs.map((j) => j.id),
        // What each waits for (SEQUENTIAL and N_TO_N give each its own), when one waits at all.
        ...(waiting.some((w) => w.length > 0) ? { arrayWaitingFor: waiting } : {}),
      });
    },
  });

  routes.add({
    method: 'GET',
    url: '/v1/jobs',
    access: 'any',
    query: listQuery,
    handler: async (request, _reply, query) => {
      const scope = teamScope(context.principal(request));
      // Refused, not answered with no jobs: "none of team alpha's jobs" would be a false statement about alpha.
      if (scope !== undefined && query.team !== undefined && query.team !== scope)
        throw new HttpError(
          403,
          `this token is for team ${scope}: it sees that team's jobs only, not those of team ${JSON.stringify(query.team)}`,
        );
      const states: readonly JobState[] | undefined = query.state;
      const team = scope ?? query.team;
      const endedSince =
        query.endedSince === undefined ? undefined : sinceQueryParam('endedSince', query.endedSince);
      const { limit } = query;
      // One more than asked: whether there is a next page.
      const page = store.listJobs({
        states,
        team,
        endedSince,
        afterId: query.after,
        limit: limit + 1,
      });
      const more = page.length > limit;
      const jobs = more ? page.slice(0, limit) : page;
      const costOf = query.withCost
        ? jobCosts(
            () =>
              service.costsOfJobs === undefined
                ? new Map(service.costs().byJob.map((line) => [line.id, line.cost]))
                : service.costsOfJobs(jobs.map((j) => j.id)),
            (e) => request.log.warn(e, 'jobs listed without their costs: the cost accounting failed'),
          )
        : undefined;
      const waits = latestWaits();
      return {
        jobs: jobs.map((j) => {
          const summary = jobSummary(j, taskCount(j.id), store, predicting());
          return {
            ...summary,
            queue: shownQueue(summary.queue, j, waits.get(j.id)),
            ...(costOf === undefined ? {} : { cost: costOf(j.id) }),
          };
        }),
        // The last job listed, to ask for the page after it.
        ...(more ? { next: jobs.at(-1)?.id } : {}),
        // What the window left out, so a listing can say that there is more.
        ...(endedSince === undefined
          ? {}
          : {
              endedEarlier: store.countJobs({ states, team }) - store.countJobs({ states, team, endedSince }),
            }),
      };
    },
  });

  routes.add({
    method: 'GET',
    url: '/v1/jobs/:id',
    access: 'any',
    handler: async (request) => {
      const { id } = parseWith(idParams, request.params, 'path');
      const job = visibleJob(context, context.principal(request), id);
      const document = jobDocument(store, job, predicting());
      const waits = latestWaits();
      const answer: JobDocumentAnswer = {
        ...document,
        queue: shownQueue(document.queue, job, waits.get(job.id)),
        latestWait: latestWaitView(store, job, waits),
      };
      return answer;
    },
  });

  routes.add({
    method: 'POST',
    url: '/v1/jobs/:id/cancel',
    access: 'any',
    handler: async (request) => {
      const { id } = parseWith(idParams, request.params, 'path');
      visibleJob(context, context.principal(request), id);
      const job = service.cancel(id);
      return jobSummary(job, taskCount(job.id), store, predicting());
    },
  });

  routes.add({
    method: 'POST',
    url: '/v1/jobs/:id/cancel-array',
    access: 'any',
    handler: async (request) => {
      const { id } = parseWith(idParams, request.params, 'path');
      const job = visibleJob(context, context.principal(request), id);
      const array = wholeArrayOf(store, job);
      // A well-formed request about a job that is not what it asks for, as cancelling an ended job is.
      if ('problem' in array) throw new HttpError(409, `${array.problem}: cancel it by its id`);
      // Its jobs that already ended stay as they ended.
      const cancelled = service.cancelMany(
        array.jobs.filter((j) => !isFinalJobState(j.state)).map((j) => j.id),
        'cancelled by request, with the rest of its array',
      );
      return { cancelled: cancelled.map((j) => jobSummary(j, taskCount(j.id), store, predicting())) };
    },
  });

  routes.add({
    method: 'POST',
    url: '/v1/jobs/:id/unsuccessful',
    access: 'any',
    takesBody: true,
    handler: async (request) => {
      const { id } = parseWith(idParams, request.params, 'path');
      visibleJob(context, context.principal(request), id);
      if (service.markUnsuccessful === undefined)
        throw new HttpError(501, 'this controller cannot end jobs as unsuccessful');
      const body = bodyOf(request.body);
      if (body !== undefined && body.kind !== 'json')
        throw new HttpError(415, 'send the stage and reason as application/json (or no body)');
      const options = parseWith(unsuccessfulBody, body?.value ?? {}, 'body');
      const job = service.markUnsuccessful(id, options);
      return jobSummary(job, taskCount(job.id), store, predicting());
    },
  });

  routes.add({
    method: 'GET',
    url: '/v1/jobs/:id/why',
    access: 'any',
    query: whyQuery,
    handler: async (request, _reply, { limit }) => {
      const { id } = parseWith(idParams, request.params, 'path');
      const principal = context.principal(request);
      const job = visibleJob(context, principal, id);
      const records = service.why(job.id, limit);
      const waits = latestWaits();
      return {
        jobId: job.id,
        state: job.state,
        records: whyForScope(records, visibleJobIds(store, teamScope(principal))),
        market: jobMarket(store, job),
        // Its place in the queue now: what says why it waits when no recorded round has (nothing was planned).
        queue: isFinalJobState(job.state)
          ? null
          : shownQueue(readQueueRecord(store, job.id)?.queue ?? null, job, waits.get(job.id)),
        // Newer than every record when the latest round had nothing else to plan (it recorded none).
        latestWait: latestWaitView(store, job, waits),
      };
    },
  });

  routes.add({
    method: 'GET',
    url: '/v1/jobs/:id/logs',
    access: 'any',
    handler: async (request, reply) => {
      const { id } = parseWith(idParams, request.params, 'path');
      visibleJob(context, context.principal(request), id);
      if (service.jobLogs === undefined)
        throw new HttpError(
          501,
          'no worker yet: task logs are collected by the worker agent into the object store, which this controller lacks',
        );
      const reader = service.jobLogReader?.(id);
      const text = reader === undefined ? await service.jobLogs(id) : await reader.text();
      return reply.type('text/plain; charset=utf-8').send(text);
    },
  });

  /** What a follower needs to fetch only what is new: each run's part and its size so far. */
  routes.add({
    method: 'GET',
    url: '/v1/jobs/:id/logs/parts',
    access: 'any',
    handler: async (request) => {
      const { id } = parseWith(idParams, request.params, 'path');
      visibleJob(context, context.principal(request), id);
      return { parts: await jobLogReader(id).parts() };
    },
  });

  routes.add({
    method: 'GET',
    url: '/v1/jobs/:id/logs/bytes',
    access: 'any',
    query: logBytesQuery,
    handler: async (request, reply, { part, from }) => {
      const { id } = parseWith(idParams, request.params, 'path');
      visibleJob(context, context.principal(request), id);
      const bytes = await jobLogReader(id).readPart(part, from, MAX_LOG_BYTES_READ);
      if (bytes === undefined) throw notFound('log part', part);
      return reply.type('application/octet-stream').send(bytes);
    },
  });

  function jobLogReader(id: string): JobLogReader {
    const reader = service.jobLogReader?.(id);
    if (reader === undefined)
      throw new HttpError(501, 'this controller serves task logs only whole (GET /v1/jobs/{id}/logs)');
    return reader;
  }
}

/**
 * A run's name as workers write it (protocol/object-keys.ts taskLogRunName): `<start ms, 14 digits>-<task>-<instance>
 * .log`, where task and instance ids are of the worker protocol's alphabet. Anything else names no part, and letting
 * it through reaches the object store's key check (control characters, backslashes) as a server error.
 */
const LOG_PART_NAME = /^\d{14}-[A-Za-z0-9][A-Za-z0-9._:-]*\.log$/;

/** The most of a log part one request answers: a follower catching up on a long log asks again. */
export const MAX_LOG_BYTES_READ = 4 * 1024 * 1024;

const logBytesQuery = queryParameters({
  part: z
    .string()
    .max(512, 'at most 512 characters')
    .regex(LOG_PART_NAME, 'expected a part name like 01712345678901-job-7.0-inst-3.log'),
  from: z.coerce
    .number()
    .int('a whole number')
    .min(0, 'at least 0')
    .max(Number.MAX_SAFE_INTEGER, 'too large')
    .default(0),
});

/**
 * Each job's cost so far from the controller's cost accounting (0 for a job not yet charged), or null for every job
 * when the controller cannot account costs: a listing does not fail for want of its cost column.
 */
function jobCosts(
  costs: () => ReadonlyMap<string, number>,
  failed: (error: unknown) => void,
): (jobId: string) => number | null {
  let byJob: ReadonlyMap<string, number> | undefined;
  try {
    byJob = costs();
  } catch (e) {
    failed(e);
    byJob = undefined;
  }
  return (id) => (byJob === undefined ? null : (byJob.get(id) ?? 0));
}
