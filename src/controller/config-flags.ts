/** The controller's command-line flags and where each lands in the configuration. */

type Json = Record<string, unknown>;

/** Raw commander values: strings, booleans and lists as commander gives them. */
export interface ControllerFlags {
  readonly config?: string;
  readonly provider?: string;
  readonly cluster?: string;
  readonly region?: string;
  readonly stateDir?: string;
  readonly state?: string;
  readonly bucket?: string;
  readonly objectStore?: string;
  readonly listen?: string;
  readonly advertiseUrl?: string;
  readonly metricsAuth?: string;
  readonly roundSeconds?: string;
  readonly pollSeconds?: string;
  readonly catalog?: string;
  readonly maxCostPerHour?: string;
  readonly maxInstances?: string;
  readonly maxMigrationsPerRound?: string;
  readonly dryRun?: boolean;
  readonly orphans?: string;
  readonly registrationTimeoutSeconds?: string;
  readonly registrationBackoffSeconds?: string;
  readonly reportEverySeconds?: string;
  readonly backupSeconds?: string;
  readonly backupKeep?: string;
  readonly priceRefreshHours?: string;
  readonly ami?: string;
  readonly availabilityZones?: string;
  readonly subnets?: string;
  readonly securityGroups?: string;
  readonly instanceProfile?: string;
  readonly keyName?: string;
  readonly workerControllerUrl?: string;
  readonly userDataTemplate?: string;
  readonly identityCertificate?: string;
  readonly executor?: string;
  readonly heartbeatTimeoutSeconds?: string;
  readonly workerGiveUpSeconds?: string;
  readonly scheduler?: string;
  readonly interruptionQueue?: string;
}

/** Where each flag lands in the configuration (for merging and for error messages). */
export const FLAG_PATHS: readonly (readonly [
  keyof ControllerFlags,
  readonly string[],
  'string' | 'number' | 'boolean' | 'list',
])[] = [
  ['provider', ['provider'], 'string'],
  ['cluster', ['cluster'], 'string'],
  ['region', ['region'], 'string'],
  ['stateDir', ['stateDir'], 'string'],
  ['state', ['state'], 'string'],
  ['bucket', ['bucket'], 'string'],
  ['objectStore', ['objectStore'], 'string'],
  ['listen', ['listen'], 'string'],
  ['advertiseUrl', ['advertiseUrl'], 'string'],
  ['metricsAuth', ['metricsAuth'], 'string'],
  ['roundSeconds', ['roundSeconds'], 'number'],
  ['pollSeconds', ['pollSeconds'], 'number'],
  ['catalog', ['catalog'], 'string'],
  ['maxCostPerHour', ['caps', 'maxCostPerHour'], 'number'],
  ['maxInstances', ['caps', 'maxInstances'], 'number'],
  ['maxMigrationsPerRound', ['caps', 'maxMigrationsPerRound'], 'number'],
  ['dryRun', ['dryRun'], 'boolean'],
  ['orphans', ['orphans'], 'string'],
  ['registrationTimeoutSeconds', ['workerRegistration', 'timeoutSeconds'], 'number'],
  ['registrationBackoffSeconds', ['workerRegistration', 'backoffBaseSeconds'], 'number'],
  ['reportEverySeconds', ['reportEverySeconds'], 'number'],
  ['backupSeconds', ['backupSeconds'], 'number'],
  ['backupKeep', ['backupKeep'], 'number'],
  ['priceRefreshHours', ['priceRefreshHours'], 'number'],
  ['ami', ['ec2', 'amiId'], 'string'],
  ['subnets', ['ec2', 'subnetIds'], 'list'],
  ['securityGroups', ['ec2', 'securityGroupIds'], 'list'],
  ['instanceProfile', ['ec2', 'instanceProfile'], 'string'],
  ['keyName', ['ec2', 'keyName'], 'string'],
  ['workerControllerUrl', ['ec2', 'worker', 'controllerUrl'], 'string'],
  ['userDataTemplate', ['ec2', 'worker', 'templatePath'], 'string'],
  ['identityCertificate', ['ec2', 'worker', 'identityCertificate'], 'string'],
  ['executor', ['executor'], 'string'],
  ['heartbeatTimeoutSeconds', ['workerHeartbeatTimeoutSeconds'], 'number'],
  ['workerGiveUpSeconds', ['workerGiveUpSeconds'], 'number'],
  ['scheduler', ['scheduler', 'name'], 'string'],
  ['interruptionQueue', ['interruptionQueue'], 'string'],
];

export function flagNameOf(field: keyof ControllerFlags): string {
  return `--${field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

/**
 * Flags that say how EC2 instances are launched (image, network, access, user data), how their workers' identity is
 * checked, or where EC2's interruption events come from. Local mode launches no EC2 instance: one given there would be
 * ignored, or leave the `ec2.worker` section it fills incomplete and blame a flag the user never gave.
 * (`--worker-controller-url` is not one: local mode's workers reach the API there too.)
 */
export const EC2_ONLY_FLAGS: readonly (keyof ControllerFlags)[] = [
  'ami',
  'subnets',
  'securityGroups',
  'instanceProfile',
  'keyName',
  'userDataTemplate',
  'identityCertificate',
  'interruptionQueue',
];

/** Each EC2-only flag given while the provider (the flags' over the file's) is local, as a problem naming it. */
export function ec2OnlyFlagProblems(flags: ControllerFlags, provider: unknown): string[] {
  if (provider !== 'local') return [];
  return EC2_ONLY_FLAGS.filter((flag) => flags[flag] !== undefined).map(
    (flag) =>
      `${flagNameOf(flag)} applies to --provider aws only: local mode launches no EC2 instance (leave it out)`,
  );
}

/**
 * File settings a flag replaces, by the flag's path: another way of saying what the flag says (`--subnets` and the
 * file's `ec2.placements` both say where instances go). Kept, they would beat the flag or be refused with it, while
 * flags override the file.
 */
const REPLACES: ReadonlyMap<string, readonly (readonly string[])[]> = new Map([
  ['ec2.subnetIds', [['ec2', 'placements']]],
]);

/** Lay one flag's value over the file at its path, dropping the file's settings it replaces (`REPLACES`). */
export function setPath(target: Json, path: readonly string[], value: unknown): void {
  for (const replaced of REPLACES.get(path.join('.')) ?? []) deletePath(target, replaced);
  let node = target;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) node[key] = {};
    node = node[key] as Json;
  }
  node[path[path.length - 1] as string] = value;
}

function deletePath(target: Json, path: readonly string[]): void {
  let node: unknown = target;
  for (const key of path.slice(0, -1)) {
    if (typeof node !== 'object' || node === null || Array.isArray(node)) return;
    node = (node as Json)[key];
  }
  if (typeof node === 'object' && node !== null && !Array.isArray(node))
    delete (node as Json)[path[path.length - 1] as string];
}

export function flagValue(raw: string | boolean, kind: 'string' | 'number' | 'boolean' | 'list'): unknown {
  if (kind === 'boolean') return raw === true || raw === 'true';
  if (typeof raw !== 'string') return raw;
  if (kind === 'list')
    return raw
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
  if (kind === 'number') {
    const trimmed = raw.trim();
    // Leave a non-number as a string: the schema then says "expected number" for that flag.
    return /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(trimmed) ? Number(trimmed) : raw;
  }
  return raw;
}
