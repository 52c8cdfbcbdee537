import { dryRunSpotQuote, type DryRunSpotQuote } from './dry-run-spot.js';
import { ValidationError } from '../../core/validation.js';
import type { PriceBook } from '../../scheduler/reservation-price.js';
import { readSpecText, validateJobSpec, validateSpecText, type SpecText } from '../job-spec/parse.js';
import { jsonEnvNumbersAsWritten } from '../job-spec/env-text.js';
import { arraySubmissionSize, type JobSpec } from '../job-spec/spec.js';
import type { FamilyDemand } from '../../core/resources.js';
import type { EtaRecord } from '../queue-records.js';
import { parseBuildContextRef } from '../../protocol/object-keys.js';
import { NOT_UPLOADED } from '../artifacts.js';
import type { Principal } from './auth.js';
import { tooDeepProblem, tooDeepYamlProblem, type RequestBody } from './body.js';
import { HttpError } from './errors.js';
import type { ApiControllerService } from './routing.js';

/** How validation errors name the request body. */
export const SPEC_SOURCE = 'job spec';

/**
 * A YAML body read once: the depth of its text is checked before the YAML parser (which recurses) sees it, and the
 * depth of its value after (aliases can nest deeper than the text).
 */
function readYamlBody(text: string): SpecText {
  const tooDeep = tooDeepYamlProblem(text);
  if (tooDeep !== undefined) throw new ValidationError(SPEC_SOURCE, [tooDeep]);
  const read = readSpecText(text, SPEC_SOURCE);
  const deepValue = tooDeepProblem(read.value);
  if (deepValue !== undefined) throw new ValidationError(SPEC_SOURCE, [deepValue]);
  return read;
}

function isMap(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The validated spec of a submission. A team token submits for its own team: a spec without `team` gets it, a spec
 * naming another team is refused (403) rather than silently rewritten. YAML specs are validated from their text so
 * every problem names its line; JSON problems name the field path.
 */
export function specFromBody(
  body: RequestBody | undefined,
  principal: Principal,
  priceBook: PriceBook,
): JobSpec {
  if (body === undefined || body.kind === 'archive')
    throw new HttpError(
      body === undefined ? 400 : 415,
      'send the job spec as JSON (Content-Type: application/json) or YAML (Content-Type: application/yaml)',
    );
  const yaml = body.kind === 'yaml' ? readYamlBody(body.text) : undefined;
  const value =
    body.kind === 'json' ? jsonEnvNumbersAsWritten(body.text, body.value, SPEC_SOURCE) : yaml?.value;
  if (value === undefined || value === null)
    throw new ValidationError(SPEC_SOURCE, ['(root): the body is empty']);
  if (principal.kind === 'team' && isMap(value)) {
    const named = value['team'];
    if (named !== undefined && named !== principal.team)
      throw new HttpError(
        403,
        `this token submits for team ${principal.team}, but the spec names team ${JSON.stringify(named)}`,
      );
    if (named === undefined)
      return yaml === undefined
        ? validateJobSpec({ ...value, team: principal.team }, SPEC_SOURCE, priceBook)
        : validateSpecText(yaml, SPEC_SOURCE, priceBook, { team: principal.team });
  }
  return yaml === undefined
    ? validateJobSpec(value, SPEC_SOURCE, priceBook)
    : validateSpecText(yaml, SPEC_SOURCE, priceBook);
}

/**
 * Refuse a spec whose `build.context` is anything but a context the submitter uploaded (`POST /v1/contexts`'
 * reference, exactly as answered): a path would be a directory on the worker's host, which no user may make a worker
 * hash and run a task in, and another team's upload is that team's source, which its jobs would read. `fleetwise
 * submit` uploads a local directory and puts the reference in its place; a resubmission by the same team passes.
 */
export async function requireUploadedContexts(
  spec: JobSpec,
  principal: Principal,
  service: Pick<ApiControllerService, 'buildContextProblem'>,
): Promise<void> {
  const team = principal.kind === 'team' ? principal.team : undefined;
  const checked = new Map<string, Promise<string | undefined>>();
  const check = (ref: string): Promise<string | undefined> => {
    let problem = checked.get(ref);
    if (problem === undefined) {
      problem =
        parseBuildContextRef(ref) === undefined
          ? Promise.resolve(NOT_UPLOADED)
          : service.buildContextProblem === undefined
            ? Promise.resolve(NO_CONTEXTS)
            : service.buildContextProblem(ref, team);
      checked.set(ref, problem);
    }
    return problem;
  };
  const problems = await Promise.all(
    spec.tasks.map(async (task, i) => {
      if (task.build === undefined) return undefined;
      const problem = await check(task.build.context);
      return problem === undefined
        ? undefined
        : `tasks.${i}.build.context: ${JSON.stringify(task.build.context)} ${problem}`;
    }),
  );
  const refused = problems.filter((p): p is string => p !== undefined);
  if (refused.length > 0) throw new ValidationError(SPEC_SOURCE, refused);
}

const NO_CONTEXTS =
  'names a build context, which this controller does not accept; build and push the image, then use `image:` in the spec';

export interface DryRunTask {
  readonly name: string;
  readonly replicas: number;
  readonly demand: FamilyDemand;
  /** The cheapest instance type that hosts one replica alone (its reservation price, Eva §4.2). */
  readonly instanceType: string;
  /** That type's $/hour: what one replica costs at most, before packing. */
  readonly costPerHour: number;
}

/** What `POST /v1/jobs?dryRun=true` answers: the validated job and what it would get now. Nothing is stored. */
export interface DryRunView {
  readonly dryRun: true;
  readonly name: string;
  readonly team: string;
  readonly tasks: readonly DryRunTask[];
  /** Sum over replicas of the reservation prices: the job's $/hour alone, before packing. */
  readonly costPerHour: number;
  /**
   * The completion the controller predicts if the job were submitted now (held for its dependencies, it starts in
   * the prediction once they are predicted to have succeeded); null when it cannot predict one.
   */
  readonly eta: EtaRecord | null;
  /** What its submission would be warned about (as the job view's `warnings`): how it runs here, its run limits. */
  readonly warnings: readonly string[];
  /** The dependencies it would be held for: those that have not succeeded (absent when none). */
  readonly waitingFor?: readonly string[];
  /** Held for them: the earliest it could start by their predictions (as the job view's); null when unknown. */
  readonly startsNoEarlierThanSeconds?: number | null;
  /** An array: the jobs it would submit (each alike; the ETA is one of them submitted alone). */
  readonly arraySize?: number;
  /** The job alone at its hosts' cheapest spot prices, where the controller buys spot and the job may use it. */
  readonly spot?: DryRunSpotQuote;
}

/** What a dry run of a job held for its dependencies says besides its ETA. */
export interface DependencyHold {
  readonly waitingFor: readonly string[];
  readonly startsNoEarlierThanSeconds: number | null;
}

export function dryRunView(
  spec: JobSpec,
  priceBook: PriceBook,
  eta: EtaRecord | null,
  warnings: readonly string[],
  hold?: DependencyHold,
  spotMarket = false,
): DryRunView {
  const arraySize = arraySubmissionSize(spec);
  const spot = dryRunSpotQuote(spec, priceBook, spotMarket);
  const tasks = spec.tasks.map((t): DryRunTask => {
    // The spec was validated against this price book, so every demand has a type.
    const type = priceBook.minType(t.demand);
    if (type === undefined) throw new HttpError(400, `no instance type can host task ${t.name}`);
    return {
      name: t.name,
      replicas: t.replicas,
      demand: t.demand,
      instanceType: type.name,
      costPerHour: type.costPerHour,
    };
  });
  return {
    dryRun: true,
    name: spec.name,
    team: spec.team,
    tasks,
    costPerHour: tasks.reduce((sum, t) => sum + t.costPerHour * t.replicas, 0),
    eta,
    warnings,
    ...hold,
    ...(arraySize === undefined ? {} : { arraySize }),
    ...(spot === undefined ? {} : { spot }),
  };
}
