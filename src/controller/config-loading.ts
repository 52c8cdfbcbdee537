import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { priceOverrideProblems, type Catalog } from '../core/catalog.js';
import { nearestKey } from '../core/strict-object.js';
import { ValidationError } from '../core/validation.js';
import { SCHEDULER_NAMES, unknownSchedulerProblem } from '../scheduler/registry.js';
import { controllerConfigSchema, type ControllerConfig, type ParsedControllerConfig } from './config.js';
import {
  ec2OnlyFlagProblems,
  FLAG_PATHS,
  flagNameOf,
  flagValue,
  setPath,
  type ControllerFlags,
} from './config-flags.js';
import {
  catalogProblems,
  localBootProblems,
  localOnlyProblems,
  registrationBackoff,
  type ConfigProblem,
  type FieldPath,
} from './config-checks.js';
import {
  fieldAt,
  issuePath,
  parseWithLines,
  unknownKeyProblems,
  type FileWithLines,
} from './settings-file-fields.js';

/** Reading the configuration file (keeping each value's line for messages), laying the flags over it, validating. */

type Json = Record<string, unknown>;

const LOCAL_HEARTBEAT_SECONDS = 1;
/** Ten heartbeats, as the defaults (1 s, 10 s): a longer interval given alone lengthens the timeout with it. */
const LOCAL_HEARTBEATS_PER_TIMEOUT = 10;
/**
 * `--provider local` (the quick start): everything on this machine under `.fleetwise/`, the API on 127.0.0.1:7070,
 * short rounds and heartbeats so a laptop demo moves in seconds. `fleetwise controller --help` quotes these, so its
 * defaults and the ones applied cannot differ.
 */
export const LOCAL_DEFAULTS = {
  cluster: 'local',
  stateDir: '.fleetwise',
  listen: '127.0.0.1:7070',
  roundSeconds: 10,
  pollSeconds: 2,
  vanishGraceSeconds: 0,
  workerHeartbeatSeconds: LOCAL_HEARTBEAT_SECONDS,
  workerHeartbeatTimeoutSeconds: LOCAL_HEARTBEATS_PER_TIMEOUT * LOCAL_HEARTBEAT_SECONDS,
  priceRefreshHours: 0,
  registrationTimeoutSeconds: 60,
  registrationBackoffBaseSeconds: 5,
  registrationBackoffMaxSeconds: 60,
} as const;

/** Local mode's defaults, for the fields left unset only. */
function applyLocalDefaults(merged: Json): void {
  const d = LOCAL_DEFAULTS;
  merged.cluster ??= d.cluster;
  merged.stateDir ??= d.stateDir;
  merged.listen ??= d.listen;
  merged.roundSeconds ??= d.roundSeconds;
  merged.pollSeconds ??= d.pollSeconds;
  merged.vanishGraceSeconds ??= d.vanishGraceSeconds;
  merged.workerHeartbeatSeconds ??= d.workerHeartbeatSeconds;
  const interval = merged.workerHeartbeatSeconds;
  merged.workerHeartbeatTimeoutSeconds ??=
    typeof interval === 'number'
      ? Math.max(d.workerHeartbeatTimeoutSeconds, LOCAL_HEARTBEATS_PER_TIMEOUT * interval)
      : d.workerHeartbeatTimeoutSeconds;
  merged.priceRefreshHours ??= d.priceRefreshHours;
  const registration = (merged.workerRegistration ??= {}) as unknown;
  // Anything but a mapping is left as written, for validation to name it (its line, what is expected).
  if (typeof registration !== 'object' || registration === null || Array.isArray(registration)) return;
  const fields = registration as Json;
  fields.timeoutSeconds ??= d.registrationTimeoutSeconds;
  fields.backoffBaseSeconds ??= d.registrationBackoffBaseSeconds;
  fields.backoffMaxSeconds ??= d.registrationBackoffMaxSeconds;
}

interface FileSource extends FileWithLines {
  readonly value: Json;
}

function readConfigFile(path: string): FileSource {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ValidationError(path, [`cannot read the configuration file: ${(e as Error).message}`]);
  }
  const file = parseWithLines(path, text);
  const value = file.value ?? {};
  if (typeof value !== 'object' || Array.isArray(value))
    throw new ValidationError(path, ['(root): expected a mapping of settings']);
  return { ...file, value: value as Json };
}

/**
 * `scheduler: eva` reads naturally, but the section also holds Eva's tunables: the policy is its `name`. Shown with the
 * policy meant (the nearest registered one).
 */
function schedulerNotASection(input: unknown): string {
  const given = typeof input === 'string' ? input : undefined;
  const example = (given === undefined ? undefined : nearestKey(given, SCHEDULER_NAMES)) ?? 'eva';
  const unknown =
    given === undefined || (SCHEDULER_NAMES as readonly string[]).includes(given)
      ? ''
      : `; ${unknownSchedulerProblem([given])}`;
  return `a section, not a policy name: the policy goes under scheduler.name, e.g. scheduler: { name: ${example} }${unknown}`;
}

export interface LoadConfigOptions {
  readonly flags: ControllerFlags;
  readonly env?: NodeJS.ProcessEnv;
  /** Resolves relative paths in flags (default: process.cwd()). */
  readonly cwd?: string;
  /** The catalog's region, the last fallback for `region`. */
  readonly defaultRegion?: string;
  /**
   * The catalog the controller plans with (checked when given): `priceOverrides`, `localBootSeconds` and
   * `caps.familyGroups` must name its types and families, and each quota a group some family of it is in.
   */
  readonly catalog?: Catalog;
  /** Whether the file's `priceOverrides` are the prices the run takes (default true): checked against `catalog` only then. */
  readonly priceOverridesTaken?: boolean;
  /**
   * `simulate --config`: the file is read for what a simulation takes of it, alone. The command takes none of the
   * controller's flags, so messages name none; and the simulator ignores the cluster's name and where the state lives,
   * so the file may leave them out.
   */
  readonly forSimulation?: boolean;
}

/**
 * What a simulation reading a file without them takes for `cluster` and `stateDir`: the controller runtime's own cluster
 * name (sim/controller-runtime/run-controller.ts), and local mode's state directory, which it never opens.
 */
const SIMULATION_PLACEHOLDERS = { cluster: 'fleetwise-sim', stateDir: LOCAL_DEFAULTS.stateDir } as const;

/**
 * Read `--config` (when given), lay the flags over it and validate. Problems name the flag (`--round-seconds`)
 * or the file field with its line (`fleetwise.yaml: caps.maxInstances (line 7): must be ≥ 1`).
 */
export function loadControllerConfig(options: LoadConfigOptions): ControllerConfig {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const file =
    options.flags.config === undefined ? undefined : readConfigFile(resolve(cwd, options.flags.config));
  const merged: Json = structuredClone(file?.value ?? {});
  const fromFlag = new Map<string, string>();
  for (const [flag, path, kind] of FLAG_PATHS) {
    const raw = options.flags[flag];
    if (raw === undefined) continue;
    setPath(merged, path, flagValue(raw, kind));
    fromFlag.set(path.join('.'), flagNameOf(flag));
  }
  // Before the defaults fill the rest: what was given, the flags over the file.
  const givenBy = new Map<string, string>([
    ...(file === undefined ? [] : writtenPaths(file.value).map((p) => [p, file.path] as const)),
    ...fromFlag,
  ]);
  // Refused by name before the schema: an EC2-only flag would otherwise fill an ec2 section local mode ignores, or
  // leave it incomplete and blame a flag the user did not give.
  const ec2Only = ec2OnlyFlagProblems(options.flags, merged.provider);
  if (ec2Only.length > 0) throw new ValidationError('controller options', ec2Only);
  // The same settings written in the file, by field and line: ignored, they would poll an interruption queue for
  // instances local mode never launches, or fail on an ec2.worker field the file never gave.
  if (merged.provider === 'local' && file !== undefined) {
    const inFile = ec2OnlyFileFields(file.value).map(
      (path) =>
        `${fieldAt(file, path)}: applies to provider aws only: local mode launches no EC2 instance (leave it out)`,
    );
    if (inFile.length > 0) throw new ValidationError(file.path, inFile);
  }
  if (merged.provider === 'local') applyLocalDefaults(merged);
  if (options.forSimulation === true) {
    merged.cluster ??= SIMULATION_PLACEHOLDERS.cluster;
    merged.stateDir ??= SIMULATION_PLACEHOLDERS.stateDir;
  }
  // A hint names a flag only where the command reading the file takes it.
  const flagHint = (flag: keyof ControllerFlags): string | undefined =>
    options.forSimulation === true ? undefined : flagNameOf(flag);
  const result = controllerConfigSchema.safeParse(merged);
  const source = file === undefined ? 'controller options' : file.path;
  // A field as problems name it: as shown (its dotted path by default), with its line in the file when it has one.
  const at = (path: FieldPath, shown?: string): string => fieldAt(file, path, shown);
  if (!result.success) {
    const problems = result.error.issues.flatMap((issue): string[] => {
      const path = issuePath(issue);
      if (issue.code === 'unrecognized_keys')
        // An unknown key is any text: quoted where it is not a plain name, it cannot pass for another problem.
        return unknownKeyProblems(controllerConfigSchema, path, issue.keys).map(
          (p) => `${at(p.path)}: ${p.message}`,
        );
      const dotted = path.map(String).join('.');
      const flag = fromFlag.get(dotted);
      if (flag !== undefined) return [`${flag}: ${issue.message}`];
      if (dotted === '' && issue.code === 'invalid_type') return [`(root): ${issue.message}`];
      if (dotted === 'scheduler' && issue.code === 'invalid_type' && merged.scheduler !== undefined)
        return [`${at(path, dotted)}: ${schedulerNotASection(merged.scheduler)}`];
      // zod leaves the input out of its issues: a field left out is told by the message.
      const missing = issue.code === 'invalid_type' && /received undefined$/.test(issue.message);
      const flagOf = FLAG_PATHS.find(([, p]) => p.join('.') === dotted)?.[0];
      const taken = flagOf === undefined ? undefined : flagHint(flagOf);
      const hint =
        !missing || flagOf === undefined
          ? ''
          : ` (set it in the file${taken === undefined ? '' : ` or with ${taken}`})`;
      return [`${at(path, dotted === '' ? '(root)' : dotted)}: ${issue.message}${hint}`];
    });
    throw new ValidationError(source, problems);
  }
  const parsed = result.data;
  // A setting as a message about another one names it: the flag that gave it, else its field with its line.
  const named = (path: FieldPath): string => fromFlag.get(path.join('.')) ?? at(path);
  const refuse = (problems: readonly ConfigProblem[]): void => {
    if (problems.length > 0)
      throw new ValidationError(
        source,
        problems.map((p) => `${named(p.path)}: ${p.message}`),
      );
  };
  if (
    options.catalog !== undefined &&
    parsed.priceOverrides !== undefined &&
    options.priceOverridesTaken !== false
  )
    refuse(
      priceOverrideProblems(options.catalog, parsed.priceOverrides).map((p) => ({
        path: ['priceOverrides', ...p.path],
        message: p.message,
      })),
    );
  // The provider as a message about a local-only setting names it: with its flag, its line, or as the default.
  const providerFlag = fromFlag.get('provider');
  const providerNamed =
    providerFlag !== undefined
      ? `${parsed.provider} (${providerFlag})`
      : givenBy.has('provider')
        ? at(['provider'], parsed.provider)
        : `${parsed.provider} by default`;
  const localFlag = flagHint('provider');
  refuse(
    localOnlyProblems(parsed, {
      named: providerNamed,
      local: `provider: local${localFlag === undefined ? '' : ` (or ${localFlag} local)`}`,
    }),
  );
  if (options.catalog !== undefined) refuse(catalogProblems(parsed, options.catalog));
  refuse(
    localBootProblems(
      parsed,
      registrationTimeout(parsed, {
        flag: fromFlag.get('workerRegistration.timeoutSeconds'),
        field: givenBy.has('workerRegistration.timeoutSeconds')
          ? at(['workerRegistration', 'timeoutSeconds'])
          : undefined,
        flagTaken: flagHint('registrationTimeoutSeconds'),
      }),
    ),
  );
  const backoff = registrationBackoff(
    parsed.workerRegistration,
    givenBy.has('workerRegistration.backoffBaseSeconds'),
    givenBy.has('workerRegistration.backoffMaxSeconds'),
    named,
  );
  if ('message' in backoff) throw new ValidationError(source, [`${named(backoff.path)}: ${backoff.message}`]);
  const workerRegistration = { ...parsed.workerRegistration, ...backoff };
  // A relative path in the file is relative to the file (as its stateDir always was), one in a flag to the current
  // directory: the same file started from elsewhere keeps its state, objects, catalog, template and
  // certificate together.
  const baseOf = (path: string): string =>
    file === undefined || fromFlag.has(path) ? cwd : resolve(file.path, '..');
  const stateDir = resolve(baseOf('stateDir'), parsed.stateDir);
  const localPath = (path: string, value: string | undefined): string | undefined =>
    value === undefined || /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : resolve(baseOf(path), value);
  const region =
    parsed.region ?? nonEmpty(env.AWS_REGION) ?? nonEmpty(env.AWS_DEFAULT_REGION) ?? options.defaultRegion;
  if (region === undefined)
    throw new ValidationError(source, [
      `region: not set (use ${flagHint('region') === undefined ? '' : '--region, '}the file, or AWS_REGION)`,
    ]);
  const objectStore =
    localPath('objectStore', parsed.objectStore) ??
    (parsed.bucket === undefined ? resolve(stateDir, 'objects') : `s3://${parsed.bucket}`);
  const catalog = localPath('catalog', parsed.catalog);
  const worker = parsed.ec2.worker;
  const templatePath = localPath('ec2.worker.templatePath', worker?.templatePath);
  const identityCertificate = localPath('ec2.worker.identityCertificate', worker?.identityCertificate);
  return {
    ...parsed,
    ...(catalog === undefined ? {} : { catalog }),
    ...(worker === undefined
      ? {}
      : {
          ec2: {
            ...parsed.ec2,
            worker: {
              ...worker,
              ...(templatePath === undefined ? {} : { templatePath }),
              ...(identityCertificate === undefined ? {} : { identityCertificate }),
            },
          },
        }),
    workerRegistration,
    region,
    stateDir,
    objectStore,
    // Reconcile at least as often as rounds run, and every 15 s between long rounds so tasks start soon after
    // their instance is up rather than a whole round later.
    pollSeconds: parsed.pollSeconds ?? Math.min(parsed.roundSeconds, 15),
    ...(file === undefined ? {} : { file: resolve(file.path) }),
    givenBy,
  };
}

/**
 * The registration timeout as a message about local boot times names it: its value and where it comes from (`flag`,
 * else `field` in the file, else its default), and how to raise it (the field, and its flag where the command takes it).
 */
function registrationTimeout(
  parsed: ParsedControllerConfig,
  given: {
    readonly flag: string | undefined;
    readonly field: string | undefined;
    readonly flagTaken: string | undefined;
  },
): { readonly named: string; readonly setting: string } {
  const seconds = parsed.workerRegistration.timeoutSeconds;
  if (given.flag !== undefined) return { named: `${given.flag} ${seconds}`, setting: given.flag };
  const setting = `workerRegistration.timeoutSeconds${given.flagTaken === undefined ? '' : ` (or ${given.flagTaken})`}`;
  if (given.field !== undefined) return { named: `${given.field}, ${seconds} s`, setting };
  const local = parsed.provider === 'local' ? ' in local mode' : '';
  return { named: `workerRegistration.timeoutSeconds, ${seconds} s by default${local}`, setting };
}

/** The dotted path of every setting a file writes: each section and each of its fields (a list is one setting). */
/**
 * The fields of a config file that only configure EC2: `interruptionQueue` and each field of its `ec2:` section but
 * `ec2.worker.controllerUrl` (local mode's workers reach the API there too), each named once at its outermost.
 */
function ec2OnlyFileFields(value: Json): FieldPath[] {
  const fields: FieldPath[] = 'interruptionQueue' in value ? [['interruptionQueue']] : [];
  const ec2 = value['ec2'];
  if (typeof ec2 !== 'object' || ec2 === null || Array.isArray(ec2))
    return 'ec2' in value ? [...fields, ['ec2']] : fields;
  for (const [key, field] of Object.entries(ec2)) {
    if (key !== 'worker' || typeof field !== 'object' || field === null || Array.isArray(field)) {
      fields.push(['ec2', key]);
      continue;
    }
    for (const workerKey of Object.keys(field))
      if (workerKey !== 'controllerUrl') fields.push(['ec2', 'worker', workerKey]);
  }
  return fields;
}

function writtenPaths(value: Json, prefix = ''): string[] {
  return Object.entries(value).flatMap(([key, field]) => {
    const path = `${prefix}${key}`;
    const nested =
      typeof field === 'object' && field !== null && !Array.isArray(field)
        ? writtenPaths(field as Json, `${path}.`)
        : [];
    return [path, ...nested];
  });
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}
