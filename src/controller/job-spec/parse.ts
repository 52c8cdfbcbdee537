import { LineCounter, type Document, type YAMLError } from 'yaml';
import type { Catalog } from '../../core/catalog.js';
import { ANY_FAMILY, formatResources, type FamilyDemand } from '../../core/resources.js';
import { ValidationError } from '../../core/validation.js';
import { parseDocumentUniqueKeys, yamlErrorLine } from '../../core/yaml-unique-keys.js';
import { PriceBook } from '../../scheduler/reservation-price.js';
import { explainIssue, formatPath, lineOf, type Path, type Problem } from './problems.js';
import {
  DEFAULT_SHM_SIZE_GIB,
  IMAGE_REFERENCE_PATTERN,
  IMAGE_REFERENCE_RULE,
  jobSpecSchema,
  utf8Bytes,
  type RawJobSpec,
} from './schema.js';
import { JOB_SPEC_LIMITS, type ArrayProperties, type JobSpec, type TaskTemplateSpec } from './spec.js';
import { derivedWorkload } from './tasks.js';
import { keepEnvValuesAsWritten } from './env-text.js';
import { acceptedNetworkDeclarationSchema, toNetworkDeclaration } from '../../core/network-schema.js';
import { MAX_DURATION_RULE, MAX_DURATION_SECONDS } from '../../core/duration.js';
import { successModelSeconds } from '../../queue/success.js';

/**
 * Parse and validate a job spec (YAML or JSON text; JSON is YAML). `source` names the file in errors; every problem
 * names the field path, the reason and the line. Demands are checked against `catalog`: a family it lacks, or a
 * demand no instance type can host, is an error here rather than a job that waits forever.
 */
export function parseJobSpec(
  text: string,
  source: string,
  catalog: Catalog | PriceBook,
  /** A team for a spec that names none (a team token's submission): problems keep their lines. */
  defaults: { readonly team?: string | undefined } = {},
): JobSpec {
  return validateSpecText(readSpecText(text, source), source, catalog, defaults);
}

/** Spec text read once: its YAML document (for the lines of problems) and its value. */
export interface SpecText {
  readonly doc: Document.Parsed;
  readonly lineCounter: LineCounter;
  /** The document as values, each task's env values as written (env-text.ts). */
  readonly value: unknown;
}

/**
 * Read spec text (YAML or JSON) without validating it, so a reader that looks at the value first (the API's team
 * check, `fleetwise submit`'s command-line additions) parses it once. Syntax errors and repeated keys are refused here.
 */
export function readSpecText(text: string, source: string): SpecText {
  if (utf8Bytes(text) > JOB_SPEC_LIMITS.maxSpecBytes)
    throw new ValidationError(source, [`(root): larger than ${JOB_SPEC_LIMITS.maxSpecBytes} bytes`]);
  const lineCounter = new LineCounter();
  // Placed here rather than by the parser (prettyErrors), which copies each error's whole line to quote it: a long
  // line of thousands of errors (`!a !a …`) took time quadratic in the line, seconds for 64 KiB.
  const doc = parseDocumentUniqueKeys(text, { lineCounter, prettyErrors: false });
  if (doc.errors.length > 0) throw new ValidationError(source, syntaxProblems(text, doc.errors, lineCounter));
  keepEnvValuesAsWritten(doc);
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: 100 });
  } catch (e) {
    throw new ValidationError(source, [
      isStackOverflow(e) ? tooDeep(undefined) : syntaxProblem((e as Error).message),
    ]);
  }
  return { doc, lineCounter, value };
}

/** Syntax errors named one by one; past them, one problem counts the rest. */
const MAX_SYNTAX_PROBLEMS = 20;

/** How V8 words a recursion that ran out of stack; the yaml parser passes it on as an error of the text. */
const STACK_OVERFLOW = /^Maximum call stack size exceeded\b/;

function isStackOverflow(error: unknown): boolean {
  return error instanceof Error && STACK_OVERFLOW.test(error.message);
}

/**
 * The problems of a text the parser found `errors` in, each naming its line. A few are read again with the parser
 * placing them, so each reads as the parser and the repeated-key check word it (`…, again at line 8, column 1`);
 * past MAX_SYNTAX_PROBLEMS, the first are placed here (`at line L, column C`) and the rest counted. A nesting deep
 * enough to overflow the parser's recursion (an error per level it unwinds) is one problem saying so, as the API's
 * depth check says it of a body it sees is too deep.
 */
function syntaxProblems(text: string, errors: readonly YAMLError[], lineCounter: LineCounter): string[] {
  const overflow = errors.find((e) => e.code === 'RESOURCE_EXHAUSTION' && isStackOverflow(e));
  if (overflow !== undefined)
    return [tooDeep(overflow.pos[0] < 0 ? undefined : lineCounter.linePos(overflow.pos[0]).line)];
  if (errors.length <= MAX_SYNTAX_PROBLEMS)
    return parseDocumentUniqueKeys(text, { prettyErrors: true }).errors.map((e) => syntaxProblem(e.message));
  const named = [...errors].sort((a, b) => a.pos[0] - b.pos[0]).slice(0, MAX_SYNTAX_PROBLEMS);
  return [
    ...named.map((e) => {
      // The repeated-key check's count of the rest names its line already.
      if (e.pos[0] < 0 || / line \d+/.test(e.message)) return syntaxProblem(e.message);
      const { line, col } = lineCounter.linePos(e.pos[0]);
      return syntaxProblem(`${e.message} at line ${line}, column ${col}`);
    }),
    `not valid YAML/JSON: ${errors.length - named.length} more errors after these`,
  ];
}

function tooDeep(line: number | undefined): string {
  const where = line === undefined ? '' : ` (line ${line})`;
  return `(root): nested deeper than ${JOB_SPEC_LIMITS.maxDepth} levels${where}`;
}

function syntaxProblem(message: string): string {
  return `not valid YAML/JSON: ${yamlErrorLine(message)}`;
}

/** Validate spec text read by readSpecText; problems name the field path, the reason and the line. */
export function validateSpecText(
  read: SpecText,
  source: string,
  catalog: Catalog | PriceBook,
  defaults: { readonly team?: string | undefined } = {},
): JobSpec {
  const value =
    // Only a map takes the default team: spread, a tagged root (bytes, a set) would become one.
    defaults.team !== undefined && isSpecMap(read.value) && read.value['team'] === undefined
      ? { ...read.value, team: defaults.team }
      : read.value;
  return validate(value, source, catalog, (path) => lineOf(read.doc, read.lineCounter, path));
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A spec a controller accepted before, read with the bounds it was accepted under (a network table without its floor). */
const acceptedJobSpecSchema = jobSpecSchema.extend({ network: acceptedNetworkDeclarationSchema.optional() });

export interface ValidationOptions {
  /**
   * The spec was accepted by a controller before (read back from its job archive): checks that only keep a new
   * submission self-consistent (a success model agreeing with expectedDurationSeconds) or runnable (an image Docker
   * can pull, a program to start) are not applied again, and bounds tightened since (a network table's performance
   * floor) are read as they were, so an archive written before them still restores, each job as it was accepted.
   */
  readonly accepted?: boolean;
}

/**
 * Whether a parsed spec is a map, which a job spec must be: a plain object, as YAML and JSON maps read. A YAML tag
 * makes one a Buffer (!!binary), a Set (!!set) or a Map (!!omap), whose bytes or entries would be named as unknown
 * fields; a list is no map either.
 */
export function isSpecMap(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/** Validate an already-parsed spec (an API request body); problems name field paths but no lines. */
export function validateJobSpec(
  value: unknown,
  source: string,
  catalog: Catalog | PriceBook,
  options: ValidationOptions = {},
): JobSpec {
  return validate(value, source, catalog, () => undefined, options);
}

function validate(
  value: unknown,
  source: string,
  catalog: Catalog | PriceBook,
  lineAt: (path: Path) => number | undefined,
  options: ValidationOptions = {},
): JobSpec {
  const fail = (problems: readonly Problem[]): never => {
    throw new ValidationError(
      source,
      problems.map((p) => {
        const line = lineAt(p.path);
        return `${formatPath(p.path)}: ${p.message}${line === undefined ? '' : ` (line ${line})`}`;
      }),
    );
  };
  if (!isSpecMap(value))
    return fail([{ path: [], message: 'expected a job spec (a map with name, team and tasks)' }]);
  const result = (options.accepted === true ? acceptedJobSpecSchema : jobSpecSchema).safeParse(value);
  const dropped = droppedEnvNames(value);
  if (!result.success || dropped.length > 0)
    return fail([...dropped, ...(result.success ? [] : result.error.issues.flatMap(explainIssue))]);
  const raw = result.data;
  const problems = [
    ...checkStructure(raw),
    ...(options.accepted === true ? [] : [...successProblems(raw), ...unrunnableProblems(raw)]),
    ...checkAgainstCatalog(raw, catalog),
  ];
  if (problems.length > 0) return fail(problems);
  return resolve(raw);
}

/**
 * An `env` variable named `__proto__`: JSON.parse and the YAML parser keep it as a key, but zod's record (like any
 * assignment to a plain object) skips it, so it would vanish between validation and the task without a word.
 * `constructor` and `prototype` are ordinary keys, kept and passed on.
 */
function droppedEnvNames(value: unknown): Problem[] {
  const tasks = isRecord(value) ? value['tasks'] : undefined;
  if (!Array.isArray(tasks)) return [];
  return tasks.flatMap((task: unknown, i): Problem[] => {
    const env = isRecord(task) ? task['env'] : undefined;
    return isRecord(env) && Object.hasOwn(env, '__proto__')
      ? [
          {
            path: ['tasks', i, 'env', '__proto__'],
            message: '__proto__ cannot be an environment name (it would be dropped, not passed to the task)',
          },
        ]
      : [];
  });
}

function checkStructure(raw: RawJobSpec): Problem[] {
  const problems: Problem[] = [];
  /** Each task name after expanding replicas, with the template it comes from (at most 64 × 64 names). */
  const owners = new Map<string, number>();
  let total = 0;
  raw.tasks.forEach((t, i) => {
    const path = ['tasks', i];
    // A command alone is a process-executor task; whether this cluster can run it is checked at submission.
    if (t.image === undefined && t.build === undefined && t.command === undefined)
      problems.push({
        path,
        message:
          'needs image (a registry image) or build (a Docker build context), or, for the process executor, a command',
      });
    if (t.image !== undefined && t.build !== undefined)
      problems.push({ path, message: 'give either image or build, not both' });
    const clash = nameClash(raw, i, owners);
    if (clash !== undefined) problems.push({ path: [...path, 'name'], message: clash });
    total += t.replicas;
    const shm = t.shmSizeGiB;
    if (shm !== undefined)
      for (const [family, v] of Object.entries(t.demand))
        if (shm > v[2])
          problems.push({
            path: [...path, 'shmSizeGiB'],
            message: `${shm} GiB of shared memory exceeds the task's ${v[2]} GiB memory demand on ${family} (shm counts against it)${mibHint(shm)}`,
          });
  });
  if (total > JOB_SPEC_LIMITS.maxTasks)
    problems.push({
      path: ['tasks'],
      message: `${total} tasks after replicas, at most ${JOB_SPEC_LIMITS.maxTasks} per job`,
    });
  // An array dependency pairs the jobs of an array being submitted (each is stored with the ids it waits for).
  const submitsArray = raw.arrayProperties !== undefined && raw.arrayProperties.index === undefined;
  (raw.dependsOn ?? []).forEach((d, i) => {
    if (typeof d !== 'string' && !submitsArray)
      problems.push({
        path: ['dependsOn', i],
        message: `${d.type} is for the jobs of an array: give arrayProperties.size (and no index)`,
      });
  });
  // Each job of an array stores the ids it waits for: bounded in all, so one submission cannot store 10⁸ of them.
  const size = submitsArray ? (raw.arrayProperties?.size ?? 0) : 1;
  const each = jobDependencies(raw).length;
  const waits = size * each;
  if (waits > JOB_SPEC_LIMITS.maxArrayWaits)
    problems.push({
      path: ['dependsOn'],
      message:
        `${size} jobs each waiting for ${each} make ${waits} waits, at most ` +
        `${JOB_SPEC_LIMITS.maxArrayWaits} in one array: let one job wait for those, and the array for that job`,
    });
  const root = raw.network?.root;
  if (root !== undefined && rootTaskName(raw, root) === undefined)
    problems.push({
      path: ['network', 'root'],
      message: `no task named ${root} (tasks: ${expandedNames(raw).join(', ')})`,
    });
  return problems;
}

/** How far a success model's run and `expectedDurationSeconds` may differ: 1%, for rounding in what people write. */
const SUCCESS_RUN_TOLERANCE = 0.01;

/**
 * A success model and `expectedDurationSeconds` describe the same run at full throughput: success-rank orders the job
 * by the one, while admission sizes it and the ETA simulation runs it by the other. The stages (a run that passes
 * them all) must sum to the duration; an expected size, which counts runs that stop early, must be no more than it.
 * Without a duration, the model's run is the job's (`expectedDurationOf`, spec.ts), so it must be one a job may declare.
 */
function successProblems(raw: RawJobSpec): Problem[] {
  const success = raw.success;
  if (success === undefined) return [];
  const run = successModelSeconds(success);
  const duration = raw.expectedDurationSeconds;
  if (success.kind === 'stages') {
    const path = ['success', 'stageSeconds'];
    if (duration === undefined)
      return run > MAX_DURATION_SECONDS
        ? [
            {
              path,
              message: `the stages sum to ${secondsText(run)} s, the job's expected duration (no expectedDurationSeconds): ${MAX_DURATION_RULE}`,
            },
          ]
        : [];
    return Math.abs(run - duration) > SUCCESS_RUN_TOLERANCE * duration
      ? [
          {
            path,
            message:
              `the stages sum to ${secondsText(run)} s but expectedDurationSeconds is ${secondsText(duration)} s: ` +
              'they must agree within 1% (both are the run through every stage, at full throughput)',
          },
        ]
      : [];
  }
  return duration !== undefined && run > duration * (1 + SUCCESS_RUN_TOLERANCE)
    ? [
        {
          path: ['success', 'expectedSizeSeconds'],
          message:
            `${secondsText(run)} s is more than expectedDurationSeconds (${secondsText(duration)} s): an expected ` +
            'size (runs that stop early count their shorter run) must not exceed the full run, within 1%',
        },
      ]
    : [];
}

/**
 * What no worker could start: an image that is no Docker image reference, or an empty program. Both would fail only on
 * the worker, after an instance was bought for the task.
 */
function unrunnableProblems(raw: RawJobSpec): Problem[] {
  return raw.tasks.flatMap((t, i): Problem[] => [
    ...(t.image === undefined || IMAGE_REFERENCE_PATTERN.test(t.image)
      ? []
      : [{ path: ['tasks', i, 'image'], message: IMAGE_REFERENCE_RULE }]),
    ...(t.command?.[0]?.trim() === ''
      ? [
          {
            path: ['tasks', i, 'command', 0],
            message: 'the program to run (the first item) is empty or blank',
          },
        ]
      : []),
  ]);
}

/** Seconds as a spec states them: a sum of stages in floating point (0.1 + 0.2) shown as written. */
function secondsText(seconds: number): string {
  return String(Number(seconds.toFixed(3)));
}

/** Task names after expanding replicas (`<template>` for one replica, `<template>-<i>` for more). */
function expandedNames(raw: RawJobSpec): string[] {
  return raw.tasks.flatMap((t, i) => namesOf(t, i));
}

/** The names template `index` expands to (tasks.ts expandTasks names them the same way). */
function namesOf(t: RawJobSpec['tasks'][number], index: number): string[] {
  const name = templateName(t, index);
  return t.replicas === 1 ? [name] : Array.from({ length: t.replicas }, (_, r) => `${name}-${r}`);
}

/**
 * Why template `index`'s name clashes with an earlier template's, if it does; records its task names in `owners`
 * (expanded name → template). Names must be unique as written and after expanding replicas: `w` with two replicas
 * is `w-0` and `w-1`, so a template named `w-1` beside it would give the job two tasks named `w-1`, which neither
 * the store's task records nor the prediction world (world/trace-jobs.ts) can tell apart.
 */
function nameClash(raw: RawJobSpec, index: number, owners: Map<string, number>): string | undefined {
  const name = templateName(raw.tasks[index] as RawJobSpec['tasks'][number], index);
  const sameName = raw.tasks.findIndex((t, i) => i < index && templateName(t, i) === name);
  let clash = sameName < 0 ? undefined : `duplicate task name ${name} (also tasks.${sameName})`;
  for (const task of namesOf(raw.tasks[index] as RawJobSpec['tasks'][number], index)) {
    const earlier = owners.get(task);
    if (earlier === undefined) owners.set(task, index);
    else
      clash ??=
        `two tasks named ${task} after expanding replicas: ${expandedFrom(raw, task, earlier)} and ` +
        `${expandedFrom(raw, task, index)} (the replicas of a template are named <name>-<index>)`;
  }
  return clash;
}

/** Where the task `task` of template `index` comes from, in words. */
function expandedFrom(raw: RawJobSpec, task: string, index: number): string {
  const t = raw.tasks[index] as RawJobSpec['tasks'][number];
  const name = templateName(t, index);
  return t.replicas === 1
    ? `tasks.${index}`
    : `replica ${task.slice(name.length + 1)} of tasks.${index} (${name}, replicas: ${t.replicas})`;
}

/** The expanded task `network.root` names: a task by its name, or a template with replicas by its first replica. */
function rootTaskName(raw: RawJobSpec, root: string): string | undefined {
  const names = expandedNames(raw);
  if (names.includes(root)) return root;
  const template = raw.tasks.findIndex((t, i) => templateName(t, i) === root);
  return template < 0 ? undefined : `${root}-0`;
}

function checkAgainstCatalog(raw: RawJobSpec, catalog: Catalog | PriceBook): Problem[] {
  const book = catalog instanceof PriceBook ? catalog : new PriceBook(catalog);
  const families = [...new Set(book.catalog.types.map((t) => t.family))];
  const problems: Problem[] = [];
  raw.tasks.forEach((t, i) => {
    let familiesOk = true;
    for (const family of Object.keys(t.demand))
      if (family !== ANY_FAMILY && !families.includes(family)) {
        familiesOk = false;
        problems.push({
          path: ['tasks', i, 'demand', family],
          message: `family ${family} is not in the ${book.catalog.region} catalog (it has ${families.join(', ')}; use any for every family)`,
        });
      }
    if (familiesOk && book.minType(t.demand) === undefined)
      problems.push({ path: ['tasks', i, 'demand'], message: unhostableMessage(t.demand, book, families) });
  });
  return problems;
}

function unhostableMessage(demand: FamilyDemand, book: PriceBook, families: readonly string[]): string {
  const largest = families.flatMap((family) => {
    const d = demand[family] ?? demand[ANY_FAMILY];
    if (d === undefined) return [];
    const types = book.byCostDescending.filter((t) => t.family === family);
    const top = types[0];
    return top === undefined
      ? []
      : [`${family} needs ${formatResources(d)}, largest ${top.name} has ${formatResources(top.capacity)}`];
  });
  const memory = Math.max(...Object.values(demand).map((v) => v[2]));
  const largestMemory = Math.max(...book.catalog.types.map((t) => t.capacity[2]));
  const hint = memory > largestMemory ? mibHint(memory) : '';
  return `no instance type in the ${book.catalog.region} catalog can host this task (${largest.join('; ')})${hint}`;
}

/**
 * Shared memory for a task that names none: the default, or the task's smallest memory demand (over its families) when
 * that is less, since shm counts against each.
 */
function defaultShmSizeGiB(demand: FamilyDemand): number {
  return Math.min(DEFAULT_SHM_SIZE_GIB, ...Object.values(demand).map((v) => v[2]));
}

/** Memory is in GiB; values written in MiB (16384 for 16 GiB) are the usual reason a demand fits nowhere. */

export function mibHint(gib: number): string {
  if (gib < MIB_HINT_FROM_GIB) return '';
  return `; memory is in GiB: ${gib} looks like MiB, which would be ${formatGiB(gib / 1024)} GiB`;
}

/** Below this many "GiB" a value is plausibly meant as GiB; from here on it is more likely MiB. */
const MIB_HINT_FROM_GIB = 1024;

function formatGiB(gib: number): string {
  return Number.isInteger(gib) ? String(gib) : gib.toFixed(2).replace(/0+$/, '');
}

function resolve(raw: RawJobSpec): JobSpec {
  const tasks = raw.tasks.map((t, i): TaskTemplateSpec => {
    const name = templateName(t, i);
    const workload =
      t.workload ??
      (raw.workload === undefined
        ? derivedWorkload(t)
        : raw.tasks.length === 1
          ? raw.workload
          : `${raw.workload}_${name}`);
    return {
      name,
      ...(t.image === undefined ? {} : { image: t.image }),
      ...(t.build === undefined ? {} : { build: t.build }),
      ...(t.command === undefined ? {} : { command: t.command }),
      env: t.env,
      demand: t.demand,
      replicas: t.replicas,
      shmSizeGiB: t.shmSizeGiB ?? defaultShmSizeGiB(t.demand),
      workload,
    };
  });
  return {
    name: raw.name,
    team: raw.team,
    ...(raw.description === undefined ? {} : { description: raw.description }),
    tasks,
    checkpoint: raw.checkpoint,
    ...(raw.totalIterations === undefined ? {} : { totalIterations: raw.totalIterations }),
    ...(raw.expectedDurationSeconds === undefined
      ? {}
      : { expectedDurationSeconds: raw.expectedDurationSeconds }),
    ...(raw.noMoveSeconds === undefined ? {} : { noMoveSeconds: raw.noMoveSeconds }),
    ...(jobDependencies(raw).length === 0 ? {} : { dependsOn: jobDependencies(raw) }),
    ...(raw.maxRunSeconds === undefined ? {} : { maxRunSeconds: raw.maxRunSeconds }),
    ...(raw.valueOfTimePerJobHour === undefined ? {} : { valueOfTimePerJobHour: raw.valueOfTimePerJobHour }),
    ...(raw.workload === undefined ? {} : { workload: raw.workload }),
    queue: raw.queue,
    ...(raw.success === undefined ? {} : { success: raw.success }),
    ...(raw.unsuccessfulExitCodes === undefined
      ? {}
      : { unsuccessfulExitCodes: [...new Set(raw.unsuccessfulExitCodes)].sort((a, b) => a - b) }),
    ...(raw.retryStrategy === undefined ? {} : { retryStrategy: raw.retryStrategy }),
    ...(raw.network === undefined
      ? {}
      : {
          network: toNetworkDeclaration({
            ...raw.network,
            root: raw.network.root === undefined ? undefined : rootTaskName(raw, raw.network.root),
          }),
        }),
    ...(raw.spot === undefined ? {} : { spot: raw.spot }),
    ...(raw.spotMaxDelayMinutes === undefined ? {} : { spotMaxDelaySeconds: raw.spotMaxDelayMinutes * 60 }),
    ...(raw.arrayProperties === undefined
      ? {}
      : { arrayProperties: resolvedArray(raw, raw.arrayProperties) }),
  };
}

/** The jobs `dependsOn` names outright (its array dependencies go to arrayProperties). */
function jobDependencies(raw: RawJobSpec): string[] {
  return (raw.dependsOn ?? []).filter((d): d is string => typeof d === 'string');
}

/** An array with its array dependencies (`dependsOn`'s N_TO_N and SEQUENTIAL entries). */
function resolvedArray(raw: RawJobSpec, array: NonNullable<RawJobSpec['arrayProperties']>): ArrayProperties {
  const entries = (raw.dependsOn ?? []).filter((d) => typeof d !== 'string');
  const sameIndexOf = entries.flatMap((d) => (d.type === 'N_TO_N' && d.jobId !== undefined ? [d.jobId] : []));
  return {
    ...array,
    ...(sameIndexOf.length === 0 ? {} : { sameIndexOf }),
    ...(entries.some((d) => d.type === 'SEQUENTIAL') ? { sequential: true } : {}),
  };
}

function templateName(t: { readonly name?: string | undefined }, index: number): string {
  return t.name ?? `task-${index}`;
}
