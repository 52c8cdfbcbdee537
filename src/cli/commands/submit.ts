import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Command } from 'commander';
import { isNode } from 'yaml';
import { loadCatalogFile } from '../../cloud/catalog-file.js';
import { errnoCode } from '../../core/errno.js';
import { ValidationError } from '../../core/validation.js';
import {
  isSpecMap,
  readSpecText,
  validateJobSpec,
  validateSpecText,
} from '../../controller/job-spec/parse.js';
import { lineOf } from '../../controller/job-spec/problems.js';
import { writtenArraySize } from '../../controller/job-spec/array.js';
import { IDEMPOTENCY_KEY_PATTERN, IDEMPOTENCY_KEY_RULE } from '../../controller/submission-keys.js';
import { queueFieldsOf, warningsOf } from './job.js';
import { PriceBook } from '../../scheduler/reservation-price.js';
import { FleetwiseClient, type SubmittedJob } from '../client.js';
import { addConnectionOptions, type ConnectionOptions } from '../client-connection.js';
import { ApiError, ConnectionError, failureWithLines, NamedRefusal } from '../client-errors.js';
import type { DryRunResponse, JobSummaryResponse } from '../api-responses.js';
import { RESUBMISSION_KEY_PREFIX } from '../resubmission.js';
import { requireJobIds } from '../job-id-arguments.js';
import { formatIdList } from '../table.js';
import { terminalSafe, terminalSafeDeep } from '../terminal-text.js';
import { catalogHostingAnyDemand, withLines, type FieldPath } from '../spec-lines.js';
import { BuildContexts, type RawSpec } from '../submit-contexts.js';
import { formatDryRun } from '../dry-run-text.js';
import {
  arraySizeOption,
  checkChainAfterArrays,
  checkChainTeams,
  checkPerIndex,
  namedJob,
  standInIds,
  withArray,
  withDependencies,
  type PerIndexDependency,
} from '../submit-chain-rules.js';

interface SubmitOptions extends ConnectionOptions {
  readonly json?: boolean;
  readonly dryRun?: boolean;
  readonly catalog?: string;
  readonly dependsOn?: string[];
  readonly chain?: boolean;
  readonly array?: string;
  readonly perIndex?: boolean;
  readonly idempotencyKey?: string;
}

/** A spec without `team` is submitted for the token's team; this stands in for it in the local checks only. */
const LOCAL_TEAM_PLACEHOLDER = 'token-team';

/** `submit -` reads the spec from standard input (a `build:` directory is then relative to the working directory). */
const STDIN = '-';

/** How problems name a file. */
function sourceOf(file: string): string {
  return file === STDIN ? 'standard input' : file;
}

/**
 * The spec typed at a terminal, prompted for on stderr; under --json only when stderr is a terminal too (no script
 * reads it), as there stderr holds only the error (one JSON object).
 */
async function readStdin(json: boolean): Promise<string> {
  if (process.stdin.isTTY && (!json || process.stderr.isTTY))
    process.stderr.write('reading the job spec from standard input (end with Ctrl-D)\n');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** A spec file as read and checked locally. */
export interface CheckedSpecFile {
  /** The document as written, with what the command line sets in it: what is sent, as JSON. */
  readonly raw: RawSpec;
  /**
   * The line in the file of the field a problem names. The controller is sent JSON, so its problems name fields
   * alone; a field the command line set (`--array`, `--depends-on`) has a line only where the file wrote it.
   */
  readonly lineAt: (path: FieldPath, setByCommandLine?: ReadonlySet<string>) => number | undefined;
}

/**
 * Check a spec file locally (the controller's validation, with a team standing in for the token's where it names
 * none) so mistakes are reported with their line before anything is sent. Demands are checked for their form, not
 * their fit: the controller decides that by its own catalog (`dryRun`), or `catalog` (`--catalog`) when given.
 */
export async function checkSpecFile(
  file: string,
  /** What the command line changes in the spec (`--array`, `--depends-on`), checked with it. */
  prepare: (raw: RawSpec) => RawSpec = (raw) => raw,
  catalog?: GivenCatalog,
  /** --json: standard input typed at a terminal is prompted for only where no script reads stderr. */
  json = false,
): Promise<CheckedSpecFile> {
  const source = sourceOf(file);
  let text: string;
  try {
    text = file === STDIN ? await readStdin(json) : await readFile(file, 'utf8');
  } catch (e) {
    // A directory of specs (`submit examples/jobs/`) is a slip the shell's glob mends; EISDIR alone would not say so.
    if (errnoCode(e) === 'EISDIR')
      throw new ValidationError(source, [`is a directory: give spec files (e.g. ${join(file, '*.yaml')})`]);
    throw new ValidationError(source, [`cannot read: ${(e as Error).message}`]);
  }
  // Read once, as the controller reads spec text: a syntax error or repeated key is refused here with its line, and
  // an env value keeps the text written (1.10, 007) when the spec is sent on as JSON.
  const read = readSpecText(text, source);
  const { doc, lineCounter: counter, value: raw } = read;
  if (!isSpecMap(raw)) {
    // Not a map: the controller's validation says so, naming the line.
    validateSpecText(read, source, catalogHostingAnyDemand(raw), { team: LOCAL_TEAM_PLACEHOLDER });
    throw new ValidationError(source, ['(root): expected a job spec (a map with name, team and tasks)']);
  }
  const spec = prepare(raw as RawSpec);
  const written = raw as RawSpec;
  const lineAt = (path: FieldPath, setByCommandLine?: ReadonlySet<string>): number | undefined => {
    const top = path[0];
    if (typeof top === 'string' && (spec[top] !== written[top] || setByCommandLine?.has(top) === true)) {
      const node = doc.getIn(path, true);
      return isNode(node) && node.range != null ? counter.linePos(node.range[0]).line : undefined;
    }
    return lineOf(doc, counter, path);
  };
  if (spec === written)
    validateSpecText(read, source, catalogHostingAnyDemand(spec), { team: LOCAL_TEAM_PLACEHOLDER });
  else checkSpec(spec, source, lineAt);
  if (catalog !== undefined) {
    try {
      validateJobSpec({ team: LOCAL_TEAM_PLACEHOLDER, ...spec }, source, catalog.book);
    } catch (e) {
      if (!(e instanceof ValidationError)) throw e;
      throw new ValidationError(
        `${source} (checked against --catalog ${catalog.path}; the controller checks against its own)`,
        withLines(e.problems, lineAt),
      );
    }
  }
  return { raw: spec, lineAt };
}

/** The catalog `--catalog` names, which specs are checked against locally as well. */
interface GivenCatalog {
  readonly path: string;
  readonly book: PriceBook;
}

/** Check a spec as the controller would but for its fit, naming each problem's line in the file. */
function checkSpec(spec: RawSpec, source: string, lineAt: (path: FieldPath) => number | undefined): void {
  try {
    validateJobSpec({ team: LOCAL_TEAM_PLACEHOLDER, ...spec }, source, catalogHostingAnyDemand(spec));
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
    throw new ValidationError(e.source, withLines(e.problems, lineAt));
  }
}

export function registerSubmit(program: Command): void {
  addConnectionOptions(
    program
      .command('submit')
      .description('submit job specs (YAML or JSON) to the controller')
      .argument(
        '<file...>',
        'job spec files, e.g. examples/jobs/resnet.yaml; - reads one from standard input',
      )
      .option(
        '--json',
        'print one JSON object per job, one a line, instead of text: {"id", "name", "team", "state", ' +
          '"warnings", "waitingFor"}, with "array": {"index", "size"} for the jobs of an array and "replayed": ' +
          "true for those an earlier run with the idempotency key submitted; with --dry-run, each file's dry run " +
          'instead',
      )
      .option(
        '--catalog <file>',
        'also check demands against this catalog locally (the controller checks them against its own, which decides)',
      )
      .option(
        '--depends-on <ids>',
        "jobs (e.g. job-3, or job-3,job-4; repeatable) that must succeed before these start: added to each spec's " +
          'dependsOn',
        // One value each time (not a list running to the next option): `--depends-on job-3 b.yaml` keeps b.yaml a file.
        (ids: string, earlier: string[] | undefined) => [...(earlier ?? []), ids],
      )
      .option(
        '--array <size>',
        "submit each file as an array of this many jobs (AWS Batch's array jobs): alike but for the index their " +
          'tasks read from FLEETWISE_ARRAY_INDEX (and AWS_BATCH_JOB_ARRAY_INDEX); sets arrayProperties.size',
      )
      .option(
        '--chain',
        'a pipeline: each file waits for the one before it to succeed (added to its dependsOn as it is submitted)',
      )
      .option(
        '--per-index',
        'with --chain between arrays of one size: each job waits only for the job of its index in the array before ' +
          "(AWS Batch's N_TO_N), not for all of it",
      )
      .option(
        '--idempotency-key <key>',
        'make the submission safe to run again: run with the same key (after a crash, a lost answer), it answers the ' +
          'jobs the first run made instead of submitting them twice (several files: KEY/1, KEY/2, … each). Without ' +
          'it each file gets a key of its own, so a lost answer is asked again without a second copy',
      )
      .option(
        '--dry-run',
        "validate on the controller and show each task's instance type, $/hour and the ETA it would get now; submit " +
          'nothing (build: directories are uploaded, for the controller to check)',
      ),
  ).action(async (files: string[], options: SubmitOptions) => {
    if (files.filter((f) => f === STDIN).length > 1)
      throw new ValidationError('arguments', ['-: standard input can be read only once']);
    if (options.chain === true && options.dryRun === true)
      throw new ValidationError('--chain', [
        'a dry run submits nothing, so the later steps would wait for jobs that do not exist: check the files with ' +
          '--dry-run alone (each is predicted as if it were the first step)',
      ]);
    if (options.chain === true && files.length < 2)
      throw new ValidationError('--chain', ['a pipeline needs at least two files']);
    const catalog =
      options.catalog === undefined
        ? undefined
        : { path: options.catalog, book: new PriceBook(loadCatalogFile(options.catalog)) };
    // Check every file before submitting any, so a typo in the third file does not leave two jobs submitted: here
    // what can be checked without the controller, then each file on the controller (a dry run).
    const dependsOn = (options.dependsOn ?? []).flatMap((ids) => ids.split(',')).map((id) => id.trim());
    requireJobIds(dependsOn, '--depends-on');
    const array = options.array === undefined ? undefined : arraySizeOption(options.array);
    const checked: CheckedSpecFile[] = [];
    for (const file of files)
      checked.push(
        await checkSpecFile(
          file,
          (raw) => withDependencies(array === undefined ? raw : withArray(raw, array), dependsOn),
          catalog,
          options.json === true,
        ),
      );
    const specs = checked.map((c) => c.raw);
    // Each upload is told on stderr in text; under --json stderr holds only the error (one JSON object), and the
    // stored copy each spec points at is in the job's spec (`fleetwise job ID --json`).
    const contexts = new BuildContexts(
      options.json === true ? () => undefined : (line) => process.stderr.write(line),
    );
    for (const [i, file] of files.entries()) await contexts.check(specs[i] as RawSpec, file, sourceOf(file));
    const baseKey = options.idempotencyKey ?? randomUUID();
    const keys = submissionKeys(baseKey, files.length, options.idempotencyKey !== undefined);
    if (options.perIndex === true) checkPerIndex(files, specs, options.chain === true);
    else if (options.chain === true) checkChainAfterArrays(files, specs);
    if (options.chain === true) checkChainSteps(files, checked, options.perIndex === true);
    const client = FleetwiseClient.fromOptions(options);
    // Every file's build contexts are uploaded before any file is dry-run or submitted (an upload makes no job): the
    // controller refusing one (its size, its form) then leaves none submitted, and the dry runs check the references
    // the submissions send. A dry run uploads them too, so the controller checks them.
    const sent: RawSpec[] = [];
    for (const [i, file] of files.entries())
      sent.push(await contexts.upload(specs[i] as RawSpec, file, sourceOf(file), client));
    // The controller checks what only it knows: the token's team, dependencies, its catalog, its run limits, whether
    // the team may build from each context. A step of a chain is checked without the step before it, which does not
    // exist yet (checkChainSteps counted it).
    const teams: (string | undefined)[] = [];
    /**
     * The jobs this run made before it stopped on a refusal: a line on stderr before the error in text; under --json
     * lines the error adds (after its details, as resubmit's and cancel's), so stderr stays one JSON object.
     */
    /** How a resend is told: on stderr, but not under --json, where stderr holds only the error (one JSON object). */
    const told = (
      onResend: (reason: string, delayMs: number) => void,
    ): { onResend?: (reason: string, delayMs: number) => void } =>
      options.json === true ? {} : { onResend };
    const madeBefore = (jobs: readonly JobSummaryResponse[]): string[] => {
      const line = alreadySubmitted(jobs);
      if (line === undefined) return [];
      if (options.json === true) return [line];
      process.stderr.write(`${line}\n`);
      return [];
    };
    /**
     * Files the controller answered while they were checked: refused by their dry run, yet submitted by an earlier
     * run with this idempotency key (their dependency may have failed since), so their keyed submission is answered
     * with the jobs that run made, as a rerun promises.
     */
    const answered = new Map<number, SubmittedJob>();
    /** A dry run's views under --json, printed once every file passed: a file refused leaves stdout empty. */
    const views: DryRunResponse[] = [];
    // A step of a chain is sent waiting for the jobs of the step before it.
    const stepSpec = (i: number, previous: JobSummaryResponse | undefined): RawSpec =>
      options.chain !== true || previous === undefined
        ? (sent[i] as RawSpec)
        : options.perIndex === true
          ? withDependencies(sent[i] as RawSpec, [{ jobId: previous.id, type: 'N_TO_N' }])
          : withDependencies(sent[i] as RawSpec, previous.arrayJobIds ?? [previous.id]);
    for (const [i, file] of files.entries()) {
      let view: DryRunResponse;
      try {
        view = await client.dryRunJob(sent[i], told(sayDryRunResending(file)));
      } catch (e) {
        // A dry run cannot tell whether the key made this file's jobs before; its keyed submission can, and is sent
        // only for a file the controller refuses (a file it would take is never submitted before the others are
        // checked). Without an earlier submission under the key it is refused again, as the dry run was; a step of
        // a chain whose step before it was not answered so cannot be sent as the first run sent it.
        const refused = e instanceof ApiError && e.status >= 400 && e.status < 500;
        const previous = i === 0 || options.chain !== true ? undefined : answered.get(i - 1);
        if (
          !refused ||
          options.idempotencyKey === undefined ||
          options.dryRun === true ||
          (options.chain === true && i > 0 && previous === undefined)
        )
          throw refusedFile(file, e, checked[i] as CheckedSpecFile);
        let job: SubmittedJob;
        try {
          job = await client.submitJob(stepSpec(i, previous), {
            idempotencyKey: keys[i],
            ...told(sayResending(file)),
          });
        } catch (again) {
          const added = madeBefore([...answered.values()].filter(madeNow));
          throw refusedFile(file, again, checked[i] as CheckedSpecFile, added);
        }
        answered.set(i, job);
        teams.push(job.team);
        continue;
      }
      teams.push(view.team);
      if (options.dryRun !== true) continue;
      // Under --json each view is printed once every file passed, its warnings in its `warnings`.
      if (options.json === true) {
        views.push(view);
        continue;
      }
      process.stdout.write(formatDryRun(file, terminalSafeDeep(view)));
      // On stderr, as a submission's warnings are.
      for (const w of view.warnings) process.stderr.write(`warning: ${file}: ${terminalSafe(w)}\n`);
    }
    if (options.dryRun === true) {
      for (const view of views) process.stdout.write(`${JSON.stringify(view)}\n`);
      return;
    }
    if (options.chain === true) {
      try {
        checkChainTeams(files, teams);
      } catch (e) {
        const added = madeBefore([...answered.values()].filter(madeNow));
        if (added.length > 0 && e instanceof ValidationError)
          throw new ValidationError(e.source, [...e.problems, ...added]);
        throw e;
      }
    }
    const submitted: JobSummaryResponse[] = [];
    for (const [i, file] of files.entries()) {
      const previous = submitted.at(-1);
      let job: SubmittedJob;
      const early = answered.get(i);
      if (early !== undefined) job = early;
      else
        try {
          // A step after an array waits for every job of it.
          job = await client.submitJob(stepSpec(i, previous), {
            idempotencyKey: keys[i],
            ...told(sayResending(file)),
          });
        } catch (e) {
          const added = madeBefore(submitted);
          const lost = e instanceof ConnectionError || (e instanceof ApiError && e.status >= 500);
          // The same command with the same base key sends what this one did (each file's spec, its array and the
          // dependencies the chain gave it): the files already answered are answered again, the rest submitted once.
          if (lost)
            added.push(
              `to send it again without risking a second copy, run the same command with --idempotency-key ${baseKey}`,
            );
          throw refusedFile(file, e, checked[i] as CheckedSpecFile, added);
        }
      submitted.push(job);
      // Submitted by an earlier run with this key (not this run's own lost first send, answered again).
      const before = job.replayed === true && !job.resent;
      const warnings = warningsOf(job);
      const waitingFor = queueFieldsOf(job).waitingFor ?? [];
      const ids = job.arrayJobIds ?? [job.id];
      if (options.json === true)
        // One line per job; the jobs of an array are alike at submission but for their index.
        for (const [index, id] of ids.entries())
          process.stdout.write(
            `${JSON.stringify({
              id,
              name: job.name,
              team: job.team,
              state: job.state,
              warnings,
              waitingFor: job.arrayJobIds === undefined ? waitingFor : (job.arrayWaitingFor?.[index] ?? []),
              ...(job.arrayJobIds === undefined ? {} : { array: { index, size: ids.length } }),
              ...(before ? { replayed: true } : {}),
            })}\n`,
          );
      else {
        const pairedWith = options.perIndex === true ? previous?.arrayJobIds : undefined;
        const each = job.arrayWaitingFor ?? [];
        const alike = each.every((w) => w.join() === (each[0] ?? []).join());
        const waits =
          pairedWith !== undefined
            ? `, each waiting for the job of its index in ${pairedWith[0]} … ${pairedWith.at(-1)}`
            : !alike
              ? `, ${each.filter((w) => w.length > 0).length} of them waiting for their dependencies`
              : waitingFor.length === 0
                ? ''
                : `, waiting for ${formatIdList(waitingFor)}`;
        const what =
          job.arrayJobIds === undefined ? job.id : `${ids[0]} … ${ids.at(-1)}, an array of ${ids.length}`;
        process.stdout.write(
          terminalSafe(
            before
              ? `submitted before with this idempotency key: ${what} (${job.name}, team ${job.team}): ${job.state}\n`
              : `submitted ${what} (${job.name}, team ${job.team}): ${job.state}${waits}\n`,
          ),
        );
      }
      // Under --json each line's `warnings` carries them, and stderr holds only the error.
      if (options.json !== true)
        for (const w of warnings)
          process.stderr.write(
            terminalSafe(
              `warning: ${job.arrayJobIds === undefined ? job.id : `${ids[0]} … ${ids.at(-1)}`}: ${w}\n`,
            ),
          );
    }
  });
}

/** The jobs this command submitted before it stopped (an array by its first and last job); undefined for none. */
function alreadySubmitted(jobs: readonly JobSummaryResponse[]): string | undefined {
  if (jobs.length === 0) return undefined;
  return `already submitted: ${jobs.map((j) => (j.arrayJobIds === undefined ? j.id : `${j.arrayJobIds[0]} … ${j.arrayJobIds.at(-1)}`)).join(', ')}`;
}

/**
 * An answer of jobs this run made, not an earlier run with the key: a file its dry run refused is submitted only
 * when the controller takes it after all (its dry run and its submission each saw the state of their moment).
 */
function madeNow(job: SubmittedJob): boolean {
  return job.replayed !== true || job.resent;
}

/** What a resent dry run says on stderr. */
function sayDryRunResending(file: string): (reason: string, delayMs: number) => void {
  return (reason, delayMs) =>
    process.stderr.write(
      `${file}: checking it on the controller: ${terminalSafe(reason.split('\n')[0] ?? reason)}; asking again in ${delayMs / 1000} s\n`,
    );
}

/** What a resend of a lost answer says on stderr (the submission is keyed: no second copy is made). */
export function sayResending(what: string): (reason: string, delayMs: number) => void {
  return (reason, delayMs) =>
    process.stderr.write(
      `${what}: no answer (${terminalSafe(reason.split('\n')[0] ?? reason)}); sending it again in ${delayMs / 1000} s (with its idempotency key: never a second copy)\n`,
    );
}

/**
 * Each file's idempotency key: the base key given, or a random one, for one file; `BASE/n` for the n-th of several.
 * A random base still makes the client's own resends of a lost answer safe, and is printed when a send is given up.
 */
function submissionKeys(base: string, count: number, given: boolean): string[] {
  const keys = count === 1 ? [base] : Array.from({ length: count }, (_, i) => `${base}/${i + 1}`);
  if (!given) return keys;
  if (base.startsWith(RESUBMISSION_KEY_PREFIX))
    throw new ValidationError('--idempotency-key', [
      `${JSON.stringify(base)}: keys starting ${RESUBMISSION_KEY_PREFIX} are fleetwise resubmit's own`,
    ]);
  const bad = keys.find((k) => !IDEMPOTENCY_KEY_PATTERN.test(k));
  if (bad !== undefined)
    throw new ValidationError('--idempotency-key', [`${JSON.stringify(bad)}: ${IDEMPOTENCY_KEY_RULE}`]);
  return keys;
}

/**
 * Check each step of a chain as it will be submitted, waiting for the step before it, whose jobs do not exist yet:
 * ids standing in for them count as many (an array's size times what each of its jobs waits for is bounded).
 */
function checkChainSteps(
  files: readonly string[],
  checked: readonly CheckedSpecFile[],
  perIndex: boolean,
): void {
  for (const [i, file] of files.entries()) {
    const before = checked[i - 1];
    const step = checked[i];
    if (before === undefined || step === undefined) continue;
    const size = writtenArraySize(before.raw);
    const own = Array.isArray(step.raw['dependsOn']) ? (step.raw['dependsOn'] as unknown[]) : [];
    const ids = standInIds(perIndex ? 1 : (size ?? 1), new Set(own.map(namedJob)));
    const waitsFor = perIndex ? ids.map((jobId): PerIndexDependency => ({ jobId, type: 'N_TO_N' })) : ids;
    checkSpec(
      withDependencies(step.raw, waitsFor),
      `${file} (in the --chain it waits for ${size === undefined ? 'the job' : perIndex ? 'its index in the array' : `all ${size} jobs of the array`} of ${files[i - 1]})`,
      (path) => step.lineAt(path, new Set(['dependsOn'])),
    );
  }
}

/**
 * The controller's refusal of a file (or the failure to have its answer), named by it: the problems it found (which
 * name fields only: it was sent JSON) with their lines in the file, kept apart for --json; then the `added` lines
 * (the jobs made already, how to send again), each on a line of its own.
 */
function refusedFile(file: string, e: unknown, spec: CheckedSpecFile, added: readonly string[] = []): Error {
  if (e instanceof ApiError) return new NamedRefusal(file, e, withLines(e.details, spec.lineAt), added);
  return failureWithLines(`${file}: `, e, added);
}
