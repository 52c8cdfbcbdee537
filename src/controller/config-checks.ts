import type { Catalog } from '../core/catalog.js';
import { familyQuotaGroup, spotQuotaGroup } from '../core/quota-groups.js';
import { nearestKey } from '../core/strict-object.js';
import { LOCAL_LAUNCH_DELAYS } from '../cloud/local/local-delays.js';
import type { ParsedControllerConfig } from './config.js';

/**
 * Checks of a parsed configuration that its schema cannot make: against the catalog the controller plans with, and
 * between settings where it matters which were given and which hold a default. config-loading.ts runs them and names
 * each problem's field as it names every other (the flag that gave it, or the field with its line in the file).
 */

export type FieldPath = readonly (string | number)[];

export interface ConfigProblem {
  readonly path: FieldPath;
  readonly message: string;
}

/** How a message names a setting other than the one the problem is about: its field and line, or its flag. */
export type SettingName = (path: FieldPath) => string;

/**
 * Names in the file that must be the catalog's: a misspelt one would do nothing without a word. A `localBootSeconds`
 * type would boot at the default delay; a `caps.familyGroups` family would leave the family in AWS's group, and a
 * quota on a group no family of the catalog falls in would hold nothing back.
 */
export function catalogProblems(config: ParsedControllerConfig, catalog: Catalog): ConfigProblem[] {
  const typeNames = catalog.types.map((t) => t.name);
  const families = [...new Set(catalog.types.map((t) => t.family))];
  // A family list is short enough to show when no near name is found; a type list is not.
  const notIn = (what: 'type' | 'family', name: string, known: readonly string[]): string => {
    const near = nearestKey(name, known);
    if (near !== undefined) return `not an instance ${what} of the catalog, did you mean ${near}?`;
    return `not an instance ${what} of the catalog${what === 'family' ? ` (its families: ${known.join(', ')})` : ''}`;
  };
  const bootTypes = Object.keys(config.localBootSeconds)
    .filter((name) => !typeNames.includes(name))
    .map((name) => ({ path: ['localBootSeconds', name], message: notIn('type', name, typeNames) }));
  const familyGroups = config.caps.familyGroups ?? {};
  const unknownFamilies = Object.keys(familyGroups)
    .filter((family) => !families.includes(family))
    .map((family) => ({
      path: ['caps', 'familyGroups', family],
      message: notIn('family', family, families),
    }));
  const emptyGroups = (config.caps.quotas ?? []).flatMap((q, i) => {
    const message = emptyQuotaGroupProblem(q.group, catalog, familyGroups, 'caps.familyGroups');
    return message === undefined ? [] : [{ path: ['caps', 'quotas', i, 'group'], message }];
  });
  return [...bootTypes, ...unknownFamilies, ...emptyGroups];
}

/**
 * Why a quota on `group` would hold nothing back, when no family of the catalog is in it (on demand or spot, with
 * `familyGroups` moving families between groups); undefined when some family is. `familyGroupsAt` names where families
 * are mapped to groups, for the remedy. A controller config's `caps.quotas` and `simulate --quota` are checked alike.
 */
export function emptyQuotaGroupProblem(
  group: string,
  catalog: Catalog,
  familyGroups: Readonly<Record<string, string>>,
  familyGroupsAt: string,
): string | undefined {
  const families = [...new Set(catalog.types.map((t) => t.family))];
  const onDemand = [...new Set(families.map((f) => familyQuotaGroup(f, familyGroups)))];
  if (onDemand.includes(group) || onDemand.map(spotQuotaGroup).includes(group)) return undefined;
  return (
    `no family of the catalog is in quota group ${group}, so this quota would hold nothing back ` +
    `(the catalog's groups: ${onDemand.join(', ')}, each with its -spot twin); map a family to it in ` +
    `${familyGroupsAt}, or name the group its families are in`
  );
}

/** What a local worker takes from the end of its instance's boot until it has registered (the planner's figure). */
const LOCAL_WORKER_START_SECONDS =
  LOCAL_LAUNCH_DELAYS.workerStartSeconds + LOCAL_LAUNCH_DELAYS.workerRegisterSeconds;

/**
 * Local mode: an instance whose boot, with its worker's start and registration after it, reaches the registration
 * timeout is replaced before its worker registers, every time: its type's launches only pause, ever longer, and its
 * jobs never start. A timeout the worker's start alone reaches does that to every type: six workers launched at once
 * on a two-vCPU host registered 2.3 to 3.3 s after their launch, and all six were replaced under a 2 s timeout.
 */
export function localBootProblems(
  config: ParsedControllerConfig,
  timeout: {
    /** The timeout as the message names it, with its value and where it comes from. */
    readonly named: string;
    /** The setting that raises it: the field, and the flag when the command takes one. */
    readonly setting: string;
  },
): ConfigProblem[] {
  if (config.provider !== 'local') return [];
  const seconds = config.workerRegistration.timeoutSeconds;
  if (seconds <= LOCAL_WORKER_START_SECONDS) {
    const slowest = Math.max(0, ...Object.values(config.localBootSeconds));
    return [
      {
        path: ['workerRegistration', 'timeoutSeconds'],
        message:
          `${seconds} s: a local worker starts and registers about ${LOCAL_WORKER_START_SECONDS} s after its ` +
          'launch (later while others start), so every instance would be replaced before its worker registers, and ' +
          `no job would start; in local mode it must be above ${slowest + LOCAL_WORKER_START_SECONDS} s` +
          (slowest > 0
            ? ` (the slowest localBootSeconds, ${slowest} s, and the worker's start after it)`
            : ''),
      },
    ];
  }
  return Object.entries(config.localBootSeconds)
    .filter(([, boot]) => boot + LOCAL_WORKER_START_SECONDS >= seconds)
    .map(([type, boot]) => {
      const most = seconds - LOCAL_WORKER_START_SECONDS;
      return {
        path: ['localBootSeconds', type],
        message:
          `${boot} s of boot, with the worker's start and registration after it (about ` +
          `${LOCAL_WORKER_START_SECONDS} s), reaches the registration timeout, ${timeout.named}: every ${type} ` +
          `would be replaced before its worker registers, and its jobs would never start; raise ${timeout.setting} ` +
          `above ${boot + LOCAL_WORKER_START_SECONDS} s` +
          (most > 0 ? `, or lower this boot below ${most} s` : ''),
      };
    });
}

/**
 * `localBootSeconds` delays local worker processes only: under any other provider an instance boots as its cloud boots
 * it, and the setting would be ignored without a word.
 */
export function localOnlyProblems(
  config: ParsedControllerConfig,
  provider: {
    /** The provider as the message names it, with where it comes from. */
    readonly named: string;
    /** How to choose local mode: the field, and the flag when the command takes one. */
    readonly local: string;
  },
): ConfigProblem[] {
  if (config.provider === 'local' || Object.keys(config.localBootSeconds).length === 0) return [];
  return [
    {
      path: ['localBootSeconds'],
      message:
        'applies to the local provider only (its instances are worker processes, started that much later), and the ' +
        `provider is ${provider.named}: an EC2 instance boots in EC2's own time; remove it, or choose local mode ` +
        `with ${provider.local}`,
    },
  ];
}

/** The registration backoff as it runs: doubling from the base up to the max. */
export interface RegistrationBackoff {
  readonly backoffBaseSeconds: number;
  readonly backoffMaxSeconds: number;
}

/**
 * The backoff doubles from its base up to its max, so a base above the max is a contradiction when both were given:
 * refused. When only one was given, the other follows it instead of silently undoing it: a base alone (the
 * `--registration-backoff-seconds` flag, "the first backoff") raises the default max to it, a max alone lowers the
 * default base to it.
 */
export function registrationBackoff(
  given: RegistrationBackoff,
  baseGiven: boolean,
  maxGiven: boolean,
  maxName: SettingName,
): RegistrationBackoff | ConfigProblem {
  const { backoffBaseSeconds: base, backoffMaxSeconds: max } = given;
  if (base <= max) return given;
  if (baseGiven && maxGiven)
    return {
      path: ['workerRegistration', 'backoffBaseSeconds'],
      message:
        `${base} s is above ${maxName(['workerRegistration', 'backoffMaxSeconds'])}, ${max} s: the launch backoff ` +
        'doubles from its base up to its max; lower the base or raise the max',
    };
  return baseGiven ? { ...given, backoffMaxSeconds: base } : { ...given, backoffBaseSeconds: max };
}
