import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, type CollectionTag, type ScalarTag, type YAMLMap, type YAMLSeq } from 'yaml';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { workerBootstrapSchema, workerUserDataBase64 } from '../../src/cloud/aws/user-data.js';
import { controllerConfigSchema } from '../../src/controller/config.js';
import {
  checkpointKeys,
  checkpointPrefix,
  jobArchiveKeys,
  latestBackupKey,
  LATEST_REPORT_KEY,
  parseBuildContextRef,
  taskExitKey,
  taskLogKey,
  taskLogRunName,
  taskLogRunPrefix,
  taskLogSegmentKey,
} from '../../src/protocol/object-keys.js';
import { DEFAULT_PROBE_PORT } from '../../src/worker/latency-probe.js';
import { cliSourceModules } from '../helpers/built-cli.js';

/**
 * The least-privilege IAM policies of infra/controller.yaml must name exactly the AWS actions the code calls. The
 * controller's (infra/iam-policy.json): this test scans src/ for the AWS SDK commands, paginators and lib-storage
 * uploads in use, maps each to its IAM actions, and compares with the policy in both directions. The workers'
 * (infra/worker-iam-policy.json): the same for the modules `fleetwise worker` loads, and, key by key, the object
 * store calls the worker makes against the prefixes the policy grants them on, both ways too.
 */

const SRC = join(PROJECT_ROOT, 'src');
const POLICY_PATH = join(PROJECT_ROOT, 'infra', 'iam-policy.json');
const WORKER_POLICY_PATH = join(PROJECT_ROOT, 'infra', 'worker-iam-policy.json');
const TEMPLATE_PATH = join(PROJECT_ROOT, 'infra', 'controller.yaml');

/**
 * IAM actions per SDK operation, keyed `<package>:<operation>`. A new call in src/ that is missing here fails the
 * test: add it here and to the policy.
 */
const IAM_ACTIONS_OF: Readonly<Record<string, readonly string[]>> = {
  'client-ec2:RunInstances': [
    'ec2:RunInstances',
    // TagSpecifications on RunInstances are authorized as ec2:CreateTags (conditioned on ec2:CreateAction).
    'ec2:CreateTags',
  ],
  'client-ec2:DescribeInstances': ['ec2:DescribeInstances'],
  'client-ec2:TerminateInstances': ['ec2:TerminateInstances'],
  'client-ec2:DescribeInstanceTypes': ['ec2:DescribeInstanceTypes'],
  // `fleetwise catalog refresh`: spot prices per pool.
  'client-ec2:DescribeSpotPriceHistory': ['ec2:DescribeSpotPriceHistory'],
  'client-ec2:DescribeImages': ['ec2:DescribeImages'],
  'client-ec2:DescribeSubnets': ['ec2:DescribeSubnets'],
  'client-ec2:DescribeAvailabilityZones': ['ec2:DescribeAvailabilityZones'],
  // TagSpecifications on CreatePlacementGroup are authorized as ec2:CreateTags too.
  'client-ec2:CreatePlacementGroup': ['ec2:CreatePlacementGroup', 'ec2:CreateTags'],
  'client-ec2:DescribePlacementGroups': ['ec2:DescribePlacementGroups'],
  'client-ec2:DeletePlacementGroup': ['ec2:DeletePlacementGroup'],
  'client-s3:PutObject': ['s3:PutObject'],
  'client-s3:GetObject': ['s3:GetObject'],
  'client-s3:HeadObject': ['s3:GetObject'], // HEAD is authorized as s3:GetObject
  'client-s3:ListObjectsV2': ['s3:ListBucket'],
  'client-s3:DeleteObject': ['s3:DeleteObject'],
  'client-s3:DeleteObjects': ['s3:DeleteObject'],
  'client-s3:CopyObject': ['s3:GetObject', 's3:PutObject'],
  // PutObject for a small body; Create/UploadPart/CompleteMultipartUpload (all s3:PutObject) and, on failure,
  // AbortMultipartUpload for a large one.
  'lib-storage:Upload': ['s3:PutObject', 's3:AbortMultipartUpload'],
  'client-pricing:GetProducts': ['pricing:GetProducts'],
  'client-sqs:ReceiveMessage': ['sqs:ReceiveMessage'],
  'client-sqs:DeleteMessageBatch': ['sqs:DeleteMessage'], // a batch is authorized as sqs:DeleteMessage
};

/** Actions the policy grants beyond the calls themselves, and why. */
const ALLOWED_EXTRA_ACTIONS: Readonly<Record<string, string>> = {
  'iam:PassRole': 'RunInstances with IamInstanceProfile passes the worker role to EC2',
};

interface SdkCall {
  readonly key: string;
  readonly file: string;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Names imported (as values, not types) from each @aws-sdk package of a file: local name → [package, name]. */
function sdkImports(text: string): Map<string, readonly [string, string]> {
  const imported = new Map<string, readonly [string, string]>();
  for (const m of text.matchAll(/import\s*\{([^}]*)\}\s*from\s*'@aws-sdk\/([a-z0-9-]+)'/g)) {
    const pkg = m[2] as string;
    for (const part of (m[1] as string).split(',')) {
      const spec = part.trim();
      if (spec === '' || spec.startsWith('type ')) continue;
      const [name, alias] = spec.split(/\s+as\s+/);
      imported.set((alias ?? name) as string, [pkg, name as string]);
    }
  }
  return imported;
}

/** The SDK operations a source text calls: `new XCommand(`, `paginateX(`, `new Upload(`. */
export function sdkCallsIn(text: string, file: string): SdkCall[] {
  const imported = sdkImports(text);
  const calls: SdkCall[] = [];
  for (const m of text.matchAll(/\bnew\s+([A-Za-z0-9]+)\s*\(|\b(paginate[A-Za-z0-9]+)\s*\(/g)) {
    const local = (m[1] ?? m[2]) as string;
    const origin = imported.get(local);
    if (origin === undefined) continue;
    const [pkg, name] = origin;
    let operation: string | undefined;
    if (name.startsWith('paginate')) operation = name.slice('paginate'.length);
    else if (name.endsWith('Command')) operation = name.slice(0, -'Command'.length);
    else if (pkg === 'lib-storage' && name === 'Upload') operation = 'Upload';
    if (operation !== undefined) calls.push({ key: `${pkg}:${operation}`, file });
  }
  return calls;
}

function callsInSource(): SdkCall[] {
  return callsIn(sourceFiles(SRC));
}

function callsIn(paths: readonly string[]): SdkCall[] {
  return paths.flatMap((path) => sdkCallsIn(readFileSync(path, 'utf8'), relative(PROJECT_ROOT, path)));
}

interface Statement {
  readonly Sid?: string;
  readonly Effect: string;
  readonly Action: string | readonly string[];
  readonly Resource: unknown;
  readonly Condition?: unknown;
}

function actionsOf(statements: readonly Statement[]): Set<string> {
  return new Set(statements.flatMap((s) => (typeof s.Action === 'string' ? [s.Action] : [...s.Action])));
}

function readPolicy(path = POLICY_PATH): { Version: string; Statement: Statement[] } {
  return JSON.parse(readFileSync(path, 'utf8')) as { Version: string; Statement: Statement[] };
}

// CloudFormation's short-form intrinsic functions, as plain `{ "Fn::X": … }` objects.
const scalarTag = (tag: string, key: string): ScalarTag => ({ tag, resolve: (value) => ({ [key]: value }) });
const seqTag = (tag: string, key: string): CollectionTag => ({
  tag,
  collection: 'seq',
  resolve: (value: YAMLMap.Parsed | YAMLSeq.Parsed) => ({ [key]: value.toJSON() }) as never,
});
const mapTag = (tag: string, key: string): CollectionTag => ({
  tag,
  collection: 'map',
  resolve: (value: YAMLMap.Parsed | YAMLSeq.Parsed) => ({ [key]: value.toJSON() }) as never,
});
const CFN_TAGS = [
  scalarTag('!Ref', 'Ref'),
  scalarTag('!Sub', 'Fn::Sub'),
  seqTag('!Sub', 'Fn::Sub'),
  scalarTag('!GetAtt', 'Fn::GetAtt'),
  seqTag('!GetAtt', 'Fn::GetAtt'),
  seqTag('!Join', 'Fn::Join'),
  seqTag('!Select', 'Fn::Select'),
  seqTag('!If', 'Fn::If'),
  seqTag('!Equals', 'Fn::Equals'),
  seqTag('!Not', 'Fn::Not'),
  scalarTag('!Base64', 'Fn::Base64'),
  mapTag('!Base64', 'Fn::Base64'),
  scalarTag('!GetAZs', 'Fn::GetAZs'),
  scalarTag('!ImportValue', 'Fn::ImportValue'),
];

type Json = Record<string, unknown>;

interface Template {
  readonly Parameters: Record<string, Json>;
  readonly Conditions?: Record<string, unknown>;
  readonly Resources: Record<string, { Type: string; Properties?: Json }>;
  readonly Outputs: Record<string, Json>;
}

function readTemplate(): Template {
  return parse(readFileSync(TEMPLATE_PATH, 'utf8'), { customTags: CFN_TAGS }) as Template;
}

/** `{ Ref: X }` → "${X}" and `{ "Fn::Sub": "s" }` → "s", so template statements compare with the JSON file's. */
function placeholders(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(placeholders);
  if (typeof value !== 'object' || value === null) return value;
  const obj = value as Json;
  const keys = Object.keys(obj);
  if (keys.length === 1 && typeof obj.Ref === 'string') return `\${${obj.Ref}}`;
  if (keys.length === 1 && typeof obj['Fn::Sub'] === 'string') return obj['Fn::Sub'];
  return Object.fromEntries(keys.map((k) => [k, placeholders(obj[k])]));
}

function resourcesOfType(template: Template, type: string): [string, Json][] {
  return Object.entries(template.Resources)
    .filter(([, r]) => r.Type === type)
    .map(([id, r]) => [id, r.Properties ?? {}]);
}

/** What `Ref` gives for a resource, by type, where the config checks its shape. */
const physicalIdOf: Readonly<Record<string, string>> = {
  'AWS::S3::Bucket': 'fleetwise-bars-reportsbucket-1a2b3c4d5e6f',
  'AWS::SQS::Queue': 'https://sqs.us-east-1.amazonaws.com/123456789012/bars-interruptions',
  'AWS::EC2::SecurityGroup': 'sg-0123456789abcdef0',
};

/**
 * What CloudFormation would make of a value, for the intrinsic functions the template uses: parameters from `params`
 * (else their defaults), resources as `<LogicalId>-id` / `<LogicalId>-<Attr>`, pseudo parameters as fixed values.
 */
function evaluate(template: Template, value: unknown, params: Readonly<Record<string, string>>): unknown {
  const again = (v: unknown): unknown => evaluate(template, v, params);
  const ref = (name: string): unknown => {
    if (name === 'AWS::Region') return 'us-east-1';
    if (name === 'AWS::Partition') return 'aws';
    if (name === 'AWS::AccountId') return '123456789012';
    const param = template.Parameters[name];
    if (param === undefined) return physicalIdOf[template.Resources[name]?.Type ?? ''] ?? `${name}-id`;
    const given = params[name] ?? (param.Default as string | undefined);
    if (given === undefined) throw new Error(`parameter ${name} has no value and no default`);
    return String(param.Type).startsWith('List<') ? given.split(',') : given;
  };
  const condition = (name: string): boolean => {
    const c = template.Conditions?.[name];
    if (c === undefined) throw new Error(`no condition ${name}`);
    return again(c) as boolean;
  };
  if (Array.isArray(value)) return value.map(again);
  if (typeof value !== 'object' || value === null) return value;
  const obj = value as Json;
  const [key] = Object.keys(obj);
  const arg = key === undefined ? undefined : obj[key];
  switch (key) {
    case 'Ref':
      return ref(arg as string);
    case 'Fn::GetAtt': {
      const [id, attr] = typeof arg === 'string' ? arg.split('.') : (arg as string[]);
      return `${id}-${attr}`;
    }
    case 'Fn::Join': {
      const [sep, items] = arg as [string, unknown];
      return (again(items) as unknown[]).join(sep);
    }
    case 'Fn::Equals': {
      const [a, b] = arg as [unknown, unknown];
      return again(a) === again(b);
    }
    case 'Fn::Not':
      return !(again((arg as [unknown])[0]) as boolean);
    case 'Fn::If': {
      const [name, yes, no] = arg as [string, unknown, unknown];
      return again(condition(name) ? yes : no);
    }
    case 'Fn::Sub': {
      const [text, vars] = typeof arg === 'string' ? [arg, {}] : (arg as [string, Json]);
      return text.replace(/\$\{(!?)([^}]+)\}/g, (_m, bang: string, name: string) => {
        if (bang === '!') return `\${${name}}`;
        if (name in vars) return String(again(vars[name]));
        if (name.includes('.') && !name.startsWith('AWS::')) return name.replace('.', '-');
        return String(ref(name));
      });
    }
    default:
      return Object.fromEntries(Object.keys(obj).map((k) => [k, again(obj[k])]));
  }
}

/** Where the part of the controller's user data that writes /etc/fleetwise.yaml begins (its comment). */
const CONFIG_PART_START = '# The package workers install.';
const CONFIG_WRITE = 'cat > /etc/fleetwise.yaml <<CONFIG\n';

/**
 * The /etc/fleetwise.yaml the controller's user data writes with these parameters, parsed by the config schema: the
 * part of the script that writes it is run by bash (its output to stdout instead of the file), as the instance runs it.
 */
function controllerConfigWith(template: Template, params: Readonly<Record<string, string>>) {
  const instance = template.Resources.ControllerInstance?.Properties as Json;
  const userData = evaluate(template, (instance.UserData as Json)['Fn::Base64'], params) as string;
  const start = userData.indexOf(CONFIG_PART_START);
  const write = userData.indexOf(CONFIG_WRITE);
  const end = userData.indexOf('\nCONFIG\n', write);
  if (start === -1 || write < start || end === -1)
    throw new Error("the user data writes no /etc/fleetwise.yaml after deciding the workers' package");
  const part = userData.slice(start, end + '\nCONFIG\n'.length).replace(CONFIG_WRITE, 'cat <<CONFIG\n');
  const run = spawnSync('bash', ['-c', `set -euo pipefail\n${part}`], {
    env: { PATH: process.env.PATH, PRIVATE_IP: '10.0.0.5' },
    encoding: 'utf8',
  });
  if (run.error !== undefined) throw new Error(`bash (these tests need it): ${run.error.message}`);
  if (run.status !== 0) throw new Error(`the config part of the user data failed: ${run.stderr}`);
  return controllerConfigSchema.parse(parse(run.stdout));
}

describe('the source scanner', () => {
  it('finds value imports from @aws-sdk and ignores type-only ones and local look-alikes', () => {
    const text = [
      "import { RunInstancesCommand, type RunInstancesCommandInput, paginateDescribeInstances } from '@aws-sdk/client-ec2';",
      "import { Upload } from '@aws-sdk/lib-storage';",
      "import { ListObjectsV2Command as List } from '@aws-sdk/client-s3';",
      'class FooCommand {}',
      'new RunInstancesCommand({}); new FooCommand(); new Upload({}); new List({});',
      'for await (const p of paginateDescribeInstances({ client }, {})) {}',
    ].join('\n');
    expect(sdkCallsIn(text, 'x.ts').map((c) => c.key)).toEqual([
      'client-ec2:RunInstances',
      'lib-storage:Upload',
      'client-s3:ListObjectsV2',
      'client-ec2:DescribeInstances',
    ]);
  });

  it('finds the calls the controller is known to make (so an empty scan cannot pass)', () => {
    const keys = new Set(callsInSource().map((c) => c.key));
    for (const known of [
      'client-ec2:RunInstances',
      'client-ec2:TerminateInstances',
      'client-ec2:DescribeInstances',
      'client-s3:GetObject',
      'lib-storage:Upload',
      'client-pricing:GetProducts',
    ])
      expect(keys).toContain(known);
  });
});

describe('infra/iam-policy.json', () => {
  const calls = callsInSource();
  const policy = readPolicy();

  it('knows the IAM actions of every SDK operation src/ calls', () => {
    const unmapped = calls
      .filter((c) => IAM_ACTIONS_OF[c.key] === undefined)
      .map((c) => `${c.key} (${c.file})`);
    expect(unmapped).toEqual([]);
  });

  it('grants exactly the actions the source calls, plus the documented extras', () => {
    const needed = new Set(calls.flatMap((c) => IAM_ACTIONS_OF[c.key] ?? []));
    const granted = actionsOf(policy.Statement);
    const expected = new Set([...needed, ...Object.keys(ALLOWED_EXTRA_ACTIONS)]);
    expect([...granted].sort()).toEqual([...expected].sort());
    expect(policy.Statement.every((s) => s.Effect === 'Allow')).toBe(true);
    expect([...granted].some((a) => a.includes('*'))).toBe(false);
  });

  it('scopes what AWS lets it scope', () => {
    const by = (action: string) => policy.Statement.filter((s) => actionsOf([s]).has(action));
    const terminate = by('ec2:TerminateInstances');
    expect(terminate).toHaveLength(1);
    expect(terminate[0]?.Condition).toEqual({
      StringEquals: { 'aws:ResourceTag/fleetwise:cluster': '${ClusterName}' },
    });
    expect(terminate[0]?.Resource).toMatch(/:instance\/\*$/);
    // New instances and volumes must carry the cluster tag; tags may only be written at launch.
    expect(by('ec2:RunInstances').map((s) => s.Condition ?? null)).toContainEqual({
      StringEquals: { 'aws:RequestTag/fleetwise:cluster': '${ClusterName}' },
    });
    expect(by('ec2:CreateTags')[0]?.Condition).toEqual({
      StringEquals: { 'ec2:CreateAction': ['RunInstances', 'CreatePlacementGroup'] },
    });
    // A spot launch (RunInstances with InstanceMarketOptions) is authorized against the spot request it makes too;
    // without it every spot launch is refused (UnauthorizedOperation) and falls back to on demand.
    expect(
      by('ec2:RunInstances').flatMap((s) => (Array.isArray(s.Resource) ? s.Resource : [s.Resource])),
    ).toContain('arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:spot-instances-request/*');
    // Placement groups: created only with the cluster tag; launched into and deleted only when they carry it.
    expect(by('ec2:CreatePlacementGroup')[0]?.Condition).toEqual({
      StringEquals: { 'aws:RequestTag/fleetwise:cluster': '${ClusterName}' },
    });
    for (const action of ['ec2:DeletePlacementGroup', 'ec2:RunInstances']) {
      const onGroups = by(action).filter((s) => String(s.Resource).endsWith(':placement-group/*'));
      expect(onGroups, action).toHaveLength(1);
      expect(onGroups[0]?.Condition).toEqual({
        StringEquals: { 'aws:ResourceTag/fleetwise:cluster': '${ClusterName}' },
      });
    }
    expect(by('iam:PassRole')[0]?.Resource).toMatch(/:role\/\$\{WorkerInstanceRole\}$/);
    // Only the cluster's own interruption queue (the template names it).
    for (const action of ['sqs:ReceiveMessage', 'sqs:DeleteMessage'])
      expect(by(action)[0]?.Resource, action).toMatch(
        /:sqs:\$\{AWS::Region\}:\$\{AWS::AccountId\}:\$\{ClusterName\}-interruptions$/,
      );
    for (const s of policy.Statement.filter((st) => actionsOf([st]).values().next().value?.startsWith('s3:')))
      expect(String(s.Resource)).toMatch(/^arn:\$\{AWS::Partition\}:s3:::\$\{ReportsBucket\}(\/\*)?$/);
    // Only Describe* and the Price List API (neither supports resource-level permissions) use "*".
    for (const s of policy.Statement.filter((st) => st.Resource === '*'))
      for (const a of actionsOf([s])) expect(a).toMatch(/^(ec2:Describe|pricing:)/);
  });
});

/** The bucket, as the policies name it; an object in it is `${BUCKET_ARN}/<key>`. */
const BUCKET_ARN = 'arn:${AWS::Partition}:s3:::${ReportsBucket}';

/** An IAM wildcard pattern (`*` any run of characters, `?` one) as a regular expression. */
function wildcard(pattern: string): RegExp {
  const body = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replaceAll('*', '.*')
    .replaceAll('?', '.');
  return new RegExp(`^${body}$`, 's');
}

/**
 * Whether a statement's conditions hold for a request with `context`'s condition keys, for the operators the policies
 * use (an unknown one fails the test, to be taught here): a key the request lacks fails the condition unless the
 * operator ends in IfExists, as IAM evaluates it.
 */
function conditionHolds(condition: unknown, context: Readonly<Record<string, string>>): boolean {
  if (condition === undefined) return true;
  return Object.entries(condition as Record<string, Record<string, string | string[]>>).every(
    ([operator, keys]) => {
      const ifExists = operator.endsWith('IfExists');
      const op = ifExists ? operator.slice(0, -'IfExists'.length) : operator;
      return Object.entries(keys).every(([key, values]) => {
        const value = context[key];
        if (value === undefined) return ifExists;
        const list = typeof values === 'string' ? [values] : values;
        if (op === 'StringLike') return list.some((v) => wildcard(v).test(value));
        if (op === 'StringEquals') return list.includes(value);
        throw new Error(`this test does not evaluate the condition operator ${operator}`);
      });
    },
  );
}

function statementAllows(
  s: Statement,
  action: string,
  resource: string,
  context: Readonly<Record<string, string>> = {},
): boolean {
  const resources = Array.isArray(s.Resource) ? (s.Resource as string[]) : [s.Resource as string];
  return (
    s.Effect === 'Allow' &&
    actionsOf([s]).has(action) &&
    resources.some((r) => wildcard(r).test(resource)) &&
    conditionHolds(s.Condition, context)
  );
}

/** One S3 request a worker makes: an object action on a key, or a listing (s3:ListBucket) under a prefix. */
interface S3Request {
  readonly action: string;
  readonly resource: string;
  readonly context: Readonly<Record<string, string>>;
  readonly what: string;
}

function s3Request(action: string, keyOrPrefix: string, what: string): S3Request {
  return action === 's3:ListBucket'
    ? { action, resource: BUCKET_ARN, context: { 's3:prefix': keyOrPrefix }, what }
    : { action, resource: `${BUCKET_ARN}/${keyOrPrefix}`, context: {}, what };
}

/** Each ObjectStore method and the IAM actions the S3 store (src/storage/s3-store.ts) needs for it. */
const IAM_ACTIONS_OF_STORE_METHOD: Readonly<Record<string, readonly string[]>> = {
  put: ['s3:PutObject', 's3:AbortMultipartUpload'], // lib-storage Upload
  get: ['s3:GetObject'],
  getBuffer: ['s3:GetObject'],
  head: ['s3:GetObject'], // HeadObject
  exists: ['s3:GetObject'], // HeadObject
  list: ['s3:ListBucket'],
  listPrefixes: ['s3:ListBucket'],
  delete: ['s3:DeleteObject'],
};

const REF = { jobId: 'job-12', taskId: 'job-12.3' };
const STARTED_MS = 1_700_000_000_000;
const INSTANCE = 'i-0123456789abcdef0';
const RUN = taskLogRunName(REF.taskId, STARTED_MS, INSTANCE);

/**
 * The keys (or listing prefixes) each key function of src/protocol/object-keys.ts that a worker module imports stands
 * for there. A worker module importing one that is missing here fails the test: add it, and to the policy if needed.
 */
const WORKER_KEYS_OF: Readonly<Record<string, readonly string[]>> = {
  checkpointKeys: Object.values(checkpointKeys(REF, 7)),
  checkpointPrefix: [checkpointPrefix(REF)],
  // Recognises the checkpoint keys a listing of checkpointPrefix returns.
  parseCheckpointKey: Object.values(checkpointKeys(REF, 7)),
  taskExitKey: [taskExitKey(REF, 2)],
  // A part of taskLogSegmentKey's keys, not a key.
  taskLogRunName: [],
  taskLogRunPrefix: [taskLogRunPrefix(REF.jobId, REF.taskId, STARTED_MS)],
  taskLogSegmentKey: [taskLogSegmentKey(REF.jobId, RUN, 4)],
  // Recognises what a listing of taskLogRunPrefix returns: segments, and older workers' single objects.
  parseTaskLogKey: [
    taskLogSegmentKey(REF.jobId, RUN, 4),
    taskLogKey(REF.jobId, REF.taskId, STARTED_MS, INSTANCE),
  ],
  parseBuildContextRef: [parseBuildContextRef(`s3://bucket/contexts/${'ab'.repeat(32)}.tar.gz`)?.key ?? ''],
};

/** Worker modules that call the store with keys made elsewhere: the key functions that made them, and where. */
const KEYS_PASSED_IN: Readonly<Record<string, readonly string[]>> = {
  // The manifests of the checkpoints a task restored and uploaded (task-preparation.ts, task-record.ts).
  'src/worker/outside-stops.ts': ['checkpointKeys'],
};

/** The key functions a module imports (as values) from src/protocol/object-keys.ts. */
function keyFunctionsImported(text: string): string[] {
  return [...text.matchAll(/import\s*\{([^}]*)\}\s*from\s*'(?:\.\.?\/)+protocol\/object-keys\.js'/g)].flatMap(
    (m) =>
      (m[1] as string)
        .split(',')
        .map((part) => part.trim())
        .filter((spec) => spec !== '' && !spec.startsWith('type ')),
  );
}

/** The ObjectStore methods a module calls, on a receiver named `store` (`store.x(`, `this.store.x(`, `store().x(`). */
function storeMethodsCalled(text: string): string[] {
  return [...new Set([...text.matchAll(/\bstore(?:\(\))?\.(\w+)\(/g)].map((m) => m[1] as string))];
}

/** The methods of the ObjectStore interface (src/storage/object-store.ts). */
function objectStoreMethods(): string[] {
  const text = readFileSync(join(SRC, 'storage', 'object-store.ts'), 'utf8');
  const body = /export interface ObjectStore \{([\s\S]*?)\n\}/.exec(text)?.[1] ?? '';
  return [...body.matchAll(/^ {2}(\w+)\(/gm)].map((m) => m[1] as string).sort();
}

/** The modules the `fleetwise worker` process loads (static and dynamic imports from its command). */
const WORKER_MODULES = cliSourceModules(['cli/commands/worker.ts']);

interface WorkerStoreUse {
  readonly file: string;
  readonly methods: readonly string[];
  readonly keyFunctions: readonly string[];
}

/** Every worker module that calls the object store: what it calls, and the key functions its keys come from. */
function workerStoreUses(): WorkerStoreUse[] {
  return WORKER_MODULES.map((path) => {
    const text = readFileSync(path, 'utf8');
    const file = relative(PROJECT_ROOT, path);
    return {
      file,
      methods: storeMethodsCalled(text),
      keyFunctions: [...keyFunctionsImported(text), ...(KEYS_PASSED_IN[file] ?? [])],
    };
  }).filter((u) => u.methods.length > 0);
}

/** The S3 requests the worker makes: each store method of a module on each key its key functions stand for. */
function workerRequests(): S3Request[] {
  return workerStoreUses().flatMap((use) =>
    use.methods.flatMap((method) =>
      (IAM_ACTIONS_OF_STORE_METHOD[method] ?? []).flatMap((action) =>
        use.keyFunctions.flatMap((fn) =>
          (WORKER_KEYS_OF[fn] ?? []).map((key) =>
            s3Request(action, key, `${use.file}: store.${method}(${key})`),
          ),
        ),
      ),
    ),
  );
}

describe('infra/worker-iam-policy.json', () => {
  const policy = readPolicy(WORKER_POLICY_PATH);
  const uses = workerStoreUses();
  const requests = workerRequests();

  it('knows every store method and key function the worker uses', () => {
    expect(Object.keys(IAM_ACTIONS_OF_STORE_METHOD).sort()).toEqual(objectStoreMethods());
    // The scan sees the worker's own store calls (so an empty scan cannot pass).
    const files = uses.map((u) => u.file);
    for (const known of ['src/worker/checkpoints.ts', 'src/worker/task-log.ts', 'src/worker/exit-record.ts'])
      expect(files).toContain(known);
    for (const use of uses) {
      for (const method of use.methods)
        expect(IAM_ACTIONS_OF_STORE_METHOD, `${use.file}: store.${method}`).toHaveProperty(method);
      // A module calling the store without a known source of its keys cannot be checked.
      expect(
        use.keyFunctions.length,
        `${use.file}: where its keys come from (KEYS_PASSED_IN)`,
      ).toBeGreaterThan(0);
    }
    const imported = WORKER_MODULES.flatMap((path) => keyFunctionsImported(readFileSync(path, 'utf8')));
    for (const fn of imported) expect(WORKER_KEYS_OF, fn).toHaveProperty(fn);
  });

  it('grants exactly the actions of the SDK calls the worker process can make', () => {
    const calls = callsIn(WORKER_MODULES);
    expect(calls.filter((c) => IAM_ACTIONS_OF[c.key] === undefined).map((c) => c.key)).toEqual([]);
    // Only the S3 store: a worker calls no other AWS API (it reads its identity from the metadata service).
    expect([...new Set(calls.map((c) => c.key.split(':')[0]))].sort()).toEqual(['client-s3', 'lib-storage']);
    const needed = new Set(calls.flatMap((c) => IAM_ACTIONS_OF[c.key] ?? []));
    expect([...actionsOf(policy.Statement)].sort()).toEqual([...needed].sort());
    // The store methods the worker calls need the same actions, so the key-by-key checks below cover them all.
    const byMethods = new Set(
      uses.flatMap((u) => u.methods.flatMap((m) => IAM_ACTIONS_OF_STORE_METHOD[m] ?? [])),
    );
    expect([...byMethods].sort()).toEqual([...needed].sort());
  });

  it('allows every object store call the worker makes, on the keys it makes it on', () => {
    expect(requests.length).toBeGreaterThan(0);
    const refused = requests
      .filter((r) => !policy.Statement.some((s) => statementAllows(s, r.action, r.resource, r.context)))
      .map((r) => `${r.action} ${r.what}`);
    expect(refused).toEqual([]);
  });

  it('grants nothing the worker does not use: each action, resource and listed prefix is some call of its', () => {
    for (const s of policy.Statement) {
      const resources = Array.isArray(s.Resource) ? (s.Resource as string[]) : [s.Resource as string];
      for (const action of actionsOf([s]))
        for (const resource of resources)
          expect(
            requests.some(
              (r) =>
                r.action === action &&
                statementAllows({ ...s, Resource: resource }, action, r.resource, r.context),
            ),
            `${s.Sid ?? '?'}: ${action} on ${resource}`,
          ).toBe(true);
      const prefixes = (s.Condition as Record<string, Record<string, string[]>> | undefined)
        ?.StringLikeIfExists?.['s3:prefix'];
      for (const prefix of prefixes ?? [])
        expect(
          requests.some(
            (r) => r.context['s3:prefix'] !== undefined && wildcard(prefix).test(r.context['s3:prefix']),
          ),
          `${s.Sid ?? '?'}: s3:prefix ${prefix}`,
        ).toBe(true);
    }
  });

  it("keeps the controller's objects from the workers", () => {
    const allowed = (action: string, key: string): boolean =>
      policy.Statement.some((s) => {
        const r = s3Request(action, key, key);
        return statementAllows(s, r.action, r.resource, r.context);
      });
    const controllerKeys = [
      latestBackupKey('bars'),
      jobArchiveKeys('bars', 'job-12').spec,
      LATEST_REPORT_KEY,
    ];
    for (const key of controllerKeys)
      for (const action of ['s3:GetObject', 's3:PutObject', 's3:DeleteObject'])
        expect(allowed(action, key), `${action} ${key}`).toBe(false);
    for (const prefix of ['backups/', 'jobs/', 'reports/', 'contexts/'])
      expect(allowed('s3:ListBucket', prefix), `list ${prefix}`).toBe(false);
    // Build contexts are read, never written: the controller stores what a team uploaded.
    const context = WORKER_KEYS_OF.parseBuildContextRef?.[0] as string;
    expect(allowed('s3:GetObject', context)).toBe(true);
    for (const action of ['s3:PutObject', 's3:DeleteObject'])
      expect(allowed(action, context), action).toBe(false);
    // Logs are written and read, never deleted (the controller's retention deletes them).
    expect(allowed('s3:DeleteObject', taskLogSegmentKey(REF.jobId, RUN, 0))).toBe(false);
    // Every bucket action is on the template's bucket, nothing else.
    for (const s of policy.Statement)
      expect(String(s.Resource)).toMatch(
        /^arn:\$\{AWS::Partition\}:s3:::\$\{ReportsBucket\}(\/[a-z]+\/\*)?$/,
      );
  });

  it('lets S3 answer a read of a missing key "not found", which the worker tells from a failure', () => {
    // S3 answers 404 rather than 403 only to a caller allowed s3:ListBucket, checked without a prefix. A worker
    // restoring a task reads its exit record, which is usually missing (exit-record.ts); refused, it would retry
    // the read as a store failure for as long as the task waits.
    expect(policy.Statement.some((s) => statementAllows(s, 's3:ListBucket', BUCKET_ARN, {}))).toBe(true);
  });
});

describe('infra/controller.yaml', () => {
  const template = readTemplate();

  it('embeds the same statements as infra/iam-policy.json in the controller role', () => {
    const [roleId, role] =
      resourcesOfType(template, 'AWS::IAM::Role').find(([id]) => id === 'ControllerInstanceRole') ?? [];
    expect(roleId).toBe('ControllerInstanceRole');
    const policies = (role?.Policies ?? []) as { PolicyDocument: { Statement: unknown } }[];
    expect(policies).toHaveLength(1);
    expect(role?.ManagedPolicyArns).toBeUndefined();
    expect(placeholders(policies[0]?.PolicyDocument.Statement)).toEqual(readPolicy().Statement);
    // Every placeholder the JSON file uses is a pseudo parameter, a parameter or a resource of the template.
    const names = new Set([...Object.keys(template.Parameters), ...Object.keys(template.Resources)]);
    for (const m of readFileSync(POLICY_PATH, 'utf8').matchAll(/\$\{([^}]+)\}/g))
      expect((m[1] as string).startsWith('AWS::') || names.has(m[1] as string), m[1]).toBe(true);
  });

  it('embeds the same statements as infra/worker-iam-policy.json in the worker role, and passes that role', () => {
    const role = template.Resources.WorkerInstanceRole;
    expect(role?.Type).toBe('AWS::IAM::Role');
    const policies = (role?.Properties?.Policies ?? []) as { PolicyDocument: { Statement: unknown } }[];
    expect(policies).toHaveLength(1);
    expect(role?.Properties?.ManagedPolicyArns).toBeUndefined();
    expect(placeholders(policies[0]?.PolicyDocument.Statement)).toEqual(
      readPolicy(WORKER_POLICY_PATH).Statement,
    );
    const names = new Set([...Object.keys(template.Parameters), ...Object.keys(template.Resources)]);
    for (const m of readFileSync(WORKER_POLICY_PATH, 'utf8').matchAll(/\$\{([^}]+)\}/g))
      expect((m[1] as string).startsWith('AWS::') || names.has(m[1] as string), m[1]).toBe(true);
    // The profile the controller launches workers with holds this role; the store it gives them is the bucket's
    // root, so their keys are the policy's paths.
    expect(template.Resources.WorkerInstanceProfile?.Properties?.Roles).toEqual([
      { Ref: 'WorkerInstanceRole' },
    ]);
    const config = controllerConfigWith(template, required);
    expect(config.ec2?.instanceProfile).toBe('WorkerInstanceProfile-id');
    expect(config.bucket).toBe(physicalIdOf['AWS::S3::Bucket']);
    expect(config.objectStore).toBeUndefined();
  });

  it('has an encrypted, versioned bucket with every public access block on', () => {
    const buckets = resourcesOfType(template, 'AWS::S3::Bucket');
    expect(buckets).toHaveLength(1);
    const bucket = buckets[0]?.[1] as Json;
    const sse = (bucket.BucketEncryption as Json).ServerSideEncryptionConfiguration as Json[];
    expect(['AES256', 'aws:kms']).toContain((sse[0]?.ServerSideEncryptionByDefault as Json).SSEAlgorithm);
    expect(bucket.VersioningConfiguration).toEqual({ Status: 'Enabled' });
    expect(bucket.PublicAccessBlockConfiguration).toEqual({
      BlockPublicAcls: true,
      BlockPublicPolicy: true,
      IgnorePublicAcls: true,
      RestrictPublicBuckets: true,
    });
  });

  it('opens only the API port on the controller and the probe port between workers, only to the workers', () => {
    const groups = resourcesOfType(template, 'AWS::EC2::SecurityGroup');
    expect(groups.map(([id]) => id).sort()).toEqual(['ControllerSecurityGroup', 'WorkerSecurityGroup']);
    const standalone = resourcesOfType(template, 'AWS::EC2::SecurityGroupIngress').map(([, p]) => p);
    const ingress: { group: unknown; rule: Json }[] = [
      ...groups.flatMap(([id, p]) =>
        ((p.SecurityGroupIngress ?? []) as Json[]).map((rule) => ({ group: { Ref: id }, rule })),
      ),
      ...standalone.map((rule) => ({ group: rule.GroupId, rule })),
    ];
    expect(ingress).toHaveLength(2);
    const [api, probe] = [...ingress].sort((a, b) =>
      JSON.stringify(a.group).localeCompare(JSON.stringify(b.group)),
    );
    expect(api?.group).toEqual({ Ref: 'ControllerSecurityGroup' });
    expect(api?.rule).toMatchObject({
      IpProtocol: 'tcp',
      FromPort: { Ref: 'ApiPort' },
      ToPort: { Ref: 'ApiPort' },
    });
    // The latency probe: the worker's default port, from workers to workers.
    expect(probe?.group).toEqual({ Ref: 'WorkerSecurityGroup' });
    expect(probe?.rule).toMatchObject({
      IpProtocol: 'tcp',
      FromPort: DEFAULT_PROBE_PORT,
      ToPort: DEFAULT_PROBE_PORT,
    });
    for (const { rule } of ingress) {
      expect(rule.SourceSecurityGroupId).toEqual({ Ref: 'WorkerSecurityGroup' });
      expect(Object.keys(rule).filter((k) => /Cidr|PrefixList/.test(k))).toEqual([]);
    }
  });

  it('runs the controller with its profile, in its security group, from the configured parameters', () => {
    for (const p of [
      'VpcId',
      'ControllerSubnetId',
      'WorkerSubnetIds',
      'AmiId',
      'InstanceType',
      'ClusterName',
      'ApiPort',
    ])
      expect(template.Parameters).toHaveProperty(p);
    const instance = resourcesOfType(template, 'AWS::EC2::Instance');
    expect(instance).toHaveLength(1);
    const props = instance[0]?.[1] as Json;
    expect(props.IamInstanceProfile).toEqual({ Ref: 'ControllerInstanceProfile' });
    expect(props.SecurityGroupIds).toEqual([{ Ref: 'ControllerSecurityGroup' }]);
    expect(props.MetadataOptions).toMatchObject({ HttpTokens: 'required' });
    const sub = ((props.UserData as Json)['Fn::Base64'] as Json)['Fn::Sub'] as [string, Json];
    expect(sub[0]).toContain('fleetwise controller --config /etc/fleetwise.yaml');
    expect(sub[0]).toMatch(/nodejs\.org\/dist\/v\$\{NodeVersion\}/);
    expect(sub[0]).toContain('systemctl enable --now fleetwise-controller.service');
    // !Sub substitutes every ${…}: each must name a parameter, a resource, a pseudo parameter or a Sub variable.
    const names = new Set([
      ...Object.keys(template.Parameters),
      ...Object.keys(template.Resources),
      ...Object.keys(sub[1]),
    ]);
    for (const m of sub[0].matchAll(/\$\{([^}!]+)\}/g))
      expect((m[1] as string).startsWith('AWS::') || names.has(m[1] as string), m[1]).toBe(true);
    // The Node.js it installs is one fleetwise runs on (package.json's engines), and the pattern takes no other.
    const node = template.Parameters.NodeVersion as { Default: string; AllowedPattern: string };
    const engines = (
      JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }
    ).engines.node;
    expect(engines).toBe('^20.19.0 || >=22.12.0');
    const allowed = new RegExp(node.AllowedPattern);
    expect(allowed.test(node.Default)).toBe(true);
    for (const ok of ['20.19.0', '20.20.2', '22.12.0', '22.20.1', '24.1.0'])
      expect(allowed.test(ok), ok).toBe(true);
    for (const no of ['20.18.1', '22.11.0', '21.7.3', '18.20.4']) expect(allowed.test(no), no).toBe(false);
    for (const o of ['ApiUrl', 'ReportsBucketName', 'WorkerSecurityGroupId', 'WorkerInstanceProfileName'])
      expect(template.Outputs).toHaveProperty(o);
  });

  const required = {
    VpcId: 'vpc-0123456789abcdef0',
    ControllerSubnetId: 'subnet-0123456789abcdef0',
    WorkerSubnetIds: 'subnet-0123456789abcdef0,subnet-0fedcba9876543210',
    ClusterName: 'bars',
  };

  it('writes a controller config the schema accepts, with the stack its resources name', () => {
    const config = controllerConfigWith(template, required);
    expect(config.cluster).toBe('bars');
    expect(config.interruptionQueue).toBe(physicalIdOf['AWS::SQS::Queue']);
    expect(config.ec2?.subnetIds).toEqual(['subnet-0123456789abcdef0', 'subnet-0fedcba9876543210']);
    expect(config.ec2?.worker?.controllerUrl).toBe('http://10.0.0.5:8080');
  });

  it('passes an optional worker AMI (a GPU type needs one with the NVIDIA driver) to ec2.amiId', () => {
    const param = template.Parameters.WorkerAmiId as {
      Default: string;
      AllowedPattern: string;
      Description: string;
    };
    expect(param.Default).toBe('');
    expect(param.Description).toMatch(/NVIDIA driver/);
    const allowed = new RegExp(param.AllowedPattern);
    for (const ok of ['', 'ami-0123456789abcdef0', 'ami-12345678']) expect(allowed.test(ok), ok).toBe(true);
    for (const no of ['ami-XYZ', 'ami-0123 ', 'i-0123456789abcdef0'])
      expect(allowed.test(no), no).toBe(false);
    expect(
      controllerConfigWith(template, { ...required, WorkerAmiId: 'ami-0123456789abcdef0' }).ec2?.amiId,
    ).toBe('ami-0123456789abcdef0');
    // Left out, the controller looks up the newest Amazon Linux 2023 (src/cloud/aws/discovery.ts).
    expect(controllerConfigWith(template, required).ec2?.amiId).toBeUndefined();
  });

  it("takes only cluster names that the interruption queue's name and the controller's config both take", () => {
    const param = template.Parameters.ClusterName as {
      AllowedPattern: string;
      ConstraintDescription: string;
    };
    const allowed = new RegExp(param.AllowedPattern);
    const queue = template.Resources.InterruptionQueue?.Properties as Json;
    // SQS: a standard queue's name is 1 to 80 letters, digits, hyphens and underscores.
    const sqsTakes = (name: string): boolean =>
      /^[A-Za-z0-9_-]{1,80}$/.test(String(evaluate(template, queue.QueueName, { ClusterName: name })));
    const configTakes = (name: string): boolean =>
      controllerConfigSchema.shape.cluster.safeParse(name).success;
    // EC2 tag values (the workers' fleetwise:cluster, the controller's Name): letters, digits, spaces and
    // _ . : / = + - @, at most 256.
    const instance = template.Resources.ControllerInstance?.Properties as Json;
    const tagTakes = (name: string): boolean =>
      [
        name,
        ...(evaluate(template, instance.Tags, { ClusterName: name }) as { Value: string }[]).map(
          (t) => t.Value,
        ),
      ].every((value) => /^[\p{L}\p{Z}\p{N}_.:/=+\-@]{0,256}$/u.test(value));
    const printable = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i));
    const names = [
      ...printable.flatMap((c) => [c, `a${c}`, `a${c}b`]),
      'bars',
      'x'.repeat(63),
      'x'.repeat(64),
      `a${'-'.repeat(62)}`,
      '',
    ];
    for (const name of names) {
      expect(allowed.test(name), JSON.stringify(name)).toBe(sqsTakes(name) && configTakes(name));
      if (allowed.test(name)) expect(tagTakes(name), JSON.stringify(name)).toBe(true);
    }
    // Those the pattern takes make a config the controller takes, naming that cluster.
    for (const name of ['a', 'bars_2-x', 'x'.repeat(63)])
      expect(controllerConfigWith(template, { ...required, ClusterName: name }).cluster).toBe(name);
    for (const name of ['bars.prod', 'team:a']) expect(allowed.test(name), name).toBe(false);
    expect(param.ConstraintDescription).toMatch(/letters, digits/);
  });

  it("has workers install the controller's own version of a registry package, and any other spec as given", () => {
    const param = template.Parameters.FleetwisePackage as { Default: string; AllowedPattern: string };
    const allowed = new RegExp(param.AllowedPattern);
    // What the template takes, the worker bootstrap takes (both paste it into a script in single quotes).
    const bootstrapTakes = (spec: string): boolean =>
      workerBootstrapSchema.shape.packageSpec.safeParse(spec).success;
    for (const spec of [
      'fleetwise',
      'fleetwise@1.4.2',
      'https://x.example/f-1.0.0.tgz',
      "a'b",
      'a b',
      'a;b',
      '$(x)',
      '',
    ])
      expect(allowed.test(spec), spec).toBe(bootstrapTakes(spec) && spec !== '');
    const specOf = (spec: string): string | undefined =>
      controllerConfigWith(template, { ...required, FleetwisePackage: spec }).ec2?.worker?.packageSpec;
    // A name, name@version or name@tag: npm installed one exact version on the controller, and workers install that
    // one (the controller's own name@version), not whatever npm's latest is when each launches.
    expect(param.Default).toBe('fleetwise');
    for (const spec of [
      'fleetwise',
      'fleetwise@1.4.2',
      'fleetwise@next',
      '@acme/fleetwise',
      '@acme/fleetwise@2.0.0',
    ])
      expect(specOf(spec), spec).toBeUndefined();
    // A tarball (URL or file) or a git spec is no registry version: passed on as given.
    for (const spec of [
      'https://x.example/fleetwise-1.0.0.tgz',
      'fleetwise-1.0.0.tgz',
      'github:acme/fleetwise',
      'acme/fleetwise',
      'git+https://github.com/acme/fleetwise.git',
    ])
      expect(specOf(spec), spec).toBe(spec);
    // Left out, the controller pins workers to its own name@version.
    const own = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
      name: string;
      version: string;
    };
    const script = Buffer.from(
      workerUserDataBase64({ controllerUrl: 'http://10.0.0.5:8080', workerToken: 'w'.repeat(32) }),
      'base64',
    ).toString('utf8');
    expect(script).toContain(`FLEETWISE_PACKAGE='${own.name}@${own.version}'`);
  });

  it("lets only the stack's own EventBridge rules send to the interruption queue", () => {
    const policies = resourcesOfType(template, 'AWS::SQS::QueuePolicy');
    expect(policies).toHaveLength(1);
    const props = policies[0]?.[1] as { Queues: unknown; PolicyDocument: { Statement: Json[] } };
    expect(props.Queues).toEqual([{ Ref: 'InterruptionQueue' }]);
    const rules = resourcesOfType(template, 'AWS::Events::Rule');
    expect(rules.map(([id]) => id).sort()).toEqual(['RebalanceRecommendationRule', 'SpotInterruptionRule']);
    for (const [, rule] of rules)
      expect(rule.Targets).toEqual([
        { Id: 'InterruptionQueue', Arn: { 'Fn::GetAtt': 'InterruptionQueue.Arn' } },
      ]);
    expect(props.PolicyDocument.Statement).toHaveLength(1);
    const [statement] = props.PolicyDocument.Statement;
    expect(statement).toMatchObject({ Effect: 'Allow', Action: 'sqs:SendMessage' });
    expect(statement?.Principal).toEqual({ Service: 'events.amazonaws.com' });
    const condition = statement?.Condition as { ArnEquals: { 'aws:SourceArn': unknown[] } };
    expect(Object.keys(condition)).toEqual(['ArnEquals']);
    expect(Object.keys(condition.ArnEquals)).toEqual(['aws:SourceArn']);
    expect(condition.ArnEquals['aws:SourceArn'].map((a) => JSON.stringify(a)).sort()).toEqual(
      rules.map(([id]) => JSON.stringify({ 'Fn::GetAtt': `${id}.Arn` })).sort(),
    );
  });
});
