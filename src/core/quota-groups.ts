import type { InstanceType } from './catalog.js';

/**
 * AWS-style quotas per family group: AWS counts running on-demand capacity in vCPUs per quota group ("Running
 * On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", "Running On-Demand P instances", …) and keeps separate
 * quotas for spot requests; fleetwise adds an optional GPU count per group because GPU budgets are usually what teams
 * argue about. In the core, so that the scheduler and the queue layer name the groups alike.
 */

export interface FamilyGroupQuota {
  /** Group name, e.g. `standard`, `p`, `g-vt` (see `awsQuotaGroup`), or `<group>-spot` for its spot quota. */
  readonly group: string;
  readonly maxVcpus?: number | undefined;
  readonly maxGpus?: number | undefined;
  /**
   * Where the quota was set, as a message about it names it: the flag as typed (`--quota p:gpus=2`) or a config file's
   * entry (`fleetwise.yaml: caps.quotas.0 (group p, maxGpus 2)`). Absent: named as the `--quota` flag that would set it.
   */
  readonly source?: string | undefined;
}

/**
 * AWS on-demand quota group of an instance family (Service Quotas, EC2 "Running On-Demand … instances").
 * Unknown prefixes fall into `standard`, which is where AWS puts every general-purpose family.
 */
export function awsQuotaGroup(family: string): string {
  const f = family.toLowerCase();
  if (/^(p)\d/.test(f)) return 'p';
  if (/^(g|vt)\d/.test(f)) return 'g-vt';
  if (/^inf\d/.test(f)) return 'inf';
  if (/^trn\d/.test(f)) return 'trn';
  if (/^dl\d/.test(f)) return 'dl';
  if (/^f\d/.test(f)) return 'f';
  if (/^x\d/.test(f)) return 'x';
  if (/^hpc\d/.test(f)) return 'hpc';
  return 'standard';
}

/**
 * AWS keeps separate vCPU quotas for spot requests ("All P Spot Instance Requests", …): a spot instance counts
 * against its group's spot quota, named `<group>-spot` (e.g. `p-spot`), and not against the on-demand one.
 */
export function spotQuotaGroup(group: string): string {
  return `${group}-spot`;
}

/** The on-demand quota group of a family: an override in `familyGroups`, else AWS's. */
export function familyQuotaGroup(
  family: string,
  familyGroups: Readonly<Record<string, string>> | undefined,
): string {
  return familyGroups?.[family] ?? awsQuotaGroup(family);
}

/**
 * Whether one instance of `type` fits the quotas of its group (or, where spot may be bought, its spot group's): a type
 * that fits none can never be bought, and a plan that counts on it is refused round after round.
 */
export function typeFitsQuotas(
  type: InstanceType,
  quotas: readonly FamilyGroupQuota[],
  familyGroups: Readonly<Record<string, string>> | undefined,
  spot = false,
): boolean {
  const group = familyQuotaGroup(type.family, familyGroups);
  const fits = (g: string): boolean =>
    quotas.every(
      (q) =>
        q.group !== g ||
        ((q.maxGpus === undefined || type.capacity[0] <= q.maxGpus + 1e-9) &&
          (q.maxVcpus === undefined || type.capacity[1] <= q.maxVcpus + 1e-9)),
    );
  return fits(group) || (spot && fits(spotQuotaGroup(group)));
}

/** vCPUs and GPUs counted against one quota group. */
export interface QuotaUse {
  readonly vcpus: number;
  readonly gpus: number;
}

/** One broken quota dimension, named as the caps name it (`quota p-spot maxGpus`), with its figures. */
export interface QuotaBreach {
  readonly cap: string;
  readonly group: string;
  readonly dimension: 'maxGpus' | 'maxVcpus';
  readonly use: number;
  readonly max: number;
}

const QUOTA_EPS = 1e-9;

/**
 * The quotas `use` (per group) breaks, in the quotas' order (each quota's vCPUs, then GPUs): the one comparison the
 * queue layer's caps and the scheduler's cap cut both make.
 */
export function quotaBreaches(
  use: ReadonlyMap<string, QuotaUse>,
  quotas: readonly FamilyGroupQuota[],
): QuotaBreach[] {
  const out: QuotaBreach[] = [];
  for (const q of quotas) {
    const u = use.get(q.group) ?? { vcpus: 0, gpus: 0 };
    const limits = [
      ['maxVcpus', q.maxVcpus, u.vcpus],
      ['maxGpus', q.maxGpus, u.gpus],
    ] as const;
    for (const [dimension, max, used] of limits)
      if (max !== undefined && used > max + QUOTA_EPS)
        out.push({ cap: `quota ${q.group} ${dimension}`, group: q.group, dimension, use: used, max });
  }
  return out;
}
