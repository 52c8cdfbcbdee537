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
  const onDemand = [...new Set(families.map((f) => familyQuotaGroup(f, familyGroups)))];
  const held = new Set([...onDemand, ...onDemand.map(spotQuotaGroup)]);
  const emptyGroups = (config.caps.quotas ?? []).flatMap((q, i) =>
    held.has(q.group)
      ? []
      : [
          {
            path: ['caps', 'quotas', i, 'group'],
            message:
              `no family of the catalog is in quota group ${q.group}, so this quota would hold nothing back ` +
              `(the catalog's groups: ${onDemand.join(', ')}, each with its -spot twin); map a family to it in ` +
              'caps.familyGroups, or name the group its families are in',
          },
        ],
  );
  return [...bootTypes, ...unknownFamilies, ...emptyGroups];
}

/** What a local worker takes from the end of its instance's boot until it has registered (the planner's figure). */
const LOCAL_WORKER_START_SECONDS =
  LOCAL_LAUNCH_DELAYS.workerStartSeconds + LOCAL_LAUNCH_DELAYS.workerRegisterSeconds;

/**
 * Local mode: an instance whose boot, with its worker's start and registration after it, reaches the registration
 * timeout is replaced before its worker registers, every time: its type's launches only pause, ever longer, and its
 * jobs never start.
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
