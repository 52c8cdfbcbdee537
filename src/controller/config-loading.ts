import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { isNode, LineCounter, parseDocument, type Document } from 'yaml';
import { priceOverrideProblems, type Catalog } from '../core/catalog.js';
import { formatFieldPath, ValidationError } from '../core/validation.js';
import { controllerConfigSchema, type ControllerConfig } from './config.js';
import { FLAG_PATHS, flagNameOf, flagValue, setPath, type ControllerFlags } from './config-flags.js';

/** Reading the configuration file (keeping each value's line for messages), laying the flags over it, validating. */

type Json = Record<string, unknown>;

/**
 * `--provider local` (the quick start): everything on this machine under `.fleetwise/`, the API on 127.0.0.1:7070,
 * short rounds and heartbeats so a laptop demo moves in seconds. Only fields left unset are filled.
 */
function applyLocalDefaults(merged: Json): void {
  merged.cluster ??= 'local';
  merged.stateDir ??= '.fleetwise';
  merged.listen ??= '127.0.0.1:7070';
  merged.roundSeconds ??= 10;
  merged.pollSeconds ??= 2;
  merged.vanishGraceSeconds ??= 0;
  merged.workerHeartbeatSeconds ??= 1;
  // Ten heartbeats, as the defaults (1 s, 10 s): a longer interval given alone lengthens the timeout with it.
  const interval = merged.workerHeartbeatSeconds;
  merged.workerHeartbeatTimeoutSeconds ??= typeof interval === 'number' ? Math.max(10, 10 * interval) : 10;
  merged.priceRefreshHours ??= 0;
  const registration = (merged.workerRegistration ??= {}) as Json;
  registration.timeoutSeconds ??= 60;
  registration.backoffBaseSeconds ??= 5;
  registration.backoffMaxSeconds ??= 60;
}

interface FileSource {
  readonly path: string;
  readonly value: Json;
  readonly lineAt: (path: readonly (string | number)[]) => number | undefined;
}

function readConfigFile(path: string): FileSource {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ValidationError(path, [`cannot read the configuration file: ${(e as Error).message}`]);
  }
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true });
  if (doc.errors.length > 0)
    throw new ValidationError(
      path,
      doc.errors.map((e) => `not valid YAML: ${e.message.split('\n')[0] ?? ''}`),
    );
  const value: unknown = doc.toJS({ maxAliasCount: 100 }) ?? {};
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ValidationError(path, ['(root): expected a mapping of settings']);
  return { path, value: value as Json, lineAt: (p) => lineOf(doc, lineCounter, p) };
}

function lineOf(doc: Document, counter: LineCounter, path: readonly (string | number)[]): number | undefined {
  for (let n = path.length; n >= 1; n--) {
    const node = doc.getIn(path.slice(0, n), true);
    if (isNode(node) && node.range !== undefined && node.range !== null)
      return counter.linePos(node.range[0]).line;
  }
  return undefined;
}

export interface LoadConfigOptions {
  readonly flags: ControllerFlags;
  readonly env?: NodeJS.ProcessEnv;
  /** Resolves relative paths in flags (default: process.cwd()). */
  readonly cwd?: string;
  /** The catalog's region, the last fallback for `region`. */
  readonly defaultRegion?: string;
  /** The catalog the controller plans with: `priceOverrides` must name its types (checked when given). */
  readonly catalog?: Catalog;
}

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
  if (merged.provider === 'local') applyLocalDefaults(merged);
  const result = controllerConfigSchema.safeParse(merged);
  const source = file === undefined ? 'controller options' : file.path;
  if (!result.success) {
    const problems = result.error.issues.map((issue) => {
      const dotted = issue.path.map(String).join('.');
      const flag = fromFlag.get(dotted);
      if (flag !== undefined) return `${flag}: ${issue.message}`;
      if (dotted === '' && issue.code === 'invalid_type') return `(root): ${issue.message}`;
      const line = file?.lineAt(issue.path as (string | number)[]);
      const missing = issue.code === 'invalid_type' && issue.input === undefined;
      const hint =
        missing && FLAG_PATHS.some(([, p]) => p.join('.') === dotted)
          ? ` (set it in the file or with ${flagNameOf((FLAG_PATHS.find(([, p]) => p.join('.') === dotted) as (typeof FLAG_PATHS)[number])[0])})`
          : '';
      return `${dotted === '' ? '(root)' : dotted}${line === undefined ? '' : ` (line ${line})`}: ${issue.message}${hint}`;
    });
    throw new ValidationError(source, problems);
  }
  const parsed = result.data;
  if (options.catalog !== undefined && parsed.priceOverrides !== undefined) {
    const problems = priceOverrideProblems(options.catalog, parsed.priceOverrides).map((p) => {
      const path = ['priceOverrides', ...p.path];
      const line = file?.lineAt(path);
      return `${formatFieldPath(path)}${line === undefined ? '' : ` (line ${line})`}: ${p.message}`;
    });
    if (problems.length > 0) throw new ValidationError(source, problems);
  }
  // A relative path in the file is relative to the file (as its stateDir always was), one in a flag to the current
  // directory: the same file started from elsewhere keeps its state, objects, catalog and template together.
  const baseOf = (path: string): string =>
    file === undefined || fromFlag.has(path) ? cwd : resolve(file.path, '..');
  const stateDir = resolve(baseOf('stateDir'), parsed.stateDir);
  const localPath = (path: string, value: string | undefined): string | undefined =>
    value === undefined || /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : resolve(baseOf(path), value);
  const template = parsed.ec2.worker?.templatePath;
  const region =
    parsed.region ?? nonEmpty(env.AWS_REGION) ?? nonEmpty(env.AWS_DEFAULT_REGION) ?? options.defaultRegion;
  if (region === undefined)
    throw new ValidationError(source, ['region: not set (use --region, the file, or AWS_REGION)']);
  const objectStore =
    localPath('objectStore', parsed.objectStore) ??
    (parsed.bucket === undefined ? resolve(stateDir, 'objects') : `s3://${parsed.bucket}`);
  const catalog = localPath('catalog', parsed.catalog);
  return {
    ...parsed,
    ...(catalog === undefined ? {} : { catalog }),
    ...(template === undefined || parsed.ec2.worker === undefined
      ? {}
      : {
          ec2: {
            ...parsed.ec2,
            worker: { ...parsed.ec2.worker, templatePath: localPath('ec2.worker.templatePath', template) },
          },
        }),
    region,
    stateDir,
    objectStore,
    // Reconcile at least as often as rounds run, and every 15 s between long rounds so tasks start soon after
    // their instance is up rather than a whole round later.
    pollSeconds: parsed.pollSeconds ?? Math.min(parsed.roundSeconds, 15),
  };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}
