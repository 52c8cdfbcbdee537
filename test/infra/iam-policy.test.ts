import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, type CollectionTag, type ScalarTag, type YAMLMap, type YAMLSeq } from 'yaml';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { controllerConfigSchema } from '../../src/controller/config.js';
import { DEFAULT_PROBE_PORT } from '../../src/worker/latency-probe.js';

/**
 * The controller's least-privilege IAM policy (infra/iam-policy.json, embedded in infra/controller.yaml) must name
 * exactly the AWS actions the source calls: this test scans src/ for the AWS SDK commands, paginators and lib-storage
 * uploads in use, maps each to its IAM actions, and compares with the policy in both directions.
 */

const SRC = join(PROJECT_ROOT, 'src');
const POLICY_PATH = join(PROJECT_ROOT, 'infra', 'iam-policy.json');
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
  return sourceFiles(SRC).flatMap((path) =>
    sdkCallsIn(readFileSync(path, 'utf8'), relative(PROJECT_ROOT, path)),
  );
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

function readPolicy(): { Version: string; Statement: Statement[] } {
  return JSON.parse(readFileSync(POLICY_PATH, 'utf8')) as { Version: string; Statement: Statement[] };
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

/** The /etc/fleetwise.yaml the controller's user data writes with these parameters, parsed by the config schema. */
function controllerConfigWith(template: Template, params: Readonly<Record<string, string>>) {
  const instance = template.Resources.ControllerInstance?.Properties as Json;
  const userData = evaluate(template, (instance.UserData as Json)['Fn::Base64'], params) as string;
  const heredoc = /cat > \/etc\/fleetwise\.yaml <<CONFIG\n([\s\S]*?)\nCONFIG\n/.exec(userData)?.[1];
  if (heredoc === undefined) throw new Error('the user data writes no /etc/fleetwise.yaml');
  return controllerConfigSchema.parse(parse(heredoc.replaceAll('$PRIVATE_IP', '10.0.0.5')));
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
