import type { InstanceType } from '../../../core/catalog.js';
import type { Market } from '../../../core/market.js';
import { awsQuotaGroup, spotQuotaGroup } from '../../../core/quota-groups.js';
import type { QuotaExceededError } from '../../../cloud/provider.js';

/**
 * How long a quota refusal is remembered (seconds). A quota moves slowly: it grows by a Service Quotas request (hours
 * to days) or as the account's instances end. Two default rounds long, so a job no type of the group can be had for
 * costs one RunInstances every ten minutes, not a walk through every larger type of the group each round.
 */
export const QUOTA_REFUSAL_SECONDS = 600;

/** EC2's refusal for an instance-count limit of one type, remembered for that type only. */
export const INSTANCE_LIMIT_CODE = 'InstanceLimitExceeded';

/** A quota refusal remembered for one quota group (spot groups apart): types of at least `vcpus` are refused too. */
export interface QuotaRefusal {
  readonly vcpus: number;
  readonly typeName: string;
  readonly code: string;
  readonly atSeconds: number;
}

/**
 * Recent quota refusals, by AWS quota group (`standard`, `p`, `standard-spot`, …: core/quota-groups.ts). AWS counts
 * vCPUs per group, so a type of the group needing as many vCPUs or more would be refused too, and the fallback and
 * later launches skip those instead of asking EC2 for each (in memory, like the provider's capacity errors).
 */
export class QuotaRefusals {
  private readonly byKey = new Map<string, QuotaRefusal>();

  constructor(
    private readonly typeOf: (typeName: string) => InstanceType | undefined,
    private readonly now: () => number,
  ) {}

  /** The key of a refusal remembered for one type alone (quota groups' names have no colon). */
  private static typeKey(typeName: string, market: Market): string {
    return `type:${typeName}:${market}`;
  }

  /** The quota group `type` counts against when bought in `market` (AWS's own groups: the refusal is AWS's). */
  private static quotaGroupOf(type: InstanceType, market: Market): string {
    const group = awsQuotaGroup(type.family);
    return market === 'spot' ? spotQuotaGroup(group) : group;
  }

  /** Remember a quota refusal: for its type alone (an instance-count limit), else for its quota group. */
  remember(error: QuotaExceededError): void {
    const type = this.typeOf(error.typeName);
    if (type === undefined) return;
    // An instance-count limit is the type's own ("for the specified instance type"): it says nothing of the others.
    if (error.code === INSTANCE_LIMIT_CODE) {
      this.byKey.set(QuotaRefusals.typeKey(type.name, error.market), {
        vcpus: type.capacity[1],
        typeName: type.name,
        code: error.code,
        atSeconds: this.now(),
      });
      return;
    }
    const group = QuotaRefusals.quotaGroupOf(type, error.market);
    const earlier = this.quotaRefusalIn(group);
    // The smallest type refused stands for the group: every type at least as large is refused too.
    const smaller = earlier !== undefined && earlier.vcpus < type.capacity[1];
    this.byKey.set(group, {
      vcpus: smaller ? earlier.vcpus : type.capacity[1],
      typeName: smaller ? earlier.typeName : type.name,
      code: error.code ?? 'quota',
      atSeconds: this.now(),
    });
  }

  private quotaRefusalIn(group: string): QuotaRefusal | undefined {
    const refusal = this.byKey.get(group);
    if (refusal === undefined) return undefined;
    if (this.now() - refusal.atSeconds < QUOTA_REFUSAL_SECONDS) return refusal;
    this.byKey.delete(group);
    return undefined;
  }

  /** The remembered refusal of `typeName`'s quota group in `market`, when the type needs as many vCPUs or more. */
  refused(typeName: string, market: Market): QuotaRefusal | undefined {
    const type = this.typeOf(typeName);
    if (type === undefined) return undefined;
    const own = this.quotaRefusalIn(QuotaRefusals.typeKey(typeName, market));
    if (own !== undefined) return own;
    const refusal = this.quotaRefusalIn(QuotaRefusals.quotaGroupOf(type, market));
    return refusal !== undefined && type.capacity[1] >= refusal.vcpus ? refusal : undefined;
  }
}
